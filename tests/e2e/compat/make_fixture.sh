#!/usr/bin/env bash
# Writes a stored-data compatibility fixture: a data directory written by the
# adapterd binaries in BUILD_DIR, and what those binaries answered about it.
# compat_e2e_test (tests/e2e/compat_e2e_test.cc) starts today's binary on a
# copy of it and checks that every record still reads back the same.
#
#   tests/e2e/compat/make_fixture.sh BUILD_DIR OUT_DIR
#
# Run it with the binaries of the release whose on-disk format is to be kept
# (OUT_DIR must not exist). What it leaves in OUT_DIR:
#   data/          the data directory, the server killed (SIGKILL) while a
#                  job (task "resumed") was RUNNING past its first checkpoint
#                  and another (task "later") was QUEUED; RocksDB's info
#                  logs removed (they are not data)
#   expected/      adapterctl --json answers taken before the kill:
#                  tasks.json, task.json, datasets.json, predict.json,
#                  job-<name>.json and events-<name>.json per finished job
#                  (predictions served in bf16, as compat_e2e_test serves)
#   jobs.env       the ids of the jobs, by name (done, retrained, cancelled,
#                  running, queued)
# The model is not kept: adapterd-make-model regenerates it bit for bit
# (--preset tiny --seed 5 --init_range 0.2).
set -euo pipefail

BUILD=$(realpath "${1:?usage: make_fixture.sh BUILD_DIR OUT_DIR}")
OUT=${2:?usage: make_fixture.sh BUILD_DIR OUT_DIR}
SRC=$(cd "$(dirname "$0")/../../.." && pwd)
[[ -e "$OUT" ]] && { echo "$OUT exists" >&2; exit 2; }
mkdir -p "$OUT/expected"
OUT=$(realpath "$OUT")
WORK=$(mktemp -d)
SERVER_PID=
cleanup() {
  [[ -n "$SERVER_PID" ]] && kill -9 "$SERVER_PID" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

"$BUILD/tools/make_model/adapterd-make-model" --out "$WORK/model" --preset tiny --seed 5 --init_range 0.2 >/dev/null

"$BUILD/server/adapterd" --listen 127.0.0.1:0 --metrics_listen 127.0.0.1:0 --data_dir "$OUT/data" \
  --model_dir "$WORK/model" --threads 1 --max_queue_delay_us 500 --dtype bf16 >"$WORK/adapterd.log" 2>&1 &
SERVER_PID=$!
PORT=
for _ in $(seq 1 600); do
  PORT=$(sed -n 's/.*SERVING on port \([0-9]*\).*/\1/p' "$WORK/adapterd.log" | head -1)
  [[ -n "$PORT" ]] && break
  kill -0 "$SERVER_PID" 2>/dev/null || { cat "$WORK/adapterd.log" >&2; exit 1; }
  sleep 0.2
done
[[ -n "$PORT" ]] || { echo "adapterd did not start" >&2; exit 1; }

ctl() { "$BUILD/client/adapterctl" --server "127.0.0.1:$PORT" --timeout 300 "$@"; }
job_of() { sed -n 's/.*"job_id": *"\([^"]*\)".*/\1/p' | head -1; }
# Creates a job (train's flags), waits for its end unless --detach, and
# prints its id.
train() {
  local id
  id=$(ctl --json train --detach "$@" | job_of)
  [[ -n "$id" ]] || { echo "no job created: train $*" >&2; exit 1; }
  echo "$id"
}
EX="$SRC/examples"

# Two datasets with ids and names of their own, and those train uploads.
ctl --json datasets upload --id reviews --name "product reviews" "$EX/sentiment_train.csv" >/dev/null
ctl --json datasets upload --id topics "$EX/topics_validation.csv" >/dev/null

# A task trained twice (versions 1 and 2), with an idempotency key and an
# explicit validation set on the first, hyperparameters of every kind set.
DONE=$(train --task sentiment --data "$EX/sentiment_train.csv" \
  --validation "$EX/sentiment_validation.csv" --request-id fixture-1 --epochs 2 --batch-size 16 \
  --bottleneck 8 --activation relu --max-seq-len 32 --seed 11 --learning-rate 1e-3)
ctl jobs watch "$DONE" >/dev/null
RETRAINED=$(train --task sentiment --data "$EX/sentiment_train.csv" --epochs 1 --seed 12 --bottleneck 8 \
  --max-seq-len 32 --validation-fraction 0.2)
ctl jobs watch "$RETRAINED" >/dev/null
# A second task, and a job of it cancelled while queued or running.
TOPICS=$(train --task topics --data "$EX/topics_train.csv" --epochs 1 --max-seq-len 32 --bottleneck 8)
ctl jobs watch "$TOPICS" >/dev/null
CANCELLED=$(train --task topics --data "$EX/topics_train.csv" --epochs 50 --max-seq-len 32 --seed 3)
ctl jobs cancel "$CANCELLED" >/dev/null
for _ in $(seq 1 600); do
  ctl --json jobs get "$CANCELLED" | grep '"JOB_STATE_CANCELLED"' >/dev/null && break
  sleep 0.2
done

for name in DONE RETRAINED CANCELLED; do
  id=${!name}
  [[ -n "$id" ]] || { echo "no job id for $name" >&2; exit 1; }
  lower=${name,,}
  ctl --json jobs get "$id" >"$OUT/expected/job-$lower.json"
  ctl --json jobs watch "$id" >"$OUT/expected/events-$lower.json" || true
done
ctl --json tasks list >"$OUT/expected/tasks.json"
ctl --json tasks get sentiment >"$OUT/expected/task.json"
ctl --json datasets list >"$OUT/expected/datasets.json"
ctl --json predict --task sentiment --all-scores "great and fast, I love it" "broken, rude and slow" \
  >"$OUT/expected/predict.json"

# A job killed while RUNNING, after its first checkpoint (step 16), and one
# QUEUED behind it; each of a task of its own, so that their ends after the
# restart leave the answers above as they were.
RUNNING=$(train --task resumed --data "$EX/sentiment_train.csv" --epochs 40 --max-seq-len 32 --bottleneck 8 \
  --checkpoint-every 16 --seed 21)
QUEUED=$(train --task later --data "$EX/topics_train.csv" --epochs 1 --max-seq-len 32)
for _ in $(seq 1 1200); do
  step=$(ctl --json jobs get "$RUNNING" | sed -n 's/.*"step": *"\{0,1\}\([0-9]*\).*/\1/p' | head -1)
  [[ -n "$step" && "$step" -ge 20 ]] && break
  sleep 0.1
done
ctl --json jobs get "$QUEUED" | grep '"JOB_STATE_QUEUED"' >/dev/null || { echo "job $QUEUED is not queued" >&2; exit 1; }
kill -9 "$SERVER_PID"
wait "$SERVER_PID" 2>/dev/null || true
SERVER_PID=

rm -f "$OUT"/data/*/LOG "$OUT"/data/*/LOG.old.* "$OUT"/data/LOG "$OUT"/data/LOG.old.*
{
  echo "# written by $(git -C "$SRC" rev-parse --short HEAD 2>/dev/null || echo unknown) on $(date -u +%F)"
  for name in DONE RETRAINED TOPICS CANCELLED RUNNING QUEUED; do echo "$name=${!name}"; done
} >"$OUT/jobs.env"
du -sh "$OUT"
