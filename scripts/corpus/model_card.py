#!/usr/bin/env python3
"""Writes MODEL_CARD.md for a model built by scripts/build-default-model.sh.

    python3 scripts/corpus/model_card.py --model_dir DIR --provenance PROVENANCE.md \
        --finished 2026-11-23T11:07:00Z > DIR/MODEL_CARD.md

Everything in the card is read from files the build wrote: DIR/config.json,
DIR/pretrain_summary.json (adapterd-pretrain train), DIR/train_log.jsonl, the
sizes of DIR's files, and the corpus's PROVENANCE.md (scripts/build-corpus.sh),
which is appended whole: sources, counts, the apt snapshot and licences.

A model continued from another (`adapterd-pretrain train --init_from`) has a
lineage: the exported runs that precede its own, oldest first. With
--write_lineage (the build's own call, right after training) the lineage is
derived afresh, from the --init_from model's directory and that model's
lineage.json, and stored in DIR/lineage.json (each run's
pretrain_summary.json, its directory and the sha256 of its weights); a
lineage.json left in DIR by an earlier model is replaced, or removed when
the new model has no lineage. Without it, DIR's stored lineage.json is read
when present, so a chain of continuations stays described after the earlier
directories are gone. The card shows the lineage as a table with the totals.
"""
import argparse
import hashlib
import json
import os
import sys


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def shown_path(path):
    """A path under the working directory relative to it (the repository's root in the build)."""
    if os.path.isabs(path) and path.startswith(os.getcwd() + os.sep):
        return os.path.relpath(path)
    return path


def lineage_of(model_dir, summary, use_stored=True):
    """The runs before model_dir's own, oldest first: its stored lineage.json (if use_stored), else
    the chain through summary["init_from"] (that model's own lineage, then that model)."""
    stored = os.path.join(model_dir, "lineage.json")
    if use_stored and os.path.exists(stored):
        return json.load(open(stored))
    init_from = summary.get("init_from", "")
    if not init_from:
        return []
    try:
        parent_summary = json.load(open(os.path.join(init_from, "pretrain_summary.json")))
    except OSError as e:
        sys.exit(f"model_card: {model_dir} continues {init_from} (init_from), whose summary cannot be read "
                 f"({e.strerror}), and has no lineage.json to describe it")
    return lineage_of(init_from, parent_summary) + [{
        "model_dir": shown_path(init_from),
        "weights_sha256": sha256_of(os.path.join(init_from, "model.safetensors")),
        "summary": parent_summary,
    }]


def hardware(s):
    """The machine a run trained on: the CPU and its threads, or the GPU."""
    if s["device"] == "cpu":
        return f"cpu: {s['cpu']}, {s['threads']} threads"
    return f"{s['device']}: {s.get('gpu', 'a GPU')} (host {s['cpu']})"


def schedule(s):
    """How a run's learning rate was scheduled, and its length."""
    if s.get("lr_schedule") == "time":
        return (f"{s['steps']:,} steps; learning rate on the clock (`--lr_schedule time`): 6% warmup, then linear "
                f"decay to 0 at the end of a {s['train_seconds'] / 60:.1f}-minute budget")
    return f"{s['steps']:,} of a {s['total_steps']:,}-step schedule"


def lineage_table(runs, summary, name):
    """Markdown: one row per run of the lineage and this one, then the totals."""
    rows, steps, positions, seconds = [], 0, 0, 0.0
    for label, s in [(f"`{r['model_dir']}` (weights sha256 {r['weights_sha256'][:12]})", r["summary"])
                     for r in runs] + [(f"this model, `{name}`", summary)]:
        p = s["steps"] * s["batch_size"] * s["seq_len"]
        steps, positions, seconds = steps + s["steps"], positions + p, seconds + s["train_seconds"]
        acc = s.get("heldout", {}).get("accuracy", float("nan"))
        rows.append(f"| {label} | {s['steps']:,} | {p / max(1, s['corpus_tokens']):.2f} | {s['learning_rate']} | "
                    f"{s['train_seconds'] / 60:.1f} | {hardware(s)}, autocast {s['autocast']} | {acc:.4f} |")
    corpus_tokens = max(1, summary["corpus_tokens"])
    return ("| run | steps | epochs | peak lr (last cycle) | minutes | hardware | held-out acc after |\n"
            "|---|---:|---:|---:|---:|---|---:|\n" + "\n".join(rows) + "\n"
            f"| **all** | **{steps:,}** | **{positions / corpus_tokens:.2f}** | | **{seconds / 60:.1f}** | | |\n\n"
            f"In all, {positions:,} token positions. A run's peak lr is that of its last learning-rate "
            f"cycle; the training curve above covers this model's run only.")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model_dir", required=True)
    ap.add_argument("--provenance", required=True)
    ap.add_argument("--finished", default="", help="when training finished (UTC)")
    ap.add_argument("--notes", default="", help="a Markdown file of run notes, inserted after the accuracy")
    ap.add_argument("--write_lineage", action="store_true", help="store the lineage in DIR/lineage.json")
    a = ap.parse_args()
    d = a.model_dir
    config = json.load(open(os.path.join(d, "config.json")))
    summary = json.load(open(os.path.join(d, "pretrain_summary.json")))
    log = [json.loads(l) for l in open(os.path.join(d, "train_log.jsonl")) if l.strip()]
    provenance = open(a.provenance, encoding="utf-8").read()
    notes = open(a.notes, encoding="utf-8").read().strip() + "\n\n" if a.notes else ""
    # The provenance's own title becomes a section of the card.
    provenance = provenance.replace("# Pretraining corpus: provenance", "## Appendix: corpus provenance", 1)
    provenance = "\n".join(("#" + l) if l.startswith("## ") and not l.startswith("## Appendix") else l
                           for l in provenance.splitlines())
    size = os.path.getsize(os.path.join(d, "model.safetensors"))
    with open(os.path.join(d, "vocab.txt"), encoding="utf-8") as f:
        vocab = sum(1 for _ in f)
    held = summary.get("heldout", {})
    hours = summary["train_seconds"] / 3600.0
    tokens_seen = summary["steps"] * summary["batch_size"] * summary["seq_len"]
    curve = []
    if log:
        marks = sorted({max(1, len(log) * k // 10) - 1 for k in range(1, 11)})
        for i in marks:
            r = log[i]
            curve.append(f"| {r['step']} | {r['loss']:.3f} | {r['accuracy']:.3f} | {r['lr']:.2e} | "
                         f"{r['seconds'] / 60:.1f} |")
    name = os.path.basename(os.path.normpath(d))
    # A run started with --init_from continues an earlier model: the card's
    # lineage lists the runs that precede these steps.
    init_from = summary.get("init_from", "")
    runs = lineage_of(d, summary, use_stored=not a.write_lineage)
    if a.write_lineage:
        stored = os.path.join(d, "lineage.json")
        if runs:
            with open(stored, "w") as f:
                json.dump(runs, f, indent=1, sort_keys=True)
                f.write("\n")
        elif os.path.exists(stored):
            os.remove(stored)  # an earlier model's, exported to the same directory
    lineage = (f"## Lineage\n\nThis model continues earlier pretraining runs (`--init_from`), oldest "
               f"first; the tables above describe the last one.\n\n{lineage_table(runs, summary, name)}\n\n"
               if runs else "")
    if init_from:
        init = (f"the weights of `{shown_path(init_from)}` (`--init_from`: see \"Lineage\" below; a fresh "
                f"optimiser and schedule)")
    else:
        init = (f"normal, std {summary.get('init_range', 0.02)} (BERT's 0.02 at hidden 768, scaled by "
                f"sqrt(768/hidden)); biases 0, LayerNorm 1/0")
    print(f"""# {name}: adapterd's default encoder

A BERT-mini-sized English encoder (uncased WordPiece), pretrained from scratch
by adapterd's own tool (`adapterd-pretrain`, masked language modelling) on
English text that Debian ships. It is the model `scripts/run.sh` serves when no
`--model_dir` is given. It exists so that adapters have a *pretrained* frozen
encoder to adapt on a machine with no internet; for production accuracy serve a
real `bert-large-uncased` (README).

Rebuild it with `./scripts/build-default-model.sh` (corpus -> vocabulary ->
pretraining -> this card; on a GPU machine lent for minutes, the steps of
docs/PERFORMANCE.md, "Pretraining on a lent GPU"); the numbers below are read
from the run's files.

## Model

| | |
|---|---|
| architecture | BertModel (HF format), no pooler; MLM head `cls.predictions.*` included |
| layers / hidden / heads / FFN | {config['num_hidden_layers']} / {config['hidden_size']} / {config['num_attention_heads']} / {config['intermediate_size']} |
| vocabulary | {vocab} uncased WordPiece tokens (`adapterd-pretrain vocab`) |
| max positions | {config['max_position_embeddings']} |
| encoder parameters | {summary['parameters']:,} |
| weights | `model.safetensors`, {config.get('torch_dtype', 'float16')}, {size / 1e6:.1f} MB |

## Pretraining

| | |
|---|---|
| objective | MLM: 15% of tokens selected; 80% [MASK], 10% random, 10% unchanged; no NSP |
| data | `train.txt` of the corpus below: {summary['corpus_documents']:,} documents, {summary['corpus_tokens']:,} tokens, packed into sequences of {summary['seq_len']} |
| optimiser | AdamW (betas 0.9/0.98, eps 1e-6, weight decay 0.01 on matrices), peak lr {summary['learning_rate']}, 6% linear warmup then linear decay, grad-norm clip 1.0 |
| batch | {summary['batch_size']} sequences x {summary['seq_len']} tokens |
| steps | {schedule(summary)} ({tokens_seen:,} token positions, {tokens_seen / max(1, summary['corpus_tokens']):.2f} epochs) |
| initialisation | {init} |
| precision | fp32 weights and optimiser, matmuls under autocast {summary['autocast']}; exported in fp16 |
| seed | {summary['seed']} |
| wall time (training) | {summary['train_seconds'] / 60:.1f} min ({hours:.2f} h){', finished ' + a.finished if a.finished else ''} |
| hardware | {hardware(summary)} |

Training curve (`train_log.jsonl`; loss and accuracy of single batches):

| step | MLM loss | masked-token acc | lr | minutes |
|---:|---:|---:|---:|---:|
{chr(10).join(curve)}

## Held-out masked-token accuracy

On `heldout.txt` (about 1% of the corpus, chosen by hash before training, never
trained on): {held.get('documents', 0):,} documents, {held.get('masked_tokens', 0):,} masked tokens.

| | |
|---|---|
| masked-token accuracy | **{held.get('accuracy', float('nan')):.4f}** |
| MLM loss | {held.get('loss', float('nan')):.4f} |
| unigram baseline (always the most frequent masked token) | {held.get('unigram_accuracy', float('nan')):.4f} |

`heldout_sample.txt` (the first 300 held-out documents) is committed for the
test `tests/pretrain/default_model_test.cc`; `adapterd-pretrain eval
--model_dir {d} --corpus {d}/heldout_sample.txt` recomputes its accuracy.

{lineage}{notes}## Intended use and limits

- Intended: the frozen encoder of adapterd's quickstart and tests of the
  adapter pipeline on real English; docs/QUALITY.md measures adapters, full
  fine-tuning and a head-only baseline on it.
- Domain: what the corpus below holds: dictionary definitions (GCIDE, which is
  Webster's 1913 with its literary quotations, and WordNet), software package
  descriptions, help pages and manuals, quotations (fortunes). It has seen
  little conversational, news or fiction text, and its English is partly a
  century old (Webster's 1913).
- Small ({config['num_hidden_layers']} layers, {config['hidden_size']} wide) and briefly trained: far below BERT-base on
  general language understanding. Not for any decision about people.
- Biases: inherits those of its sources; not audited.

{provenance}""")


if __name__ == "__main__":
    sys.exit(main())
