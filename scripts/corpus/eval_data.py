"""The evaluation texts the pretraining corpus must not contain.

Shared by build_corpus.py (which excludes them) and check_overlap.py (which
verifies the result independently). Every text of every evaluation file in
examples/:

  examples/{debian_sections,wordnet_supersenses}_{train,validation,test}.csv
                                       column text (make_real_datasets.py)
  examples/everyday_descriptions.csv, topics_*.csv, sentiment_*.csv
                                       column text (make_examples.py)
  examples/kinds/*.csv                 columns text and text_pair
  examples/kinds/*.jsonl               fields text, text_pair, and tokens
                                       (joined with spaces)
  examples/kinds/*.json                SQuAD: every context and question
                                       (make_kind_examples.py,
                                       make_real_kind_datasets.py)

Labels, answers (substrings of their contexts) and entity spans are not texts.
"""
import csv
import glob
import json
import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
EXAMPLES = os.path.join(ROOT, "examples")
sys.path.insert(0, EXAMPLES)
import make_real_datasets as rd  # noqa: E402

TEXT_FIELDS = ("text", "text_pair")
MIN_CONTAINMENT_TOKENS = 4   # shorter texts are only checked for equality
NGRAM = 8                    # near-duplicate rule: any shared 8-token sequence


def _csv_texts(path):
    with open(path, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            for field in TEXT_FIELDS:
                if row.get(field):
                    yield row[field]


def _jsonl_texts(path):
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            row = json.loads(line)
            for field in TEXT_FIELDS:
                if isinstance(row.get(field), str):
                    yield row[field]
            if isinstance(row.get("tokens"), list):
                yield " ".join(row["tokens"])


def _squad_texts(path):
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    for article in doc.get("data", []):
        for paragraph in article.get("paragraphs", []):
            yield paragraph["context"]
            for qa in paragraph.get("qas", []):
                yield qa["question"]


def evaluation_files():
    """[(dataset name, path)] of every evaluation file, sorted by path."""
    paths = [os.path.join(EXAMPLES, f"{d}_{s}.csv") for d in rd.DATASETS for s in rd.SPLITS]
    for pattern in ("everyday_descriptions.csv", "topics_*.csv", "sentiment_*.csv",
                    "kinds/*.csv", "kinds/*.jsonl", "kinds/*.json"):
        paths += glob.glob(os.path.join(EXAMPLES, pattern))
    out = []
    for p in sorted(set(paths)):
        name = os.path.relpath(p, EXAMPLES)
        stem = os.path.basename(p).split(".")[0]
        for split in rd.SPLITS:
            stem = stem[: -len("_" + split)] if stem.endswith("_" + split) else stem
        out.append((("kinds/" if name.startswith("kinds/") else "") + stem, p))
    return out


def read_texts(path):
    """The texts of one evaluation file."""
    if path.endswith(".csv"):
        return list(_csv_texts(path))
    if path.endswith(".jsonl"):
        return list(_jsonl_texts(path))
    return list(_squad_texts(path))


def evaluation_texts():
    """({dataset: number of texts}, [distinct texts, sorted by normalised
    form]). Raises FileNotFoundError when one of the six CSV files of
    make_real_datasets.py is missing."""
    for path in rd.dataset_paths().values():
        if not os.path.exists(path):
            raise FileNotFoundError(2, "missing", path)
    counts, by_norm = {}, {}
    for dataset, path in evaluation_files():
        texts = read_texts(path)
        counts[dataset] = counts.get(dataset, 0) + len(texts)
        for t in texts:
            by_norm.setdefault(rd.normalise(t), t)
    return counts, [by_norm[k] for k in sorted(by_norm) if k]
