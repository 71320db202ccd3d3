#!/usr/bin/env python3
"""Writes the two real, third-party labelled datasets in examples/ (issue 5).

debian_sections_{train,validation,test}.csv
    Debian package descriptions (short description + first paragraph of the
    long description, at most 400 characters) labelled by the package's
    archive Section, from the bookworm main Packages and Translation-en
    indexes. Split by Source package, so no source package spans two splits.
wordnet_supersenses_{train,validation,test}.csv
    WordNet 3.0 noun definitions labelled by the synset's lexicographer file
    (noun.animal -> "animal", ...), split by synset.

Also writes examples/real_datasets_sources.txt (the package / synset every
example came from; scripts/build-corpus.sh reads it to keep these records and
texts out of the pretraining corpus) and examples/REAL_DATASETS.md (provenance,
licences, construction rules, counts). Edit the rules here, not in the .md.

Inputs (Debian packages, no network besides apt):
    apt-get update -o Acquire::Languages=en    # fetches Translation-en
    apt-get install wordnet-base               # /usr/share/wordnet/data.*
Run: python3 examples/make_real_datasets.py    (rewrites the files; seeded,
deterministic given the same apt indexes, whose hashes REAL_DATASETS.md lists)

scripts/corpus/build_corpus.py imports this module for the parsing and
normalisation functions, so both use exactly the same rules.
"""
import collections
import csv
import glob
import hashlib
import io
import os
import random
import re
import subprocess
import sys
import unicodedata

HERE = os.path.dirname(os.path.abspath(__file__))
APT_LISTS = "/var/lib/apt/lists"
WORDNET_DIR = "/usr/share/wordnet"
SEED = 5  # issue 5
SPLITS = ("train", "validation", "test")

# --- Debian sections dataset -------------------------------------------------
DEBIAN_SECTIONS = ("games", "graphics", "math", "net", "science", "sound")
DEBIAN_MAX_CHARS = 400           # cut at a word boundary at or below this
DEBIAN_MIN_WORDS = 6             # texts with fewer words are dropped
DEBIAN_PER_GROUP = 3             # at most this many packages per group of related packages
DEBIAN_IMBALANCE = 1.9           # no label more than this x the smallest
DEBIAN_SPLIT_FRACTIONS = {"train": 0.64, "validation": 0.12, "test": 0.24}
BOILERPLATE = re.compile(r"transitional|dummy package", re.I)

# --- WordNet supersenses dataset ---------------------------------------------
# lex_filenum -> label; the standard lexicographer file numbers of WordNet 3.0
# (lexnames(5WN); wordnet-base does not ship the lexnames file).
WORDNET_CLASSES = {5: "animal", 6: "artifact", 13: "food", 15: "location", 18: "person", 20: "plant"}
WORDNET_MIN_WORDS = 4
WORDNET_PER_CLASS = {"train": 400, "validation": 75, "test": 150}

DATASETS = ("debian_sections", "wordnet_supersenses")
SOURCES_FILE = os.path.join(HERE, "real_datasets_sources.txt")


# --- text helpers (shared with scripts/corpus/build_corpus.py) ---------------
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b\ufeff]")


def clean(text):
    """NFC, control characters removed, whitespace collapsed, stripped."""
    text = unicodedata.normalize("NFC", text)
    text = _CONTROL.sub(" ", text)
    return " ".join(text.split())


def normalise(text):
    """The comparison key for duplicates and exclusion: clean() + lowercase."""
    return clean(text).lower()


_TOKEN = re.compile(r"\w+|[^\w\s]")


def match_tokens(text):
    """Word/punctuation tokens of normalise(text), for containment checks."""
    return _TOKEN.findall(normalise(text))


def stable_hash(text, salt=""):
    return hashlib.sha256((salt + text).encode("utf-8")).hexdigest()


def cut_at_word(text, limit):
    """`text` if it fits in `limit` characters, else cut at the last space."""
    if len(text) <= limit:
        return text
    cut = text[: limit + 1].rsplit(" ", 1)[0]
    return cut.rstrip(" ,;:-(")


# --- apt indexes ---------------------------------------------------------------
def host_arch():
    try:
        return subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "amd64"


def find_list(suite, kind):
    """Path of the apt list file for `suite` (e.g. 'bookworm', 'bookworm-security')
    and `kind` ('Packages' or 'Translation-en'), component main; None if absent."""
    if kind == "Packages":
        pattern = f"*_dists_{suite}_main_binary-{host_arch()}_Packages*"
    else:
        pattern = f"*_dists_{suite}_main_i18n_{kind}*"
    hits = sorted(p for p in glob.glob(os.path.join(APT_LISTS, pattern))
                  if "diff_Index" not in p and not p.endswith(".IndexDiff"))
    return hits[0] if hits else None


def suites():
    """The suites of component main that apt has lists for, bookworm first."""
    found = set()
    for p in glob.glob(os.path.join(APT_LISTS, "*_dists_*_InRelease")):
        m = re.search(r"_dists_([^_]+)_InRelease$", p)
        if m:
            found.add(m.group(1))
    return sorted(found, key=lambda s: (s != "bookworm", s))


def read_list_bytes(path):
    """Decompressed bytes of an apt list file (apt-helper handles lz4/gz/xz)."""
    return subprocess.run(["/usr/lib/apt/apt-helper", "cat-file", path], capture_output=True,
                          check=True).stdout


def read_list(path):
    return read_list_bytes(path).decode("utf-8", errors="replace")


def deb822(text):
    """Records of a Debian control-format text, as dicts. A continuation line
    (leading space or tab) is appended to the previous field after a newline."""
    record, last = {}, None
    for line in text.split("\n"):
        if not line.strip():
            if record:
                yield record
            record, last = {}, None
        elif line[0] in " \t":
            if last is not None:
                record[last] += "\n" + line
        else:
            key, _, value = line.partition(":")
            record[key] = value.strip()
            last = key
    if record:
        yield record


def description_parts(description):
    """(short description, [paragraphs]) of a Debian description field. In the
    long description " ." is an empty line (paragraph break); lines of one
    paragraph are joined with single spaces."""
    lines = description.split("\n")
    short, paragraphs, current = clean(lines[0]), [], []
    for line in lines[1:]:
        body = line[1:] if line[:1] in (" ", "\t") else line
        if body.strip() == ".":
            if current:
                paragraphs.append(clean(" ".join(current)))
            current = []
        else:
            current.append(body)
    if current:
        paragraphs.append(clean(" ".join(current)))
    return short, [p for p in paragraphs if p]


def join_short(short, body):
    """Short description and long text as one text: "Short. Body" (no period
    added when the short description already ends in . ! ? or :)."""
    if not body:
        return short
    if not short:
        return body
    return f"{short} {body}" if short[-1] in ".!?:" else f"{short}. {body}"


def debian_dataset_text(description):
    short, paragraphs = description_parts(description)
    return cut_at_word(join_short(short, paragraphs[0] if paragraphs else ""), DEBIAN_MAX_CHARS)


def debian_dataset_body(description):
    """The long-description part of debian_dataset_text() (the text after the
    short description): the passage other packages' descriptions may repeat."""
    text = debian_dataset_text(description)
    short = description_parts(description)[0]
    return text[len(short):].lstrip(". ") if text.startswith(short) else ""


def debian_document_text(description):
    """The corpus document of a description: short + every paragraph."""
    short, paragraphs = description_parts(description)
    return join_short(short, " ".join(paragraphs))


def source_of(record):
    """Source package name of a Packages record (default: the package name)."""
    return record.get("Source", record["Package"]).split()[0]


def index_provenance(suite, kind, path):
    """(InRelease Date, Version, sha256 of the decompressed index, verified?)"""
    inrelease = glob.glob(os.path.join(APT_LISTS, f"*_dists_{suite}_InRelease"))
    date = version = expected = ""
    name = (f"main/binary-{host_arch()}/Packages" if kind == "Packages" else f"main/i18n/{kind}")
    if inrelease:
        text = open(inrelease[0], encoding="utf-8", errors="replace").read()
        m = re.search(r"^Date: (.*)$", text, re.M)
        date = m.group(1) if m else ""
        m = re.search(r"^Version: (.*)$", text, re.M)
        version = m.group(1) if m else ""
        sha = text.split("SHA256:", 1)[-1]
        m = re.search(r"^ ([0-9a-f]{64}) +\d+ " + re.escape(name) + r"$", sha, re.M)
        expected = m.group(1) if m else ""
    actual = hashlib.sha256(read_list_bytes(path)).hexdigest()
    return {"suite": suite, "index": name, "date": date, "version": version, "sha256": actual,
            "verified": actual == expected}


def require_inputs():
    missing = []
    if not find_list("bookworm", "Packages"):
        missing.append("bookworm main Packages index (run: apt-get update)")
    if not find_list("bookworm", "Translation-en"):
        missing.append("bookworm main Translation-en index (run: apt-get update -o Acquire::Languages=en)")
    if not os.path.exists(os.path.join(WORDNET_DIR, "data.noun")):
        missing.append(f"{WORDNET_DIR}/data.noun (run: apt-get install wordnet-base)")
    if missing:
        sys.exit("make_real_datasets: missing inputs:\n  " + "\n  ".join(missing))


# --- WordNet -----------------------------------------------------------------
def wordnet_synsets(pos):
    """(offset, lex_filenum, [lemmas], gloss) of every synset in data.<pos>
    (pos: noun, verb, adj, adv). The licence header lines (starting with two
    spaces) are skipped."""
    with open(os.path.join(WORDNET_DIR, f"data.{pos}"), encoding="utf-8") as f:
        for line in f:
            if line.startswith("  ") or not line.strip():
                continue
            head, _, gloss = line.partition(" | ")
            fields = head.split()
            offset, lex_filenum, word_count = fields[0], int(fields[1]), int(fields[3], 16)
            lemmas = [re.sub(r"\([a-z]+\)$", "", fields[4 + 2 * i]).replace("_", " ")
                      for i in range(word_count)]
            yield offset, lex_filenum, lemmas, clean(gloss)


def wordnet_definition(gloss):
    """The definition part of a gloss: the text before the first '; "'."""
    return gloss.split('; "', 1)[0].strip()


# --- dataset construction ----------------------------------------------------
def homepage_key(url):
    key = url.strip().lower().rstrip("/")
    for prefix in ("https://", "http://", "www."):
        key = key[len(prefix):] if key.startswith(prefix) else key
    return key


def first_paragraph_key(description):
    short, paragraphs = description_parts(description)
    return normalise(short), normalise(paragraphs[0]) if paragraphs else ""


def related_groups(candidates):
    """{source package: group id}: connected components of the candidates'
    source packages, linked by a shared Homepage, short description or first
    paragraph (keys of fewer than 5 words are ignored)."""
    parent = {}

    def find(x):
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(a, b):
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)

    for _text, _label, _package, source, homepage, (short, paragraph) in candidates:
        find("src:" + source)
        if homepage:
            union("src:" + source, "home:" + homepage)
        if len(short.split()) >= 5:
            union("src:" + source, "short:" + short)
        if len(paragraph.split()) >= 5:
            union("src:" + source, "para:" + paragraph)
    members = collections.defaultdict(set)
    for c in candidates:
        members[find("src:" + c[3])].add(c[3])
    return {source: min(group) for group in members.values() for source in group}


def build_debian(rng_seed=SEED):
    packages_path = find_list("bookworm", "Packages")
    translation_path = find_list("bookworm", "Translation-en")
    descriptions = {(r["Package"], r.get("Description-md5", "")): r.get("Description-en", "")
                    for r in deb822(read_list(translation_path)) if "Package" in r}
    stats = collections.Counter()
    candidates = []  # (text, label, package, source)
    for r in deb822(read_list(packages_path)):
        label = r.get("Section", "").split("/")[-1]
        if label not in DEBIAN_SECTIONS:
            continue
        stats["in_sections"] += 1
        description = descriptions.get((r["Package"], r.get("Description-md5", "")))
        if description is None:
            stats["no_translation"] += 1
            continue
        text = debian_dataset_text(description)
        if BOILERPLATE.search(text):
            stats["boilerplate"] += 1
            continue
        if len(text.split()) < DEBIAN_MIN_WORDS:
            stats["too_short"] += 1
            continue
        candidates.append((text, label, r["Package"], source_of(r), homepage_key(r.get("Homepage", "")),
                           first_paragraph_key(description)))
    candidates.sort(key=lambda c: c[2])

    # Identical texts (after normalise): keep the first by package name when
    # they share a label, drop all of them when the labels disagree.
    by_text = collections.defaultdict(list)
    for c in candidates:
        by_text[normalise(c[0])].append(c)
    unique = []
    for group in by_text.values():
        if len({c[1] for c in group}) > 1:
            stats["ambiguous_duplicates"] += len(group)
            continue
        stats["duplicates"] += len(group) - 1
        unique.append(group[0])

    # Related packages: one group per connected component of "same Source
    # package", "same upstream Homepage", "same short description" and "same
    # first paragraph of the long description" (different source packages of
    # one project often repeat the project's description). The group id is
    # the smallest source package name in it. At most DEBIAN_PER_GROUP
    # packages per group are kept (seeded choice).
    group_of = related_groups(unique)
    unique = [c[:3] + (group_of[c[3]],) + c[3:4] for c in unique]  # text, label, package, group, source
    stats["groups"] = len(set(group_of.values()))
    by_group = collections.defaultdict(list)
    for c in sorted(unique, key=lambda c: stable_hash(c[2], f"pick{rng_seed}")):
        by_group[c[3]].append(c)
    capped = []
    for members in by_group.values():
        stats["over_group_cap"] += max(0, len(members) - DEBIAN_PER_GROUP)
        capped.extend(members[:DEBIAN_PER_GROUP])

    # Balance: no label more than DEBIAN_IMBALANCE x the smallest.
    rng = random.Random(rng_seed)
    by_label = collections.defaultdict(list)
    for c in sorted(capped, key=lambda c: c[2]):
        by_label[c[1]].append(c)
    cap = int(DEBIAN_IMBALANCE * min(len(v) for v in by_label.values()))
    kept = []
    for label in sorted(by_label):
        members = by_label[label]
        rng.shuffle(members)
        stats["over_label_cap"] += max(0, len(members) - cap)
        kept.extend(members[:cap])

    # Split by group: greedy, each group (in seeded order) goes to the split
    # whose per-label quotas it helps most.
    per_label = collections.Counter(c[1] for c in kept)
    target = {l: {s: n * DEBIAN_SPLIT_FRACTIONS[s] for s in SPLITS} for l, n in per_label.items()}
    current = {l: collections.Counter() for l in per_label}
    groups = collections.defaultdict(list)
    for c in kept:
        groups[c[3]].append(c)
    order = sorted(groups)
    rng.shuffle(order)
    rows = {s: [] for s in SPLITS}
    for group in order:
        members = groups[group]

        def need(split):
            return sum((target[c[1]][split] - current[c[1]][split]) / target[c[1]][split] for c in members)

        split = max(("test", "validation", "train"), key=need)
        for c in members:
            current[c[1]][split] += 1
            rows[split].append(c)
    for s in SPLITS:
        rows[s].sort(key=lambda c: c[2])
        rng.shuffle(rows[s])
    return rows, stats


def build_wordnet(rng_seed=SEED):
    stats = collections.Counter()
    by_text = collections.defaultdict(list)
    for offset, lex, _lemmas, gloss in wordnet_synsets("noun"):
        if lex not in WORDNET_CLASSES:
            continue
        stats["in_classes"] += 1
        text = wordnet_definition(gloss)
        if len(text.split()) < WORDNET_MIN_WORDS:
            stats["too_short"] += 1
            continue
        by_text[normalise(text)].append((text, WORDNET_CLASSES[lex], offset))
    by_label = collections.defaultdict(list)
    for group in by_text.values():
        if len({c[1] for c in group}) > 1:
            stats["ambiguous_duplicates"] += len(group)
            continue
        stats["duplicates"] += len(group) - 1
        first = min(group, key=lambda c: c[2])
        by_label[first[1]].append(first)
    rng = random.Random(rng_seed)
    rows = {s: [] for s in SPLITS}
    for label in sorted(by_label):
        members = sorted(by_label[label], key=lambda c: c[2])
        rng.shuffle(members)
        start = 0
        for split in ("test", "validation", "train"):
            n = WORDNET_PER_CLASS[split]
            if start + n > len(members):
                sys.exit(f"make_real_datasets: only {len(members)} {label} definitions")
            rows[split].extend(members[start:start + n])
            start += n
    for s in SPLITS:
        rows[s].sort(key=lambda c: c[2])
        rng.shuffle(rows[s])
    return rows, stats


def write_csv(path, rows):
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\r\n")
        w.writerow(["text", "label"])
        for c in rows:
            w.writerow([c[0], c[1]])


# --- reading back (used by build_corpus.py and the checks) ---------------------
def dataset_paths():
    return {(d, s): os.path.join(HERE, f"{d}_{s}.csv") for d in DATASETS for s in SPLITS}


def read_dataset_texts():
    """{(dataset, split): [(text, label)]} of the committed CSV files."""
    out = {}
    for key, path in dataset_paths().items():
        with open(path, newline="", encoding="utf-8") as f:
            out[key] = [(r["text"], r["label"]) for r in csv.DictReader(f)]
    return out


def read_sources(path=SOURCES_FILE):
    """Rows of real_datasets_sources.txt as dicts (dataset, split, label,
    record, source, group): record is 'package:NAME' or 'synset:OFFSET-n';
    source is the Debian source package and group the id of its group of
    related packages ('' for WordNet)."""
    with open(path, encoding="utf-8") as f:
        lines = [l.rstrip("\n") for l in f if l.strip() and not l.startswith("#")]
    header = lines[0].split("\t")
    return [dict(zip(header, l.split("\t"))) for l in lines[1:]]


# --- documentation -------------------------------------------------------------
def dpkg_version(package):
    r = subprocess.run(["dpkg-query", "-W", "-f=${Version}", package], capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else "unknown"


def fmt_stats(stats):
    return ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in sorted(stats.items()))


def counts_table(rows, labels):
    out = io.StringIO()
    out.write("| label | " + " | ".join(SPLITS) + " | total |\n")
    out.write("|---|" + "---:|" * (len(SPLITS) + 1) + "\n")
    for label in labels:
        n = [sum(1 for c in rows[s] if c[1] == label) for s in SPLITS]
        out.write(f"| {label} | " + " | ".join(map(str, n)) + f" | {sum(n)} |\n")
    n = [len(rows[s]) for s in SPLITS]
    out.write("| **total** | " + " | ".join(map(str, n)) + f" | {sum(n)} |\n")
    maj = []
    for s in SPLITS:
        counts = collections.Counter(c[1] for c in rows[s])
        top = max(counts.values())
        labels_at_top = sorted(l for l, n in counts.items() if n == top)
        who = labels_at_top[0] if len(labels_at_top) == 1 else (
            "all classes equal" if len(labels_at_top) == len(counts) else "/".join(labels_at_top))
        maj.append(f"{100.0 * top / len(rows[s]):.1f}% ({who})")
    out.write("| majority-class rate | " + " | ".join(maj) + " | |\n")
    return out.getvalue()


def write_markdown(debian_rows, debian_stats, wordnet_rows, wordnet_stats, provenance):
    prov = "\n".join(
        f"| {p['suite']} | `{p['index']}` | {p['version']} | {p['date']} | `{p['sha256']}` | "
        f"{'yes' if p['verified'] else 'NO'} |" for p in provenance)
    sources_list = ""
    path = "/etc/apt/sources.list.d/debian.sources"
    if os.path.exists(path):
        sources_list = open(path, encoding="utf-8").read().strip()
    wn_labels = ", ".join(f"{n:02d} noun.{l} -> `{l}`" for n, l in sorted(WORDNET_CLASSES.items()))
    text = f"""# Real labelled datasets (issue 5)

Generated by `examples/make_real_datasets.py` (seed {SEED}); do not edit by
hand, change the script and rerun it. Both datasets are made only from text
that Debian ships (nobody in this project wrote it), are frozen as CSV files
(header `text,label`, RFC 4180 quoting, UTF-8, CRLF line ends) and are split
into train / validation / test. `examples/real_datasets_sources.txt` names the
Debian package or WordNet synset of every example; `scripts/build-corpus.sh`
keeps those records and these texts out of the pretraining corpus.

Regenerate (root needed for apt only):

    apt-get update -o Acquire::Languages=en   # Packages + Translation-en indexes
    apt-get install -y wordnet-base           # /usr/share/wordnet/data.noun
    python3 examples/make_real_datasets.py

Note: a later plain `apt-get update` (this machine sets `Acquire::Languages
"none"`) deletes the Translation-en index again.

## Apt snapshot used

`/etc/apt/sources.list.d/debian.sources`:

```
{sources_list}
```

The URIs are plain deb.debian.org (the snapshot.debian.org lines are comments,
not what apt fetches), so the snapshot is identified by the release and date
of the signed InRelease file and by the hashes of the indexes actually read
(sha256 of the decompressed index; "verified" = equals the hash listed in that
suite's InRelease file). Rerunning on indexes with these hashes reproduces the
CSV files byte for byte.

| suite | index | release | InRelease date | sha256 | verified |
|---|---|---|---|---|---|
{prov}

## 1. `debian_sections_{{train,validation,test}}.csv`

**Source.** Debian bookworm, component main: the Packages index
(`main/binary-{host_arch()}/Packages`: fields Package, Source, Section,
Description-md5) and the English descriptions index (`main/i18n/Translation-en`:
Description-en, joined on Package + Description-md5).

**Licence.** Each description is part of its package's `debian/control` in
Debian main and is distributed under that package's DFSG-free licence (see
`/usr/share/doc/PACKAGE/copyright` or
https://packages.debian.org/bookworm/PACKAGE). Redistributing short
descriptive excerpts with attribution to the package (the `record` column of
`real_datasets_sources.txt`) is within all of these licences.

**Construction.**
- Label: the package's `Section` field (any `contrib/` or `non-free/` prefix
  stripped); packages of the sections {", ".join(DEBIAN_SECTIONS)} only.
- Text: the short description, then the first paragraph of the long
  description (continuation lines joined with single spaces; the paragraph
  ends at the first ` .` line), joined as "Short. Paragraph" (no period added
  when the short description already ends in `.`, `!`, `?` or `:`); Unicode
  NFC, whitespace collapsed; cut at the last word boundary at or below
  {DEBIAN_MAX_CHARS} characters.
- Dropped: texts matching `transitional|dummy package` (case-insensitive)
  and texts of fewer than {DEBIAN_MIN_WORDS} words. Texts identical after
  normalisation (lowercase, collapsed whitespace) are kept once (the package
  first by name) when they share a label and dropped altogether when their
  labels differ.
- Leakage: packages are grouped by Source package (field `Source:`, default
  the package's own name), and source packages are joined into one group when
  they share an upstream `Homepage` (scheme, `www.` and trailing `/` ignored),
  an identical short description or an identical first paragraph (normalised,
  at least 5 words); groups are the connected components (different source
  packages of one project, e.g. GAP or Apertium modules, repeat the project's
  description). At most {DEBIAN_PER_GROUP} packages per group are kept (seeded choice),
  and every group goes to exactly one split (greedy assignment of the groups
  in seeded order to the split whose per-label quota of
  {", ".join(f"{s} {int(100 * f)}%" for s, f in DEBIAN_SPLIT_FRACTIONS.items())} they fill most).
- Balance: each label is capped (seeded choice) at {DEBIAN_IMBALANCE} x the size of the
  smallest label.
- Pipeline counts: {fmt_stats(debian_stats)}.

**Labels and counts.**

{counts_table(debian_rows, sorted(DEBIAN_SECTIONS))}
## 2. `wordnet_supersenses_{{train,validation,test}}.csv`

**Source.** WordNet 3.0 (Princeton University) as packaged in Debian bookworm
main, package `wordnet-base` ({dpkg_version('wordnet-base')}), file `/usr/share/wordnet/data.noun`.

**Licence.** WordNet 3.0 licence ("WordNet 3.0 license", a permissive
BSD-style licence); full text in `/usr/share/doc/wordnet-base/copyright`
(also at the end of this file, as the licence requires the notice on all
copies, including modifications).

**Construction.**
- Label: the synset's lexicographer file (field 2 of a `data.noun` line,
  lex_filenum), the part after `noun.`: {wn_labels}.
- Text: the definition part of the synset's gloss (the text after `| `, up to
  the first `; "` that starts the example sentences), stripped, NFC,
  whitespace collapsed. The lemmas (synset words) are NOT included.
- Dropped: definitions of fewer than {WORDNET_MIN_WORDS} words; definitions identical after
  normalisation are kept once (lowest synset offset) when they share a label
  and dropped altogether when their labels differ.
- Split: per label, the synsets are shuffled (seed {SEED}) and the first
  {WORDNET_PER_CLASS["test"]} go to test, the next {WORDNET_PER_CLASS["validation"]} to validation, the next {WORDNET_PER_CLASS["train"]} to train (one example per
  synset, so no synset spans two splits). Classes are exactly balanced.
- Pipeline counts: {fmt_stats(wordnet_stats)}.

**Labels and counts.**

{counts_table(wordnet_rows, sorted(WORDNET_CLASSES.values()))}
## Notes for judging results

- Chance levels: the majority-class rates above (Debian about 19%, WordNet
  16.7%); uniform guessing gives 1/6.
- Debian sections overlap in content (math vs science, sound vs net
  streaming, graphics vs science imaging), and a package's Section is the
  maintainer's choice, so 100% is not reachable; some texts are short
  ("Data files for X. This package contains the data files for X.").
- WordNet definitions are short (median 11 words) and follow
  templates ("any of various ...", "a city in ...", "type genus of the
  family ..."), which makes location and the taxonomic classes easier than
  artifact vs food.
- Pretraining corpora built by `scripts/build-corpus.sh` exclude these texts,
  the records they came from, and documents containing them (see the corpus's
  PROVENANCE.md); a corpus from elsewhere may well contain them (WordNet and
  Debian descriptions are common in web crawls).

## WordNet 3.0 licence (from `/usr/share/doc/wordnet-base/copyright`)

```
{wordnet_licence_from_copyright()}
```
"""
    with open(os.path.join(HERE, "REAL_DATASETS.md"), "w", encoding="utf-8") as f:
        f.write(text)


def wordnet_licence_from_copyright():
    """The WordNet3.0 licence paragraph of wordnet-base's copyright file."""
    path = "/usr/share/doc/wordnet-base/copyright"
    if not os.path.exists(path):
        return ""
    lines, inside = [], False
    for line in open(path, encoding="utf-8"):
        if line.startswith("License: WordNet3.0"):
            inside = True
            continue
        if inside:
            if not line.startswith(" "):
                break
            body = line[1:].rstrip("\n")
            lines.append("" if body == "." else body)
    return "\n".join(lines).strip()


def main():
    require_inputs()
    debian_rows, debian_stats = build_debian()
    wordnet_rows, wordnet_stats = build_wordnet()
    for name, rows in (("debian_sections", debian_rows), ("wordnet_supersenses", wordnet_rows)):
        for s in SPLITS:
            write_csv(os.path.join(HERE, f"{name}_{s}.csv"), rows[s])
    with open(SOURCES_FILE, "w", encoding="utf-8") as f:
        f.write("# Written by examples/make_real_datasets.py: the record every example of the real\n"
                "# datasets came from (Debian binary package, its source package and its group of\n"
                "# related packages, see REAL_DATASETS.md; WordNet noun synset offset in data.noun).\n"
                "# scripts/build-corpus.sh excludes these records (for Debian: every binary package\n"
                "# of these source packages) from the pretraining corpus.\n")
        f.write("dataset\tsplit\tlabel\trecord\tsource\tgroup\n")
        lines = []
        for s in SPLITS:
            lines += [f"debian_sections\t{s}\t{c[1]}\tpackage:{c[2]}\t{c[4]}\t{c[3]}" for c in debian_rows[s]]
            lines += [f"wordnet_supersenses\t{s}\t{c[1]}\tsynset:{c[2]}-n\t\t" for c in wordnet_rows[s]]
        f.write("\n".join(sorted(lines)) + "\n")
    provenance = [index_provenance("bookworm", kind, find_list("bookworm", kind))
                  for kind in ("Packages", "Translation-en")]
    write_markdown(debian_rows, debian_stats, wordnet_rows, wordnet_stats, provenance)
    for name, rows in (("debian_sections", debian_rows), ("wordnet_supersenses", wordnet_rows)):
        print(name, {s: len(rows[s]) for s in SPLITS},
              {s: dict(sorted(collections.Counter(c[1] for c in rows[s]).items())) for s in SPLITS})


if __name__ == "__main__":
    main()
