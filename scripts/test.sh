#!/usr/bin/env bash
# Builds adapterd and runs every test. The README's test command.
#   ./scripts/test.sh                 # deps (if missing), configure, build, fuzz, ctest
#   BUILD_DIR=build-x ./scripts/test.sh -L unit   # extra args go to ctest
#   FUZZ_SECONDS=0 SANITIZE=0 ./scripts/test.sh  # skip the fuzzers and both sanitizer builds
#
# Each test runs once. Stages, each timed on stderr. CI runs them all and
# .ci/run must stay under 45 minutes on a fresh 2-core machine:
# docs/PERFORMANCE.md, "CI time", has each stage's time and what keeps it down:
#   1. install-deps; configure and build the release build (build/): the
#      product, benchmarks and tools, and the tests labelled release_build
#      (target release_build; with SANITIZE=0, everything);
#   2. the ThreadSanitizer build (scripts/sanitize.sh thread, build-tsan/) of
#      the concurrency tests: serving, job queue and runner, the in-process
#      gRPC servers, and the canary that proves the setup still sees a race;
#   3. the libFuzzer harnesses, FUZZ_SECONDS each, one per core at a time
#      (default 30; scripts/fuzz.sh, its own clang build in build-fuzz/;
#      longer runs by hand: scripts/fuzz.sh all 600),
#      with the TSan suite, which runs on one CPU, in the pool's last round
#      beside the odd harness (FUZZ_ALSO; after the harnesses when
#      FUZZ_SECONDS=0);
#   4. ctest over the release_build tests in build/: the source checks, the
#      deployment checks, the container image (release binaries), glibc's
#      allocator tuning and the benchmarks' smoke test
#      (cmake/AdapterdHelpers.cmake says why each is there);
#   5. AddressSanitizer + UndefinedBehaviorSanitizer (scripts/sanitize.sh
#      address, build-asan/): the build of every other test, and their one
#      run, last, so that its ctest summary closes the output (a line after
#      it adds up both runs).
#   SANITIZE=0 skips 2 and 5 and the TSan suite, and runs every test in
#   build/ instead (the quick loop: FUZZ_SECONDS=0 SANITIZE=0 ./scripts/test.sh
#   -R name). After a full run, build/'s GoogleTest executables are whatever
#   the last SANITIZE=0 run or `ninja -C build` left: the full run builds
#   and runs them in build-asan/ only.
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
FUZZ_SECONDS=${FUZZ_SECONDS:-30}
SANITIZE=${SANITIZE:-1}
start=$SECONDS
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
if [ "$SANITIZE" != 0 ]; then
  cmake --build "$BUILD_DIR" -j "$JOBS" --target release_build
else
  cmake --build "$BUILD_DIR" -j "$JOBS"
fi
echo "test.sh: configure and build took $((SECONDS - start)) s" >&2

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

# The servers the e2e tests start run as scripts/run.sh runs them.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
if [ "$SANITIZE" = 0 ]; then
  echo "test.sh: every stage before ctest took $((SECONDS - run_start)) s" \
    "(ctest's 'Total Test time' below is the rest)" >&2
  cd "$BUILD_DIR"
  # ctest prints the summary ("N% tests passed, M tests failed out of K") last.
  exec ctest --output-on-failure --timeout 900 -j "$JOBS" "$@"
fi

# A failed run of the first suite does not stop the second: CI reports both.
start=$SECONDS
release_rc=0
(cd "$BUILD_DIR" && ctest --output-on-failure --timeout 900 -j "$JOBS" -L '^release_build$' "$@") || release_rc=$?
echo "test.sh: the release_build tests took $((SECONDS - start)) s" >&2
release_count=$(cd "$BUILD_DIR" && ctest -N -L '^release_build$' "$@" | sed -n 's/^Total Tests: //p')

start=$SECONDS
asan_rc=0
JOBS=$JOBS ./scripts/sanitize.sh address "$@" || asan_rc=$?
echo "test.sh: ASan + UBSan build and suite took $((SECONDS - start)) s" >&2
asan_count=$(cd build-asan && ctest -N -LE '^release_build$' "$@" | sed -n 's/^Total Tests: //p')

verdict() { [ "$1" = 0 ] && echo passed || echo "FAILED (ctest exit $1)"; }
echo "test.sh: $((release_count + asan_count)) tests, each run once:" \
  "$release_count against the release build (build/): $(verdict "$release_rc");" \
  "$asan_count under ASan + UBSan (build-asan/): $(verdict "$asan_rc");" \
  "$((SECONDS - run_start)) s in all"
[ "$release_rc" = 0 ] && [ "$asan_rc" = 0 ]
