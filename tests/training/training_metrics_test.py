"""server/training/validation_metrics.h against the implementations users compare with.

Each metric runs in C++ through tests/training/metrics_probe (METRICS_PROBE)
on generated cases and hand-made ones, and is compared with:
  - scikit-learn (accuracy_score, f1_score, mean_squared_error) and scipy
    (pearsonr, spearmanr), Debian's python3-sklearn and python3-scipy;
  - the SQuAD v2.0 evaluation script's normalize_answer / compute_exact /
    compute_f1, as published (below, unchanged but for style);
  - conlleval's chunk logic (a line-for-line port of the Perl script's
    startOfChunk / endOfChunk and its counting loop, below).
"""
import collections
import json
import math
import os
import random
import re
import string
import subprocess
import unittest

import numpy as np
from scipy import stats
from sklearn.metrics import accuracy_score, f1_score, mean_squared_error

PROBE = os.environ["METRICS_PROBE"]


def run_probe(cases):
    """Runs every case through the C++ metrics, in one process."""
    out = subprocess.run([PROBE], input="".join(json.dumps(c) + "\n" for c in cases), capture_output=True,
                         text=True, check=True, timeout=120)
    results = [json.loads(line) for line in out.stdout.splitlines()]
    assert len(results) == len(cases), out.stderr
    return results


# --- The SQuAD v2.0 evaluation script's functions --------------------------------------------------

def normalize_answer(s):
    def remove_articles(text):
        regex = re.compile(r"\b(a|an|the)\b", re.UNICODE)
        return re.sub(regex, " ", text)

    def white_space_fix(text):
        return " ".join(text.split())

    def remove_punc(text):
        exclude = set(string.punctuation)
        return "".join(ch for ch in text if ch not in exclude)

    def lower(text):
        return text.lower()

    return white_space_fix(remove_articles(remove_punc(lower(s))))


def get_tokens(s):
    if not s:
        return []
    return normalize_answer(s).split()


def compute_exact(a_gold, a_pred):
    return int(normalize_answer(a_gold) == normalize_answer(a_pred))


def compute_f1(a_gold, a_pred):
    gold_toks = get_tokens(a_gold)
    pred_toks = get_tokens(a_pred)
    common = collections.Counter(gold_toks) & collections.Counter(pred_toks)
    num_same = sum(common.values())
    if len(gold_toks) == 0 or len(pred_toks) == 0:
        return int(gold_toks == pred_toks)
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(pred_toks)
    recall = 1.0 * num_same / len(gold_toks)
    return (2 * precision * recall) / (precision + recall)


def squad_reference(gold, pred):
    """The script's get_raw_scores, averaged (as fractions)."""
    em = f1 = 0.0
    for answers, p in zip(gold, pred):
        answers = [a for a in answers if normalize_answer(a)] or [""]
        em += max(compute_exact(a, p) for a in answers)
        f1 += max(compute_f1(a, p) for a in answers)
    return em / len(gold), f1 / len(gold)


# --- conlleval ------------------------------------------------------------------------------------

def split_tag(t):
    if t == "O":
        return "O", ""
    tag, _, typ = t.partition("-")
    return tag, typ


def end_of_chunk(prev_tag, tag, prev_type, typ):
    chunk_end = False
    if prev_tag == "B" and tag == "B": chunk_end = True
    if prev_tag == "B" and tag == "O": chunk_end = True
    if prev_tag == "I" and tag == "B": chunk_end = True
    if prev_tag == "I" and tag == "O": chunk_end = True
    if prev_tag == "E" and tag == "E": chunk_end = True
    if prev_tag == "E" and tag == "I": chunk_end = True
    if prev_tag == "E" and tag == "O": chunk_end = True
    if prev_tag == "I" and tag == "O": chunk_end = True
    if prev_tag != "O" and prev_tag != "." and prev_type != typ: chunk_end = True
    if prev_tag == "]": chunk_end = True
    if prev_tag == "[": chunk_end = True
    return chunk_end


def start_of_chunk(prev_tag, tag, prev_type, typ):
    chunk_start = False
    if prev_tag == "B" and tag == "B": chunk_start = True
    if prev_tag == "I" and tag == "B": chunk_start = True
    if prev_tag == "O" and tag == "B": chunk_start = True
    if prev_tag == "O" and tag == "I": chunk_start = True
    if prev_tag == "E" and tag == "E": chunk_start = True
    if prev_tag == "E" and tag == "I": chunk_start = True
    if prev_tag == "O" and tag == "E": chunk_start = True
    if prev_tag == "O" and tag == "I": chunk_start = True
    if tag != "O" and tag != "." and prev_type != typ: chunk_start = True
    if tag == "[": chunk_start = True
    if tag == "]": chunk_start = True
    return chunk_start


def conlleval(gold_sentences, pred_sentences):
    """conlleval's counting loop; sentences end as its empty lines do."""
    correct = found_correct = found_guessed = 0
    by_type = collections.defaultdict(lambda: [0, 0, 0])  # correct, gold, guessed
    for gold, pred in zip(gold_sentences, pred_sentences):
        in_correct = False
        last_correct, last_correct_type = "O", ""
        last_guessed, last_guessed_type = "O", ""
        for g, p in list(zip(gold, pred)) + [("O", "O")]:  # the boundary line
            cor_tag, cor_type = split_tag(g)
            gu_tag, gu_type = split_tag(p)
            if in_correct:
                cor_end = end_of_chunk(last_correct, cor_tag, last_correct_type, cor_type)
                gu_end = end_of_chunk(last_guessed, gu_tag, last_guessed_type, gu_type)
                if cor_end and gu_end and last_guessed_type == last_correct_type:
                    in_correct = False
                    correct += 1
                    by_type[last_correct_type][0] += 1
                elif cor_end != gu_end or gu_type != cor_type:
                    in_correct = False
            cor_start = start_of_chunk(last_correct, cor_tag, last_correct_type, cor_type)
            gu_start = start_of_chunk(last_guessed, gu_tag, last_guessed_type, gu_type)
            if cor_start and gu_start and gu_type == cor_type:
                in_correct = True
            if cor_start:
                found_correct += 1
                by_type[cor_type][1] += 1
            if gu_start:
                found_guessed += 1
                by_type[gu_type][2] += 1
            last_correct, last_correct_type = cor_tag, cor_type
            last_guessed, last_guessed_type = gu_tag, gu_type
    precision = correct / found_guessed if found_guessed else 0.0
    recall = correct / found_correct if found_correct else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    per_type = {}
    for typ, (c, g, p) in by_type.items():
        pr = c / p if p else 0.0
        rc = c / g if g else 0.0
        per_type[typ] = 2 * pr * rc / (pr + rc) if pr + rc else 0.0
    return precision, recall, f1, per_type


class MetricsTest(unittest.TestCase):
    def assertClose(self, got, want, what):
        self.assertTrue(math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-12), f"{what}: got {got}, want {want}")

    def test_single_label_accuracy_and_f1_match_sklearn(self):
        rng = random.Random(1)
        cases = []
        for _ in range(300):
            k, n = rng.randint(2, 6), rng.randint(1, 40)
            cases.append({"metric": "class", "gold": [rng.randrange(k) for _ in range(n)],
                          "pred": [rng.randrange(k) for _ in range(n)]})
        cases.append({"metric": "class", "gold": [0, 0, 1], "pred": [2, 2, 2]})  # a label only predicted
        for case, got in zip(cases, run_probe(cases)):
            y, p = case["gold"], case["pred"]
            self.assertClose(got["accuracy"], accuracy_score(y, p), f"accuracy {case}")
            self.assertClose(got["micro_f1"], f1_score(y, p, average="micro", zero_division=0), f"micro {case}")
            self.assertClose(got["macro_f1"], f1_score(y, p, average="macro", zero_division=0), f"macro {case}")

    def test_multi_label_f1_and_exact_match_match_sklearn(self):
        rng = random.Random(2)
        cases = []
        for _ in range(300):
            # Two labels at least: sklearn reads one column as a binary target.
            k, n = rng.randint(2, 6), rng.randint(1, 30)
            rows = lambda: [sorted(rng.sample(range(k), rng.randint(0, k))) for _ in range(n)]
            cases.append({"metric": "multilabel", "gold": rows(), "pred": rows(), "num_labels": k})
        for case, got in zip(cases, run_probe(cases)):
            k = case["num_labels"]
            y = np.zeros((len(case["gold"]), k), dtype=int)
            p = np.zeros_like(y)
            for i, labels in enumerate(case["gold"]):
                y[i, labels] = 1
            for i, labels in enumerate(case["pred"]):
                p[i, labels] = 1
            self.assertClose(got["micro_f1"], f1_score(y, p, average="micro", zero_division=0), f"micro {case}")
            self.assertClose(got["macro_f1"], f1_score(y, p, average="macro", zero_division=0), f"macro {case}")
            self.assertClose(got["exact_match"], accuracy_score(y, p), f"exact match {case}")

    def test_regression_correlations_and_mse_match_scipy_and_sklearn(self):
        rng = random.Random(3)
        cases = []
        for _ in range(300):
            n = rng.randint(2, 40)
            # Few distinct values in some cases, so that ranks tie.
            draw = (lambda: float(rng.randint(0, 4))) if rng.random() < 0.3 else (lambda: rng.uniform(-5, 5))
            gold = [draw() for _ in range(n)]
            pred = [g + rng.gauss(0, 2) for g in gold] if rng.random() < 0.5 else [draw() for _ in range(n)]
            cases.append({"metric": "regression", "gold": gold, "pred": pred})
        constant = {"metric": "regression", "gold": [1.0, 2.0, 3.0], "pred": [2.0, 2.0, 2.0]}
        results = run_probe(cases + [constant])
        for case, got in zip(cases, results):
            y, p = case["gold"], case["pred"]
            self.assertClose(got["mse"], mean_squared_error(y, p), f"mse {case}")
            if len(set(y)) < 2 or len(set(p)) < 2:
                continue
            self.assertTrue(math.isclose(got["pearson"], stats.pearsonr(y, p)[0], abs_tol=1e-9), f"pearson {case}")
            self.assertTrue(math.isclose(got["spearman"], stats.spearmanr(y, p)[0], abs_tol=1e-9),
                            f"spearman {case}")
        # scipy's NaN for a constant series is 0 here (comparable epoch to epoch).
        self.assertEqual(results[-1]["pearson"], 0)
        self.assertEqual(results[-1]["spearman"], 0)

    def test_entity_f1_matches_conlleval_on_generated_tags(self):
        rng = random.Random(4)
        tags = ["O", "O", "O", "B-PER", "I-PER", "B-LOC", "I-LOC", "I-ORG", "B-ORG"]
        cases = []
        for _ in range(300):
            sentences = [rng.randint(1, 15) for _ in range(rng.randint(1, 5))]
            gold = [[rng.choice(tags) for _ in range(n)] for n in sentences]
            # Predictions near the gold tags, so that many entities match.
            pred = [[t if rng.random() < 0.7 else rng.choice(tags) for t in s] for s in gold]
            cases.append({"metric": "entities", "gold": gold, "pred": pred})
        for case, got in zip(cases, run_probe(cases)):
            precision, recall, f1, per_type = conlleval(case["gold"], case["pred"])
            self.assertClose(got["precision"], precision, f"precision {case}")
            self.assertClose(got["recall"], recall, f"recall {case}")
            self.assertClose(got["f1"], f1, f"f1 {case}")
            self.assertEqual(set(got["f1_by_type"]), set(per_type), f"types {case}")
            for typ, value in per_type.items():
                self.assertClose(got["f1_by_type"][typ], value, f"f1 of {typ} {case}")

    def test_entity_chunks_follow_conlleval_on_hand_made_tags(self):
        cases = [
            # An I- after O starts an entity; an I- of another type starts one too.
            {"metric": "entities", "gold": [["I-PER", "I-PER", "O", "B-LOC", "I-ORG", "I-ORG"]],
             "pred": [["B-PER", "I-PER", "O", "B-LOC", "B-ORG", "I-ORG"]]},
            # B- B- is two entities; the last one ends with the sentence.
            {"metric": "entities", "gold": [["B-PER", "B-PER"], ["O", "B-LOC"]],
             "pred": [["B-PER", "I-PER"], ["O", "B-LOC"]]},
            {"metric": "entities", "gold": [["O", "O"]], "pred": [["O", "O"]]},
        ]
        got = run_probe(cases)
        self.assertEqual(got[0]["gold_chunks"], [[["PER", 0, 2], ["LOC", 3, 4], ["ORG", 4, 6]]])
        self.assertClose(got[0]["f1"], 1.0, "I- starts like B-: all three match")
        self.assertEqual(got[1]["gold_chunks"], [[["PER", 0, 1], ["PER", 1, 2]], [["LOC", 1, 2]]])
        self.assertClose(got[1]["precision"], 0.5, "PER[0,2) is wrong, LOC right")
        self.assertClose(got[1]["recall"], 1 / 3, "one of three")
        self.assertEqual(got[2]["f1"], 0)

    def test_squad_scores_match_the_official_script(self):
        rng = random.Random(5)
        words = ["the", "The", "a", "an", "An", "cat", "Cat", "dog", "theater", "answer", "1912", "x_y", "caf\u00e9",
                 "CAF\u00c9", "na\u00efve", "\u00df", "a\u0301", "the,", "(the)", "don't", "--", "$5", "\u4e2d\u6587"]
        seps = [" ", "  ", "\t", "\n", "\u00a0", "\u3000", "", ",", "."]

        def text():
            return "".join(rng.choice(words) + rng.choice(seps) for _ in range(rng.randint(0, 6)))

        cases = []
        for _ in range(300):
            n = rng.randint(1, 4)
            cases.append({"metric": "squad", "gold": [[text() for _ in range(rng.randint(1, 3))] for _ in range(n)],
                          "pred": [text() for _ in range(n)]})
        hand = [("The Cat", "cat"), ("a cat sat", "cat sat on"), ("", ""), ("Norman", ""), ("the", "an"),
                ("Cats and dogs", "dogs and cats"), ("caf\u00e9!", "CAF\u00c9")]
        cases.append({"metric": "squad", "gold": [[g] for g, _ in hand], "pred": [p for _, p in hand]})
        normalize = [{"metric": "normalize", "text": text()} for _ in range(300)]
        results = run_probe(cases + normalize)
        for case, got in zip(cases, results):
            em, f1 = squad_reference(case["gold"], case["pred"])
            self.assertClose(got["exact_match"], em, f"exact match {case}")
            self.assertClose(got["f1"], f1, f"f1 {case}")
        for case, got in zip(normalize, results[len(cases):]):
            self.assertEqual(got["normalized"], normalize_answer(case["text"]), case)
        # The hand-made pairs, by hand: EM 1, 0, 1, 0, 1, 0, 1; F1 1, 0.8, 1, 0, 1, 1, 1.
        self.assertClose(results[len(cases) - 1]["exact_match"], 4 / 7, "hand-made EM")
        self.assertClose(results[len(cases) - 1]["f1"], (1 + 0.8 + 1 + 0 + 1 + 1 + 1) / 7, "hand-made F1")


if __name__ == "__main__":
    unittest.main()
