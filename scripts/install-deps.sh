#!/usr/bin/env bash
# Installs every Debian bookworm package adapterd needs to build, test and run.
# Idempotent: packages already installed are left alone, and apt is only asked
# when something is missing. Runs as root, or through sudo when available.
#
#   ./scripts/install-deps.sh                            # everything (build, test, run)
#   ADAPTERD_DEPS=build ./scripts/install-deps.sh        # only what compiling the binaries needs,
#                                                        # configured with -DADAPTERD_BUILD_TESTS=OFF
#                                                        # -DADAPTERD_BUILD_BENCH=OFF (docker/Dockerfile)
#   ADAPTERD_DEPS=build-notorch ./scripts/install-deps.sh  # the same without Debian's LibTorch and
#                                                        # OpenBLAS (docker/Dockerfile.cuda brings
#                                                        # LibTorch for CUDA)
set -euo pipefail

ADAPTERD_DEPS=${ADAPTERD_DEPS:-all}
case "$ADAPTERD_DEPS" in
  all|build|build-notorch) ;;
  *) echo "install-deps: ADAPTERD_DEPS must be all, build or build-notorch, not '$ADAPTERD_DEPS'" >&2; exit 2 ;;
esac

TORCH_PACKAGES=(
  # model core: Debian's LibTorch (1.13, CPU). OpenBLAS with pthreads is
  # required: without it LibTorch falls back to reference BLAS (~60x slower).
  libtorch-dev libopenblas0-pthread libopenblas-pthread-dev
  # oneDNN (the same libdnnl2 Debian's LibTorch links): the encoder's CPU
  # matrix products and attention (server/model/cpu_kernels.h)
  libdnnl-dev
)

BUILD_PACKAGES=(
  # toolchain (lld: CMakeLists.txt links with it when installed, ~8x faster
  # than GNU ld on the LibTorch-linked binaries)
  build-essential cmake ninja-build pkg-config git ca-certificates lld
  # common / conventions; the process log (glog, which LibTorch logs through too)
  libabsl-dev libssl-dev libgoogle-glog-dev
  # API and storage
  libprotobuf-dev protobuf-compiler libgrpc++-dev protobuf-compiler-grpc
  librocksdb-dev
  # the serving form's digest (server/model/serving_form.h)
  libxxhash-dev
  # the zip container of torch.save files (server/model/torch_archive.h)
  libzip-dev
  # tokenizer, JSON, CLI, HTTP metrics endpoint
  libutf8proc-dev nlohmann-json3-dev libcli11-dev libmicrohttpd-dev
)

TEST_PACKAGES=(
  # test and benchmark frameworks
  libgtest-dev libgmock-dev libbenchmark-dev
  # the tests' and adapterd-soak's loopback HTTP client (common/testing/http_client.h);
  # no product binary links libcurl
  libcurl4-openssl-dev
  # a real Prometheus and promtool for the metrics tests
  prometheus
  # golden-output reference (independent PyTorch implementation of BertModel)
  python3 python3-torch python3-numpy
  # reference metrics (scikit-learn, scipy) for the validation metrics' tests
  python3-sklearn python3-scipy
  # fuzzing (scripts/fuzz.sh, tests/fuzz): clang and its libFuzzer, ASan and
  # UBSan runtimes
  clang libclang-rt-14-dev
  # the source checks (format_test, tidy_test: .clang-format, .clang-tidy)
  clang-format clang-tidy
  # deployment tests (tests/deploy): images built and run with podman (no
  # Docker engine needed), a local debian:bookworm-slim base via debootstrap,
  # nginx as the task-sharding gRPC router, YAML lint, and node/npm for the
  # offline Kubernetes schema validation and the Dockerfile linter
  podman runc uidmap fuse-overlayfs slirp4netns debootstrap nginx-light yamllint python3-yaml curl
  nodejs
  # the Python client's tests (client/python): gRPC and protobuf for Python,
  # pytest, and pip/venv for the install-from-checkout test
  python3-grpcio python3-protobuf python3-pytest python3-pip python3-venv python3-setuptools
  # the Python client's type check and lint (python_lint_test: mypy, flake8)
  python3-mypy flake8
  # the web console's test: a real headless browser (driven by puppeteer-core);
  # the REST gateway's TLS test makes its certificates with openssl
  chromium openssl
)

PACKAGES=("${BUILD_PACKAGES[@]}")
if [ "$ADAPTERD_DEPS" != build-notorch ]; then PACKAGES+=("${TORCH_PACKAGES[@]}"); fi
if [ "$ADAPTERD_DEPS" = all ]; then PACKAGES+=("${TEST_PACKAGES[@]}"); fi

# npm tools for the tests, pinned, installed into one prefix
# (not on PATH): the tests find them under $ADAPTERD_TOOLS/node_modules.
ADAPTERD_TOOLS=${ADAPTERD_TOOLS:-/opt/adapterd-tools}
# puppeteer-core drives Debian's chromium in the console test; swagger-parser
# validates docs/openapi.yaml; eslint with its recommended rules (@eslint/js)
# and the browser's and node's globals lints the console and its tests
# (console_lint_test; eslint 9 runs on bookworm's node 18.20).
NPM_TOOLS=(kubernetes-models@4.5.1 dockerfilelint@1.8.0 puppeteer-core@22.15.0 @apidevtools/swagger-parser@10.1.1
  eslint@9.39.5 @eslint/js@9.39.5 globals@17.14.0)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

npm_tools_missing() {
  local t
  for t in "${NPM_TOOLS[@]}"; do
    [ -f "$ADAPTERD_TOOLS/node_modules/${t%@*}/package.json" ] || return 0
  done
  return 1
}

install_npm_tools() {
  if npm_tools_missing; then
    echo "install-deps: installing npm tools into $ADAPTERD_TOOLS: ${NPM_TOOLS[*]}"
    $SUDO mkdir -p "$ADAPTERD_TOOLS"
    $SUDO npm install --prefix "$ADAPTERD_TOOLS" --no-audit --no-fund --loglevel=error "${NPM_TOOLS[@]}"
  fi
}

SUDO=""
# npm: Debian's package only where no npm came with the machine's nodejs (a
# NodeSource nodejs bundles npm and conflicts with Debian's npm package).
if [ "$ADAPTERD_DEPS" = all ] && ! command -v npm >/dev/null 2>&1; then missing+=(npm); fi
if [ "$ADAPTERD_DEPS" != all ]; then NPM_TOOLS=(); fi

if [ ${#missing[@]} -eq 0 ]; then
  if npm_tools_missing && [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  install_npm_tools
  echo "install-deps: all ${#PACKAGES[@]} packages already installed"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "install-deps: need root (or sudo) to install: ${missing[*]}" >&2
    exit 1
  fi
fi

echo "install-deps: installing ${#missing[@]} package(s): ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# policy-rc.d: installing nginx must not start a system nginx (the tests run
# their own on loopback ports), nor fail where no init system runs.
$SUDO sh -c 'printf "#!/bin/sh\nexit 101\n" > /usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d'
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" || { $SUDO rm -f /usr/sbin/policy-rc.d; exit 1; }
$SUDO rm -f /usr/sbin/policy-rc.d
install_npm_tools
echo "install-deps: done"
