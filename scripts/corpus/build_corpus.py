#!/usr/bin/env python3
"""Builds the English pretraining corpus from text that Debian ships.

Called by scripts/build-corpus.sh after apt has provided the inputs; run it
directly only when they are already there:
    python3 scripts/corpus/build_corpus.py --out DIR

Sources (one document per line; see PROVENANCE.md written next to the output):
  debian   every long package description of the Translation-en indexes of
           component main of every configured suite (bookworm, -updates,
           -security): "Short description. paragraph paragraph ..." (paragraph
           breaks become single spaces, so one package description = one line)
  wordnet  every synset of WordNet 3.0 (data.noun/verb/adj/adv):
           "lemma, lemma: gloss" (the whole gloss, examples included)
  manpages the pages of the Debian package `manpages` (Linux man-pages),
           rendered with man(1): "NAME line. DESCRIPTION paragraphs" per page

Processing: NFC, control characters dropped, whitespace collapsed; documents
of fewer than 5 words dropped; evaluation data (examples/make_real_datasets.py)
excluded: the records the examples came from (every binary package of a
dataset example's Debian source package, every dataset WordNet synset) and
every document that equals or contains (as a word/punctuation token sequence,
after lowercasing) the text of any example of the six CSV files; exact
duplicates after normalisation (lowercase, collapsed whitespace) removed,
first occurrence kept (sources in the order above); documents ordered by the
sha256 of their normalised text; a document goes to heldout.txt when the first
32 bits of sha256("heldout:" + normalised text) are 0 mod 100 (about 1%),
else to train.txt.
"""
import argparse
import collections
import hashlib
import os
import re
import subprocess
import sys

sys.dont_write_bytecode = True
ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "examples"))
import make_real_datasets as rd  # noqa: E402  (one source of truth for parsing and normalising)

MIN_WORDS = 5
HELDOUT_MODULUS = 100
SOURCES = ("debian", "wordnet", "manpages")


class Containment:
    """Finds documents that contain any evaluation text as a token sequence."""

    def __init__(self, texts):
        self.by_key = collections.defaultdict(set)
        for t in texts:
            toks = rd.match_tokens(t)
            if len(toks) < 4:
                raise SystemExit(f"build_corpus: evaluation text too short for the check: {t!r}")
            self.by_key[tuple(toks[:4])].add(" ".join(toks))

    def contains(self, text):
        toks = rd.match_tokens(text)
        hits = self.by_key.keys() & set(zip(toks, toks[1:], toks[2:], toks[3:]))
        if not hits:
            return False
        joined = " " + " ".join(toks) + " "
        return any(" " + seq + " " in joined for key in hits for seq in self.by_key[key])


# --- sources -----------------------------------------------------------------
def debian_documents(excluded_sources, excluded_packages, log):
    """Yields (record_excluded, text) for every Translation-en record."""
    package_source = {}
    for suite in rd.suites():
        path = rd.find_list(suite, "Packages")
        if path:
            for r in rd.deb822(rd.read_list(path)):
                package_source.setdefault(r["Package"], rd.source_of(r))
    excluded = set(excluded_packages) | {p for p, s in package_source.items() if s in excluded_sources}
    log["debian_excluded_binary_packages"] = len(excluded)
    for suite in rd.suites():
        path = rd.find_list(suite, "Translation-en")
        if not path:
            log.setdefault("missing", []).append(f"{suite} main Translation-en")
            continue
        log.setdefault("indexes", []).append((suite, "Translation-en", path))
        for r in rd.deb822(rd.read_list(path)):
            if "Description-en" not in r:
                continue
            yield r["Package"] in excluded, rd.debian_document_text(r["Description-en"])


def debian_example_bodies(packages, eval_norm, min_tokens=8):
    """The long-description parts (text after the short description) of the
    debian_sections examples, as far as they have min_tokens tokens: other
    packages (other source packages of the same project) often repeat them
    under a different short description."""
    bodies = set()
    path = rd.find_list("bookworm", "Translation-en")
    for r in rd.deb822(rd.read_list(path)):
        if r.get("Package") in packages and "Description-en" in r:
            if rd.normalise(rd.debian_dataset_text(r["Description-en"])) in eval_norm:
                body = rd.debian_dataset_body(r["Description-en"])
                if len(rd.match_tokens(body)) >= min_tokens:
                    bodies.add(body)
    return sorted(bodies)


def wordnet_documents(excluded_synsets, log):
    for pos in ("noun", "verb", "adj", "adv"):
        for offset, _lex, lemmas, gloss in rd.wordnet_synsets(pos):
            record_excluded = pos == "noun" and offset in excluded_synsets
            yield record_excluded, f"{', '.join(lemmas)}: {gloss}"


_OVERSTRIKE = re.compile(r".\x08")


def render_man(path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAN")}
    env.update({"MANWIDTH": "1000", "LC_ALL": "C.UTF-8", "MAN_DISABLE_SECCOMP": "1"})
    out = subprocess.run(["man", "--nh", "--nj", "-l", path], capture_output=True, env=env,
                         timeout=60).stdout.decode("utf-8", errors="replace")
    return _OVERSTRIKE.sub("", out)


def man_document(rendered):
    """NAME line + DESCRIPTION paragraphs (subsection headings dropped)."""
    sections, name = collections.defaultdict(list), None
    block = []
    for line in rendered.split("\n") + [""]:
        if line and not line[0].isspace():
            name = line.strip()
            continue
        if not line.strip():
            if block and name:
                sections[name].append(block)
            block = []
        elif len(line) - len(line.lstrip()) >= 7:
            block.append(line)
        # else: a subsection heading ("   Signal dispositions", indent 3): dropped
    parts = []
    for heading in ("NAME", "DESCRIPTION"):
        for b in sections.get(heading, []):
            text = rd.clean(" ".join(b))
            if text:
                parts.append(text if text[-1] in ".:!?" else text + ".")
    return " ".join(parts)


def manpages_documents(log):
    try:
        files = subprocess.run(["dpkg-query", "-L", "manpages"], capture_output=True, text=True,
                               check=True).stdout.split("\n")
    except (OSError, subprocess.CalledProcessError):
        files = []
    pages = sorted(f for f in files if re.match(r"/usr/share/man/man[1-9]/[^/]+$", f) and os.path.isfile(f))
    if not pages or not any(os.access(os.path.join(d, "man"), os.X_OK)
                            for d in os.environ.get("PATH", "/usr/bin").split(":")):
        log.setdefault("missing", []).append("manpages (package or man(1) not installed; source skipped)")
        return
    log["manpages_pages"] = len(pages)
    for page in pages:
        try:
            text = man_document(render_man(page))
        except (OSError, subprocess.SubprocessError):
            log["manpages_render_failures"] = log.get("manpages_render_failures", 0) + 1
            continue
        yield False, text


# --- main ----------------------------------------------------------------------
def dpkg_version(package):
    r = subprocess.run(["dpkg-query", "-W", "-f=${Version}", package], capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else "not installed"


def words(text):
    return len(text.split())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    rd.require_inputs()

    # Evaluation data: the committed CSVs and the record list.
    try:
        eval_rows = rd.read_dataset_texts()
        sources = rd.read_sources()
    except FileNotFoundError as e:
        sys.exit(f"build_corpus: {e.filename} is missing (run python3 examples/make_real_datasets.py)")
    eval_texts = [t for rows in eval_rows.values() for t, _ in rows]
    eval_norm = {rd.normalise(t) for t in eval_texts}
    deb_rows = [r for r in sources if r["dataset"] == "debian_sections"]
    excluded_sources = {r["source"] for r in deb_rows}
    excluded_packages = {r["record"].split(":", 1)[1] for r in deb_rows}
    bodies = debian_example_bodies(excluded_packages, eval_norm)
    containment = Containment(eval_texts + bodies)
    excluded_synsets = {r["record"].split(":", 1)[1].rsplit("-", 1)[0] for r in sources
                        if r["dataset"] == "wordnet_supersenses"}

    log = {}
    stats = {s: collections.Counter() for s in SOURCES}
    seen = set()
    docs = []  # (sort key, heldout?, source, text)
    generators = {
        "debian": debian_documents(excluded_sources, excluded_packages, log),
        "wordnet": wordnet_documents(excluded_synsets, log),
        "manpages": manpages_documents(log),
    }
    for source in SOURCES:
        st = stats[source]
        for record_excluded, raw in generators[source]:
            st["records"] += 1
            if record_excluded:
                st["excluded_eval_record"] += 1
                continue
            text = rd.clean(raw)
            if words(text) < MIN_WORDS:
                st["too_short"] += 1
                continue
            norm = text.lower()
            if norm in eval_norm:
                st["excluded_eval_text"] += 1
                continue
            if containment.contains(text):
                st["excluded_eval_contained"] += 1
                continue
            if norm in seen:
                st["duplicates"] += 1
                continue
            seen.add(norm)
            held = int(rd.stable_hash(norm, "heldout:")[:8], 16) % HELDOUT_MODULUS == 0
            docs.append((rd.stable_hash(norm), held, source, text))
            st["documents"] += 1
            st["words"] += words(text)
            st["bytes"] += len(text.encode("utf-8")) + 1
            st["heldout"] += held
    docs.sort()

    for name, held in (("train.txt", False), ("heldout.txt", True)):
        tmp = os.path.join(out, name + ".tmp")
        with open(tmp, "w", encoding="utf-8", newline="\n") as f:
            for _, h, _, text in docs:
                if h == held:
                    f.write(text + "\n")
        os.replace(tmp, os.path.join(out, name))

    total = collections.Counter()
    for st in stats.values():
        total.update(st)
    write_provenance(out, stats, total, log, len(eval_texts), excluded_sources, excluded_synsets)

    mb = total["bytes"] / 1e6
    print(f"build-corpus: {total['documents']} documents, {total['words']} words, {mb:.1f} MB "
          f"-> {out}/train.txt ({total['documents'] - total['heldout']} docs) + heldout.txt "
          f"({total['heldout']} docs)")
    for s in SOURCES:
        st = stats[s]
        print(f"  {s:9s} {st['documents']:7d} docs {st['words']:9d} words {st['bytes'] / 1e6:6.1f} MB | "
              f"dropped: {st['duplicates']} duplicates, {st['too_short']} short, "
              f"{st['excluded_eval_record']} eval records, "
              f"{st['excluded_eval_text'] + st['excluded_eval_contained']} eval texts")
    print(f"  duplicates dropped {total['duplicates']}; evaluation exclusions: "
          f"{total['excluded_eval_record']} records, {total['excluded_eval_text']} equal texts, "
          f"{total['excluded_eval_contained']} containing texts")
    for m in log.get("missing", []):
        print(f"  warning: missing {m}")


def write_provenance(out, stats, total, log, n_eval, excluded_sources, excluded_synsets):
    prov = []
    for suite in rd.suites():
        for kind in ("Packages", "Translation-en"):
            path = rd.find_list(suite, kind)
            if path:
                prov.append(rd.index_provenance(suite, kind, path))
    snapshot = "\n".join(
        f"| {p['suite']} | `{p['index']}` | {p['version']} | {p['date']} | `{p['sha256']}` | "
        f"{'yes' if p['verified'] else 'NO'} |" for p in prov)
    sources_list = ""
    if os.path.exists("/etc/apt/sources.list.d/debian.sources"):
        sources_list = open("/etc/apt/sources.list.d/debian.sources", encoding="utf-8").read().strip()

    def row(name, st):
        return (f"| {name} | {st['records']} | {st['documents']} | {st['heldout']} | {st['words']} | "
                f"{st['bytes']} | {st['too_short']} | {st['duplicates']} | {st['excluded_eval_record']} | "
                f"{st['excluded_eval_text']} | {st['excluded_eval_contained']} |")

    table = "\n".join(row(s, stats[s]) for s in SOURCES) + "\n" + row("**total**", total)
    missing = "".join(f"\n- WARNING: missing {m}" for m in log.get("missing", []))
    text = f"""# Pretraining corpus: provenance

Written by `scripts/build-corpus.sh` (helper `scripts/corpus/build_corpus.py`).
`train.txt` and `heldout.txt`: UTF-8, one document per line.

## Commands

    apt-get update -o Acquire::Languages=en     # Packages + Translation-en indexes
    apt-get install -y --no-install-recommends wordnet-base manpages man-db
    python3 scripts/corpus/build_corpus.py --out {out}

Packages: wordnet-base {dpkg_version('wordnet-base')}, manpages {dpkg_version('manpages')},
man-db {dpkg_version('man-db')}, groff-base {dpkg_version('groff-base')}.

## Apt snapshot

`/etc/apt/sources.list.d/debian.sources` (the snapshot.debian.org lines are
comments; apt fetches from deb.debian.org, so the indexes are identified by
release, InRelease date and hash below; "verified" = the sha256 of the
decompressed index equals the one in the suite's signed InRelease):

```
{sources_list}
```

| suite | index | release | InRelease date | sha256 | verified |
|---|---|---|---|---|---|
{snapshot}

## Sources and counts

| source | records | documents | of which held out | words | bytes | too short | duplicates | eval records | eval texts (equal) | eval texts (contained) |
|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|
{table}
{missing}
- **debian**: every record of the Translation-en index of component main of
  {", ".join(rd.suites())} (`Description-en` = short description + long
  description). Document = "Short description. Long description" with the
  Debian control format undone (continuation lines joined, ` .` paragraph
  breaks become a single space), i.e. one package description per line.
- **wordnet**: every synset of WordNet 3.0 (`/usr/share/wordnet/data.noun`,
  `data.verb`, `data.adj`, `data.adv`; the licence header lines starting with
  two spaces skipped). Document = "lemma, lemma: gloss" (underscores in lemmas
  become spaces; adjective markers like `(a)` removed; the whole gloss,
  example sentences included).
- **manpages**: the {log.get('manpages_pages', 0)} pages of Debian package `manpages` (Linux
  man-pages project) rendered with `MANWIDTH=1000 man --nh --nj -l PAGE`.
  Document = the NAME line and the paragraphs of the DESCRIPTION section
  (subsection headings dropped), one page per line.

Processing: Unicode NFC, control characters dropped, whitespace collapsed;
documents of fewer than {MIN_WORDS} words dropped ("too short"); exact
duplicates after normalisation (lowercase + collapsed whitespace) dropped,
first occurrence kept, sources in the order debian, wordnet, manpages (the
-updates/-security Translation-en indexes mostly repeat bookworm's, hence most
Debian duplicates); ordered by sha256 of the normalised text; held out when
the first 32 bits of sha256("heldout:" + normalised text) are 0 mod
{HELDOUT_MODULUS}.

## Evaluation data excluded

The {n_eval} texts of the six CSV files of `examples/` (see
`examples/REAL_DATASETS.md`, built by `examples/make_real_datasets.py`) and
the records listed in `examples/real_datasets_sources.txt` are kept out:

- eval records: every Translation-en record of a binary package built by one
  of the {len(excluded_sources)} source packages of a `debian_sections` example
  ({log.get('debian_excluded_binary_packages', 0)} binary packages, mapped through the `Source:` fields of the Packages
  indexes), and the {len(excluded_synsets)} WordNet noun synsets of `wordnet_supersenses`;
- eval texts (equal): documents equal to an evaluation text after
  normalisation;
- eval texts (contained): documents that contain an evaluation text, or the
  long-description part of a `debian_sections` example (its text after the
  short description, when at least 8 tokens), as a contiguous sequence of
  word/punctuation tokens (`\\w+|[^\\w\\s]`, after lowercasing): e.g. a
  package of another source package of the same project repeating the
  example's paragraph, or a gloss embedding a dataset definition.

## Licences

- Debian package descriptions: part of each package's `debian/control` in
  Debian main, distributed under the DFSG-free licence of the respective
  package (`/usr/share/doc/PACKAGE/copyright`,
  https://packages.debian.org/bookworm/PACKAGE).
- WordNet 3.0: "WordNet 3.0 license" (Princeton University; permissive,
  BSD-style: use, copy, modify and distribute for any purpose without fee,
  provided the copyright notice, statements and disclaimer appear on all
  copies). Full text: `/usr/share/doc/wordnet-base/copyright` (License:
  WordNet3.0); "WordNet 3.0 Copyright 2006 by Princeton University. All
  rights reserved."
- Linux man-pages (package `manpages`): per-page licences, mostly
  "Linux-man-pages-copyleft" (verbatim copying and modified versions
  permitted), some GPL-2+, BSD and Expat; see
  `/usr/share/doc/manpages/copyright`.
"""
    with open(os.path.join(out, "PROVENANCE.md"), "w", encoding="utf-8") as f:
        f.write(text)


if __name__ == "__main__":
    main()
