#!/usr/bin/env python3
"""Writes the real datasets of the task kinds (issue 31) in examples/kinds/:

changelog_qa_{train,validation,test}.json  (extractive QA, SQuAD v2.0 JSON)
    Contexts are real Debian changelog entries (/usr/share/doc/*/
    changelog.Debian.gz of the packages installed here): the entry's header
    line, its change lines and its trailer, as one paragraph. Questions are
    templated; every answer is a real span of its entry: who made the upload,
    when, to which distribution, and which bug it closes (a question about a
    bug for an entry that closes none has no answer).
copyright_ner_{train,validation,test}.jsonl  (token classification)
    Real copyright statements from the machine-readable debian/copyright
    files (/usr/share/doc/*/copyright, DEP-5 "Copyright:" fields), one per
    line, with their YEAR (a year, or a range), HOLDER (the person or body)
    and EMAIL entities, found by the rules in copyright_entities() below:
    silver labels, derived from each statement's structure.
package_sizes_{train,validation,test}.csv  (regression)
    Debian bookworm main's short package descriptions (the Packages index),
    each with the package's real installed size: label = log2(Installed-Size
    in KiB), rounded to 3 decimals.

Every split is by source package (no source package spans two splits), at
most PER_SOURCE examples per source package. Also writes
examples/kinds/real_kind_sources.txt: the package (and version) every example
came from. Provenance, licences and counts: examples/REAL_DATASETS.md,
"Task kinds".

Run: python3 examples/make_real_kind_datasets.py   (seeded; the changelog and
copyright sets depend on the packages installed, which
real_kind_sources.txt lists; the sizes set on the Packages index, whose hash
REAL_DATASETS.md lists)
"""
import collections
import csv
import glob
import gzip
import hashlib
import json
import os
import random
import re
import subprocess
import sys
import unicodedata

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "kinds")
SEED = 31
SPLITS = ("train", "validation", "test")
SPLIT_SHARES = (0.8, 0.1, 0.1)
PER_SOURCE = 3
QA_MAX_CONTEXT_CHARS = 450
QA_PER_SOURCE = 1  # the newest entry of each source package
SIZES_PER_SPLIT = {"train": 2400, "validation": 300, "test": 300}
PACKAGES_INDEX = "/var/lib/apt/lists/deb.debian.org_debian_dists_bookworm_main_binary-amd64_Packages.lz4"


def clean(text):
    text = unicodedata.normalize("NFC", text)
    text = "".join(c for c in text if unicodedata.category(c)[0] != "C" or c in "\n\t")
    return re.sub(r"\s+", " ", text).strip()


def split_of(source, rng_salt="split"):
    """A source package's split, from a hash: stable whatever else is installed."""
    h = int(hashlib.sha256(f"{rng_salt}:{source}".encode()).hexdigest()[:8], 16) / 2**32
    return SPLITS[0] if h < SPLIT_SHARES[0] else SPLITS[1] if h < SPLIT_SHARES[0] + SPLIT_SHARES[1] else SPLITS[2]


# --- extractive QA over changelog entries ---------------------------------------------------

ENTRY = re.compile(r"^(\S+) \(([^)\s]+)\) ([^;\n]+); urgency=(\w+)[^\n]*\n(.*?)\n -- ([^<\n]+?) <([^>\n]+)>  ([^\n]+)$",
                   re.M | re.S)


def changelog_entries():
    """(source, version, dist, urgency, body lines, name, email, date) of every installed changelog."""
    seen = set()
    for path in sorted(glob.glob("/usr/share/doc/*/changelog.Debian.gz")):
        try:
            text = gzip.open(path, "rt", encoding="utf-8").read()
        except (OSError, UnicodeDecodeError):
            continue
        for m in ENTRY.finditer(text):
            source, version = m.group(1), m.group(2)
            if (source, version) in seen:
                continue
            seen.add((source, version))
            yield source, version, m.group(3).strip(), m.group(4), m.group(5), clean(m.group(6)), m.group(7), \
                clean(m.group(8))


def qa_example(entry, rng):
    source, version, dist, urgency, body, name, email, date = entry
    changes = clean(body)
    header = f"{source} ({version}) {dist}; urgency={urgency}."
    trailer = f"-- {name} <{email}> {date}"
    room = QA_MAX_CONTEXT_CHARS - len(header) - len(trailer) - 2
    if room < 40:
        return None
    if len(changes) > room:
        changes = changes[:room].rsplit(" ", 1)[0] + " ..."
    context = f"{header} {changes} {trailer}"
    at_trailer = len(header) + 1 + len(changes) + 1
    qas = []

    def ask(question, answer, start):
        if answer and context[start:start + len(answer)] == answer:
            qas.append({"question": question, "answers": [{"text": answer, "answer_start": start}],
                        "is_impossible": False})

    ask(f"Who made the upload of {source} {version}?", name, at_trailer + 3)
    ask(f"When was {source} {version} uploaded?", date, context.rindex(date))
    ask(f"Which distribution was {source} {version} uploaded to?", dist, len(f"{source} ({version}) "))
    closes = re.search(r"Closes: *(#\d+)", context)
    if closes:
        ask(f"Which bug does the upload of {source} {version} close?", closes.group(1), closes.start(1))
    elif rng.random() < 0.5:
        qas.append({"question": f"Which bug does the upload of {source} {version} close?", "answers": [],
                    "is_impossible": True})
    return {"context": context, "qas": qas} if qas else None


def write_qa(rng, sources_out):
    by_source = collections.defaultdict(list)
    for entry in changelog_entries():
        by_source[entry[0]].append(entry)
    paragraphs = {s: [] for s in SPLITS}
    for source in sorted(by_source):
        split = split_of(source)
        for entry in by_source[source][:QA_PER_SOURCE]:
            p = qa_example(entry, rng)
            if p is None:
                continue
            for i, qa in enumerate(p["qas"]):
                qa["id"] = f"{source}-{entry[1]}-{i}"
            paragraphs[split].append(p)
            sources_out.append(("changelog_qa", split, f"{source} {entry[1]}", len(p["qas"])))
    counts = {}
    for split in SPLITS:
        doc = {"version": "v2.0", "data": [{"title": "Debian changelog entries", "paragraphs": paragraphs[split]}]}
        with open(os.path.join(OUT, f"changelog_qa_{split}.json"), "w", encoding="utf-8") as f:
            json.dump(doc, f, ensure_ascii=False, indent=0)
            f.write("\n")
        counts[split] = sum(len(p["qas"]) for p in paragraphs[split])
    return counts


# --- token classification over copyright statements -----------------------------------------

YEAR = r"(?:19|20)\d\d(?:\s*[-\u2013]\s*(?:(?:19|20)\d\d|\d\d))?"
YEARS = re.compile(rf"^(?:(?:copyright|\(c\)|©)\s*)*((?:{YEAR})(?:\s*,\s*(?:{YEAR}))*)\s*,?\s*(?:by\s+)?(.*)$", re.I)
EMAIL = re.compile(r"<([^<>@\s]+@[^<>@\s]+)>")


def copyright_entities(line):
    """(text, entities) of one copyright statement, or None when it does not read as one.

    The statement is [Copyright] [(C)] YEARS [,] [by] HOLDER [<EMAIL>] [trailing text]: each year or
    range of YEARS is a YEAR entity, HOLDER (up to the email, a trailing comma, "and others" or the
    end) a HOLDER entity, the address inside <...> an EMAIL entity.
    """
    m = YEARS.match(line)
    if not m:
        return None
    entities = []
    years_at = m.start(1)
    for y in re.finditer(YEAR, m.group(1)):
        entities.append({"start": years_at + y.start(), "end": years_at + y.end(), "label": "YEAR"})
    rest_at, rest = m.start(2), m.group(2)
    email = EMAIL.search(rest)
    holder_end = len(rest)
    for stop in ("<", "("):  # an address or a remark ends the name
        if stop in rest:
            holder_end = min(holder_end, rest.index(stop))
    holder = rest[:holder_end].rstrip(" ,;")
    # A final full stop ends the sentence, unless it ends an abbreviation (Inc., Ltd., S.A.).
    if holder.endswith(".") and not re.search(r"(?:\b\w{1,3}|\.\w)\.$", holder):
        holder = holder[:-1]
    holder = re.sub(r"\s+and others$", "", holder)
    if len(holder) < 3 or not re.search(r"[A-Za-z]", holder) or len(holder) > 80:
        return None
    lead = len(rest[:holder_end]) - len(rest[:holder_end].lstrip())
    entities.append({"start": rest_at + lead, "end": rest_at + lead + len(holder.strip()), "label": "HOLDER"})
    if email:
        entities.append({"start": rest_at + email.start(1), "end": rest_at + email.end(1), "label": "EMAIL"})
    entities.sort(key=lambda e: e["start"])
    return {"text": line, "entities": entities}


def copyright_statements():
    """(source, statement) of every DEP-5 copyright file installed."""
    for path in sorted(glob.glob("/usr/share/doc/*/copyright")):
        try:
            text = open(path, encoding="utf-8").read()
        except (OSError, UnicodeDecodeError):
            continue
        if not re.match(r"Format: .*copyright-format", text):
            continue
        source = os.path.basename(os.path.dirname(path))
        m = re.search(r"^Upstream-Name: *(\S+)", text, re.M)
        if m:
            source = m.group(1)
        for field in re.finditer(r"^Copyright:(.*(?:\n[ \t]+.*)*)", text, re.M):
            for line in field.group(1).split("\n"):
                line = clean(line)
                if line and line != ".":
                    yield source, line


def write_ner(rng, sources_out):
    by_source = collections.defaultdict(list)
    seen = set()
    for source, line in copyright_statements():
        if line in seen:
            continue
        seen.add(line)
        example = copyright_entities(line)
        if example:
            by_source[source].append(example)
    rows = {s: [] for s in SPLITS}
    for source in sorted(by_source):
        split = split_of(source)
        picked = by_source[source]
        rng.shuffle(picked)
        for example in picked[:PER_SOURCE]:
            rows[split].append(example)
            sources_out.append(("copyright_ner", split, source, 1))
    for split in SPLITS:
        with open(os.path.join(OUT, f"copyright_ner_{split}.jsonl"), "w", encoding="utf-8") as f:
            for row in rows[split]:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
    return {s: len(rows[s]) for s in SPLITS}


# --- regression: installed size from the short description ----------------------------------

def packages_index():
    text = subprocess.run(["lz4cat", PACKAGES_INDEX], check=True, capture_output=True).stdout
    digest = hashlib.sha256(text).hexdigest()
    for stanza in text.decode("utf-8").split("\n\n"):
        fields = dict(re.findall(r"^([A-Za-z-]+): ?(.*)$", stanza, re.M))
        if "Package" in fields and "Installed-Size" in fields and "Description" in fields:
            source = fields.get("Source", fields["Package"]).split(" ")[0]
            yield digest, fields["Package"], source, clean(fields["Description"]), int(fields["Installed-Size"])


def write_sizes(rng, sources_out):
    import math
    by_source = collections.defaultdict(list)
    digest = ""
    for digest, package, source, description, size in packages_index():
        if size > 0 and len(description.split()) >= 3:
            by_source[source].append((package, description, size))
    pools = {s: [] for s in SPLITS}
    for source in sorted(by_source):
        packages = by_source[source]
        rng.shuffle(packages)
        pools[split_of(source)].extend((source,) + p for p in packages[:1])
    counts = {}
    for split in SPLITS:
        rng.shuffle(pools[split])
        chosen = sorted(pools[split][:SIZES_PER_SPLIT[split]], key=lambda p: p[1])
        with open(os.path.join(OUT, f"package_sizes_{split}.csv"), "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f, lineterminator="\r\n")
            w.writerow(["text", "label"])
            for source, package, description, size in chosen:
                w.writerow([description, f"{math.log2(size):.3f}"])
                sources_out.append(("package_sizes", split, package, 1))
        counts[split] = len(chosen)
    return counts, digest


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = random.Random(SEED)
    sources = []
    qa = write_qa(rng, sources)
    ner = write_ner(rng, sources)
    sizes, digest = write_sizes(rng, sources)
    with open(os.path.join(OUT, "real_kind_sources.txt"), "w", encoding="utf-8") as f:
        f.write("# Written by examples/make_real_kind_datasets.py: the package (and changelog version) every\n"
                "# example of the real task-kind datasets came from.\n")
        f.write("dataset\tsplit\trecord\texamples\n")
        for row in sources:
            f.write("\t".join(str(x) for x in row) + "\n")
    print(json.dumps({"changelog_qa": qa, "copyright_ner": ner, "package_sizes": sizes,
                      "packages_index_sha256": digest}, indent=1))


if __name__ == "__main__":
    sys.exit(main())
