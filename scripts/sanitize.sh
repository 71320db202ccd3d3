#!/usr/bin/env bash
# Sanitizer builds and runs (CI runs both through scripts/test.sh).
#
#   scripts/sanitize.sh address [ctest args]   # ASan + UBSan over the whole suite
#   scripts/sanitize.sh thread  [ctest args]   # TSan over the concurrency tests
#   SANITIZE_STEPS=build|test scripts/sanitize.sh KIND   # only one of the two
#                                                        # (default: both)
#
# Each has its own build tree (build-asan/, build-tsan/; SANITIZE_BUILD_DIR
# overrides) configured with -DADAPTERD_SANITIZE=<kind> and the default
# compiler (GCC): every adapterd target is instrumented, third-party libraries
# (LibTorch, gRPC, protobuf, RocksDB, OpenBLAS) are not, except abseil under
# TSan (scripts/tsan-abseil.sh: absl::Mutex must be visible). Reports stop the test
# that caused them (halt_on_error, UBSan without recovery). Suppressions are
# in tests/sanitizers/, for third-party frames only, each with its reason.
# Under ASan, LibTorch's tensors of 128 KiB and more come from a pool that
# keeps ASan's checks by poisoning (server/model/asan_tensor_pool.cc: ASan's
# own allocator maps and unmaps each one; asan_tensor_pool_test shows the
# checks still fire).
#
# What runs:
#   address: every test but those labelled release_build (ctest -LE), which
#            scripts/test.sh runs against the release build instead: the
#            ones that exercise no adapterd C++ built here (the container
#            image, which runs the release binaries; the Dockerfile lint;
#            the manifest, rule and dashboard checks, YAML and JSON only; the
#            source checks: format, clang-tidy, layering, thread safety, the
#            Python client's and the console's linters, the console's node
#            unit tests), malloc_tuning_test, whose subject is glibc's
#            allocator, which ASan replaces (its mallopt is a no-op there, and
#            adapterd says "defaults kept"), and the benchmarks' smoke test
#            (no benchmarks are built here). cmake/AdapterdHelpers.cmake
#            keeps the label.
#   thread:  the tests whose subject is concurrency: the serving engine
#            (batcher, executor, cache), the job queue and runner, the
#            periodic thread (common_test), and the in-process gRPC servers
#            (API, tenancy, contracts), on one CPU
#            with abseil instrumented (below), and tsan_canary_test, which
#            checks that this setup still reports a real race.
#
# CI's split (scripts/test.sh): both runs, every time. ASan + UBSan is a
# second build (of what its tests run) and the only run of every test but the
# release_build ones (the release build compiles none of them); TSan builds only
# its 8 tests and their libraries plus abseil, and runs in ~30 s. ASan + UBSan
# compiles adapterd's code at -O0, TSan at -O1, the tests' own code at -O0
# (CMakeLists.txt says why).
set -euo pipefail
cd "$(dirname "$0")/.."
KIND=${1:-}
case "$KIND" in
  address|thread) shift ;;
  *) echo "usage: $0 address|thread [ctest args]" >&2; exit 2 ;;
esac
BUILD_DIR=${SANITIZE_BUILD_DIR:-build-$([ "$KIND" = address ] && echo asan || echo tsan)}
PIN=()
JOBS=${JOBS:-$(nproc)}
SUPP=$PWD/tests/sanitizers

STEPS=${SANITIZE_STEPS:-all}
case "$STEPS" in
  all|build|test) ;;
  *) echo "sanitize.sh: SANITIZE_STEPS must be all, build or test, not '$STEPS'" >&2; exit 2 ;;
esac
if [ "$STEPS" = test ] && [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
  echo "sanitize.sh: $BUILD_DIR is not configured: run SANITIZE_STEPS=build first" >&2
  exit 1
fi

start=$SECONDS
if [ "$STEPS" != test ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DADAPTERD_SANITIZE="$KIND" \
    -DADAPTERD_BUILD_BENCH=OFF >&2
fi
if [ "$KIND" = address ]; then
  SELECT=(-LE '^release_build$')
  # Only what the selected tests run: their executables (a test binary's
  # target has the test's name; with what each depends on: the crash
  # children, rpc_probe, adapterctl) and the three binaries the end-to-end
  # and deployment tests start. Not built: tools no test runs
  # (adapterd-pretrain) and the tests left out above.
  mapfile -t TARGETS < <(comm -12 \
    <(cd "$BUILD_DIR" && ctest --show-only=json-v1 "${SELECT[@]}" |
        python3 -c 'import json, sys; print("\n".join(t["name"] for t in json.load(sys.stdin)["tests"]))' | sort) \
    <(ninja -C "$BUILD_DIR" -t targets all | sed -n 's/: phony$//p' | sort))
  # An empty list would build only the three binaries and leave every test
  # without its executable: say so instead of failing test by test.
  if [ "$STEPS" != test ] && [ "${#TARGETS[@]}" -eq 0 ]; then
    echo "sanitize.sh: none of the selected tests names a build target in $BUILD_DIR (ctest --show-only and" \
         "ninja -t targets disagree); nothing to build" >&2
    exit 1
  fi
  if [ "$STEPS" != test ]; then
    cmake --build "$BUILD_DIR" -j "$JOBS" --target adapterd adapterctl adapterd-make-model "${TARGETS[@]}" >&2
  fi
else
  TSAN_TESTS=(tsan_canary_test common_test serving_test job_manager_test job_queue_test api_server_test
              api_tenancy_test api_contracts_test http_gateway_test)
  [ "$STEPS" = test ] || cmake --build "$BUILD_DIR" -j "$JOBS" --target "${TSAN_TESTS[@]}" >&2
  SELECT=(-R "^($(IFS='|'; echo "${TSAN_TESTS[*]}"))\$")
  # Debian's abseil, instrumented (scripts/tsan-abseil.sh says why): without
  # it TSan cannot see absl::Mutex and reports every guarded field. (Built
  # once: a stamp makes later calls free.)
  ABSL_TSAN_LIB=$(JOBS=$JOBS ./scripts/tsan-abseil.sh "$BUILD_DIR/abseil-tsan")
  export LD_LIBRARY_PATH="$ABSL_TSAN_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  # LibTorch's intra-op threads are libgomp's, whose barriers (futexes and
  # atomics in an uninstrumented library) TSan cannot see: copies LibTorch
  # made on an OpenMP worker were reported against the tensor's allocation
  # on the executor thread. One intra-op thread runs every at::parallel_for
  # inline, on the calling thread; the threads adapterd itself starts (gRPC
  # handlers, the batcher, the executor, the job runner) are what this run
  # is about. The tests' OMP_NUM_THREADS is 1 in this build (cmake), and one
  # CPU makes adapterd's --threads 0 choose one intra-op thread too.
  PIN=(taskset -c "$(taskset -pc $$ | sed 's/.*: //; s/[,-].*//')")
fi
if [ "$STEPS" != test ]; then
  echo "sanitize.sh: $KIND build took $((SECONDS - start)) s" >&2
  [ "$STEPS" = build ] && exit 0
fi

export ASAN_OPTIONS="halt_on_error=1:abort_on_error=0:detect_leaks=1:detect_odr_violation=0:strict_string_checks=1:check_initialization_order=1:${ASAN_OPTIONS:-}"
export LSAN_OPTIONS="suppressions=$SUPP/lsan.supp:print_suppressions=0:${LSAN_OPTIONS:-}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:suppressions=$SUPP/ubsan.supp:${UBSAN_OPTIONS:-}"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$SUPP/tsan.supp:${TSAN_OPTIONS:-}"
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
cd "$BUILD_DIR"
start=$SECONDS
rc=0
${PIN[@]+"${PIN[@]}"} ctest --output-on-failure --timeout 1800 -j "$JOBS" "${SELECT[@]}" "$@" || rc=$?
echo "sanitize.sh: $KIND tests took $((SECONDS - start)) s" >&2
exit $rc
