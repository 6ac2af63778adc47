#!/usr/bin/env bash
# The chart's wiring, run for real: every pod the rendered chart makes becomes a network
# namespace with its own address on a bridge, the cluster DNS names (StatefulSet/Job pod
# names under their headless Services) come from per-namespace /etc/netns/NAME/hosts, and
# the real binaries start in them with exactly the environment and arguments the chart
# gives each pod (tests/k8s/pod_exec.sh), as the securityContext's user, on a read-only
# root with the chart's volumes. A "kubelet" namespace probes them as the chart's probes
# say. The job must train to completion: every Job pod exits 0, worker 0 leaves a
# checkpoint on the shared checkpoint volume, the data volume was seeded once.
#
#   bash tests/k8s/netns_test.sh SRC_DIR BUILD_DIR      (as root; needs iproute2)
#
# No root or no network namespaces: it fails (exit 1), saying why; it never passes silently.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
[ "$(id -u)" -eq 0 ] || k8s_fail "netns test needs root (it creates network namespaces, mounts and bridges); run ctest as root"
k8s_init "${1:-.}" "${2:-build}"
# Pods must see this directory (not /tmp: each pod has its own /tmp).
rm -rf "$WORK"
mkdir -p "$BUILD/k8s"
WORK=$(mktemp -d "$BUILD/k8s/netns.XXXXXX")
K8S_CLEANUPS=("rm -rf '$WORK'")

RELEASE=dtrain
NAMESPACE=ml
WORKERS=3
SERVERS=2
DEADLINE_S=${DTRAIN_K8S_DEADLINE_S:-180}

# ---- preflight: say exactly what is missing -------------------------------------------
for tool in ip unshare chroot setpriv hostname mount; do
  command -v "$tool" > /dev/null || k8s_fail "netns test needs '$tool' (apt-get install iproute2 util-linux)"
done
for bin in dtrain dtrain-scheduler dtrain-server dtrain-worker dtrain-k8s-grpc-probe; do
  [ -x "$BUILD/bin/$bin" ] || k8s_fail "$BUILD/bin/$bin is not built (build the default target: bash deploy/build.sh)"
done
[ -d /usr/share/datasets/fashion-mnist ] || k8s_fail "the bundled data set is missing (apt-get install dataset-fashion-mnist)"
TAG="dtk$$"
# Leftovers of an earlier run that was killed: its pid is gone.
for ns in $(ip netns list 2> /dev/null | awk '{print $1}' | grep -E '^dtk[0-9]+-' || true); do
  pid=${ns#dtk}
  pid=${pid%%-*}
  if ! kill -0 "$pid" 2> /dev/null; then
    ip netns pids "$ns" 2> /dev/null | xargs -r kill -9 2> /dev/null || true
    ip netns del "$ns" 2> /dev/null || true
    rm -rf "/etc/netns/$ns"
  fi
done
if ! err=$(ip netns add "$TAG-preflight" 2>&1); then
  k8s_fail "cannot create a network namespace ('ip netns add' said: $err); this test needs root with CAP_SYS_ADMIN and netns support"
fi
ip netns del "$TAG-preflight"

HAVE_INFER=false
if [ -x "$BUILD/bin/dtrain-infer" ]; then HAVE_INFER=true; fi
HAVE_METRICS=false
if "$BUILD/bin/dtrain-server" --help 2>&1 | grep -q -- --metrics-port; then HAVE_METRICS=true; fi

# ---- render ----------------------------------------------------------------------------
k8s_build_renderer
k8s_chart_copy
SETS=(
  --set "workers=$WORKERS,servers=$SERVERS,network=mlp,kvStore=dist_sync"
  --set train.numEpochs=1,train.numExamples=6000,train.batchSize=50,train.dispBatches=20
  --set train.registerTimeout=60,train.syncTimeout=60,train.modelName=netns-mlp
  # One LibTorch thread per worker: DTRAIN_THREADS comes from the CPU limit.
  --set worker.resources.limits.cpu=1,worker.resources.requests.cpu=1
  --set "inference.enabled=$HAVE_INFER,inference.watchInterval=1,inference.waitForModel=120"
)
# More --set values for debugging, e.g. DTRAIN_K8S_SET=metrics.enabled=false
if [ -n "${DTRAIN_K8S_SET:-}" ]; then SETS+=(--set "$DTRAIN_K8S_SET"); fi
"$RENDER" -n "$NAMESPACE" "${SETS[@]}" --plan "$WORK/plan" --ip-base 10.244.0. \
  "$RELEASE" "$CHART" > "$WORK/rendered.yaml" || k8s_fail "render failed"
echo "rendered $(grep -c '^kind:' "$WORK/rendered.yaml") objects; pods:"
sed 's/^/  /' "$WORK/plan/pods"

# ---- the network: a bridge in a "node" namespace, one namespace per pod ------------------
NODE="$TAG-node"
declare -A NS IP
k8s_on_exit "ip netns del '$NODE' 2> /dev/null"
ip netns add "$NODE"
ip -n "$NODE" link set lo up
ip -n "$NODE" link add br0 type bridge
ip -n "$NODE" addr add 10.244.0.1/24 dev br0
ip -n "$NODE" link set br0 up
i=0
while read -r pod _kind _workload ip _host; do
  ns="$TAG-$i"
  NS[$pod]=$ns
  IP[$pod]=$ip
  k8s_on_exit "ip netns pids '$ns' 2> /dev/null | xargs -r kill -9 2> /dev/null; ip netns del '$ns' 2> /dev/null; rm -rf '/etc/netns/$ns'"
  ip netns add "$ns"
  mkdir -p "/etc/netns/$ns"
  cp "$WORK/plan/hosts" "/etc/netns/$ns/hosts"
  # No DNS server: names the hosts file lacks fail at once instead of timing out.
  echo "nameserver 127.0.0.1" > "/etc/netns/$ns/resolv.conf"
  ip -n "$NODE" link add "veth$i" type veth peer name eth0 netns "$ns"
  ip -n "$NODE" link set "veth$i" master br0 up
  ip -n "$ns" link set lo up
  ip -n "$ns" addr add "$ip/24" dev eth0
  ip -n "$ns" link set eth0 up
  i=$((i + 1))
done < "$WORK/plan/pods"

# ---- volumes: claims shared by every pod, emptyDirs per pod ------------------------------
VOL="$WORK/volumes"
mkdir -p "$VOL/pvc" "$VOL/pod"
FSGROUP=$(awk '$1 == "fsgroup" {print $2; exit}' "$WORK"/plan/pod/*/c/*/security)
for claim in $(cat "$WORK"/plan/pod/*/c/*/mounts | awk '$2 == "pvc" {print $3}' | sort -u); do
  mkdir -p "$VOL/pvc/$claim"
  # What fsGroup does to a volume: group-owned, group-writable, setgid.
  if [ "$FSGROUP" != - ]; then chgrp "$FSGROUP" "$VOL/pvc/$claim"; fi
  chmod 2775 "$VOL/pvc/$claim"
done
while read -r pod _rest; do
  for dir in $(cat "$WORK"/plan/pod/"$pod"/c/*/mounts | awk '$2 == "emptyDir" {print $3}' | sort -u); do
    mkdir -p "$VOL/pod/$pod/$dir"
    chmod 1777 "$VOL/pod/$pod/$dir"
  done
done < "$WORK/plan/pods"
# The pods' root filesystem is this machine's, read-only; so is the work dir above them.
chmod 755 "$WORK"

# ---- the "image": the built binaries and docker/ (dtrain-seed-data) -----------------------
# The pods run them as the securityContext's user (10001). A build under a home directory
# of mode 700 is not traversable for that user and every container would end "exited 126"
# with nothing said: check as each pod user, and if one cannot run them, stage a copy in
# /var/tmp (which the pods see; /tmp they do not) and say so.
IMAGE_BIN="$BUILD/bin" IMAGE_DOCKER="$SRC/docker"
image_unreadable_by() { # uid: the image paths that uid cannot run or read, or nothing
  local uid=$1 f
  for f in "$IMAGE_BIN"/dtrain "$IMAGE_BIN"/dtrain-scheduler "$IMAGE_BIN"/dtrain-server "$IMAGE_BIN"/dtrain-worker \
    "$IMAGE_DOCKER"/dtrain-seed-data; do
    setpriv --reuid="$uid" --regid="$uid" --clear-groups /usr/bin/test -x "$f" -a -r "$f" 2> /dev/null || echo "$f"
  done
}
POD_UIDS=$(awk '$1 == "uid" && $2 != "-" {print $2}' "$WORK"/plan/pod/*/c/*/security | sort -u)
for uid in $POD_UIDS; do
  missing=$(image_unreadable_by "$uid")
  [ -n "$missing" ] || continue
  if [ "$IMAGE_BIN" = "$BUILD/bin" ]; then
    STAGE=$(mktemp -d /var/tmp/dtrain-k8s-image.XXXXXX)
    k8s_on_exit "rm -rf '$STAGE'"
    chmod 755 "$STAGE"
    mkdir -m 755 "$STAGE/bin"
    cp "$BUILD"/bin/dtrain "$BUILD"/bin/dtrain-* "$STAGE/bin/"
    cp -r "$SRC/docker" "$STAGE/docker"
    chmod -R a+rX "$STAGE"
    echo "note: the pods' user $uid cannot run $(echo "$missing" | head -1) (is a parent directory of mode 700?);" \
      "running the pods from a copy in $STAGE"
    IMAGE_BIN="$STAGE/bin" IMAGE_DOCKER="$STAGE/docker"
    missing=$(image_unreadable_by "$uid")
  fi
  [ -z "$missing" ] || k8s_fail "the pods run as uid $uid, which cannot run or read: $(echo $missing); make the build directory and its parents readable and searchable by that user (chmod o+rx), or build elsewhere"
done

# ---- start every pod: init containers in order, then the main container ------------------
IMAGE_PATH="$IMAGE_BIN:$IMAGE_DOCKER:/usr/local/bin:/usr/bin:/bin"
export DTRAIN_K8S_KEEP_VISIBLE="$SRC:$BUILD"
mkdir -p "$WORK/roots" "$WORK/logs" "$WORK/status"
run_pod() {
  local pod=$1 ns=$2 kind name rc
  while read -r kind name; do
    ip netns exec "$ns" unshare --uts bash "$SRC/tests/k8s/pod_exec.sh" \
      "$WORK/plan" "$pod" "$name" "$VOL" "$WORK/roots" "$IMAGE_PATH" \
      > "$WORK/logs/$pod.$name.log" 2>&1 && rc=0 || rc=$?
    echo "$kind $name $rc" >> "$WORK/status/$pod"
    [ "$rc" -eq 0 ] || return 0 # a failed init container stops the pod
  done < "$WORK/plan/pod/$pod/containers"
}
declare -A PGID
while read -r pod _rest; do
  setsid bash -c "$(declare -f run_pod); WORK='$WORK' SRC='$SRC' VOL='$VOL' IMAGE_PATH='$IMAGE_PATH' run_pod '$pod' '${NS[$pod]}'" &
  PGID[$pod]=$!
  disown
  k8s_on_exit "kill -9 -- -${PGID[$pod]} 2> /dev/null"
done < "$WORK/plan/pods"
start=$(date +%s)

passed=0
failed=0
ok() { echo "ok   $*"; passed=$((passed + 1)); }
bad() { echo "FAIL $*"; failed=$((failed + 1)); }
kubelet() { ip netns exec "$NODE" "$@"; }

# ---- the kubelet's probes, while the job runs --------------------------------------------
probe_once() { # POD KIND PORT [SERVICE|PATH]
  local pod=$1 kind=$2 port=$3 extra=${4:-}
  case "$kind" in
    grpc) kubelet "$BUILD/bin/dtrain-k8s-grpc-probe" "${IP[$pod]}:$port" ${extra:+"${extra/#-/}"} > /dev/null 2>&1 ;;
    tcp) kubelet timeout 1 bash -c "exec 3<>/dev/tcp/${IP[$pod]}/$port" 2> /dev/null ;;
    http) kubelet timeout 2 bash -c "exec 3<>/dev/tcp/${IP[$pod]}/$port; printf 'GET $extra HTTP/1.0\r\n\r\n' >&3; head -1 <&3" 2> /dev/null | grep -q ' 200 ' ;;
    *) return 1 ;;
  esac
}
# Every readiness/liveness probe of a Job pod must succeed while its pod runs.
declare -A PROBED
probe_deadline=$((start + 60))
while [ "$(date +%s)" -lt "$probe_deadline" ]; do
  pending=0
  while read -r pod kind _rest; do
    for cdir in "$WORK/plan/pod/$pod/c"/*; do
      while read -r which ptype port extra; do
        key="$pod/$(basename "$cdir")/$which"
        [ -z "${PROBED[$key]:-}" ] || continue
        if [ "$kind" = Deployment ] && [ "$which" = readiness ]; then continue; fi # needs a checkpoint first
        if [ -s "$WORK/status/$pod" ] && grep -q "^main" "$WORK/status/$pod"; then
          PROBED[$key]="pod exited before its $which probe passed"
          continue
        fi
        if probe_once "$pod" "$ptype" "$port" "$extra"; then PROBED[$key]=ok; else pending=$((pending + 1)); fi
      done < "$cdir/probes"
    done
  done < "$WORK/plan/pods"
  [ "$pending" -gt 0 ] || break
  sleep 0.2
done
for key in $(printf '%s\n' "${!PROBED[@]}" | sort); do
  if [ "${PROBED[$key]}" = ok ]; then ok "probe $key"; else bad "probe $key: ${PROBED[$key]}"; fi
done

if [ "$HAVE_METRICS" = true ] && grep -q DTRAIN_METRICS_PORT "$WORK/rendered.yaml"; then
  while read -r pod kind _rest; do
    port=$(awk '$1 == "metrics" {print $2}' "$WORK/plan/pod/$pod/c"/*/ports | head -1)
    [ -n "$port" ] || continue
    scraped=""
    for _ in $(seq 1 50); do # up to ~10 s: the endpoint starts with the process
      if grep -q "^main" "$WORK/status/$pod" 2> /dev/null; then scraped=exited; break; fi
      if probe_once "$pod" http "$port" /metrics; then scraped=ok; break; fi
      sleep 0.2
    done
    case "$scraped" in
      ok) ok "scrape $pod:$port/metrics" ;;
      exited) echo "note: $pod exited before its /metrics was scraped" ;;
      *) bad "scrape $pod:$port/metrics: no HTTP 200" ;;
    esac
  done < "$WORK/plan/pods"
else
  echo "note: metrics off in this rendering, or the binaries take no --metrics-port; /metrics not scraped"
fi

# ---- the job's end: every Job pod exits, and exits 0 --------------------------------------
job_pods=$(awk '$2 == "Job" {print $1}' "$WORK/plan/pods")
while :; do
  left=0
  for pod in $job_pods; do
    grep -q "^main" "$WORK/status/$pod" 2> /dev/null || left=$((left + 1))
  done
  [ "$left" -gt 0 ] || break
  if [ $(($(date +%s) - start)) -gt "$DEADLINE_S" ]; then
    bad "$left Job pod(s) still running after ${DEADLINE_S}s"
    break
  fi
  sleep 0.5
done
elapsed=$(($(date +%s) - start))
for pod in $job_pods; do
  while read -r kind name rc; do
    if [ "$rc" = 0 ]; then ok "$pod/$name exited 0 ($kind)"; else bad "$pod/$name exited $rc ($kind)"; fi
  done < <(cat "$WORK/status/$pod" 2> /dev/null || echo "main ? running")
done

prefix="$RELEASE-worker"
for ((r = 0; r < WORKERS; r++)); do
  log="$WORK/logs/$prefix-$r.worker.log"
  if grep -q "worker $r .*Training done" "$log" 2> /dev/null; then
    ok "worker $r (pod $prefix-$r) trained to the end: $(grep -o 'Validation-accuracy=[0-9.]*' "$log" | tail -1)"
  else
    bad "worker $r (pod $prefix-$r): no 'Training done' as rank $r"
  fi
done
# dist_sync: after every step all workers hold the same weights.
fnvs=$(cat "$WORK"/logs/"$prefix"-*.worker.log 2> /dev/null | grep -o 'weights-fnv64=[0-9a-f]*' | sort -u || true)
if [ "$(echo "$fnvs" | grep -c .)" -eq 1 ]; then
  ok "all $WORKERS workers end with identical weights ($fnvs)"
else
  bad "workers end with different weights: $(echo "$fnvs" | tr '\n' ' ')"
fi
if grep -q "job over" "$WORK/logs/$RELEASE-scheduler-0.scheduler.log" 2> /dev/null; then
  ok "scheduler saw the job end: $(grep -o 'job over.*' "$WORK/logs/$RELEASE-scheduler-0.scheduler.log" | head -1)"
else
  bad "scheduler never saw the job end"
fi
ckpt="$VOL/pvc/$RELEASE-checkpoints"
if [ -f "$ckpt/netns-mlp-0001.params" ] && [ -f "$ckpt/netns-mlp-symbol.json" ]; then
  ok "checkpoint on the shared volume: $(cd "$ckpt" && ls | tr '\n' ' ')(owner uid $(stat -c %u "$ckpt/netns-mlp-0001.params"))"
else
  bad "no checkpoint netns-mlp-0001.params on the checkpoint claim ($(ls -A "$ckpt" 2> /dev/null | tr '\n' ' '))"
fi
seeded=$(cat "$WORK"/logs/"$prefix"-*.seed-data.log 2> /dev/null | grep -c "copied" || true)
if [ "$seeded" -eq 1 ] && [ "$(ls "$VOL/pvc/$RELEASE-data/fashion-mnist" | wc -l)" -eq 4 ]; then
  ok "data volume seeded once by $WORKERS concurrent init containers"
else
  bad "data seeding: $seeded copies, $(ls "$VOL/pvc/$RELEASE-data" 2> /dev/null | tr '\n' ' ')"
fi

if [ "$HAVE_INFER" = true ]; then
  pod=$(awk '$2 == "Deployment" {print $1; exit}' "$WORK/plan/pods")
  read -r _w ptype port svc < <(grep '^readiness' "$WORK/plan/pod/$pod/c"/*/probes)
  ready=""
  for _ in $(seq 1 100); do
    if probe_once "$pod" "$ptype" "$port" "$svc"; then ready=1; break; fi
    sleep 0.3
  done
  if [ -n "$ready" ]; then ok "inference ($pod) Ready on the newest checkpoint"; else bad "inference ($pod) never Ready"; fi
else
  echo "note: dtrain-infer is not built; the inference Deployment was not run"
fi

if [ "$failed" -gt 0 ]; then
  for f in "$WORK"/logs/*.log; do
    echo "---- $(basename "$f" .log) (last 30 lines)"
    tail -30 "$f" | sed 's/^/  | /'
  done
else
  echo "---- worker 0's log (last 5 lines)"
  tail -5 "$WORK/logs/$prefix-0.worker.log" | sed 's/^/  | /'
fi
echo "training took ${elapsed}s in $(wc -l < "$WORK/plan/pods") emulated pods"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
