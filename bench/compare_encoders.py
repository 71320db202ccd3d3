#!/usr/bin/env python3
"""Two encoders on the same configurations of the paper's comparison (docs/QUALITY.md, "The
paper's comparison on the new encoder"): for every run of NEW, the run of OLD with the same key
(dataset, method, lr, epochs, seed), side by side as a Markdown table of validation and test
figures (each dataset's own metric: accuracy, SQuAD F1, entity F1, Spearman).

    python3 bench/compare_encoders.py OLD.jsonl NEW.jsonl [OLD2.jsonl NEW2.jsonl ...]
"""
import json
import sys


def metric(run, split):
    """The run's own metric on `split` ("validation" or "test"), in percent (Spearman x 100)."""
    if f"{split}_metric" in run:
        value = run[f"{split}_metric"]
    else:  # classification rows written before the per-kind metrics
        value = run[f"{split}_accuracy"]
    return 100.0 * value


def load(path):
    with open(path) as f:
        return {r["key"]: r for r in (json.loads(line) for line in f if line.strip())}


def main(paths):
    if len(paths) % 2:
        sys.exit("give OLD NEW pairs")
    print("| dataset | method | lr | epochs | previous encoder: val / test | new encoder: val / test | test change |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for old_path, new_path in zip(paths[::2], paths[1::2]):
        old, new = load(old_path), load(new_path)
        for key in sorted(new, key=lambda k: (new[k]["dataset"], new[k]["method"], new[k]["lr"])):
            n, o = new[key], old.get(key)
            before = f"{metric(o, 'validation'):.1f} / {metric(o, 'test'):.1f}" if o else "not run"
            change = f"{metric(n, 'test') - metric(o, 'test'):+.1f}" if o else ""
            print(f"| {n['dataset']} | {n['method']} | {n['lr']:g} | {n['epochs']} | {before} | "
                  f"{metric(n, 'validation'):.1f} / {metric(n, 'test'):.1f} | {change} |")


if __name__ == "__main__":
    main(sys.argv[1:])
