#!/usr/bin/env bash
# bf16 vs fp32 serving agreement on the real datasets' test splits (P3;
# docs/PERFORMANCE.md). Trains adapters (m = 64) on the default encoder
# for both datasets of examples/REAL_DATASETS.md with the real adapterd and
# adapterctl, predicts every test text with --dtype fp32 and again with
# --dtype bf16 on the same stored adapters, and prints, per dataset, how many
# argmax labels agree and the largest probability difference.
#
#   bench/dtype_agreement.sh [BUILD_DIR] [EPOCHS]     # defaults: build, 3
#
# A benchmark, not a test (minutes of training); the CI test of the same
# property runs on the walkthrough's first 300 texts (tests/e2e/e2e_test.cc).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
EPOCHS=${2:-3}
MODEL=models/adapterd-mini-en
WORK=$(mktemp -d /tmp/adapterd-dtype-agreement.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$WORK"' EXIT
PORT=$(python3 tests/testing/free_port.py)
CTL=("$BUILD/client/adapterctl" --server "127.0.0.1:$PORT" --timeout 3600)

serve() {  # serve DTYPE: starts adapterd, waits until it is SERVING
  "$BUILD/server/adapterd" --model_dir "$MODEL" --data_dir "$WORK/data" --listen "127.0.0.1:$PORT" \
    --metrics_listen "" --dtype "$1" > "$WORK/adapterd.$1.log" 2>&1 &
  for _ in $(seq 600); do
    grep -q "SERVING on port" "$WORK/adapterd.$1.log" && return 0
    sleep 0.1
  done
  echo "adapterd did not start:" >&2; cat "$WORK/adapterd.$1.log" >&2; exit 1
}
stop() { kill -TERM %1; wait %1 || true; }

DATASETS=(wordnet_supersenses debian_sections)
serve fp32
for ds in "${DATASETS[@]}"; do
  "${CTL[@]}" train --task "$ds" --data "examples/${ds}_train.csv" --validation "examples/${ds}_validation.csv" \
    --epochs "$EPOCHS" --learning-rate 1e-3 --seed 1 >&2
done
for dtype in fp32 bf16; do
  [[ $dtype == fp32 ]] || serve "$dtype"
  for ds in "${DATASETS[@]}"; do
    /usr/bin/python3 -c 'import csv,sys; [print(r["text"].replace("\n"," ")) for r in csv.DictReader(open(sys.argv[1]))]' \
      "examples/${ds}_test.csv" > "$WORK/$ds.txt"
    "${CTL[@]}" --json predict --task "$ds" --all-scores --file "$WORK/$ds.txt" > "$WORK/$ds.$dtype.json"
  done
  stop
done

/usr/bin/python3 - "$WORK" "${DATASETS[@]}" <<'PY'
import json, sys
work, datasets = sys.argv[1], sys.argv[2:]
print("dataset | texts | argmax agreement | largest probability difference")
for ds in datasets:
    a = json.load(open(f"{work}/{ds}.fp32.json"))["predictions"]
    b = json.load(open(f"{work}/{ds}.bf16.json"))["predictions"]
    assert len(a) == len(b)
    agree = sum(x["label"] == y["label"] for x, y in zip(a, b))
    diff = 0.0
    for x, y in zip(a, b):
        sx = {s["label"]: s["score"] for s in x["all_scores"]}
        for s in y["all_scores"]:
            diff = max(diff, abs(sx[s["label"]] - s["score"]))
    print(f"{ds} | {len(a)} | {agree}/{len(a)} = {100.0 * agree / len(a):.2f}% | {diff:.4f}")
PY
