#!/usr/bin/env bash
# The README's walkthrough, measured on an encoder (docs/QUALITY.md, "The
# default encoder"): starts adapterd on MODEL_DIR with a fresh data directory,
# then runs the walkthrough's commands exactly as the README writes them and
# prints what a new user would see:
#   - supersenses: `adapterctl train` 3 epochs at lr 1e-3 (seed 1, as the e2e
#     test), then the first 300 examples of the held-out test split through
#     `adapterctl predict`: test accuracy;
#   - the twelve everyday descriptions of examples/everyday_descriptions.csv
#     (the README's two and ten more, written before the encoder was trained):
#     each prediction and how many are right;
#   - every kind of the README's "Every kind of task" (aspects, ratings,
#     people, bios): 10 epochs each at the README's learning rate (KIND_LR,
#     default 3e-3), what `train` reports, and the README's predictions.
#
#   bench/walkthrough_eval.sh MODEL_DIR [PORT] > result.txt
#
# Needs build/server/adapterd and build/client/adapterctl. Takes a few minutes
# on 2 cores (the larger the encoder, the longer). Not a test: it measures.
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=$(cd "$1" && pwd)
PORT=${2:-18950}
BUILD=${BUILD_DIR:-build}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/walkthrough.XXXXXX")
trap 'kill "$SERVER" 2>/dev/null; wait "$SERVER" 2>/dev/null; rm -rf "$WORK"' EXIT
# No --timeout: it would bound watching a training job too.
CTL=("$BUILD/client/adapterctl" --server "127.0.0.1:$PORT")

GOMP_SPINCOUNT=${GOMP_SPINCOUNT:-3000000} "$BUILD/server/adapterd" --model_dir "$MODEL" --data_dir "$WORK/data" \
  --listen "127.0.0.1:$PORT" --metrics_listen "" --threads 2 > "$WORK/server.log" 2>&1 &
SERVER=$!
for _ in $(seq 300); do "${CTL[@]}" health > /dev/null 2>&1 && break; sleep 0.2; done
"${CTL[@]}" health > /dev/null || { tail -20 "$WORK/server.log"; exit 1; }
echo "encoder: $MODEL ($(python3 -c "import json,sys; c=json.load(open(sys.argv[1])); print(f\"{c['num_hidden_layers']} x {c['hidden_size']}\")" "$MODEL/config.json"))"

start=$(date +%s)
"${CTL[@]}" train --task supersenses --data examples/wordnet_supersenses_train.csv \
  --validation examples/wordnet_supersenses_validation.csv --learning-rate 1e-3 --epochs 3 --seed 1 \
  > "$WORK/train_supersenses.txt" 2>&1 || { cat "$WORK/train_supersenses.txt"; exit 1; }
echo "supersenses: trained in $(( $(date +%s) - start )) s: $(grep -o 'SUCCEEDED.*' "$WORK/train_supersenses.txt" | tail -1)"
python3 - "$WORK" <<'PY'
import csv, sys
work = sys.argv[1]
rows = list(csv.DictReader(open("examples/wordnet_supersenses_test.csv", encoding="utf-8")))[:300]
open(f"{work}/test.txt", "w", encoding="utf-8").write("".join(r["text"] + "\n" for r in rows))
open(f"{work}/test_labels.txt", "w", encoding="utf-8").write("".join(r["label"] + "\n" for r in rows))
rows = list(csv.DictReader(open("examples/everyday_descriptions.csv", encoding="utf-8")))
open(f"{work}/everyday.txt", "w", encoding="utf-8").write("".join(r["text"] + "\n" for r in rows))
open(f"{work}/everyday_labels.txt", "w", encoding="utf-8").write("".join(r["label"] + "\n" for r in rows))
PY
"${CTL[@]}" --json predict --task supersenses --file "$WORK/test.txt" > "$WORK/test_pred.json"
"${CTL[@]}" --json predict --task supersenses --file "$WORK/everyday.txt" > "$WORK/everyday_pred.json"
python3 - "$WORK" <<'PY'
import json, sys
work = sys.argv[1]
def labels(name):
    return [l.rstrip("\n") for l in open(f"{work}/{name}", encoding="utf-8")]
pred = json.load(open(f"{work}/test_pred.json"))["predictions"]
gold = labels("test_labels.txt")
right = sum(p["label"] == g for p, g in zip(pred, gold))
print(f"supersenses: test accuracy {right / len(gold):.3f} ({right}/{len(gold)}, the first 300 of the test split)")
pred = json.load(open(f"{work}/everyday_pred.json"))["predictions"]
texts, gold = labels("everyday.txt"), labels("everyday_labels.txt")
right = 0
for t, p, g in zip(texts, pred, gold):
    ok = p["label"] == g
    right += ok
    print(f"  {'ok ' if ok else 'BAD'} {t:55s} {p['label']:9s} {p['score']:.2f}  (expected {g})")
print(f"everyday descriptions: {right}/{len(gold)} right")
PY
"${CTL[@]}" predict --task supersenses "a large wild cat with a striped coat" "a tool for cutting wood"

# Every kind of task, as the README's "Every kind of task" runs them.
train_kind() {  # TASK KIND FILE_STEM LR: train 10 epochs, print what train reports
  local start=$(date +%s)
  "${CTL[@]}" train --task "$1" --kind "$2" --data "examples/kinds/$3_train.$4" \
    --validation "examples/kinds/$3_validation.$4" --learning-rate "$5" --epochs 10 --seed 1 \
    > "$WORK/train_$1.txt" 2>&1 || { cat "$WORK/train_$1.txt"; exit 1; }
  echo "$1 ($2, lr $5): trained in $(( $(date +%s) - start )) s: $(grep -o 'SUCCEEDED.*' "$WORK/train_$1.txt" | tail -1)"
}
train_kind aspects multi-label aspects jsonl "${KIND_LR:-3e-3}"
"${CTL[@]}" predict --task aspects --threshold 0.4 "it arrived the next day, the price was fair"
train_kind ratings regression ratings csv "${KIND_LR:-3e-3}"
"${CTL[@]}" predict --task ratings "works perfectly, it is blue" "complete waste of money"
train_kind people ner people jsonl "${KIND_LR:-3e-3}"
"${CTL[@]}" predict --task people "Grace Hopper moved to Zürich in the spring ."
train_kind bios qa biographies json "${KIND_LR:-3e-3}"
"${CTL[@]}" predict --task bios --top-k 2 "Where was Ada Lovelace born?" \
  --context "Ada Lovelace was born in London in 1815. Ada became a mathematician."
