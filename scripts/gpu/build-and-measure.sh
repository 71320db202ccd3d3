#!/usr/bin/env bash
# The GPU issue's one command (docs/PERFORMANCE.md, "GPU"): on a lent GPU
# machine, from the repository root, build adapterd against the machine's
# CUDA LibTorch and the Debian libraries carried in .gpu/ (scripts/gpu/
# prepare.sh made them here), then run the checks and measurements in order
# of importance, each under its own time limit, and write what they print
# under $OUT:
#
#   run.log           everything, with each stage's start time
#   build.log         configure and build output
#   gpu_checks.json   C1, C2 (BERT-large geometry, calibrated head), G1, G2, G4,
#                     and a kernel-time profile of three G1 forwards
#   c2_trained.json   C2 on the pretrained default encoder, a task trained there
#                     (and again with a bf16 residual stream: summary.txt)
#   c3.json           C3: transformers' BertModel + PyTorch adapters vs adapterd
#   training.log      G5: adapter training (fp32 and bf16) vs full fine-tuning (training_bench)
#   loadgen.log       G3 (cold loads), G6 (gRPC server / in-process), mixed/single
#                     (the server's log stays in /tmp; its tail goes to run.log)
#   summary.txt       the RESULT lines of every stage (the anchor's too: transformers'
#                     BertModel bf16 on the same model, and its kernel-time profile)
#
#   OUT=/tmp/out scripts/gpu/build-and-measure.sh [STAGES]
#
# STAGES (default "build loadgen checks reduced agreement c3 trained training anchor")
# picks stages; build is needed by the others once per machine. "reduced"
# repeats C2, G1 and G4 with the bf16 encoder's residual stream in bf16
# (--reduced_residual_stream; its RESULT lines start "reduced."). "gdb" runs a
# small adapterd-loadgen under cuda-gdb for the stack of a crash. "agreement"
# trains a task on each real dataset of examples/REAL_DATASETS.md on the
# pretrained default encoder and compares fp32 with bf16 (both residual
# streams) on every test text. The script never stops at a
# failed stage: the next stages still run, and the exit status is the number
# of failed stages. Each stage runs under `timeout`, cut to what is left of
# ADAPTERD_GPU_DEADLINE seconds (default 480) since the start; a stage with
# under 20 s left is skipped, so the whole run ends inside the device call's
# limit with its logs written. It never changes the GPU's settings.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-/tmp/adapterd-gpu-out}
mkdir -p "$OUT"
STAGES=${1:-build loadgen checks reduced agreement c3 trained training anchor}
PREFIX=${ADAPTERD_GPU_PREFIX:-/tmp/adapterd-prefix}
BUILD=${ADAPTERD_GPU_BUILD:-/tmp/adapterd-build-gpu}
MODEL=/tmp/adapterd-bert-large
WORK=/tmp/adapterd-gpu-work
mkdir -p "$WORK"
exec > >(tee -a "$OUT/run.log") 2>&1
T0=$(date +%s)
DEADLINE=${ADAPTERD_GPU_DEADLINE:-480}
FAILED=0
# limit MAX: seconds a stage may take, MAX or what is left before DEADLINE.
limit() {
  local left=$((DEADLINE - ($(date +%s) - T0)))
  echo $((left < $1 ? left : $1))
}
# enough MAX: false (and a note) when fewer than 20 s are left.
enough() {
  [ "$(limit "$1")" -ge 20 ] && return 0
  echo "--- skipped: $(( $(date +%s) - T0 )) s of the ${DEADLINE} s deadline spent"
  return 1
}
stage() { echo; echo "=== [$(( $(date +%s) - T0 )) s] $*"; }
failed() { echo "!!! stage failed: $*"; FAILED=$((FAILED + 1)); }
want() { [[ " $STAGES " == *" $1 "* ]]; }
results() { grep -h '^RESULT' "$@" 2>/dev/null >> "$OUT/summary.txt" || true; }

stage "machine"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv || true
grep -E '^(PRETTY_NAME|VERSION_ID)=' /etc/os-release || true
ldd --version | head -1; gcc --version | head -1; cmake --version | head -1; ninja --version; nproc
command -v nvcc && nvcc --version | tail -2
TORCH_CMAKE=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
python3 -c 'import torch, transformers; print("torch", torch.__version__, "cuda", torch.version.cuda, "transformers", transformers.__version__, torch.cuda.get_device_name(0))'
echo "LibTorch CMake: $TORCH_CMAKE"

stage "ceilings (PyTorch): bf16 8192^3 product, device-to-device copy"
python3 - <<'PY' || true
import torch
torch.manual_seed(0)
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16); b = torch.randn_like(a)
for _ in range(3): a @ b
s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
s.record()
for _ in range(10): a @ b
e.record(); torch.cuda.synchronize()
print(f"RESULT ceiling.bf16_matmul_tflops {2 * 8192**3 * 10 / (s.elapsed_time(e) / 1e3) / 1e12:.1f}")
x = torch.empty(2 * 1024**3, dtype=torch.uint8, device="cuda"); y = torch.empty_like(x)
for _ in range(3): y.copy_(x)
s.record()
for _ in range(10): y.copy_(x)
e.record(); torch.cuda.synchronize()
print(f"RESULT ceiling.copy_gb_per_s {2 * x.numel() * 10 / (s.elapsed_time(e) / 1e3) / 1e9:.0f}")
PY
results "$OUT/run.log"

if want build; then
  stage "unpack the carried Debian libraries into $PREFIX"
  scripts/gpu/unpack.sh "$PREFIX" || failed unpack
fi
# Python (PyTorch, transformers) keeps the machine's own library path: the
# prefix's libraries (OpenSSL, zlib, ...) are for adapterd's binaries only.
MACHINE_LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}
# shellcheck source=/dev/null
source scripts/gpu/env.sh "$PREFIX" || failed env
export CUDACXX=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0}
# CMake 4 refuses configs that ask for compatibility with CMake < 3.5 unless told.
export CMAKE_POLICY_VERSION_MINIMUM=${CMAKE_POLICY_VERSION_MINIMUM:-3.5}

if want build; then
  stage "configure"
  # shellcheck disable=SC2086  # ADAPTERD_GPU_CMAKE_ARGS is a list of flags
  configure() {
    cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DADAPTERD_WERROR=OFF \
      -DADAPTERD_WITH_ONEDNN=OFF -DADAPTERD_BUILD_TESTS=OFF -DADAPTERD_BUILD_BENCH=ON \
      -DCMAKE_CUDA_COMPILER="$CUDACXX" -DCMAKE_CUDA_ARCHITECTURES=90 \
      $ADAPTERD_GPU_CMAKE_ARGS "$@" -DCMAKE_PREFIX_PATH="$TORCH_CMAKE;$ADAPTERD_GPU_CMAKE_PREFIX_PATH" > "$OUT/build.log" 2>&1
  }
  if ! configure; then
    tail -40 "$OUT/build.log"
    echo "--- configure failed; again without cuDNN/cuSPARSELt lookups"
    configure -DCAFFE2_USE_CUDNN=OFF -DUSE_CUDNN=OFF -DCAFFE2_USE_CUSPARSELT=OFF -DUSE_CUSPARSELT=OFF || failed configure
  fi
  grep -E "Found Torch|Caffe2: CUDA|CUDA detected|Torch version|Found CUDAToolkit" "$OUT/build.log" | head
  stage "build"
  if ! timeout "$(limit 300)" cmake --build "$BUILD" -j "$(nproc)" --target adapterd adapterctl adapterd-make-model adapterd-gpu-checks \
        adapterd-loadgen training_bench >> "$OUT/build.log" 2>&1; then
    grep -E "error|Error" "$OUT/build.log" | head -40
    failed build
  fi
  tail -3 "$OUT/build.log"
fi

BIN=$BUILD
if [ ! -x "$BIN/bench/adapterd-gpu-checks" ]; then
  echo "no binaries: stopping after $(( $(date +%s) - T0 )) s"
  exit 99
fi

if [ ! -f "$MODEL/model.safetensors" ]; then
  stage "BERT-large geometry (adapterd-make-model --preset large, random weights, fp32)"
  "$BIN/tools/make_model/adapterd-make-model" --preset large --vocab_size 30522 --out "$MODEL" || failed make-model
fi

if want loadgen && enough 150; then
  stage "G3, G6: adapterd --device cuda --dtype bf16 and adapterd-loadgen, 100 tasks"
  PORT=18500
  rm -rf "$WORK/server"
  "$BIN/server/adapterd" --model_dir "$MODEL" --data_dir "$WORK/server" --listen "127.0.0.1:$PORT" \
    --metrics_listen "127.0.0.1:$((PORT + 1))" --device cuda --dtype bf16 --device_cache_bytes 8589934592 --max_batch_size 64 \
    > "$WORK/server.log" 2>&1 &
  SERVER=$!
  for _ in $(seq 600); do grep -q "SERVING on port" "$WORK/server.log" && break; sleep 0.2; done
  grep -q "SERVING on port" "$WORK/server.log" || { tail -20 "$WORK/server.log"; failed server; }
  timeout "$(limit 150)" "$BIN/bench/adapterd-loadgen" --model_dir "$MODEL" --server "127.0.0.1:$PORT" --device cuda \
    --dtype bf16 --tasks 100 --concurrency 128 --seconds 4 --words 100 --max_batch_size 64 \
    --device_cache_bytes 8589934592 --with_training false --cold_loads 100 > "$OUT/loadgen.log" 2>&1 \
    || failed loadgen
  cat "$OUT/loadgen.log"
  # The server's own batching over the whole run (warm-up included): rows
  # and tasks per forward, queue wait, and its Predict latency.
  env LD_LIBRARY_PATH="$MACHINE_LD_LIBRARY_PATH" python3 - "$((PORT + 1))" <<'PY' || true
import re, sys, urllib.request
text = urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/metrics", timeout=5).read().decode()
sums = {}
for line in text.splitlines():
    m = re.match(r'^(adapterd_[a-z_]*(?:batch|forward|predict|request|queue)[a-z_]*)_(sum|count)(\{[^}]*\})? ([0-9.e+-]+)$', line)
    if m and 'task=' not in (m.group(3) or ''):
        key = m.group(1) + (m.group(3) or '')
        sums.setdefault(key, {})[m.group(2)] = float(m.group(4))
for key, v in sorted(sums.items()):
    if v.get('count'):
        print(f"server metric {key}: count {v['count']:.0f}, mean {v['sum'] / v['count']:.4g}")
PY
  kill -TERM "$SERVER" 2>/dev/null; wait "$SERVER" 2>/dev/null
  tail -5 "$WORK/server.log"
fi

if want checks && enough 200; then
  stage "C1, G4, G1/G2, C2 (calibrated) on BERT-large geometry"
  timeout "$(limit 200)" "$BIN/bench/adapterd-gpu-checks" --model_dir "$MODEL" --out "$WORK/checks" --device cuda \
    --dtype bf16 --tasks 1000 --batch 1000 --seq 128 --iters 5 --c2_inputs 10000 --c2_task calibrated --profile \
    > "$WORK/checks.log" 2>&1 || failed checks
  grep -v '^RESULT' "$WORK/checks.log"
  cp "$WORK/checks/gpu_checks.json" "$OUT/" 2>/dev/null
  results "$WORK/checks.log"
fi

if want reduced && enough 150; then
  stage "G4, G1/G2, C2 (calibrated) again with the bf16 encoder's residual stream in bf16"
  timeout "$(limit 150)" "$BIN/bench/adapterd-gpu-checks" --model_dir "$MODEL" --out "$WORK/reduced" --device cuda \
    --dtype bf16 --tasks 1000 --batch 1000 --seq 128 --iters 5 --c2_inputs 10000 --c2_task calibrated --profile \
    --only g1,g4,c2 --reduced_residual_stream > "$WORK/reduced.log" 2>&1 || failed reduced
  grep -v '^RESULT' "$WORK/reduced.log"
  sed 's/^RESULT /RESULT reduced./' "$WORK/reduced.log" > "$WORK/reduced.results"
  results "$WORK/reduced.results"
fi

if want agreement && enough 60; then
  for ds in wordnet_supersenses debian_sections; do
    for stream in wide reduced; do
      enough 30 || break
      stage "C2 on $ds's test split (trained 3 epochs on the default encoder), bf16 residual stream: $stream"
      flag=""; [ "$stream" = reduced ] && flag=--reduced_residual_stream
      timeout "$(limit 60)" "$BIN/bench/adapterd-gpu-checks" --model_dir models/adapterd-mini-en --out "$WORK/agree-$ds-$stream" \
        --device cuda --dtype bf16 --only c2 --c2_task dataset --c2_dataset "examples/$ds" --c2_epochs 3 --seq 128 \
        $flag > "$WORK/agree-$ds-$stream.log" 2>&1 || failed "agreement $ds $stream"
      grep -v '^RESULT' "$WORK/agree-$ds-$stream.log"
      sed "s/^RESULT c2\./RESULT agreement.$ds.$stream./" "$WORK/agree-$ds-$stream.log" > "$WORK/agree-$ds-$stream.results"
      results "$WORK/agree-$ds-$stream.results"
    done
  done
fi

if want c3 && enough 90; then
  stage "C3: transformers BertModel + PyTorch adapters vs adapterd, fp32"
  timeout "$(limit 90)" env LD_LIBRARY_PATH="$MACHINE_LD_LIBRARY_PATH" python3 scripts/gpu/c3_reference.py "$MODEL" "$WORK/checks/c3" --device cuda --out "$OUT/c3.json" \
    > "$WORK/c3.log" 2>&1 || failed c3
  tail -15 "$WORK/c3.log"
  results "$WORK/c3.log"
fi

if want trained && enough 90; then
  stage "C2 on the pretrained default encoder (models/adapterd-mini-en), a task trained on the GPU"
  timeout "$(limit 90)" "$BIN/bench/adapterd-gpu-checks" --model_dir models/adapterd-mini-en --out "$WORK/trained" \
    --device cuda --dtype bf16 --only c2 --c2_task trained --c2_inputs 10000 --c2_train_examples 3000 \
    --c2_epochs 2 --seq 64 > "$WORK/trained.log" 2>&1 || failed trained
  grep -v '^RESULT' "$WORK/trained.log"
  cp "$WORK/trained/gpu_checks.json" "$OUT/c2_trained.json" 2>/dev/null
  sed 's/^RESULT c2\./RESULT c2_trained./' "$WORK/trained.log" > "$WORK/trained.results"
  results "$WORK/trained.results"
  if want reduced && enough 60; then
    stage "C2 on the pretrained default encoder again, the bf16 residual stream in bf16"
    timeout "$(limit 60)" "$BIN/bench/adapterd-gpu-checks" --model_dir models/adapterd-mini-en --out "$WORK/trained-reduced" \
      --device cuda --dtype bf16 --only c2 --c2_task trained --c2_inputs 10000 --c2_train_examples 3000 \
      --c2_epochs 2 --seq 64 --reduced_residual_stream > "$WORK/trained-reduced.log" 2>&1 || failed trained-reduced
    grep -v '^RESULT' "$WORK/trained-reduced.log"
    sed 's/^RESULT c2\./RESULT reduced.c2_trained./' "$WORK/trained-reduced.log" > "$WORK/trained-reduced.results"
    results "$WORK/trained-reduced.results"
  fi
fi

if want training && enough 150; then
  stage "G5: adapter training (fp32, and bf16 mixed precision) vs full fine-tuning, BERT-large geometry, batch 32 x 128"
  timeout "$(limit 150)" "$BIN/bench/training_bench" --preset=large --batch=32 --seq=128 --steps=12 --device=cuda \
    > "$OUT/training.log" 2>&1 || failed training
  tail -12 "$OUT/training.log"
  if enough 60; then
    stage "G5 again with TF32 products (--tf32=1)"
    timeout "$(limit 60)" "$BIN/bench/training_bench" --preset=large --batch=32 --seq=128 --steps=12 \
      --device=cuda --tf32=1 >> "$OUT/training.log" 2>&1 || failed training-tf32
    grep "^Ratio" "$OUT/training.log"
  fi
fi

if want gdb && enough 90; then
  stage "adapterd-loadgen (small) under cuda-gdb: the stack of a crash, if it crashes"
  command -v cuda-gdb || echo "no cuda-gdb"
  timeout "$(limit 90)" cuda-gdb -q -batch -ex run -ex bt -ex "info threads" -ex "thread apply all bt 8" \
    --args "$BIN/bench/adapterd-loadgen" --model_dir "$MODEL" --device cuda --dtype bf16 --tasks 4 \
    --concurrency 8 --seconds 1 --words 16 --max_batch_size 16 --with_training false --cold_loads 4 \
    > "$WORK/gdb.log" 2>&1 || failed gdb
  # The faulting thread's stack comes first, after "received signal".
  grep -v "^\[New Thread\|^\[Thread .* exited\|^\[Switching" "$WORK/gdb.log" > "$WORK/gdb.short.log"
  if grep -q "received signal" "$WORK/gdb.short.log"; then
    sed -n '/received signal/,$p' "$WORK/gdb.short.log" | head -70
  else
    tail -15 "$WORK/gdb.short.log"
  fi
fi

if want anchor && enough 60; then
  stage "anchor: transformers' BertModel, bf16, batch 1000 x 128, timed and profiled"
  timeout "$(limit 60)" env LD_LIBRARY_PATH="$MACHINE_LD_LIBRARY_PATH" python3 scripts/gpu/hf_anchor.py "$MODEL" \
    > "$WORK/anchor.log" 2>&1 || failed anchor
  grep -v '^RESULT\|Loading weights' "$WORK/anchor.log"
  results "$WORK/anchor.log"
fi

stage "done: $FAILED failed stage(s)"
sort -u "$OUT/summary.txt" -o "$OUT/summary.txt" 2>/dev/null
cat "$OUT/summary.txt" 2>/dev/null
exit "$FAILED"
