#!/usr/bin/env bash
# Builds and runs adapterd's libFuzzer harnesses (tests/fuzz, README there).
#
#   scripts/fuzz.sh list              # the harness names
#   scripts/fuzz.sh NAME SECONDS      # one harness; NAME=all runs every one, SECONDS each
#
# For each harness: build it (clang, ASan + UBSan) in build-fuzz/
# (FUZZ_BUILD_DIR), replay tests/fuzz/regressions/NAME and the seed corpus
# tests/fuzz/corpus/NAME (every input must pass), then fuzz for SECONDS with a
# working corpus in build-fuzz/corpus/NAME (seeded from the source corpus; the
# source tree is never written). One line per harness:
#   fuzz: NAME executions=N seconds=S crashes=0
# Exits nonzero on any failure; a crashing input's path is printed
# (build-fuzz/artifacts/NAME/crash-...). Build output goes to stderr, the
# summary lines to stdout. JOBS sets the build parallelism; FUZZ_PARALLEL
# (default: the CPU count) how many harnesses run at once, each on one core,
# so 'all 60' takes 60 s per round of FUZZ_PARALLEL harnesses, not per harness.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
FUZZ_SRC=$ROOT/tests/fuzz
BUILD_DIR=${FUZZ_BUILD_DIR:-$ROOT/build-fuzz}
case "$BUILD_DIR" in /*) ;; *) BUILD_DIR=$PWD/$BUILD_DIR ;; esac
JOBS=${JOBS:-$(nproc)}
# One harness per CPU by default. GNU nproc answers OMP_NUM_THREADS when it is
# set (below, this script sets it to 1 for the harnesses), hence env -u.
#
# FUZZ_ALSO="command": a one-core command that takes a slot of the same pool
# after the harnesses, so that it runs in the last round beside the odd
# harness instead of after the whole run (scripts/test.sh puts the TSan
# suite, which is pinned to one CPU, there). Run with bash -c; its output is
# printed after the harnesses' and its exit status counts like theirs.
PARALLEL=${FUZZ_PARALLEL:-$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)}
[[ "$PARALLEL" =~ ^[1-9][0-9]*$ ]] || { echo "fuzz.sh: FUZZ_PARALLEL must be a positive integer" >&2; exit 2; }

usage() {
  echo "usage: $0 list | $0 NAME|all SECONDS" >&2
  exit 2
}

harnesses() {
  local f
  for f in "$FUZZ_SRC"/*_fuzzer.cc; do
    f=${f##*/}
    echo "${f%_fuzzer.cc}"
  done
}

[ $# -ge 1 ] || usage
if [ "$1" = list ]; then
  [ $# -eq 1 ] || usage
  harnesses
  exit 0
fi
[ $# -eq 2 ] || usage
NAME=$1
SECONDS_EACH=$2
[[ "$SECONDS_EACH" =~ ^[0-9]+$ ]] && [ "$SECONDS_EACH" -gt 0 ] || {
  echo "fuzz.sh: SECONDS must be a positive integer, not '$SECONDS_EACH'" >&2
  exit 2
}
if [ "$NAME" = all ]; then
  mapfile -t NAMES < <(harnesses)
else
  harnesses | grep -x -- "$NAME" >/dev/null || {  # not -q: an early exit would fail the pipe
    echo "fuzz.sh: unknown harness '$NAME' (known: $(harnesses | tr '\n' ' '))" >&2
    exit 2
  }
  NAMES=("$NAME")
fi

# --- configure (once) and build ------------------------------------------------
if ! command -v "${CXX:-clang++}" >/dev/null 2>&1; then
  echo "fuzz.sh: ${CXX:-clang++} not found: install clang and libclang-rt-14-dev (scripts/install-deps.sh)" >&2
  exit 1
fi
start=$SECONDS
if ! grep -qs '^ADAPTERD_FUZZ:BOOL=ON$' "$BUILD_DIR/CMakeCache.txt"; then
  # -O1 -gline-tables-only without -DNDEBUG: asserts stay on, stacks have lines.
  CC=${CC:-clang} CXX=${CXX:-clang++} cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja \
    -DADAPTERD_FUZZ=ON -DADAPTERD_BUILD_TESTS=OFF -DADAPTERD_BUILD_BENCH=OFF \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" >&2
fi
targets=()
for n in "${NAMES[@]}"; do targets+=("${n}_fuzzer"); done
cmake --build "$BUILD_DIR" -j "$JOBS" --target "${targets[@]}" >&2
echo "fuzz.sh: configure and build took $((SECONDS - start)) s" >&2

# --- replay, then fuzz ---------------------------------------------------------
# Torch-linked harnesses compute on one thread; UBSan reports carry a stack.
# FUZZ_ALSO gets the caller's environment back (below).
CALLER_OMP_NUM_THREADS=${OMP_NUM_THREADS-unset}
CALLER_UBSAN_OPTIONS=${UBSAN_OPTIONS-unset}
export OMP_NUM_THREADS=1
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
COMMON_FLAGS=(-timeout=10 -rss_limit_mb=2048)

inputs_of() {  # the regression inputs and seeds of harness $1 (file paths)
  local d
  for d in "$FUZZ_SRC/regressions/$1" "$FUZZ_SRC/corpus/$1"; do
    [ -d "$d" ] && find "$d" -type f ! -name '.*' | sort
  done
  return 0
}

# fuzz_one NAME: replay, then fuzz one harness. Its summary line goes to
# stdout, its diagnostics to stderr; returns nonzero on any failure.
fuzz_one() {
  local n=$1
  local bin=$BUILD_DIR/tests/fuzz/${n}_fuzzer
  local logs=$BUILD_DIR/logs
  local artifacts=$BUILD_DIR/artifacts/$n
  local work=$BUILD_DIR/corpus/$n
  local inputs dict rc started runs secs crashes
  mkdir -p "$logs" "$artifacts" "$work"

  mapfile -t inputs < <(inputs_of "$n")
  if [ ${#inputs[@]} -gt 0 ]; then
    if ! "$bin" "${COMMON_FLAGS[@]}" "${inputs[@]}" >"$logs/$n.replay.log" 2>&1; then
      echo "fuzz.sh: $n: a regression or seed input fails (log: $logs/$n.replay.log):" >&2
      grep -E 'Running: |ERROR: |FUZZ_CHECK|runtime error' "$logs/$n.replay.log" | tail -n 20 >&2 || true
      grep -E '^Running: ' "$logs/$n.replay.log" | tail -n 1 | sed "s|^Running: |fuzz: $n failing input: |" || true
      echo "fuzz: $n executions=0 seconds=0 crashes=1"
      return 1
    fi
  fi
  echo "fuzz.sh: $n: replayed ${#inputs[@]} regression and seed inputs" >&2

  # The working corpus keeps what earlier runs found; the seeds are added.
  [ -d "$FUZZ_SRC/corpus/$n" ] && cp -n "$FUZZ_SRC/corpus/$n"/* "$work"/ 2>/dev/null || true
  dict=()
  [ -f "$FUZZ_SRC/$n.dict" ] && dict=(-dict="$FUZZ_SRC/$n.dict")
  rc=0
  started=$SECONDS
  "$bin" "${COMMON_FLAGS[@]}" "${dict[@]}" -max_total_time="$SECONDS_EACH" \
    -artifact_prefix="$artifacts/" -print_final_stats=1 "$work" >"$logs/$n.log" 2>&1 || rc=$?

  # libFuzzer's last line: "Done N runs in S second(s)".
  runs=$(sed -nE 's/^Done ([0-9]+) runs in ([0-9]+) second.*/\1/p' "$logs/$n.log" | tail -n 1)
  secs=$(sed -nE 's/^Done ([0-9]+) runs in ([0-9]+) second.*/\2/p' "$logs/$n.log" | tail -n 1)
  if [ -z "$runs" ]; then  # stopped by a crash: the last status line's count
    runs=$(sed -nE 's/^#([0-9]+)[[:space:]].*/\1/p' "$logs/$n.log" | tail -n 1)
    secs=$((SECONDS - started))
  fi
  crashes=0
  if [ "$rc" -ne 0 ]; then
    crashes=1
    echo "fuzz.sh: $n failed (exit $rc; log: $logs/$n.log):" >&2
    grep -E 'ERROR: |FUZZ_CHECK|runtime error|SUMMARY' "$logs/$n.log" | head -n 10 >&2 || true
    # The input to keep under tests/fuzz/regressions/$n once the bug is fixed.
    grep -oE 'Test unit written to [^ ]+' "$logs/$n.log" | sed "s|^Test unit written to |fuzz: $n crashing input: |" || true
  fi
  echo "fuzz: $n executions=${runs:-0} seconds=${secs:-$SECONDS_EACH} crashes=$crashes"
  return $crashes
}

# FUZZ_PARALLEL harnesses at a time (PARALLEL, above; each fuzzes on one
# thread, so each still gets SECONDS of a whole core). Each one's output is
# held until it ends, then printed in harness order.
OUT=$BUILD_DIR/run
rm -rf "$OUT"
mkdir -p "$OUT"
pids=()
# Waits for a free slot of the pool.
take_slot() {
  while [ ${#pids[@]} -ge "$PARALLEL" ]; do
    wait -n || true
    running=()
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && running+=("$p"); done
    pids=(${running[@]+"${running[@]}"})
  done
}
for i in "${!NAMES[@]}"; do
  take_slot
  n=${NAMES[$i]}
  ( rc=0; fuzz_one "$n" >"$OUT/$i.out" 2>"$OUT/$i.err" || rc=$?; echo "$rc" >"$OUT/$i.rc" ) &
  pids+=($!)
done
if [ -n "${FUZZ_ALSO:-}" ]; then
  take_slot
  (
    if [ "$CALLER_OMP_NUM_THREADS" = unset ]; then unset OMP_NUM_THREADS; else export OMP_NUM_THREADS=$CALLER_OMP_NUM_THREADS; fi
    if [ "$CALLER_UBSAN_OPTIONS" = unset ]; then unset UBSAN_OPTIONS; else export UBSAN_OPTIONS=$CALLER_UBSAN_OPTIONS; fi
    rc=0; bash -c "$FUZZ_ALSO" >"$OUT/also.out" 2>"$OUT/also.err" || rc=$?; echo "$rc" >"$OUT/also.rc"
  ) &
  pids+=($!)
fi
wait
failed=0
for i in "${!NAMES[@]}"; do
  cat "$OUT/$i.err" >&2
  cat "$OUT/$i.out"
  [ "$(cat "$OUT/$i.rc" 2>/dev/null)" = 0 ] || failed=1
done
if [ -n "${FUZZ_ALSO:-}" ]; then
  cat "$OUT/also.err" >&2
  cat "$OUT/also.out"
  if [ "$(cat "$OUT/also.rc" 2>/dev/null)" != 0 ]; then
    echo "fuzz.sh: FUZZ_ALSO failed (exit $(cat "$OUT/also.rc" 2>/dev/null || echo '?')): $FUZZ_ALSO" >&2
    failed=1
  fi
fi
exit $failed
