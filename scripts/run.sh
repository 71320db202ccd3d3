#!/usr/bin/env bash
# Installs dependencies (if missing), builds, and starts adapterd with embedded
# defaults: RocksDB under ./data, gRPC on 127.0.0.1:8500, the REST/JSON API and
# web console on http://127.0.0.1:8080 (ADAPTERD_HTTP_LISTEN or --http_listen
# to move it; empty turns it off), /metrics on 127.0.0.1:9500. No external
# server is needed.
#
#   ./scripts/run.sh                              # default model (see below)
#   ./scripts/run.sh --model_dir ~/bert-large-uncased
#   MODEL_DIR=~/bert-large-uncased ./scripts/run.sh
#   ./scripts/run.sh --listen 0.0.0.0:8500 --max_batch_size 64   # other flags go to adapterd
#
# The model: --model_dir / MODEL_DIR when given (a HuggingFace BERT directory);
# otherwise the project's pretrained default, models/adapterd-mini-en (built by
# scripts/build-default-model.sh); only if that is missing, a generated random
# BERT, created once under ./data/model, with a loud warning: a random encoder
# is NOT pretrained and adapters trained on it learn little.
set -euo pipefail
cd "$(dirname "$0")/.."

MODEL_DIR=${MODEL_DIR:-}
DATA_DIR=${DATA_DIR:-./data}
args=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --model_dir) MODEL_DIR=$2; shift 2 ;;
    --model_dir=*) MODEL_DIR=${1#*=}; shift ;;
    --data_dir) DATA_DIR=$2; shift 2 ;;
    --data_dir=*) DATA_DIR=${1#*=}; shift ;;
    *) args+=("$1"); shift ;;
  esac
done

./scripts/install-deps.sh

BUILD_DIR=${BUILD_DIR:-build}
if [[ ! -f "$BUILD_DIR/build.ninja" ]]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
fi
cmake --build "$BUILD_DIR" -j "${JOBS:-$(nproc)}" --target adapterd adapterctl adapterd-make-model

mkdir -p "$DATA_DIR"
if [[ -z "$MODEL_DIR" ]]; then
  if [[ -f models/adapterd-mini-en/model.safetensors ]]; then
    # The project's own pretrained encoder (models/adapterd-mini-en/MODEL_CARD.md).
    MODEL_DIR=models/adapterd-mini-en
    echo "run.sh: serving the default pretrained encoder $MODEL_DIR (BERT-mini size; see its MODEL_CARD.md)" >&2
  else
    MODEL_DIR="$DATA_DIR/model"
    if [[ ! -f "$MODEL_DIR/model.safetensors" ]]; then
      # init_range 0.05: at BERT's 0.02 a frozen random encoder passes almost no
      # token information to the adapters, and at 0.2 (right for the tests'
      # 32-wide encoders) a 256-wide one saturates (docs/ARCHITECTURE.md).
      "$BUILD_DIR/tools/make_model/adapterd-make-model" --out "$MODEL_DIR" --preset mini --seed 1 --init_range 0.05
    fi
    cat >&2 <<WARN

************************************************************************
*  WARNING: serving a RANDOMLY INITIALISED encoder ($MODEL_DIR).
*  It is NOT PRETRAINED: adapters trained on it learn only shallow
*  word-presence cues. For real accuracy pass a pretrained HuggingFace
*  BERT: ./scripts/run.sh --model_dir /path/to/bert-base-uncased
************************************************************************

WARN
  fi
fi

# libgomp reads its wait policy only at start-up. adapterd computes in oneDNN
# on OpenMP's workers and keeps OpenBLAS to one thread, so workers that spin
# ~70 ms between operators before sleeping pay off (bf16 batch-1 latency
# 0.65x of sleeping workers'; docs/PERFORMANCE.md, "Wait policy"). An OMP_WAIT_POLICY of the caller's wins.
if [[ -z "${OMP_WAIT_POLICY:-}" ]]; then export GOMP_SPINCOUNT=${GOMP_SPINCOUNT:-3000000}; fi
# The REST/JSON API and console (the binary's default is off); a flag wins.
export ADAPTERD_HTTP_LISTEN=${ADAPTERD_HTTP_LISTEN-127.0.0.1:8080}
exec "$BUILD_DIR/server/adapterd" --data_dir "$DATA_DIR" --model_dir "$MODEL_DIR" "${args[@]}"
