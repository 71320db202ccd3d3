#!/usr/bin/env bash
# Builds adapterd and runs every test. The README's test command.
#   ./scripts/test.sh                 # deps (if missing), configure, build, ctest
#   BUILD_DIR=build-x ./scripts/test.sh -L unit   # extra args go to ctest
set -euo pipefail
cd "$(dirname "$0")/.."

# Each phase's wall time goes to stderr (CI's cost per phase; ctest times
# every test itself).
start=$SECONDS
./scripts/install-deps.sh
echo "test.sh: install-deps took $((SECONDS - start)) s" >&2

BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}
start=$SECONDS
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build "$BUILD_DIR" -j "$JOBS"
echo "test.sh: configure and build took $((SECONDS - start)) s" >&2

cd "$BUILD_DIR"
# The servers the e2e tests start run as scripts/run.sh runs them.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
# ctest prints the summary ("N% tests passed, M tests failed out of K") last.
ctest --output-on-failure --timeout 900 -j "$JOBS" "$@"
