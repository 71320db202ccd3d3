#!/usr/bin/env bash
# Installs every Debian bookworm package adapterd needs to build, test and run.
# Idempotent: packages already installed are left alone, and apt is only asked
# when something is missing. Runs as root, or through sudo when available.
set -euo pipefail

PACKAGES=(
  # toolchain
  build-essential cmake ninja-build pkg-config git ca-certificates
  # model core: Debian's LibTorch (1.13, CPU). OpenBLAS with pthreads is
  # required: without it LibTorch falls back to reference BLAS (~60x slower).
  libtorch-dev libopenblas0-pthread libopenblas-pthread-dev
  # common / conventions
  libabsl-dev libssl-dev
  # API and storage
  libprotobuf-dev protobuf-compiler libgrpc++-dev protobuf-compiler-grpc
  librocksdb-dev
  # tokenizer, JSON, CLI, HTTP metrics endpoint
  libutf8proc-dev nlohmann-json3-dev libcli11-dev libmicrohttpd-dev prometheus
  # tests and benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev
  # golden-output reference (independent PyTorch implementation of BertModel)
  python3 python3-torch python3-numpy
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages already installed"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "install-deps: need root (or sudo) to install: ${missing[*]}" >&2
    exit 1
  fi
fi

echo "install-deps: installing ${#missing[@]} package(s): ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "install-deps: done"
