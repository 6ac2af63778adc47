#!/usr/bin/env bash
# dtrain against PyTorch DDP/gloo on an emulated cluster: every process on its own host (a
# network namespace with its own address on a bridge), every host's link limited to
# --rate in both directions (tc tbf), optionally one worker's CPU limited by a cgroup
# quota. dtrain runs first (scheduler with server 0, each server and worker on its own
# host), then the reference (/usr/bin/python3 tests/bench/torch_reference.py, one rank
# per worker host, over the same links); the result is dtrain's samples/s as a ratio to
# the reference's from the same run.
#
#   bash tests/bench/netns_cluster.sh [options] [-- more dtrain-worker flags]   (as root)
#   bash tests/bench/netns_cluster.sh clean      remove what a SIGKILLed run left behind
# Options (defaults in brackets):
#   --rate R          link rate each way: 1gbit, 250mbit, 10gbit, ... or none [1gbit]
#   --network N       lenet or mlp [lenet];   --hidden W   mlp widths, e.g. 2048,2048
#   --workers N [2]   --servers N [2]   --threads T [1]   --batch B [64]   --epochs E [1]
#   --num-examples N  training examples in all (0: the whole set) [0]
#   --kv-store M      dtrain's mode [dist_sync]
#   --cc NAME         every host's TCP congestion control (cubic, bbr, reno) [the machine's]
#   --straggler-cpu C worker N-1 (and the reference's last rank) limited to C cores (0.33)
#   --only dtrain|torch   run one side only (no ratio)
#   --deadline S      seconds each side may take [900]
#   --logs DIR        keep every process's log in DIR (default: a temp dir, removed)
#   --link-trace      sample each host's link every 2 ms while a side runs; print how
#                     much of the time each direction was in use (link_trace.py; the
#                     samples stay in the logs' directory as links-<side>-<host>.txt)
# Environment: BIN (the binaries), NB_SYSCTLS ("key=value ..." set in every host's namespace,
# commas standing for spaces: net.ipv4.tcp_wmem=4096,16384,262144).
# Prints one line per side and, last, one "RESULT key=value ..." line.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BIN=${BIN:-$ROOT/build/bin}
REF=${REF:-$HERE/torch_reference.py}
PY=${PY:-/usr/bin/python3}
REF_FLAGS=${REF_FLAGS:-}
. "$HERE/netns_lib.sh"

usage() {
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
}

if [ "${1:-}" = clean ]; then
  nb_init
  echo "netns: nothing of earlier runs is left"
  exit 0
fi

RATE=1gbit NETWORK=lenet HIDDEN="" WORKERS=2 SERVERS=2 THREADS=1 BATCH=64 EPOCHS=1 EXAMPLES=0
KV=dist_sync NB_CC="" LINK_TRACE="" STRAGGLER="" ONLY=both DEADLINE=900 LOGS=""
EXTRA=()
while [ $# -gt 0 ]; do
  case "$1" in --) ;; -h | --help) ;; --link-trace) LINK_TRACE=1; shift; continue ;; *) [ $# -ge 2 ] || { echo "netns_cluster.sh: $1 needs a value" >&2; exit 2; } ;; esac
  case "$1" in
    --rate) RATE=$2 ;;
    --network) NETWORK=$2 ;;
    --hidden) HIDDEN=$2 ;;
    --workers) WORKERS=$2 ;;
    --servers) SERVERS=$2 ;;
    --threads) THREADS=$2 ;;
    --batch) BATCH=$2 ;;
    --epochs) EPOCHS=$2 ;;
    --num-examples) EXAMPLES=$2 ;;
    --kv-store) KV=$2 ;;
    --cc) NB_CC=$2 ;;
    --straggler-cpu) STRAGGLER=$2 ;;
    --only) ONLY=$2 ;;
    --deadline) DEADLINE=$2 ;;
    --logs) LOGS=$2 ;;
    --) shift; EXTRA=("$@"); break ;;
    -h | --help) usage ;;
    *) echo "netns_cluster.sh: unknown option '$1'" >&2; usage ;;
  esac
  shift 2
done
case "$ONLY" in both | dtrain | torch) ;; *) echo "--only: dtrain, torch or both" >&2; exit 2 ;; esac
[ "$RATE" = none ] || nb_rate_bits "$RATE" > /dev/null
for n in WORKERS SERVERS THREADS BATCH EPOCHS EXAMPLES DEADLINE; do
  [[ "${!n}" =~ ^[0-9]+$ ]] || { echo "--${n,,}: '${!n}' is not a number" >&2; exit 2; }
done
[ "$WORKERS" -ge 1 ] && [ "$SERVERS" -ge 1 ] || { echo "need at least one worker and one server" >&2; exit 2; }
if [ "$ONLY" != torch ]; then
  for b in dtrain-scheduler dtrain-server dtrain-worker; do
    [ -x "$BIN/$b" ] || nb_fail "$BIN/$b is not built (cmake --build build --target $b, or set BIN)"
  done
fi
if [ "$ONLY" != dtrain ]; then
  [ -f "$REF" ] || nb_fail "the reference $REF is missing (set REF)"
  "$PY" -c 'import torch' 2> /dev/null || nb_fail "$PY cannot import torch (apt-get install python3-torch)"
fi

nb_init
if [ -n "$LOGS" ]; then
  mkdir -p "$LOGS"
  NB_LOGS=$(cd "$LOGS" && pwd)
else
  NB_LOGS=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-netns.XXXXXX")
  nb_on_exit "rm -rf '$NB_LOGS'"
fi

# Hosts: servers 0..S-1 (the scheduler on server 0's), then workers 0..W-1; the
# reference's rank r runs on worker r's host.
nb_network $((SERVERS + WORKERS)) "$RATE"
server_host() { echo "$1"; }
worker_host() { echo $((SERVERS + $1)); }
hosts=""
for ((i = 0; i < SERVERS; i++)); do hosts+="${hosts:+, }server $i ${NB_IP[$i]}"; done
for ((i = 0; i < WORKERS; i++)); do hosts+=", worker $i ${NB_IP[$(worker_host "$i")]}"; done
echo "netns: run $NB_TAG: hosts $hosts (the scheduler on server 0's); $([ "$RATE" = none ] && echo "links not limited" || echo "each link $RATE both ways (tbf)")${STRAGGLER:+; worker $((WORKERS - 1)) limited to $STRAGGLER CPU}"

[ "$RATE" = none ] || echo "netns: each host's eth0 and its bridge port: $(ip netns exec "${NB_NS[0]}" tc qdisc show dev eth0 | head -1)"
model=(--network "$NETWORK")
[ -z "$HIDDEN" ] || model+=(--hidden "$HIDDEN")
bytes_before() { local i; for ((i = 0; i < SERVERS + WORKERS; i++)); do LINK0[i]=$(nb_link_bytes "$i"); done; }
link_summary() { # what each host sent over its link since bytes_before, in MB
  local i out=""
  for ((i = 0; i < SERVERS + WORKERS; i++)); do
    out+="${out:+, }$(awk -v a="${LINK0[i]}" -v b="$(nb_link_bytes "$i")" 'BEGIN { printf "%.1f", (b - a) / 1e6 }')"
  done
  echo "$out"
}
declare -a LINK0=()

start_worker_like() { # HOST NAME CMD...: limited when NAME is the straggler
  local h=$1 name=$2
  shift 2
  if [ -n "$STRAGGLER" ] && [ "$name" = "$STRAGGLER_NAME" ]; then
    nb_start_limited "$h" "$STRAGGLER" "$name" "$@"
  else
    nb_start "$h" "$name" "$@"
  fi
}

straggler_note() { # WHO
  [ -n "$STRAGGLER" ] || return 0
  echo "straggler: $1 ran in cgroup $NB_CGROUP_ROOT/dtrain-netns-$$/$STRAGGLER_NAME at $STRAGGLER CPU:" \
    "$(nb_cgroup_throttling "$STRAGGLER_NAME")"
}

# --link-trace: a sampler in each host's namespace while one side runs.
trace_start() { # SIDE
  [ -n "$LINK_TRACE" ] || return 0
  local i
  for ((i = 0; i < SERVERS + WORKERS; i++)); do
    nb_start "$i" "links-$1-h$i" "$PY" "$HERE/link_trace.py" sample "$NB_LOGS/links-$1-$(host_name "$i").txt"
  done
}
trace_stop() { # SIDE
  [ -n "$LINK_TRACE" ] || return 0
  local i files=()
  for ((i = 0; i < SERVERS + WORKERS; i++)); do
    kill -TERM "${NB_PID[links-$1-h$i]}" 2> /dev/null || true
    wait "${NB_PID[links-$1-h$i]}" 2> /dev/null || true
    files+=("$(host_name "$i")=$NB_LOGS/links-$1-$(host_name "$i").txt")
  done
  [ "$RATE" != none ] || { echo "$1 links: not limited, no rate to compare with (samples in $NB_LOGS)"; return 0; }
  echo "$1 $("$PY" "$HERE/link_trace.py" summary "$(nb_rate_bits "$RATE")" "${files[@]}")"
}
host_name() { # I: server<i> or worker<i>
  if [ "$1" -lt "$SERVERS" ]; then echo "server$1"; else echo "worker$(($1 - SERVERS))"; fi
}

DTRAIN_SPS="" TORCH_SPS=""
run_dtrain() {
  local port=9091 sched="${NB_IP[0]}" i names=() w
  STRAGGLER_NAME="worker$((WORKERS - 1))"
  bytes_before
  local env=(env DMLC_PS_ROOT_URI="$sched" DMLC_PS_ROOT_PORT="$port" DMLC_NUM_WORKER="$WORKERS"
    DMLC_NUM_SERVER="$SERVERS" DTRAIN_REGISTER_TIMEOUT=120)
  trace_start dtrain
  nb_start 0 scheduler "${env[@]}" "$BIN/dtrain-scheduler" --port "$port" --kv-store "$KV"
  for ((i = 0; i < SERVERS; i++)); do
    nb_start "$(server_host "$i")" "server$i" "${env[@]}" DMLC_SERVER_ID="$i" "$BIN/dtrain-server"
    names+=("server$i")
  done
  local flags=(--kv-store "$KV" "${model[@]}" --batch-size "$BATCH" --num-epochs "$EPOCHS" --threads "$THREADS"
    --disp-batches 100000 "${EXTRA[@]}")
  [ "$EXAMPLES" -eq 0 ] || flags+=(--num-examples "$EXAMPLES")
  for ((w = 0; w < WORKERS; w++)); do
    start_worker_like "$(worker_host "$w")" "worker$w" "${env[@]}" DMLC_WORKER_ID="$w" "$BIN/dtrain-worker" "${flags[@]}"
    names+=("worker$w")
  done
  local n bad=""
  nb_wait "$DEADLINE" "the dtrain job (scheduler at $sched:$port)" scheduler "${names[@]}" || true
  trace_stop dtrain
  straggler_note "worker $((WORKERS - 1))"
  for n in scheduler "${names[@]}"; do [ "${NB_RC[$n]:-}" = 0 ] || bad+=" $n(${NB_RC[$n]:+exit }${NB_RC[$n]:-running})"; done
  if [ -n "$bad" ]; then
    for n in scheduler "${names[@]}"; do echo "---- $n"; tail -15 "$NB_LOGS/$n.log"; done >&2
    nb_fail "dtrain processes failed:$bad"
  fi
  # Every worker reached the scheduler and the servers over its namespace's address.
  for ((w = 0; w < WORKERS; w++)); do
    grep -q "${NB_IP[$(worker_host "$w")]}" "$NB_LOGS/worker$w.log" "$NB_LOGS/scheduler.log" ||
      nb_fail "worker $w's address ${NB_IP[$(worker_host "$w")]} appears in neither its log nor the scheduler's"
  done
  DTRAIN_SPS=$(cat "$NB_LOGS"/worker*.log | grep -o 'Training done.*([0-9.]* samples/sec)' | grep -o '([0-9.]* samples/sec)' |
    tr -d '(' | awk '{s += $1} END {printf "%.1f", s}')
  local acc fnv
  acc=$(grep -o 'Validation-accuracy=[0-9.]*' "$NB_LOGS/worker0.log" | tail -1 | cut -d= -f2)
  fnv=$(grep -o 'weights-fnv64=[0-9a-f]*' "$NB_LOGS/worker0.log" | tail -1 | cut -d= -f2)
  DTRAIN_ACC=$acc
  echo "dtrain: $DTRAIN_SPS samples/s total, validation accuracy $acc, weights-fnv64=$fnv;" \
    "MB sent per host (servers, workers): $(link_summary)"
}

run_torch() {
  local master="${NB_IP[$(worker_host 0)]}:29511" r names=()
  STRAGGLER_NAME="torch$((WORKERS - 1))"
  bytes_before
  local args=(--world "$WORKERS" --master "$master" --network "$NETWORK" --threads "$THREADS" --batch "$BATCH"
    --epochs "$EPOCHS")
  [ -z "$HIDDEN" ] || args+=(--hidden "$HIDDEN")
  [ "$EXAMPLES" -eq 0 ] || args+=(--num-examples "$EXAMPLES")
  # REF_FLAGS: more reference flags, e.g. "--lenet-layout dtrain" (the same LeNet code as dtrain's).
  # shellcheck disable=SC2206  # a list of flags
  [ -z "${REF_FLAGS:-}" ] || args+=(${REF_FLAGS})
  trace_start torch
  for ((r = 0; r < WORKERS; r++)); do
    # gloo binds the interface named here, not whatever the host name resolves to.
    start_worker_like "$(worker_host "$r")" "torch$r" env GLOO_SOCKET_IFNAME=eth0 "$PY" "$REF" "${args[@]}" --rank "$r"
    names+=("torch$r")
  done
  nb_wait "$DEADLINE" "the DDP/gloo reference (master $master)" "${names[@]}" || true
  trace_stop torch
  straggler_note "reference rank $((WORKERS - 1))"
  local n
  for n in "${names[@]}"; do
    [ "${NB_RC[$n]:-}" = 0 ] || { tail -20 "$NB_LOGS/$n.log" >&2; nb_fail "reference rank ${n#torch}: ${NB_RC[$n]:+exit }${NB_RC[$n]:-still running}"; }
  done
  local json
  json=$(grep '^{' "$NB_LOGS/torch0.log" | tail -1)
  [ -n "$json" ] || nb_fail "the reference printed no result line ($NB_LOGS/torch0.log)"
  TORCH_SPS=$(echo "$json" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["samples_per_s_total"])')
  TORCH_ACC=$(echo "$json" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["test_acc"])')
  echo "torch DDP/gloo: $json; MB sent per host (servers idle, workers): $(link_summary)"
}

[ "$ONLY" = torch ] || run_dtrain
[ "$ONLY" = dtrain ] || run_torch
ratio=""
if [ -n "$DTRAIN_SPS" ] && [ -n "$TORCH_SPS" ]; then
  ratio=$(awk -v a="$DTRAIN_SPS" -v b="$TORCH_SPS" 'BEGIN { printf "%.3f", a / b }')
  echo "ratio dtrain/torch samples/s = $ratio"
fi
echo "RESULT rate=$RATE network=$NETWORK${HIDDEN:+ hidden=$HIDDEN} workers=$WORKERS servers=$SERVERS threads=$THREADS cc=${NB_CC:-$(sysctl -n net.ipv4.tcp_congestion_control)}" \
  "batch=$BATCH epochs=$EPOCHS examples=$EXAMPLES kv=$KV straggler=${STRAGGLER:-none}" \
  "dtrain_sps=${DTRAIN_SPS:-} torch_sps=${TORCH_SPS:-} ratio=${ratio:-} dtrain_acc=${DTRAIN_ACC:-} torch_acc=${TORCH_ACC:-}"
