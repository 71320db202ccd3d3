#!/usr/bin/env bash
# The paper's comparison on real data (issue 5, docs/QUALITY.md): Houlsby
# adapters (m = 64, m = 8) vs full fine-tuning vs the head-only and
# head + LayerNorm baselines, on the default encoder and the two datasets of
# examples/, each configuration chosen on validation, reported on test.
#
#   bench/paper_table.sh                       # the whole grid, then the table
#   bench/paper_table.sh --epochs 3            # only the 3-epoch part of the grid
#   RESULTS=/tmp/r.jsonl bench/paper_table.sh --methods adapters64,full
#
# Results accumulate in $RESULTS (default bench/results/paper_table.jsonl,
# one JSON line per run); a run already there is not repeated, so an
# interrupted sweep continues where it stopped. Extra arguments go to
# `adapterd-paper-table run` (--datasets, --methods, --epochs, --threads,
# --max_runs, --model_dir). The full grid is 90 runs, about 7 hours on the
# 2-core development CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
RESULTS=${RESULTS:-bench/results/paper_table.jsonl}
MODEL_DIR=${MODEL_DIR:-models/adapterd-mini-en}
BUILD_DIR=${BUILD_DIR:-build}

./scripts/install-deps.sh
if [[ ! -f "$BUILD_DIR/build.ninja" ]]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
fi
cmake --build "$BUILD_DIR" -j "${JOBS:-$(nproc)}" --target adapterd-paper-table
mkdir -p "$(dirname "$RESULTS")"
"$BUILD_DIR/bench/adapterd-paper-table" run --model_dir "$MODEL_DIR" --results "$RESULTS" "$@"
"$BUILD_DIR/bench/adapterd-paper-table" report --results "$RESULTS"
