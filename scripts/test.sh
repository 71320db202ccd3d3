#!/usr/bin/env bash
# Builds adapterd and runs every test. The README's test command.
#   ./scripts/test.sh                 # deps (if missing), configure, build, fuzz, ctest
#   BUILD_DIR=build-x ./scripts/test.sh -L unit   # extra args go to ctest
#   FUZZ_SECONDS=0 SANITIZE=0 ./scripts/test.sh  # skip the fuzzers and both sanitizer builds
#
# Stages, each timed on stderr. CI runs them all and .ci/run must stay under
# 45 minutes on a fresh 2-core machine: docs/PERFORMANCE.md, "CI time", has
# each stage's time and what keeps it down:
#   1. install-deps; configure and build (build/);
#   2. the libFuzzer harnesses, FUZZ_SECONDS each, one per core at a time
#      (default 60; scripts/fuzz.sh, its own clang build in build-fuzz/);
#   3. AddressSanitizer + UndefinedBehaviorSanitizer over the whole suite
#      (scripts/sanitize.sh address, build-asan/);
#   4. ThreadSanitizer over the concurrency tests: serving, job queue and
#      runner, the in-process gRPC servers, and the canary that proves the
#      setup still sees a race (scripts/sanitize.sh thread, build-tsan/);
#      SANITIZE=0 skips 3 and 4;
#   5. ctest over every test, last, so that its summary closes the output.
set -euo pipefail
cd "$(dirname "$0")/.."

# Each phase's wall time goes to stderr (CI's cost per phase; ctest times
# every test itself).
run_start=$SECONDS
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

if [ "${SANITIZE:-1}" != 0 ]; then
  start=$SECONDS
  JOBS=$JOBS ./scripts/sanitize.sh address
  echo "test.sh: ASan + UBSan build and suite took $((SECONDS - start)) s" >&2
  start=$SECONDS
  JOBS=$JOBS ./scripts/sanitize.sh thread
  echo "test.sh: TSan build and concurrency tests took $((SECONDS - start)) s" >&2
fi

echo "test.sh: every stage before the last ctest took $((SECONDS - run_start)) s" \
  "(ctest's 'Total Test time' below is the rest)" >&2
cd "$BUILD_DIR"
# The servers the e2e tests start run as scripts/run.sh runs them.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
# ctest prints the summary ("N% tests passed, M tests failed out of K") last.
ctest --output-on-failure --timeout 900 -j "$JOBS" "$@"
