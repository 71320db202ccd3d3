#!/usr/bin/env python3
"""Verifies that a built corpus holds no evaluation data.

    python3 scripts/corpus/check_overlap.py --corpus data/corpus

For every document (line) of DIR/train.txt and DIR/heldout.txt, checks that
  - it is not equal to an evaluation text (after lowercasing and collapsing
    whitespace);
  - it does not contain an evaluation text of 4 to 7 tokens as a token
    sequence (longer texts are covered by the next check);
  - it shares no 8-token sequence with an evaluation text of at least 8
    tokens.
Tokens: \\w+ or a single other non-space character, after NFC and
lowercasing (the definition build_corpus.py uses, implemented again here:
every n-gram of the corpus is looked up in sets of evaluation n-grams, instead
of build_corpus.py's prefix index and substring search). The evaluation texts
are those of eval_data.py. Prints the counts; exits 1 when any check fails.
"""
import argparse
import os
import re
import sys
import unicodedata

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import eval_data  # noqa: E402

TOKEN = re.compile(r"\w+|[^\w\s]")
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b\ufeff]")


def norm(text):
    return " ".join(CONTROL.sub(" ", unicodedata.normalize("NFC", text)).lower().split())


def tokens(text):
    return TOKEN.findall(norm(text))


def ngrams(toks, n):
    return zip(*(toks[i:] for i in range(n)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", required=True, help="directory with train.txt and heldout.txt")
    args = ap.parse_args()

    counts, texts = eval_data.evaluation_texts()
    n = eval_data.NGRAM
    lo = eval_data.MIN_CONTAINMENT_TOKENS
    equal = {norm(t) for t in texts}
    short_sets = {k: set() for k in range(lo, n)}   # texts of lo..n-1 tokens, by length
    long_grams, n_short, n_long, n_tiny = set(), 0, 0, 0
    for t in texts:
        toks = tokens(t)
        if len(toks) < lo:
            n_tiny += 1
        elif len(toks) < n:
            short_sets[len(toks)].add(tuple(toks))
            n_short += 1
        else:
            long_grams.update(ngrams(toks, n))
            n_long += 1
    print(f"evaluation texts: {len(texts)} distinct ({sum(counts.values())} in "
          f"{len(counts)} datasets): {n_tiny} under {lo} tokens (equality only), {n_short} of "
          f"{lo}-{n - 1} tokens (containment), {n_long} of {n}+ tokens ({len(long_grams)} distinct "
          f"{n}-grams)")

    failed = False
    for name in ("train.txt", "heldout.txt"):
        path = os.path.join(args.corpus, name)
        docs = hit_equal = hit_contained = hit_ngram = 0
        first = None
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.rstrip("\n")
                docs += 1
                toks = tokens(line)
                if norm(line) in equal:
                    hit_equal += 1
                    first = first or line
                if any(not s.isdisjoint(ngrams(toks, k)) for k, s in short_sets.items() if s):
                    hit_contained += 1
                    first = first or line
                if not long_grams.isdisjoint(ngrams(toks, n)):
                    hit_ngram += 1
                    first = first or line
        ok = hit_equal == hit_contained == hit_ngram == 0
        failed |= not ok
        print(f"{'ok  ' if ok else 'FAIL'}  {name}: {docs} documents; {hit_equal} equal to an evaluation "
              f"text, {hit_contained} containing one of {lo}-{n - 1} tokens, {hit_ngram} sharing an "
              f"{n}-gram with one" + (f" (first: {first[:100]!r})" if first else ""))
    print("FAILED" if failed else "no evaluation text in the corpus")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
