#!/usr/bin/env bash
# The seed users' cluster, in real containers: a podman bridge network of its own, the
# scheduler, 2 servers and 2 workers each in its own container of the dtrain image, with
# the environment and arguments the chart gives each pod (helm/dtrain/templates/_pods.tpl,
# _helpers.tpl "dtrain.clusterEnv": DTRAIN_ROLE, DTRAIN_RANK, DTRAIN_NODE_HOST = the
# container's address, ...), training LeNet on the image's bundled Fashion-MNIST, seeded
# into a shared data directory as the chart's init container does.
#   1. plain    the job runs uninterrupted; worker 0 prints weights-fnv64=...
#   2. restart  the same job; once worker 1 logged batch KILL_BATCH, `podman kill` of its
#               container (exit 137) and `podman start` of the same container (as the
#               kubelet restarts a pod's container); it rejoins as its rank and the job ends
#               with the plain run's weights.
#   3. infer    dtrain-infer in a container serves the restart run's checkpoint on a
#               published port; `dtrain predict` on the host classifies t10k images there.
# Every container exits 0, and the network, the containers and the data are removed on
# exit, whatever happens (the image too when this script built it).
#
#   bash tests/container/cluster_test.sh SRC_DIR BUILD_DIR [IMAGE]     (as root)
#
# IMAGE: an image built by docker/build-image.sh; without it, one is built from
# BUILD_DIR/bin (--prebuilt, ~2-6 min) and removed at the end. Knobs (environment):
# DTRAIN_CT_EXAMPLES (3000), DTRAIN_CT_EPOCHS (2), DTRAIN_CT_KILL_BATCH (10),
# DTRAIN_CT_DEADLINE_S (300, per run).
set -euo pipefail
SRC=$(cd "${1:?usage: cluster_test.sh SRC_DIR BUILD_DIR [IMAGE]}" && pwd)
BUILD=$(cd "${2:?usage: cluster_test.sh SRC_DIR BUILD_DIR [IMAGE]}" && pwd)
IMAGE=${3:-}
. "$SRC/docker/containers.sh"
containers_preflight podman runc buildah
# The host's `dtrain` (health, predict), the one binary here that runs outside a container.
[ -x "$BUILD/bin/dtrain" ] || containers_fail "$BUILD/bin/dtrain is not built (bash deploy/build.sh)"
EXAMPLES=${DTRAIN_CT_EXAMPLES:-3000}
EPOCHS=${DTRAIN_CT_EPOCHS:-2}
KILL_BATCH=${DTRAIN_CT_KILL_BATCH:-10}
DEADLINE_S=${DTRAIN_CT_DEADLINE_S:-300}
read -r -a RUN_FLAGS <<< "$(containers_run_flags)"
T0=$(date +%s)
step() { echo "[$(($(date +%s) - T0))s] $*"; }
ok() { echo "ok   $*"; }

TAG=dtct$$
WORK=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-cluster.XXXXXX")
NET=$TAG
CONTAINERS=()
BUILT_IMAGE=""
cleanup() {
  local c
  for c in "${CONTAINERS[@]}"; do podman rm -f -t 0 "$c" > /dev/null 2>&1 || true; done
  podman network rm -f "$NET" > /dev/null 2>&1 || true
  [ -z "$BUILT_IMAGE" ] || podman rmi -f "$BUILT_IMAGE" > /dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 143' TERM INT
# Leftovers of an earlier run that was killed (SIGKILL skips the trap): its pid is gone.
for n in $(podman network ls --format '{{.Name}}' | grep -E '^dtct[0-9]+$' || true); do
  if ! kill -0 "${n#dtct}" 2> /dev/null; then
    podman ps -a --format '{{.Names}}' | grep -E "^$n-" | xargs -r podman rm -f -t 0 > /dev/null 2>&1 || true
    podman network rm -f "$n" > /dev/null 2>&1 || true
  fi
done

if [ -z "$IMAGE" ]; then
  IMAGE=localhost/dtrain:$TAG
  BUILT_IMAGE=$IMAGE
  step "building $IMAGE from $BUILD/bin"
  bash "$SRC/docker/build-image.sh" --prebuilt "$BUILD" --tag "$IMAGE" > "$WORK/build-image.log" 2>&1 ||
    { tail -30 "$WORK/build-image.log"; containers_fail "docker/build-image.sh failed"; }
fi
podman image exists "$IMAGE" || containers_fail "no image $IMAGE"

# ---- the network: a bridge of its own, an address per container ------------------------
podman network create "$NET" > /dev/null || containers_fail "podman network create $NET failed"
subnet=$(podman network inspect "$NET" --format '{{range .Subnets}}{{.Subnet}}{{end}}')
[[ "$subnet" =~ ^([0-9]+\.[0-9]+\.[0-9]+)\.0/24$ ]] || containers_fail "network $NET: unexpected subnet '$subnet'"
NETPFX=${BASH_REMATCH[1]}
step "network $NET: $subnet"
ip_of() { # ROLE RANK: the address the container of that pod gets
  case "$1" in scheduler) echo "$NETPFX.2" ;; server) echo "$NETPFX.$((10 + $2))" ;;
    worker) echo "$NETPFX.$((20 + $2))" ;; infer) echo "$NETPFX.30" ;; esac
}

# The chart's volumes: the data claim (seeded once, mounted read-only by workers) and a
# checkpoint claim per run, owned by the pods' user (fsGroup 10001).
mkdir -p "$WORK/data" "$WORK/ckpt-plain" "$WORK/ckpt-restart"
chown 10001:10001 "$WORK/data" "$WORK/ckpt-plain" "$WORK/ckpt-restart"
CONTAINERS+=("$TAG-seed")
podman run --name "$TAG-seed" "${RUN_FLAGS[@]}" --network none -v "$WORK/data:/data" \
  -e DTRAIN_DATA_DIR=/data/fashion-mnist --entrypoint dtrain-seed-data "$IMAGE" > "$WORK/seed.log" 2>&1 ||
  { cat "$WORK/seed.log"; containers_fail "seeding the data directory failed"; }
ok "the data directory was seeded from the image ($(ls "$WORK/data/fashion-mnist" | wc -l) files)"

# ---- one training job: 5 containers --------------------------------------------------------
pod() { # RUN ROLE RANK: starts that pod's container as the chart would (dtrain run)
  local run=$1 role=$2 rank=$3 name="$TAG-$1-$2-$3" env=() args=() mounts=()
  env=(-e DTRAIN_ROLE="$role" -e DTRAIN_SCHEDULER_ADDR="$(ip_of scheduler 0):9091"
    -e DTRAIN_NUM_WORKERS=2 -e DTRAIN_NUM_SERVERS=2 -e DTRAIN_KV_STORE=dist_sync
    -e DTRAIN_REGISTER_TIMEOUT=60 -e DTRAIN_JOB_ID="$TAG-$run" -e DTRAIN_REJOIN_TIMEOUT=120)
  if [ "$role" != scheduler ]; then
    env+=(-e DTRAIN_RANK="$rank" -e DTRAIN_NODE_HOST="$(ip_of "$role" "$rank")" -e DTRAIN_SYNC_TIMEOUT=60)
  fi
  case "$role" in
    scheduler) env+=(-e DTRAIN_PORT=9091 -e DTRAIN_HEARTBEAT_TIMEOUT=10); args=(--exit-grace=15) ;;
    server) env+=(-e DTRAIN_PORT=9092) ;;
    worker)
      env+=(-e DTRAIN_THREADS=1)
      mounts=(-v "$WORK/data:/data:ro" -v "$WORK/ckpt-$run:/checkpoints")
      args=(--network=lenet --num-epochs="$EPOCHS" --batch-size=64 --lr=0.05 --mom=0.9 --wd=0.0001
        --num-examples="$EXAMPLES" --disp-batches=5 --seed=42
        --data-dir=/data/fashion-mnist --model-prefix=/checkpoints/fmnist-lenet) ;;
  esac
  CONTAINERS+=("$name")
  podman run -d --name "$name" "${RUN_FLAGS[@]}" --network "$NET" --ip "$(ip_of "$role" "$rank")" \
    "${mounts[@]}" "${env[@]}" "$IMAGE" run "${args[@]}" > "$WORK/$name.start" 2>&1 ||
    { cat "$WORK/$name.start"; containers_fail "cannot start $name"; }
}
start_job() { # RUN
  pod "$1" scheduler 0
  pod "$1" server 0
  pod "$1" server 1
  pod "$1" worker 0
  pod "$1" worker 1
}
state_of() { podman inspect --format '{{.State.Status}} {{.State.ExitCode}}' "$1" 2> /dev/null || echo "missing -1"; }
show_logs() { # RUN
  local c
  for c in "$TAG-$1"-{scheduler-0,server-0,server-1,worker-0,worker-1}; do
    echo "---- $c ($(state_of "$c")), last lines:"
    podman logs "$c" 2>&1 | tail -15 | sed 's/^/  | /'
  done
}
await_job() { # RUN: every container exits 0 within DEADLINE_S
  local run=$1 deadline=$(($(date +%s) + DEADLINE_S)) c s running
  while :; do
    running=""
    for c in "$TAG-$run"-{scheduler-0,server-0,server-1,worker-0,worker-1}; do
      s=$(state_of "$c")
      case "$s" in
        "exited 0") ;;
        exited*) show_logs "$run"; containers_fail "$run: $c exited with status ${s#exited }" ;;
        *) running+=" ${c#"$TAG-$run-"}" ;;
      esac
    done
    [ -n "$running" ] || return 0
    if [ "$(date +%s)" -ge "$deadline" ]; then
      show_logs "$run"
      containers_fail "$run: still running after ${DEADLINE_S}s:$running"
    fi
    sleep 1
  done
}
fnv_of() { # RUN: worker 0's final weights-fnv64
  podman logs "$TAG-$1-worker-0" 2>&1 | grep -o 'weights-fnv64=[0-9a-f]*' | tail -1 | cut -d= -f2
}

step "plain: scheduler, 2 servers, 2 workers; LeNet, $EPOCHS epochs of $EXAMPLES examples"
t=$(date +%s)
start_job plain
await_job plain
PLAIN_FNV=$(fnv_of plain)
[ -n "$PLAIN_FNV" ] || { show_logs plain; containers_fail "plain: worker 0 printed no weights-fnv64"; }
ok "plain: every container exited 0 in $(($(date +%s) - t))s; weights-fnv64=$PLAIN_FNV"

step "restart: the same job; worker 1's container killed at batch $KILL_BATCH and started again"
t=$(date +%s)
start_job restart
victim="$TAG-restart-worker-1"
deadline=$(($(date +%s) + DEADLINE_S))
until podman logs "$victim" 2>&1 | grep -q "Epoch\[0\] Batch \[$KILL_BATCH\]"; do
  [ "$(state_of "$victim")" = "running 0" ] || { show_logs restart; containers_fail "restart: worker 1 ended before batch $KILL_BATCH: no restart exercised"; }
  [ "$(date +%s)" -lt "$deadline" ] || { show_logs restart; containers_fail "restart: worker 1 did not log batch $KILL_BATCH within ${DEADLINE_S}s"; }
  sleep 0.2
done
podman kill -s KILL "$victim" > /dev/null
# A SIGKILLed container exits at once; 30 s is a deadline, not an expectation (the state
# check below names what it found if it did not).
timeout 30 podman wait "$victim" > /dev/null 2>&1 || true
[ "$(state_of "$victim")" = "exited 137" ] || containers_fail "restart: worker 1 after podman kill: $(state_of "$victim"), not exited 137"
ok "worker 1's container was killed at batch $KILL_BATCH (exit 137)"
podman start "$victim" > "$WORK/restart.log" 2>&1 || { cat "$WORK/restart.log"; containers_fail "podman start $victim failed"; }
await_job restart
RESTART_FNV=$(fnv_of restart)
# The container ran twice and its log holds both lives: the second rejoined the job as
# rank 1 and resumed mid-epoch.
victim_log=$(podman logs "$victim" 2>&1)
echo "$victim_log" | grep -q "rejoined the job $TAG-restart" ||
  { show_logs restart; containers_fail "restart: worker 1's second life did not log 'rejoined the job $TAG-restart'"; }
ok "worker 1's container, started again, $(echo "$victim_log" | grep -o "rejoined the job [^:]*" | head -1) and $(echo "$victim_log" | grep -o "resuming at epoch [0-9]* batch [0-9]*" | head -1)"
if [ "$RESTART_FNV" = "$PLAIN_FNV" ]; then
  ok "restart: every container exited 0 in $(($(date +%s) - t))s; the weights equal the plain run's (weights-fnv64=$RESTART_FNV)"
else
  show_logs restart
  containers_fail "restart: weights-fnv64=${RESTART_FNV:-none}, but the uninterrupted run ended with $PLAIN_FNV"
fi

# ---- inference: the checkpoint served from a container, classified from the host ------
step "infer: dtrain-infer serving the restart run's checkpoint on a published port"
host_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
CONTAINERS+=("$TAG-infer")
podman run -d --name "$TAG-infer" "${RUN_FLAGS[@]}" --network "$NET" --ip "$(ip_of infer 0)" \
  -p "127.0.0.1:$host_port:50051" -v "$WORK/ckpt-restart:/checkpoints:ro" --entrypoint dtrain-infer "$IMAGE" \
  --model-prefix=/checkpoints/fmnist-lenet --port=50051 --wait-for-model=60 > "$WORK/infer.start" 2>&1 ||
  { cat "$WORK/infer.start"; containers_fail "cannot start the inference container"; }
deadline=$(($(date +%s) + 60))
until "$BUILD/bin/dtrain" health --addr="127.0.0.1:$host_port" --timeout=2 > /dev/null 2>&1; do
  [ "$(date +%s)" -lt "$deadline" ] || { podman logs "$TAG-infer" 2>&1 | tail -20; containers_fail "infer: not SERVING on 127.0.0.1:$host_port within 60 s"; }
  sleep 0.5
done
d=/usr/share/datasets/fashion-mnist
[ -f "$d/t10k-images-idx3-ubyte.gz" ] || d="$WORK/data/fashion-mnist"
"$BUILD/bin/dtrain" predict --server "127.0.0.1:$host_port" --images "$d/t10k-images-idx3-ubyte.gz" \
  --labels "$d/t10k-labels-idx1-ubyte.gz" --limit 200 > "$WORK/predict.log" 2>&1 ||
  { tail -20 "$WORK/predict.log"; containers_fail "dtrain predict through 127.0.0.1:$host_port failed"; }
acc=$(grep -o 'accuracy=[0-9.]*' "$WORK/predict.log" | cut -d= -f2)
# LeNet after this job classifies far above chance (10%); the figure is deterministic,
# the weights being the plain run's.
awk -v a="${acc:-0}" 'BEGIN { exit !(a >= 0.5) }' ||
  { tail -5 "$WORK/predict.log"; containers_fail "dtrain predict: accuracy ${acc:-none} on 200 t10k images, expected >= 0.5"; }
ok "infer: dtrain predict on the host classified 200 t10k images through port $host_port: accuracy=$acc"
echo "container cluster test passed in $(($(date +%s) - T0))s"
