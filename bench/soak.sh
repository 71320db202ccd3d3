#!/usr/bin/env bash
# The soak: adapterd on the default encoder over a fresh data dir,
# then adapterd-soak against it for MINUTES (default 30): Zipf Predict load
# over 100 tasks, 10 training jobs one after another, uploads, exports,
# imports and deletes. Prints a line per 5-minute window and a summary
# (unexpected errors, RSS growth after warm-up, FDs, threads, p99).
#   bench/soak.sh                      # 30 minutes
#   MINUTES=5 WINDOW_S=60 bench/soak.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
MINUTES=${MINUTES:-30}
WINDOW_S=${WINDOW_S:-300}
MODEL_DIR=${MODEL_DIR:-models/adapterd-mini-en}
THREADS=${THREADS:-2}
work=$(mktemp -d /tmp/adapterd-soak.XXXXXX)
log="$work/adapterd.log"
export GOMP_SPINCOUNT=${GOMP_SPINCOUNT:-3000000}
"$BUILD_DIR/server/adapterd" --model_dir "$MODEL_DIR" --data_dir "$work/data" --listen 127.0.0.1:0 \
  --metrics_listen 127.0.0.1:0 --threads "$THREADS" > "$log" 2>&1 &
pid=$!
trap 'kill -TERM $pid 2>/dev/null || true; wait $pid 2>/dev/null || true' EXIT
port=""
for _ in $(seq 1 300); do
  port=$(grep -o 'SERVING on port [0-9]*' "$log" | grep -o '[0-9]*$' || true)
  [ -n "$port" ] && break
  kill -0 $pid 2>/dev/null || { cat "$log" >&2; exit 1; }
  sleep 0.2
done
[ -n "$port" ] || { echo "soak.sh: adapterd did not start" >&2; cat "$log" >&2; exit 1; }
metrics_port=$(grep -o '/metrics on port [0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
echo "soak.sh: adapterd pid $pid on port $port (/metrics $metrics_port), data in $work" >&2
rc=0
"$BUILD_DIR/bench/adapterd-soak" --server "127.0.0.1:$port" --pid "$pid" --minutes "$MINUTES" \
  --window_s "$WINDOW_S" --metrics_port "$metrics_port" "$@" || rc=$?
kill -TERM $pid
wait $pid || true
trap - EXIT
# The server's warnings and errors (glog lines start W or E), less the
# tenants file's (the soak runs without one).
grep -E "^[WE][0-9]" "$log" | grep -v "tenants.cc" | tail -20 >&2 || true
rm -rf "$work"
exit $rc
