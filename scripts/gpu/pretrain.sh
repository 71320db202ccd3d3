#!/usr/bin/env bash
# Pretrains candidate default encoders on a lent GPU machine in one device
# call (docs/PERFORMANCE.md, "Pretraining on a lent GPU"; the issue's plan):
# builds adapterd-pretrain alone (the model-only build, against the machine's
# CUDA LibTorch and the Debian libraries carried in .gpu-model/), then trains
# every run of CARRY/runs.conf at the same time on the one GPU, each with a
# learning rate that follows the clock (--lr_schedule time) and ends at the
# deadline, evaluates each on the held-out ids, exports it in fp16, and packs
# what comes back into $OUT, inside the device tool's limits (8 files of at
# most 16 MiB).
#
#   OUT=/tmp/out ADAPTERD_GPU_DEADLINE=550 scripts/gpu/pretrain.sh [CARRY]
#
# CARRY (default .pretrain-carry, made here by scripts/gpu/prepare-pretrain.sh):
#   vocab.txt          the vocabulary the ids index
#   train.ids.xz       the training corpus as token ids (adapterd-pretrain tokenize), xz
#   heldout.ids        the held-out split, the same way
#   runs.conf          one run per line: NAME then adapterd-pretrain train flags
#                      (geometry, --lr, --batch_size, ...); '#' starts a comment
#   init/NAME/         optional: an earlier lending's export of run NAME, which
#                      this run continues (--init_from: two lendings add up)
# $OUT, when it ends:
#   run.log            everything printed, with each stage's time
#   models.tar.xz.NN   the runs' exports, logs and summaries, one archive cut
#                      into pieces of 15 MiB (cat models.tar.xz.* | tar -xJ)
# ADAPTERD_PRETRAIN_DEVICE=cpu runs the same flow on a CPU machine with
# Debian's LibTorch (a dry run of this script before a lending; no autocast).
# The exit status is the number of runs that did not produce an export
# (99: no binary). Every stage is cut to what is left of ADAPTERD_GPU_DEADLINE
# seconds (default 540) since the start, so the call ends inside its limit
# with its files written. It never changes the GPU's settings.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
REPO=$PWD
CARRY=$(cd "${1:-.pretrain-carry}" && pwd) || { echo "no carry directory ${1:-.pretrain-carry}"; exit 98; }
OUT=${OUT:-/tmp/adapterd-pretrain-out}
mkdir -p "$OUT"
PREFIX=${ADAPTERD_GPU_PREFIX:-/tmp/adapterd-prefix-model}
BUILD=${ADAPTERD_GPU_BUILD:-/tmp/adapterd-build-model}
WORK=${ADAPTERD_GPU_WORK:-/tmp/adapterd-pretrain-work}
DEADLINE=${ADAPTERD_GPU_DEADLINE:-540}
# Seconds kept at the end for the held-out evaluation, the fp16 export and the
# packing, after the runs' clocks stop.
TAIL_SECONDS=${ADAPTERD_GPU_TAIL_SECONDS:-70}
DEVICE=${ADAPTERD_PRETRAIN_DEVICE:-cuda}
AUTOCAST=bf16
[ "$DEVICE" = cpu ] && AUTOCAST=off
mkdir -p "$WORK"
exec > >(tee -a "$OUT/run.log") 2>&1
T0=$(date +%s)
elapsed() { echo $(( $(date +%s) - T0 )); }
left() { echo $(( DEADLINE - $(elapsed) )); }
stage() { echo; echo "=== [$(elapsed) s] $*"; }

stage "machine"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv || true
nproc; gcc --version | head -1; cmake --version | head -1
GPU_NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
TORCH_CMAKE=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.is_available() and torch.cuda.get_device_name(0))'

stage "build adapterd-pretrain (model-only build)"
MACHINE_LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}
scripts/gpu/unpack.sh "$PREFIX" .gpu-model/debs || { echo "unpack failed"; exit 99; }
# shellcheck source=/dev/null
source scripts/gpu/env.sh "$PREFIX" || exit 99
export CMAKE_POLICY_VERSION_MINIMUM=${CMAKE_POLICY_VERSION_MINIMUM:-3.5}
configure() {
  # shellcheck disable=SC2086  # ADAPTERD_GPU_CMAKE_ARGS is a list of flags
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DADAPTERD_WERROR=OFF -DADAPTERD_MODEL_ONLY=ON \
    -DADAPTERD_WITH_ONEDNN=OFF -DADAPTERD_BUILD_TESTS=OFF -DADAPTERD_BUILD_BENCH=OFF \
    -DCMAKE_CUDA_ARCHITECTURES=90 $ADAPTERD_GPU_CMAKE_ARGS "$@" \
    -DCMAKE_PREFIX_PATH="$TORCH_CMAKE;$ADAPTERD_GPU_CMAKE_PREFIX_PATH" > "$WORK/build.log" 2>&1
}
if ! configure; then
  tail -30 "$WORK/build.log"
  echo "--- configure failed; again without cuDNN/cuSPARSELt lookups"
  configure -DCAFFE2_USE_CUDNN=OFF -DUSE_CUDNN=OFF -DCAFFE2_USE_CUSPARSELT=OFF -DUSE_CUSPARSELT=OFF ||
    { tail -40 "$WORK/build.log"; exit 99; }
fi
BUILD_LIMIT=$(( $(left) - 200 )); [ "$BUILD_LIMIT" -ge 60 ] || BUILD_LIMIT=60
timeout "$BUILD_LIMIT" cmake --build "$BUILD" -j "$(nproc)" --target adapterd-pretrain >> "$WORK/build.log" 2>&1 ||
  { grep -E "error|Error" "$WORK/build.log" | head -40; tail -20 "$WORK/build.log"; }
PRETRAIN=$BUILD/tools/pretrain/adapterd-pretrain
[ -x "$PRETRAIN" ] || { echo "no adapterd-pretrain after $(elapsed) s"; exit 99; }
tail -2 "$WORK/build.log"

stage "corpus"
xz -dc "$CARRY/train.ids.xz" > "$WORK/train.ids" || exit 98
ls -la "$WORK/train.ids" "$CARRY/heldout.ids"

# Each run trains until the deadline less the tail, all at once, on one GPU.
MINUTES=$(python3 -c "print(round(max(0.5, ($(left) - $TAIL_SECONDS - 15) / 60.0), 2))")
stage "train every run of runs.conf at once for $MINUTES minutes (lr schedule on the clock)"
# GPU load and memory every 15 s, beside the runs.
nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv,noheader -l 15 > "$WORK/gpu_load.csv" 2>&1 &
SMI=$!
declare -A PID=()
NAMES=()
launch() {  # NAME FLAGS...
  local name=$1; shift
  local init=()
  [ -f "$CARRY/init/$name/model.safetensors" ] && init=(--init_from "$CARRY/init/$name")
  rm -rf "$WORK/$name"
  mkdir -p "$WORK/$name"
  # shellcheck disable=SC2068  # the flags are words of runs.conf
  "$PRETRAIN" train --corpus "$WORK/train.ids" --heldout "$CARRY/heldout.ids" --eval_sequences 0 \
    --vocab "$CARRY/vocab.txt" --work_dir "$WORK/$name/run" --out "$WORK/$name/model" --preset mini \
    --seq_len 128 --device "$DEVICE" --autocast "$AUTOCAST" --dropout 0 --lr_schedule time --max_minutes "$MINUTES" \
    --checkpoint_every 0 --report_every 100 --threads 2 --out_dtype f16 --seed 42 "${init[@]}" $@ \
    > "$WORK/$name/stdout.log" 2>&1 &
  PID[$name]=$!
}
while read -r name flags; do
  [[ -z "$name" || "$name" == \#* ]] && continue
  NAMES+=("$name")
  # shellcheck disable=SC2086
  launch "$name" $flags
  echo "started $name: $flags"
done < "$CARRY/runs.conf"
# A run that dies at its start (a CUDA or autocast problem) is started again
# once without autocast (fp32 with TF32 products is LibTorch's default), for
# what is left.
sleep 45
for name in "${NAMES[@]}"; do
  if ! kill -0 "${PID[$name]}" 2>/dev/null; then
    wait "${PID[$name]}"; rc=$?
    echo "!!! $name ended early (exit $rc):"; tail -15 "$WORK/$name/stdout.log"
    MINUTES=$(python3 -c "print(round(max(0.5, ($(left) - $TAIL_SECONDS - 15) / 60.0), 2))")
    flags=$(awk -v n="$name" '$1 == n { $1 = ""; print }' "$CARRY/runs.conf")
    mv "$WORK/$name/stdout.log" "$WORK/$name.first-try.log"
    # shellcheck disable=SC2086
    launch "$name" $flags --autocast off
    echo "restarted $name without autocast for $MINUTES minutes"
  fi
done
while :; do
  alive=0
  for name in "${NAMES[@]}"; do kill -0 "${PID[$name]}" 2>/dev/null && alive=1; done
  [ "$alive" = 0 ] && break
  if [ "$(left)" -le 15 ]; then
    # A run still training checkpoints on SIGTERM (no export: its checkpoint
    # comes back instead); one past its training (evaluating, exporting) is
    # killed 8 s later, so that what there is gets packed in time.
    echo "!!! deadline: stopping the runs"
    for name in "${NAMES[@]}"; do kill -TERM "${PID[$name]}" 2>/dev/null; done
    sleep 8
    for name in "${NAMES[@]}"; do kill -KILL "${PID[$name]}" 2>/dev/null; done
    break
  fi
  sleep 5
done
kill "$SMI" 2>/dev/null
FAILED=0
for name in "${NAMES[@]}"; do
  wait "${PID[$name]}" 2>/dev/null; rc=$?
  stage "$name: exit $rc"
  grep -E "^(fresh|model from|resumed|corpus)" "$WORK/$name/stdout.log"
  grep "^step" "$WORK/$name/stdout.log" | awk 'NR % 10 == 1' | tail -12
  grep "^step" "$WORK/$name/stdout.log" | tail -1
  grep -E "^(held-out|wrote)" "$WORK/$name/stdout.log"
  if [ -f "$WORK/$name/model/model.safetensors" ]; then
    cp "$WORK/$name/run/train_log.jsonl" "$WORK/$name/stdout.log" "$WORK/$name/model/"
    # The summary names the GPU (adapterd-pretrain knows only "cuda"), for the model card.
    python3 - "$WORK/$name/model/pretrain_summary.json" "$GPU_NAME" <<'PY'
import json, sys
path, gpu = sys.argv[1:]
s = json.load(open(path))
s["gpu"] = gpu
open(path, "w").write(json.dumps(s, indent=2, sort_keys=True) + "\n")
PY
  else
    FAILED=$((FAILED + 1))
    tail -20 "$WORK/$name/stdout.log"
    # Stopped at the deadline: its last checkpoint (fp32) comes back instead.
    if [ -f "$WORK/$name/run/checkpoint/model.safetensors" ]; then
      mkdir -p "$WORK/$name/model"
      cp "$WORK/$name/run/checkpoint/"{config.json,model.safetensors,vocab.txt} "$WORK/$name/run/train_log.jsonl" \
        "$WORK/$name/stdout.log" "$WORK/$name/model/"
    fi
  fi
done
echo "GPU load (utilization %, memory):"; cat "$WORK/gpu_load.csv"

stage "pack"
(
  cd "$WORK" || exit 1
  files=()
  for name in "${NAMES[@]}"; do
    [ -d "$name/model" ] && files+=("$name/model")
    [ -f "$name.first-try.log" ] && files+=("$name.first-try.log")
  done
  files+=(build.log gpu_load.csv)
  tar -c "${files[@]}" | xz -T0 -1 > "$WORK/models.tar.xz"
) || echo "!!! packing failed"
split -b 15M -d "$WORK/models.tar.xz" "$OUT/models.tar.xz."
ls -la "$OUT"
stage "done: $FAILED run(s) without an export"
exit "$FAILED"
