#!/usr/bin/env bash
# The paper's comparison on real data (docs/QUALITY.md): Houlsby
# adapters (m = 64, m = 8) vs full fine-tuning vs the head-only and
# head + LayerNorm baselines, on the default encoder and the two datasets of
# examples/, each configuration chosen on validation, reported on test.
#
#   bench/paper_table.sh                       # the whole grid, then the table
#   bench/paper_table.sh --epochs 3            # only the 3-epoch part of the grid
#   RESULTS=/tmp/r.jsonl bench/paper_table.sh --methods adapters64,full
#
# Results accumulate in $RESULTS (default bench/results/paper_table.jsonl,
# one JSON line per run, each with the model's fingerprint); a run already
# there is not repeated, so an interrupted sweep continues where it stopped.
# A results file of another model is refused: move it away after rebuilding
# the model. Extra arguments go to `adapterd-paper-table run` (--datasets,
# --methods, --epochs, --lrs, --max_runs, --model_dir).
#
# PARALLEL processes (default: one per core) share the grid (--shard K/N),
# each with one compute thread (LibTorch's and OpenBLAS's pools both sized to
# 1: docs/PERFORMANCE.md, "CPU threads"). For these short texts, separate
# single-thread processes use the cores better than threads in one process.
# The full grid is 90 runs, about 5-6 hours on this project's 2-vCPU VM.
set -euo pipefail
cd "$(dirname "$0")/.."
RESULTS=${RESULTS:-bench/results/paper_table.jsonl}
MODEL_DIR=${MODEL_DIR:-models/adapterd-mini-en}
BUILD_DIR=${BUILD_DIR:-build}
PARALLEL=${PARALLEL:-$(nproc)}

./scripts/install-deps.sh
if [[ ! -f "$BUILD_DIR/build.ninja" ]]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
fi
cmake --build "$BUILD_DIR" -j "${JOBS:-$(nproc)}" --target adapterd-paper-table
mkdir -p "$(dirname "$RESULTS")"
TOOL="$BUILD_DIR/bench/adapterd-paper-table"
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true' INT TERM
for ((k = 0; k < PARALLEL; ++k)); do
  "$TOOL" run --model_dir "$MODEL_DIR" --results "$RESULTS" --threads 1 --shard "$k/$PARALLEL" "$@" &
  pids+=($!)
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
[[ $status == 0 ]] || { echo "paper_table: a shard failed" >&2; exit 1; }
"$TOOL" report --results "$RESULTS"
