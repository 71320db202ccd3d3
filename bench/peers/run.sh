#!/usr/bin/env bash
# Peer benchmark: adapterd vs ONNX Runtime on the same encoder + one task's
# adapters (docs/PERFORMANCE.md "Peer comparison: ONNX Runtime").
#
#   bench/peers/run.sh                  # BERT-base geometry, m = 64, 2 threads
#   ROUNDS=3 BIG_SECONDS=30 bench/peers/run.sh
#
# Steps: installs onnxruntime-node@1.20.1 into bench/peers/node_modules if
# missing; builds adapterd-peer and adapterd-make-model; writes a random
# BERT-base checkpoint and a task's adapter set (fixed seeds) under $WORK_DIR;
# exports encoder + adapters to ONNX and checks the PyTorch module against
# adapterd's fp32 forward and ONNX Runtime against the module (max abs logit
# difference <= 1e-4, else it stops); then times, interleaved, ROUNDS times:
#   adapterd fp32 b32x128, adapterd bf16 b32x128, ORT fp32 b32x128,
#   adapterd fp32 b1x20,   adapterd bf16 b1x20,   ORT fp32 b1x20
# and prints the medians over rounds and the ratios P1, P2, P8.
#
# Env: BUILD_DIR (build), WORK_DIR (/tmp/adapterd-peers), ROUNDS (2),
# BIG_SECONDS (20: per b32x128 measurement), SMALL_SECONDS (10), THREADS (2),
# PRESET (base), BOTTLENECK (64).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
BUILD_DIR=${BUILD_DIR:-build}
WORK_DIR=${WORK_DIR:-/tmp/adapterd-peers}
ROUNDS=${ROUNDS:-2}
BIG_SECONDS=${BIG_SECONDS:-20}
SMALL_SECONDS=${SMALL_SECONDS:-10}
THREADS=${THREADS:-2}
PRESET=${PRESET:-base}
BOTTLENECK=${BOTTLENECK:-64}
PEERS=$ROOT/bench/peers
ORT_VERSION=1.20.1

# 1. ONNX Runtime for Node. The CPU binaries ship in the npm package; skip the
# postinstall's CUDA download (it fetches from GitHub, unreachable offline).
if [[ "$(node -p "try{require('$PEERS/node_modules/onnxruntime-node/package.json').version}catch(e){''}")" != "$ORT_VERSION" ]]; then
  echo "== installing onnxruntime-node@$ORT_VERSION into bench/peers/node_modules"
  (cd "$PEERS" && npm install --no-save --no-package-lock --no-audit --no-fund --prefix . \
    --onnxruntime-node-install-cuda=skip "onnxruntime-node@$ORT_VERSION" >/dev/null)
fi

# 2. Tools.
if [[ ! -f "$BUILD_DIR/build.ninja" ]]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
fi
cmake --build "$BUILD_DIR" -j "${JOBS:-2}" --target adapterd-peer adapterd-make-model
PEER=$ROOT/$BUILD_DIR/bench/peers/adapterd-peer
MAKE_MODEL=$ROOT/$BUILD_DIR/tools/make_model/adapterd-make-model

# 3. Model, adapter, ONNX, checks.
mkdir -p "$WORK_DIR"
MODEL=$WORK_DIR/model-$PRESET
ADAPTER=$WORK_DIR/task-m$BOTTLENECK.safetensors
ONNX=$WORK_DIR/model-$PRESET-m$BOTTLENECK.onnx
CHECK=$WORK_DIR/check.json
echo "== model ($PRESET, random, seed 1) and adapter (m=$BOTTLENECK, seed 1) in $WORK_DIR"
"$MAKE_MODEL" --out "$MODEL" --preset "$PRESET" --seed 1
"$PEER" make-adapter --model_dir "$MODEL" --out "$ADAPTER" --bottleneck "$BOTTLENECK" --labels 4 --seed 1
echo "== export to ONNX and check against adapterd's fp32 forward"
/usr/bin/python3 -W ignore "$PEERS/export_onnx.py" --model_dir "$MODEL" --adapter "$ADAPTER" --out "$ONNX" \
  --peer "$PEER" --check_json "$CHECK" --threads "$THREADS"
node "$PEERS/ort_bench.js" --model "$ONNX" --check "$CHECK" --threads "$THREADS"
VOCAB=$(/usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['vocab_size'])" "$MODEL/config.json")

# 4. Timings, interleaved.
RESULTS=$WORK_DIR/results.jsonl
: >"$RESULTS"
echo "== timing: $ROUNDS rounds; load: $(cut -d' ' -f1-3 /proc/loadavg)"
adapterd_bench() {  # dtype batch seq seconds
  GOMP_SPINCOUNT=3000000 "$PEER" bench --model_dir "$MODEL" --adapter "$ADAPTER" --dtype "$1" \
    --batch "$2" --seq "$3" --seconds "$4" --threads "$THREADS" | tail -1
}
ort_bench() {  # batch seq seconds
  node "$PEERS/ort_bench.js" --model "$ONNX" --batch "$1" --seq "$2" --seconds "$3" --vocab "$VOCAB" \
    --threads "$THREADS" | tail -1
}
for ((r = 1; r <= ROUNDS; r++)); do
  for line in \
    "$(adapterd_bench fp32 32 128 "$BIG_SECONDS")" \
    "$(adapterd_bench bf16 32 128 "$BIG_SECONDS")" \
    "$(ort_bench 32 128 "$BIG_SECONDS")" \
    "$(adapterd_bench fp32 1 20 "$SMALL_SECONDS")" \
    "$(adapterd_bench bf16 1 20 "$SMALL_SECONDS")" \
    "$(ort_bench 1 20 "$SMALL_SECONDS")"; do
    echo "round $r: $line"
    echo "$line" >>"$RESULTS"
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"

# 5. Table.
/usr/bin/python3 - "$RESULTS" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
def med(engine, dtype, batch, key):
    v = [r[key] for r in rows if r["engine"].startswith(engine) and r["dtype"] == dtype and r["batch"] == batch]
    return statistics.median(v), v
print("\n%-34s %12s %12s   %s" % ("configuration (median of rounds)", "seq/s", "p50 ms", "seq/s per round"))
for eng, dt, b, s in (("adapterd", "fp32", 32, 128), ("adapterd", "bf16", 32, 128), ("onnxruntime", "fp32", 32, 128),
                      ("adapterd", "fp32", 1, 20), ("adapterd", "bf16", 1, 20), ("onnxruntime", "fp32", 1, 20)):
    sps, all_sps = med(eng, dt, b, "seq_per_s")
    p50, _ = med(eng, dt, b, "p50_ms")
    print("%-34s %12.3f %12.2f   %s" % (f"{eng} {dt} b{b}x{s}", sps, p50, ", ".join("%.2f" % x for x in all_sps)))
p1 = med("adapterd", "fp32", 32, "seq_per_s")[0] / med("onnxruntime", "fp32", 32, "seq_per_s")[0]
p2 = med("adapterd", "bf16", 32, "seq_per_s")[0] / med("onnxruntime", "fp32", 32, "seq_per_s")[0]
p8 = med("adapterd", "fp32", 1, "p50_ms")[0] / med("onnxruntime", "fp32", 1, "p50_ms")[0]
p8b = med("adapterd", "bf16", 1, "p50_ms")[0] / med("onnxruntime", "fp32", 1, "p50_ms")[0]
print("\nRatios (this run):")
print("  P1 adapterd fp32 / ORT fp32, seq/s, b32x128      %.3f   (issue: ~0.51x before)" % p1)
print("  P2 adapterd bf16 / ORT fp32, seq/s, b32x128      %.3f   target >= 2.0: %s" % (p2, "met" if p2 >= 2.0 else "NOT met"))
print("  P8 adapterd fp32 / ORT p50 latency, b1x20        %.3f   target <= 1.0: %s" % (p8, "met" if p8 <= 1.0 else "NOT met"))
print("     (adapterd bf16 / ORT p50 latency, b1x20      %.3f)" % p8b)
EOF
