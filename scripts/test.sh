#!/usr/bin/env bash
# Builds adapterd and runs every test. The README's test command.
#   ./scripts/test.sh                 # deps (if missing), configure, build, fuzz, ctest
#   BUILD_DIR=build-x ./scripts/test.sh -L unit   # extra args go to ctest
#   FUZZ_SECONDS=0 ./scripts/test.sh  # skip the fuzzers (quick local runs)
#
# Stages, each timed on stderr: install-deps; configure and build (build/);
# the libFuzzer harnesses, FUZZ_SECONDS each (default 60; scripts/fuzz.sh, its
# own clang build in build-fuzz/); then ctest over every test, last, so that
# its summary closes the output.
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

FUZZ_SECONDS=${FUZZ_SECONDS:-60}
if [ "$FUZZ_SECONDS" != 0 ]; then
  start=$SECONDS
  JOBS=$JOBS ./scripts/fuzz.sh all "$FUZZ_SECONDS"
  echo "test.sh: fuzzing ($FUZZ_SECONDS s per harness) took $((SECONDS - start)) s" >&2
fi

cd "$BUILD_DIR"
# The servers the e2e tests start run as scripts/run.sh runs them.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
# ctest prints the summary ("N% tests passed, M tests failed out of K") last.
ctest --output-on-failure --timeout 900 -j "$JOBS" "$@"
