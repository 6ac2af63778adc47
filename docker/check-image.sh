#!/usr/bin/env bash
# Checks a built dtrain image in real containers (podman, runc): it holds every binary and
# they find their libraries; it has no compiler or -dev package; it runs as a non-root
# user; it trains one small epoch on the bundled Fashion-MNIST, serves the checkpoint with
# dtrain-infer and draws `dtrain predict`'s captioned grid, all three opening no library
# they do not link; and its HEALTHCHECK, run by podman, answers as it should.
#
#   bash docker/check-image.sh [IMAGE]        (as root; default dtrain:0.1.0)
#
# The same checks whichever stage the binaries came from (docker/Dockerfile's BINARIES).
# Leaves nothing behind: the containers it starts are removed on exit, the image is kept.
set -euo pipefail
cd "$(dirname "$0")/.."
. docker/containers.sh
IMAGE=${1:-dtrain:0.1.0}
containers_preflight podman runc
podman image exists "$IMAGE" || containers_fail "no image $IMAGE (bash docker/build-image.sh)"
read -r -a RUN_FLAGS <<< "$(containers_run_flags)"
T0=$(date +%s)
NAME=dtrain-check-$$
CONTAINERS=()
LOG=$(mktemp "${TMPDIR:-/tmp}/dtrain-check.XXXXXX")
cleanup() {
  local c
  for c in "${CONTAINERS[@]}"; do podman rm -f -t 0 "$c" > /dev/null 2>&1 || true; done
  rm -f "$LOG"
}
trap cleanup EXIT
trap 'exit 143' TERM INT

check() { # DESCRIPTION COMMAND: COMMAND in the check container, as the image's user
  local out
  if out=$(podman exec "$NAME" /bin/sh -c "$2" 2>&1); then
    echo "ok   $1"
  else
    echo "$out" | tail -20 | sed 's/^/  | /'
    containers_fail "$1"
  fi
}

# ---- the image's configuration ----------------------------------------------------------
user=$(podman image inspect --format '{{.Config.User}}' "$IMAGE")
[ -n "$user" ] && [ "${user%%:*}" != 0 ] && [ "${user%%:*}" != root ] ||
  containers_fail "the image must not run as root (USER is '${user}')"
echo "ok   USER is $user"
podman image inspect --format '{{json .HealthCheck}}' "$IMAGE" | grep -q '"Test"' ||
  containers_fail "the image has no HEALTHCHECK (built with --format oci? it keeps none)"
echo "ok   the image has a HEALTHCHECK"

# ---- inside a container of the image -----------------------------------------------------
# One container that waits, the checks exec'd into it in turn, as the image's user.
CONTAINERS+=("$NAME")
# podman's own messages go to a log, shown when it fails: where no systemd runs, every
# start of a container with a HEALTHCHECK logs that its timer could not be set up.
podman run -d --name "$NAME" "${RUN_FLAGS[@]}" --network none --entrypoint sleep "$IMAGE" infinity > "$LOG" 2>&1 ||
  { cat "$LOG"; containers_fail "cannot start a container of $IMAGE"; }
check "runs as uid 10001" 'test "$(id -u)" = 10001'
check "every binary is there" \
  'for b in dtrain dtrain-scheduler dtrain-server dtrain-worker dtrain-infer dtrain-seed-data; do command -v $b; done'
check "every binary finds its libraries" '! ldd /opt/dtrain/bin/* 2>/dev/null | grep "not found"'
check "no compiler, no -dev packages (runtime libraries only)" \
  '! command -v c++ && ! command -v cc && ! command -v cmake && ! dpkg-query -W -f "\${Package}\n" | grep -- "-dev$"'
check "dtrain run execs the role's binary" 'DTRAIN_ROLE=worker dtrain run --help | grep -q -- --kv-store'
check "bundled Fashion-MNIST seeds a data directory" \
  'DTRAIN_DATA_DIR=/tmp/data/fashion-mnist dtrain-seed-data && test "$(ls /tmp/data/fashion-mnist | wc -l)" = 4'
# The image carries the libraries the binaries load (ldd's closure), not their packages:
# these run under LD_DEBUG=files, and a library opened at run time (dlopen) fails the check
# after them. (LeNet: its convolutions are oneDNN's, which looks for libJitPI.so, VTune's
# profiling hook; no Debian package has it, so it is not found with the packages either.)
check "trains one small epoch on the bundled data and checkpoints" \
  'LD_DEBUG=files LD_DEBUG_OUTPUT=/tmp/ld-files dtrain-worker --kv-store local --network lenet --num-epochs 1 \
     --num-examples 600 --threads 1 --data-dir /tmp/data/fashion-mnist --model-prefix /tmp/model/lenet &&
   test -f /tmp/model/lenet-0001.params'
check "dtrain-infer serves it; dtrain predict scores t10k images and draws the grid with captions" \
  'LD_DEBUG=files LD_DEBUG_OUTPUT=/tmp/ld-files dtrain-infer --model-prefix /tmp/model/lenet --epoch 1 \
     --host 127.0.0.1 --port-file /tmp/infer.port > /tmp/infer.log 2>&1 & p=$!;
   for i in $(seq 100); do [ -s /tmp/infer.port ] && break; sleep 0.2; done; d=/tmp/data/fashion-mnist;
   LD_DEBUG=files LD_DEBUG_OUTPUT=/tmp/ld-files dtrain predict --server 127.0.0.1:$(cat /tmp/infer.port) \
     --images $d/t10k-images-idx3-ubyte.gz --labels $d/t10k-labels-idx1-ubyte.gz --limit 20 \
     --render /tmp/grid.png > /tmp/predict.log 2>&1; rc=$?; kill $p; cat /tmp/predict.log;
   [ $rc = 0 ] && grep -q "of 20 right" /tmp/predict.log && ! grep -q "Fontconfig error" /tmp/predict.log &&
   test -s /tmp/grid.png'
check "they open no library at run time beyond what they link (no dlopen under LD_DEBUG=files)" \
  'ls /tmp/ld-files.* > /dev/null || exit 1; opened=$(grep -h "dynamically loaded" /tmp/ld-files.* |
     sed "s/.*file=\([^ ]*\) .*/\1/" | sort -u | grep -vx libJitPI.so);
   [ -z "$opened" ] || { echo "dlopen()ed at run time:" $opened; exit 1; }'

# ---- HEALTHCHECK, run by podman in containers that run as a pod would -------------------
healthcheck() { # CONTAINER: podman's verdict, "healthy" or "unhealthy"
  if podman healthcheck run "$1" > /dev/null 2>&1; then echo healthy; else echo unhealthy; fi
}
start() { # NAME PODMAN-RUN-ARGS...: a detached container of the image
  local n=$1
  shift
  CONTAINERS+=("$n")
  podman run -d --name "$n" "${RUN_FLAGS[@]}" --network none "$@" > "$LOG" 2>&1 ||
    { cat "$LOG"; containers_fail "cannot start $n"; }
}
start "$NAME-worker" --entrypoint sleep "$IMAGE" infinity
[ "$(healthcheck "$NAME-worker")" = healthy ] || containers_fail "HEALTHCHECK: unhealthy with no DTRAIN_PORT (a worker)"
echo "ok   HEALTHCHECK: healthy where there is no port to ask (a worker)"
start "$NAME-noport" -e DTRAIN_PORT=9 --entrypoint sleep "$IMAGE" infinity
[ "$(healthcheck "$NAME-noport")" = unhealthy ] || containers_fail "HEALTHCHECK: healthy although nothing answers on DTRAIN_PORT"
echo "ok   HEALTHCHECK: unhealthy when nothing answers on DTRAIN_PORT"
# The scheduler as the chart starts it: `dtrain run` with DTRAIN_ROLE.
start "$NAME-scheduler" -e DTRAIN_ROLE=scheduler -e DTRAIN_PORT=19091 -e DTRAIN_NUM_WORKERS=1 \
  -e DTRAIN_NUM_SERVERS=1 "$IMAGE" run
state=unhealthy
for _ in $(seq 50); do
  state=$(healthcheck "$NAME-scheduler")
  [ "$state" = healthy ] && break
  sleep 0.2
done
[ "$state" = healthy ] || {
  podman logs "$NAME-scheduler" 2>&1 | tail -20 | sed 's/^/  | /'
  containers_fail "HEALTHCHECK: the scheduler serving on DTRAIN_PORT was not healthy within 10 s"
}
echo "ok   HEALTHCHECK: healthy when the scheduler serves on DTRAIN_PORT"
echo "image $IMAGE: $(podman image ls --format '{{.Size}}' "$IMAGE" | head -1); checks passed in $(($(date +%s) - T0))s"
