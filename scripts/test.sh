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
#   2. the ThreadSanitizer build (scripts/sanitize.sh thread, build-tsan/) of
#      the concurrency tests: serving, job queue and runner, the in-process
#      gRPC servers, and the canary that proves the setup still sees a race;
#   3. the libFuzzer harnesses, FUZZ_SECONDS each, one per core at a time
#      (default 30; scripts/fuzz.sh, its own clang build in build-fuzz/;
#      longer runs by hand: scripts/fuzz.sh all 600),
#      with the TSan suite, which runs on one CPU, in the pool's last round
#      beside the odd harness (FUZZ_ALSO; after the harnesses when
#      FUZZ_SECONDS=0);
#   4. AddressSanitizer + UndefinedBehaviorSanitizer over the whole suite
#      (scripts/sanitize.sh address, build-asan/);
#      SANITIZE=0 skips 2, 4 and the TSan suite;
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

FUZZ_SECONDS=${FUZZ_SECONDS:-30}
SANITIZE=${SANITIZE:-1}
TSAN_SUITE="SANITIZE_STEPS=test JOBS=$JOBS ./scripts/sanitize.sh thread"
if [ "$SANITIZE" != 0 ]; then
  start=$SECONDS
  SANITIZE_STEPS=build JOBS=$JOBS ./scripts/sanitize.sh thread
  echo "test.sh: TSan build took $((SECONDS - start)) s" >&2
fi

if [ "$FUZZ_SECONDS" != 0 ]; then
  start=$SECONDS
  also=""
  [ "$SANITIZE" != 0 ] && also=$TSAN_SUITE
  FUZZ_ALSO=$also JOBS=$JOBS ./scripts/fuzz.sh all "$FUZZ_SECONDS"
  echo "test.sh: fuzzing ($FUZZ_SECONDS s per harness)${also:+ and the TSan suite beside it} took" \
    "$((SECONDS - start)) s" >&2
elif [ "$SANITIZE" != 0 ]; then
  start=$SECONDS
  bash -c "$TSAN_SUITE"
  echo "test.sh: TSan suite took $((SECONDS - start)) s" >&2
fi

if [ "$SANITIZE" != 0 ]; then
  start=$SECONDS
  JOBS=$JOBS ./scripts/sanitize.sh address
  echo "test.sh: ASan + UBSan build and suite took $((SECONDS - start)) s" >&2
fi

echo "test.sh: every stage before the last ctest took $((SECONDS - run_start)) s" \
  "(ctest's 'Total Test time' below is the rest)" >&2
cd "$BUILD_DIR"
# The servers the e2e tests start run as scripts/run.sh runs them.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
# ctest prints the summary ("N% tests passed, M tests failed out of K") last.
ctest --output-on-failure --timeout 900 -j "$JOBS" "$@"
