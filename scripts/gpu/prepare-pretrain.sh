#!/usr/bin/env bash
# Prepares, on this Debian host, everything scripts/gpu/pretrain.sh needs on a
# lent GPU machine, inside what one device call carries (64 MiB in all, the
# repository's tracked files included):
#
#   ./scripts/gpu/prepare-pretrain.sh [--corpus DIR] [--vocab FILE] [--out DIR]
#
#   --corpus DIR   train.txt + heldout.txt of scripts/build-corpus.sh
#                  [data/corpus; built there when missing]
#   --vocab FILE   the vocabulary to tokenize with [built from DIR/train.txt
#                  with `adapterd-pretrain vocab --size 8192` into DIR/vocab.txt
#                  when missing]
#   --out DIR      the carried directory [.pretrain-carry, git-ignored]
#   --runs FILE    the runs to train there [scripts/gpu/pretrain_runs.conf]
#   --init NAME=DIR  run NAME continues the model in DIR (--init_from: an earlier
#                  lending's export, e.g. mini-4x256=models/adapterd-mini-en); the
#                  model's vocabulary must be the one the corpus is tokenized
#                  with (--vocab DIR/vocab.txt). Repeatable.
#
# Writes DIR: vocab.txt, train.ids.xz (adapterd-pretrain tokenize, then xz -9e),
# heldout.ids, runs.conf, init/NAME/ when given; and .gpu-model/ (prepare.sh's
# model profile) when missing. Ends by adding up what the device call would
# carry and failing above ADAPTERD_CARRY_MAX_MIB (62). Then, through the device tool:
#   run(command="OUT=$OUT ADAPTERD_GPU_DEADLINE=540 bash scripts/gpu/pretrain.sh",
#       carry=[".gpu-model", ".pretrain-carry"], timeout_s=590)
# and back here: scripts/gpu/finish-pretrain.sh FILES_AT.
set -euo pipefail
cd "$(dirname "$0")/../.."
CORPUS=data/corpus
VOCAB=""
OUTDIR=.pretrain-carry
RUNS=scripts/gpu/pretrain_runs.conf
INIT=()
while [[ $# -gt 0 ]]; do
  [[ $# -ge 2 ]] || { sed -n '2,27p' "$0"; exit 2; }
  case "$1" in
    --corpus) CORPUS=$2 ;;
    --vocab) VOCAB=$2 ;;
    --out) OUTDIR=$2 ;;
    --runs) RUNS=$2 ;;
    --init) INIT+=("$2") ;;
    *) echo "prepare-pretrain: unknown option $1" >&2; exit 2 ;;
  esac
  shift 2
done
BUILD_DIR=${BUILD_DIR:-build}
PRETRAIN=$BUILD_DIR/tools/pretrain/adapterd-pretrain
[ -x "$PRETRAIN" ] || cmake --build "$BUILD_DIR" --target adapterd-pretrain
if [[ ! -s "$CORPUS/train.txt" || ! -s "$CORPUS/heldout.txt" ]]; then
  ./scripts/build-corpus.sh --out "$CORPUS"
fi
if [[ -z "$VOCAB" ]]; then
  VOCAB=$CORPUS/vocab.txt
  [[ -s "$VOCAB" ]] || "$PRETRAIN" vocab --corpus "$CORPUS/train.txt" --size 8192 --out "$VOCAB"
fi
mkdir -p "$OUTDIR"
cp "$VOCAB" "$OUTDIR/vocab.txt"
for split in train heldout; do
  if [[ ! -s "$CORPUS/$split.ids" || "$CORPUS/$split.ids" -ot "$CORPUS/$split.txt" || "$CORPUS/$split.ids" -ot "$VOCAB" ]]; then
    "$PRETRAIN" tokenize --corpus "$CORPUS/$split.txt" --vocab "$VOCAB" --out "$CORPUS/$split.ids"
  fi
done
if [[ ! -s "$OUTDIR/train.ids.xz" || "$OUTDIR/train.ids.xz" -ot "$CORPUS/train.ids" ]]; then
  # Ids compress to ~0.9 bytes a token (the text to ~1.05; LZMA's 2-byte
  # alignment options gain 0.2% more, not worth their obscurity).
  xz -9e -T"$(nproc)" -c "$CORPUS/train.ids" > "$OUTDIR/train.ids.xz.tmp"
  mv "$OUTDIR/train.ids.xz.tmp" "$OUTDIR/train.ids.xz"
fi
cp "$CORPUS/heldout.ids" "$OUTDIR/heldout.ids"
cp "$RUNS" "$OUTDIR/runs.conf"
rm -rf "$OUTDIR/init"
for pair in "${INIT[@]}"; do
  name=${pair%%=*} dir=${pair#*=}
  [[ -f "$dir/model.safetensors" ]] || { echo "prepare-pretrain: no model in $dir" >&2; exit 1; }
  cmp -s "$dir/vocab.txt" "$OUTDIR/vocab.txt" ||
    { echo "prepare-pretrain: $dir has another vocabulary than the corpus's ids (--vocab $dir/vocab.txt)" >&2; exit 1; }
  mkdir -p "$OUTDIR/init/$name"
  cp "$dir/"{config.json,model.safetensors,vocab.txt,tokenizer_config.json,pretrain_summary.json} "$OUTDIR/init/$name/"
done
[[ -d .gpu-model/debs ]] || ADAPTERD_GPU_PROFILE=model ./scripts/gpu/prepare.sh

# What the device call carries: tracked and untracked-not-ignored files, and
# the two carried directories.
tree=$( { git ls-files -z; git ls-files -z --others --exclude-standard; } | xargs -0 stat -c %s 2>/dev/null |
  awk '{t += $1} END {print t + 0}')
carried=$(du -sb .gpu-model "$OUTDIR" | awk '{t += $1} END {print t}')
max_mib=${ADAPTERD_CARRY_MAX_MIB:-62}
awk -v t="$tree" -v c="$carried" -v m="$max_mib" 'BEGIN {
  printf "prepare-pretrain: the call carries %.1f MiB (tree %.1f + .gpu-model and the corpus %.1f; limit %d)\n",
    (t + c) / 1048576, t / 1048576, c / 1048576, m }'
ls -la "$OUTDIR"
[ $((tree + carried)) -le $((max_mib * 1048576)) ] || { echo "prepare-pretrain: too large to carry" >&2; exit 1; }
