#!/usr/bin/env bash
# Builds the English pretraining corpus from text Debian ships, through
# apt only: Debian package descriptions (Translation-en indexes), WordNet 3.0
# glosses (wordnet-base), the Linux man-pages (manpages), and general English
# prose: GCIDE (Webster's 1913 + WordNet 1.5), fortunes, The Devil's Dictionary,
# the Jargon File, GNOME and LibreOffice help, the Debian Administrator's
# Handbook and Debian Reference; technical manuals: Python 3.11, PostgreSQL 15,
# Perl 5.36, FOLDOC (whole by default; --cap limits a source).
#
#   ./scripts/build-corpus.sh                  # writes ./data/corpus
#   ./scripts/build-corpus.sh --out /tmp/corpus
#   ./scripts/build-corpus.sh --cap python=4 --cap perl=none   # per-source caps (MB of text)
#   ./scripts/build-corpus.sh --sources gcide,fortunes --no-caps
#
# Output: DIR/train.txt and DIR/heldout.txt (one document per line, ~1% held
# out by hash) and DIR/PROVENANCE.md (sources, apt snapshot, counts, licences).
# --sources LIST, --cap SOURCE=MB and --no-caps go to build_corpus.py (its
# --help lists the sources and default caps). The texts and source records of
# the evaluation datasets in examples/ are excluded, with their near duplicates
# (a shared 8-token sequence); scripts/corpus/check_overlap.py verifies that.
# Idempotent and deterministic: apt is only asked when an input is missing, and
# the same apt indexes and packages give the same files. Runs as root, or
# through sudo when available (apt steps only).
set -euo pipefail

usage() { sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; }

OUT=""
PASS=()   # options for build_corpus.py
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) [[ $# -ge 2 ]] || { usage >&2; exit 2; }; OUT=$2; shift 2 ;;
    --out=*) OUT=${1#*=}; shift ;;
    --sources|--cap) [[ $# -ge 2 ]] || { usage >&2; exit 2; }; PASS+=("$1" "$2"); shift 2 ;;
    --sources=*|--cap=*|--no-caps) PASS+=("$1"); shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "build-corpus: unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
done
# A relative --out is relative to the caller's directory; the default is
# relative to the repository root, like ./data in scripts/run.sh.
if [[ -n "$OUT" ]]; then
  mkdir -p "$OUT"
  OUT=$(cd "$OUT" && pwd)
fi
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/data/corpus}

SUDO=""
need_root() {
  if [ "$(id -u)" -ne 0 ] && [ -z "$SUDO" ]; then
    if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
      echo "build-corpus: need root (or sudo) for: $*" >&2
      exit 1
    fi
  fi
}
export DEBIAN_FRONTEND=noninteractive

# 1. Package indexes with the English descriptions. This machine's apt config
# sets Acquire::Languages "none", and any plain `apt-get update` deletes the
# Translation-en lists again, so check every run.
have_translations() {
  compgen -G "/var/lib/apt/lists/*_dists_bookworm_main_i18n_Translation-en*" >/dev/null &&
    compgen -G "/var/lib/apt/lists/*_dists_bookworm_main_binary-*_Packages*" >/dev/null
}
if ! have_translations; then
  need_root "apt-get update -o Acquire::Languages=en"
  echo "build-corpus: apt-get update -o Acquire::Languages=en"
  $SUDO apt-get update -qq -o Acquire::Languages=en
  have_translations || { echo "build-corpus: no Translation-en index after apt-get update" >&2; exit 1; }
fi

# 2. WordNet, the man pages (man-db renders them) and the documents of the
# other sources (scripts/corpus/build_corpus.py: PACKAGES).
PACKAGES=(wordnet-base manpages man-db
          dict-gcide dict-devil dict-jargon dict-foldoc fortunes-min fortunes
          gnome-user-docs libreoffice-help-en-us debian-handbook debian-reference-en
          python3.11-doc postgresql-doc-15 perl-doc)
missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -gt 0 ]; then
  need_root "apt-get install ${missing[*]}"
  echo "build-corpus: installing ${missing[*]}"
  # Keep the Translation-en lists this update would otherwise delete.
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" ||
    { $SUDO apt-get update -qq -o Acquire::Languages=en &&
      $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"; }
fi

# 3. Extract, clean, exclude evaluation data, dedupe, split, write.
for f in examples/real_datasets_sources.txt examples/debian_sections_test.csv \
         examples/wordnet_supersenses_test.csv; do
  [ -f "$f" ] || { echo "build-corpus: $f missing (run: python3 examples/make_real_datasets.py)" >&2; exit 1; }
done
mkdir -p "$OUT"
PYTHONDONTWRITEBYTECODE=1 python3 scripts/corpus/build_corpus.py --out "$OUT" ${PASS[@]+"${PASS[@]}"}
# 4. Verify: no evaluation text, nor an 8-token sequence of one, in the output.
PYTHONDONTWRITEBYTECODE=1 python3 scripts/corpus/check_overlap.py --corpus "$OUT"
