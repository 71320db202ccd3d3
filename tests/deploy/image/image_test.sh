#!/usr/bin/env bash
# deploy_image_test: builds docker/Dockerfile with podman and runs the image as
# a deployment would, with no arguments (configuration by environment only):
#
#   1. the local base image debian:bookworm-slim exists (ensure-base-image.sh);
#   2. podman build --isolation=chroot --format docker (HEALTHCHECK is a
#      Docker-format field: podman's default OCI format drops it). The
#      binaries come from the build tree under test (stripped), handed to the
#      Dockerfile as its `builder` stage with --build-context: the runtime
#      stage, its package list and its checks are what this test builds, and
#      the same sources were compiled on the same Debian release a moment ago
#      (the builder stage's own compile would cost CI about 8 minutes).
#      IMAGE_BINARIES=source builds them in the builder stage instead, as a
#      user's plain `podman build` does;
#   3. the container runs with only the recipe's run flags, a named volume on
#      /data and ADAPTERD_LISTEN / ADAPTERD_HTTP_LISTEN /
#      ADAPTERD_METRICS_LISTEN on free loopback ports (--network=host);
#   4. from the host, build/client/adapterctl trains a task (--detach, then
#      jobs watch to SUCCEEDED) and records predict's scores; the image's
#      REST gateway answers /healthz, the console and the same Predict;
#   5. the image's HEALTHCHECK reports healthy;
#   6. the server runs as uid 10001, not root;
#   7. podman stop (SIGTERM) ends it with exit 0 and "stopped cleanly"; a new
#      container on the same volume predicts bit-identical scores;
#   8. with --cpus 1 the server logs "intra-op threads: 1" (--threads 0
#      follows the cgroup CPU quota).
# Every wait is bounded; every container and the volume are removed on exit.
# Prints each phase's wall time and the image size.
#
# Environment: ADAPTERD_SOURCE_DIR (repo root), ADAPTERD_BINARY_DIR (build
# tree with client/adapterctl, server/adapterd and adapterd-make-model),
# IMAGE (default adapterd:test), IMAGE_BINARIES (build-tree, the default, or
# source), BUILD_JOBS (ninja -j in a source build, default 2), ADAPTERD_CACHE
# (base rootfs cache), KEEP_IMAGE_TEST_DIR=1 keeps the work directory with
# the logs.
set -euo pipefail

SRC=${ADAPTERD_SOURCE_DIR:-$(cd "$(dirname "$0")/../../.." && pwd)}
BIN=${ADAPTERD_BINARY_DIR:-$SRC/build}
IMAGE=${IMAGE:-adapterd:test}
BUILD_JOBS=${BUILD_JOBS:-2}
IMAGE_BINARIES=${IMAGE_BINARIES:-build-tree}
CTL="$BIN/client/adapterctl"
cd "$SRC"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/adapterd-image-test.XXXXXX")
TAG=$$-$RANDOM
VOLUME="adapterd-image-test-$TAG"
CONTAINERS=()
PHASES=()
failed=0

log() { echo "image_test: $*"; }
die() { echo "image_test: FAIL: $*" >&2; exit 1; }
check() {  # check DESCRIPTION COMMAND...: a failed check is reported, the test goes on
  local what=$1; shift
  if "$@"; then log "ok: $what"; else echo "image_test: FAIL: $what" >&2; failed=1; fi
}
now() { date +%s.%N; }
phase_end() {  # phase_end NAME START
  local s; s=$(awk -v a="$2" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')
  PHASES+=("$1: ${s} s"); log "phase $1 took ${s} s"
}

cleanup() {
  local rc=$? c
  for c in "${CONTAINERS[@]}"; do
    podman rm -f -t 5 "$c" >/dev/null 2>&1 || true
  done
  podman volume rm -f "$VOLUME" >/dev/null 2>&1 || true
  if [[ $rc -ne 0 || $failed -ne 0 || -n "${KEEP_IMAGE_TEST_DIR:-}" ]]; then
    log "logs kept in $WORK"
  else
    rm -rf "$WORK"
  fi
}
trap cleanup EXIT

[[ -x "$CTL" ]] || die "$CTL not built (cmake --build build --target adapterctl)"
command -v podman >/dev/null || die "podman not installed (scripts/install-deps.sh)"

# run_server NAME [PODMAN RUN FLAGS...]: a detached container of $IMAGE with
# the recipe's flags, the volume, and fresh ports in $PORT / $HTTP_PORT /
# $METRICS_PORT.
run_server() {
  local name=$1; shift
  # Ports from below the ephemeral range (tests/testing/free_port.py says why).
  local ports
  ports=$(python3 "$SRC/tests/testing/free_port.py" 3) || return 1
  { read -r PORT; read -r HTTP_PORT; read -r METRICS_PORT; } <<<"$ports"
  CONTAINERS+=("$name")
  podman --runtime runc run -d --name "$name" --network=host \
    --ulimit nofile=1024:1024 --ulimit nproc=1000:1000 \
    -v "$VOLUME:/data" \
    -e "ADAPTERD_LISTEN=127.0.0.1:$PORT" -e "ADAPTERD_HTTP_LISTEN=127.0.0.1:$HTTP_PORT" \
    -e "ADAPTERD_METRICS_LISTEN=127.0.0.1:$METRICS_PORT" \
    "$@" "$IMAGE" >"$WORK/$name.id" 2>"$WORK/$name.run.err" || {
      cat "$WORK/$name.run.err" >&2
      return 1
    }
}

# wait_serving NAME SECONDS: until adapterctl health says SERVING; fails early
# when the container exits.
wait_serving() {
  local name=$1 deadline=$((SECONDS + $2)) state
  while ((SECONDS < deadline)); do
    if "$CTL" --server "127.0.0.1:$PORT" --timeout 3 health >/dev/null 2>&1; then return 0; fi
    state=$(podman inspect --format '{{.State.Status}}' "$name" 2>/dev/null || echo gone)
    if [[ "$state" != running && "$state" != created ]]; then
      echo "image_test: container $name is $state; its log:" >&2
      podman logs "$name" >&2 2>&1 || true
      return 1
    fi
    sleep 1
  done
  echo "image_test: $name not SERVING within $2 s; its log:" >&2
  podman logs "$name" >&2 2>&1 || true
  return 1
}

ctl() { timeout 120 "$CTL" --server "127.0.0.1:$PORT" "$@"; }

TEXTS=("the screen was great and fast, I love it" "it arrived broken and the service was rude and slow" "an ordinary chair")

# ------------------------------------------------------------- 1. base image
t=$(now)
"$SRC/tests/deploy/image/ensure-base-image.sh"
phase_end base-image "$t"

# ------------------------------------------------------------------ 2. build
t=$(now)
BUILD_FLAGS=()
case "$IMAGE_BINARIES" in
  build-tree)
    # The Dockerfile's builder stage leaves the three stripped binaries in
    # /out; a build context of that name and layout takes the stage's place.
    mkdir -p "$WORK/binaries/out"
    for b in server/adapterd client/adapterctl tools/make_model/adapterd-make-model; do
      [[ -x "$BIN/$b" ]] || die "$BIN/$b not built (cmake --build build)"
      strip -o "$WORK/binaries/out/${b##*/}" "$BIN/$b" || die "strip $BIN/$b failed"
    done
    BUILD_FLAGS=(--build-context "builder=$WORK/binaries")
    log "binaries: the build tree's ($BIN), as the builder stage"
    ;;
  source) log "binaries: compiled in the Dockerfile's builder stage" ;;
  *) die "IMAGE_BINARIES must be build-tree or source, not '$IMAGE_BINARIES'" ;;
esac
log "podman build -f docker/Dockerfile -t $IMAGE (log: $WORK/build.log)"
if ! timeout 2400 podman build --isolation=chroot --format docker --build-arg "BUILD_JOBS=$BUILD_JOBS" \
      ${BUILD_FLAGS[@]+"${BUILD_FLAGS[@]}"} \
      --build-arg "REVISION=$(git -C "$SRC" rev-parse HEAD 2>/dev/null || echo unknown)" \
      -f docker/Dockerfile -t "$IMAGE" . >"$WORK/build.log" 2>&1; then
  tail -n 60 "$WORK/build.log" >&2
  die "podman build failed"
fi
phase_end build "$t"
if [[ "$IMAGE_BINARIES" = build-tree ]]; then
  # The image serves the binaries under test, and the source stage never ran.
  IN_IMAGE=$(podman --runtime runc run --rm --network=none --ulimit nofile=1024:1024 --ulimit nproc=1000:1000 \
    --entrypoint sha256sum "$IMAGE" \
    /usr/local/bin/adapterd /usr/local/bin/adapterctl /usr/local/bin/adapterd-make-model | awk '{ print $1 }')
  STAGED=$(cd "$WORK/binaries/out" && sha256sum adapterd adapterctl adapterd-make-model | awk '{ print $1 }')
  check "the image's three binaries are the build tree's" test "$IN_IMAGE" = "$STAGED"
  check "the builder stage did not compile" bash -c "! grep -q 'cmake --build' '$WORK/build.log'"
fi
SIZE=$(podman image inspect --format '{{.Size}}' "$IMAGE")
log "image $IMAGE: $SIZE bytes ($(awk -v s="$SIZE" 'BEGIN { printf "%.0f", s / 1048576 }') MiB)"

t=$(now)
podman volume create "$VOLUME" >/dev/null

# ---------------------------------------- 3. run with no arguments, 4. train
run_server "adapterd-it-a-$TAG" || die "podman run failed"
wait_serving "adapterd-it-a-$TAG" 180 || die "the container did not start serving"
log "SERVING on 127.0.0.1:$PORT (container adapterd-it-a-$TAG)"
check "the image's defaults: the default encoder from /opt/adapterd/models, data in /data" \
  grep -q "model /opt/adapterd/models/adapterd-mini-en" <(podman logs "adapterd-it-a-$TAG" 2>&1)

ctl --json train --detach --task sentiment --data examples/sentiment_train.csv \
  --validation examples/sentiment_validation.csv --epochs 2 --seed 7 >"$WORK/train.json" \
  || die "train --detach failed: $(cat "$WORK/train.json")"
JOB=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["job_id"])' "$WORK/train.json")
log "job $JOB created; watching it"
timeout 1200 "$CTL" --server "127.0.0.1:$PORT" jobs watch "$JOB" >"$WORK/watch.log" 2>&1 \
  || { cat "$WORK/watch.log" >&2; die "jobs watch $JOB did not end SUCCEEDED"; }
grep -q SUCCEEDED "$WORK/watch.log" || die "jobs watch: no SUCCEEDED in $(tail -n 3 "$WORK/watch.log")"
log "$(tail -n 1 "$WORK/watch.log")"
ctl --json predict --task sentiment --all-scores "${TEXTS[@]}" >"$WORK/predict-before.json" \
  || die "predict failed"
log "scores: $(tr -d '\n' <"$WORK/predict-before.json" | cut -c1-300)"
# The REST gateway and the console, served by the image.
# Each body is read whole before it is searched: `curl | grep -q` under
# pipefail fails whenever grep finds its match and exits before curl has
# written the rest (curl exits 23 on the closed pipe).
http_body() { curl -sf --max-time 60 "$@"; }
BODY=$(http_body "http://127.0.0.1:$HTTP_PORT/healthz") && [[ $BODY == *'"SERVING"'* ]] \
  || die "HTTP /healthz is not SERVING: ${BODY:-no answer}"
BODY=$(http_body "http://127.0.0.1:$HTTP_PORT/") && [[ $BODY == *'<title>'* ]] \
  || die "the console is not served at /: $(head -c 300 <<<"${BODY:-no answer}")"
BODY=$(http_body -X POST -H "Content-Type: application/json" "http://127.0.0.1:$HTTP_PORT/v1/tasks/sentiment:predict" -d "{\"texts\": [\"${TEXTS[0]}\"]}") \
  && [[ $BODY == *'"predictions"'* ]] || die "HTTP predict failed: ${BODY:-no answer}"
log "ok: HTTP on 127.0.0.1:$HTTP_PORT: /healthz SERVING, the console at /, Predict over REST"

# ------------------------------------------------------------ 5. HEALTHCHECK
check "the image has a HEALTHCHECK" \
  grep -q adapterctl <(podman image inspect --format '{{json .Config.Healthcheck}}' "$IMAGE")
if podman healthcheck run "adapterd-it-a-$TAG" >"$WORK/health.out" 2>&1; then
  log "ok: podman healthcheck run: $(tr '\n' ' ' <"$WORK/health.out")"
else
  echo "image_test: FAIL: podman healthcheck run: $(cat "$WORK/health.out")" >&2; failed=1
fi
STATUS=$(podman inspect --format '{{.State.Health.Status}}' "adapterd-it-a-$TAG" 2>/dev/null \
  || podman inspect --format '{{.State.Healthcheck.Status}}' "adapterd-it-a-$TAG")
check "health status is healthy (got '$STATUS')" test "$STATUS" = healthy

# --------------------------------------------------------------- 6. non-root
UID_IN=$(podman exec "adapterd-it-a-$TAG" id -u)
PID1_UID=$(podman exec "adapterd-it-a-$TAG" awk '/^Uid:/ { print $2 }' /proc/1/status)
check "the container user is not root (id -u: $UID_IN)" test "$UID_IN" = 10001
check "adapterd (pid 1) runs as uid $PID1_UID, not root" test "$PID1_UID" = 10001

# --------------------------------------------- 7. SIGTERM, restart, same scores
podman stop -t 30 "adapterd-it-a-$TAG" >/dev/null 2>>"$WORK/podman-stop.err"
EXIT=$(podman inspect --format '{{.State.ExitCode}}' "adapterd-it-a-$TAG")
podman logs "adapterd-it-a-$TAG" >"$WORK/a.log" 2>&1 || true
check "SIGTERM: exit code 0 (got $EXIT)" test "$EXIT" = 0
check "SIGTERM: the log says SIGTERM received" grep -q "SIGTERM received" "$WORK/a.log"
check "SIGTERM: 'stopped cleanly'" grep -q "stopped cleanly" "$WORK/a.log"

run_server "adapterd-it-b-$TAG" || die "podman run (restart) failed"
wait_serving "adapterd-it-b-$TAG" 180 || die "the restarted container did not start serving"
ctl --json predict --task sentiment --all-scores "${TEXTS[@]}" >"$WORK/predict-after.json" \
  || die "predict after the restart failed"
check "scores after a restart on the same volume are bit-identical" \
  cmp -s "$WORK/predict-before.json" "$WORK/predict-after.json"
podman stop -t 30 "adapterd-it-b-$TAG" >/dev/null 2>>"$WORK/podman-stop.err"

# ------------------------------------------------------------ 8. --cpus 1
if run_server "adapterd-it-c-$TAG" --cpus 1; then
  if wait_serving "adapterd-it-c-$TAG" 180; then
    podman logs "adapterd-it-c-$TAG" >"$WORK/c.log" 2>&1 || true
    log "--cpus 1: $(grep -m1 'intra-op threads' "$WORK/c.log" || echo 'no intra-op threads line')"
    check "--cpus 1: the log has 'intra-op threads: 1'" grep -q "intra-op threads: 1 " "$WORK/c.log"
  else
    echo "image_test: FAIL: the --cpus 1 container did not start serving" >&2; failed=1
  fi
else
  echo "image_test: FAIL: podman run --cpus 1: $(cat "$WORK/adapterd-it-c-$TAG.run.err")" >&2; failed=1
fi
phase_end test "$t"

log "summary: ${PHASES[*]}; image size $SIZE bytes"
if [[ $failed -ne 0 ]]; then
  echo "image_test: FAILED" >&2
  exit 1
fi
log "PASSED"
