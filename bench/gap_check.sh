#!/usr/bin/env bash
# The quick check between pretraining cycles (docs/QUALITY.md, "More
# pretraining"): does a candidate encoder bring adapters m = 64 within 2
# points of full fine-tuning? Far cheaper than the paper table's 90-run grid
# (bench/paper_table.sh), which a new default model still needs.
#
#   bench/gap_check.sh data/mini-c4                       # both datasets
#   DATASETS=wordnet_supersenses bench/gap_check.sh data/mini-c4
#   RESULTS=/tmp/c4.jsonl bench/gap_check.sh data/mini-c4
#
# Per dataset it trains adapters m = 64 and full fine-tuning, each at the
# configuration the committed paper table chose for it on validation (below;
# 20 epochs, seed 42), as two single-thread processes side by side, and
# prints validation and test accuracy and the gap. Runs accumulate in
# $RESULTS (default data/gap_check/<model directory name>.jsonl; one file per
# model, as adapterd-paper-table requires); a run already there is skipped.
# On the 2-vCPU development VM: about 15 min for wordnet_supersenses and
# 33 min for debian_sections.
set -euo pipefail
[[ $# == 1 && -d "$1" ]] || { sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
MODEL_DIR=$1
cd "$(dirname "$0")/.."
RESULTS=${RESULTS:-data/gap_check/$(basename "$MODEL_DIR").jsonl}
DATASETS=${DATASETS:-wordnet_supersenses,debian_sections}
BUILD_DIR=${BUILD_DIR:-build}
TOOL="$BUILD_DIR/bench/adapterd-paper-table"
cmake --build "$BUILD_DIR" --target adapterd-paper-table   # a no-op when up to date
mkdir -p "$(dirname "$RESULTS")"

# The paper table's chosen learning rates (docs/QUALITY.md, "Chosen
# configurations"), all at 20 epochs: update them when a new table chooses
# others.
declare -A ADAPTERS_LR=([debian_sections]=0.001 [wordnet_supersenses]=0.003)
declare -A FULL_LR=([debian_sections]=0.0003 [wordnet_supersenses]=0.0003)

IFS=, read -ra datasets <<< "$DATASETS"
for d in "${datasets[@]}"; do
  [[ -n "${ADAPTERS_LR[$d]:-}" ]] || { echo "gap_check: unknown dataset $d" >&2; exit 2; }
  pids=()
  for m in adapters64 full; do
    if [[ $m == full ]]; then lr=${FULL_LR[$d]}; else lr=${ADAPTERS_LR[$d]}; fi
    "$TOOL" run --model_dir "$MODEL_DIR" --results "$RESULTS" --threads 1 \
      --datasets "$d" --methods "$m" --epochs 20 --lrs "$lr" &
    pids+=($!)
  done
  status=0
  for pid in "${pids[@]}"; do wait "$pid" || status=1; done
  [[ $status == 0 ]] || { echo "gap_check: a run on $d failed" >&2; exit 1; }
done

chosen=()
for d in "${datasets[@]}"; do chosen+=("$d/adapters64/${ADAPTERS_LR[$d]}" "$d/full/${FULL_LR[$d]}"); done
/usr/bin/env python3 - "$RESULTS" "${chosen[@]}" <<'EOF'
import json, sys
wanted = {tuple(c.split("/")) for c in sys.argv[2:]}
rows = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r["epochs"] == 20 and (r["dataset"], r["method"], repr(r["lr"])) in wanted:
        rows[(r["dataset"], r["method"])] = r
print(f"model {next(iter(rows.values()))['model']}")
print("| dataset | adapters m=64 val / test | full val / test | gap val / test |")
print("|---|---:|---:|---:|")
for d in sorted({k[0] for k in rows}):
    a, f = rows.get((d, "adapters64")), rows.get((d, "full"))
    if not a or not f:
        continue
    va, ta = 100 * a["validation_accuracy"], 100 * a["test_accuracy"]
    vf, tf = 100 * f["validation_accuracy"], 100 * f["test_accuracy"]
    print(f"| {d} | {va:.1f} / {ta:.1f} | {vf:.1f} / {tf:.1f} | {vf - va:.1f} / {tf - ta:.1f} |")
EOF
