#!/usr/bin/env python3
"""Checks the real datasets in examples/ and, with --corpus DIR, that none of
their texts is in DIR/train.txt or DIR/heldout.txt.

    python3 scripts/corpus/check_datasets.py [--corpus data/corpus]

Independent of the builders' own logic where it matters: CSVs are read with
the csv module, and corpus containment is a plain substring search over the
lowercased, whitespace-collapsed corpus text (not the token check that
build_corpus.py uses). Exits 1 when a check fails.
"""
import argparse
import collections
import csv
import os
import re
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
EX = os.path.join(ROOT, "examples")
DATASETS = ("debian_sections", "wordnet_supersenses")
SPLITS = ("train", "validation", "test")
SIZES = {"train": (2000, 3000), "validation": (400, 500), "test": (800, 1000)}
failures = []


def check(ok, message):
    print(("ok    " if ok else "FAIL  ") + message)
    if not ok:
        failures.append(message)


def norm(text):
    return " ".join(text.lower().split())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus")
    args = ap.parse_args()

    data = {}
    for d in DATASETS:
        for s in SPLITS:
            path = os.path.join(EX, f"{d}_{s}.csv")
            raw = open(path, "rb").read()
            raw.decode("utf-8")  # raises on invalid UTF-8
            with open(path, newline="", encoding="utf-8") as f:
                rows = list(csv.reader(f))
            check(rows[0] == ["text", "label"], f"{d}_{s}: header text,label")
            body = rows[1:]
            check(all(len(r) == 2 for r in body), f"{d}_{s}: 2 fields per record")
            check(all(r[0].strip() for r in body), f"{d}_{s}: no empty text")
            check(all(re.fullmatch(r"[a-z]{2,12}", r[1]) for r in body), f"{d}_{s}: short lowercase labels")
            lo, hi = SIZES[s]
            check(lo <= len(body) <= hi, f"{d}_{s}: {len(body)} examples in [{lo}, {hi}]")
            counts = collections.Counter(r[1] for r in body)
            ratio = max(counts.values()) / min(counts.values())
            check(ratio <= 2.0, f"{d}_{s}: largest/smallest class {ratio:.2f} <= 2; "
                                f"{dict(sorted(counts.items()))}; majority "
                                f"{100.0 * max(counts.values()) / len(body):.1f}%")
            check(len({norm(r[0]) for r in body}) == len(body), f"{d}_{s}: no duplicate texts")
            data[(d, s)] = body

    # No text in two splits (nor in two datasets).
    where = collections.defaultdict(set)
    for key, body in data.items():
        for t, _ in body:
            where[norm(t)].add(key)
    check(all(len(v) == 1 for v in where.values()),
          f"no text in two files: {sum(len(v) > 1 for v in where.values())} shared of {len(where)}")

    # Records: no Debian source package / group, no synset, in two splits.
    with open(os.path.join(EX, "real_datasets_sources.txt"), encoding="utf-8") as f:
        lines = [l.rstrip("\n").split("\t") for l in f if l.strip() and not l.startswith("#")]
    header, recs = lines[0], [dict(zip(lines[0], l)) for l in lines[1:]]
    for d in DATASETS:
        n = collections.Counter(r["split"] for r in recs if r["dataset"] == d)
        check(all(n[s] == len(data[(d, s)]) for s in SPLITS), f"{d}: sources.txt rows match CSV sizes")
    for field in ("source", "group", "record"):
        splits = collections.defaultdict(set)
        for r in recs:
            if r.get(field):
                splits[(r["dataset"], r[field])].add(r["split"])
        check(all(len(v) == 1 for v in splits.values()),
              f"no {field} in two splits ({len(splits)} distinct)")

    if args.corpus:
        texts = sorted(where)
        for name in ("train.txt", "heldout.txt"):
            path = os.path.join(args.corpus, name)
            with open(path, encoding="utf-8") as f:
                lines = f.read().split("\n")
            exact = sum(1 for l in lines if norm(l) in where)
            check(exact == 0, f"{name}: {len(lines) - 1} lines, {exact} equal to a dataset text")
            big = "\n".join(norm(l) for l in lines)
            raw_hits = [t for t in texts if t in big]
            # A hit counts when it is not part of a longer word at either end
            # ("a genus of gymnosperm" inside "... of gymnospermous trees" does not).
            found = [t for t in raw_hits if re.search(r"(?<!\w)" + re.escape(t) + r"(?!\w)", big)]
            check(not found, f"{name}: {len(found)} of {len(texts)} dataset texts occur in it "
                  f"(substring at word boundaries; {len(raw_hits)} raw substring hits)"
                  + (f" (first: {found[0][:80]!r})" if found else ""))
    print("FAILED: %d check(s)" % len(failures) if failures else "all checks passed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
