# An emulated cluster for benchmarks (sourced, not run): each "host" is a network
# namespace with one address on a bridge, its link limited in both directions by a tc
# token bucket (tbf; netem is not in this kernel), and a straggler is a real process in a
# cgroup v1 cpu controller group with a CFS quota. Everything made here is named after
# the harness's pid (namespaces dnb<PID>-*, cgroup dtrain-netns-<PID>), removed by an EXIT
# trap whatever ends the run, and swept by the next run (nb_sweep_stale) if the harness
# itself was SIGKILLed.
#
#   nb_init                          traps, cleanups, the sweep; sets NB_TAG, NB_LOGS
#   nb_network N RATE                hosts 0..N-1 (NB_NS[i], NB_IP[i]) on one bridge, RATE each way
#   nb_start I NAME CMD...           CMD in host I, in the background; log NB_LOGS/NAME.log
#   nb_start_limited I CPU NAME CMD...   the same inside a cgroup with CPU cores of quota (0.33)
#   nb_wait DEADLINE_S WHAT NAME...  waits for those processes; names who is left at the deadline
#   nb_link_bytes I                  bytes host I sent on its link
#   nb_cgroup_throttling NAME        how often the CPU quota stopped a limited process
set -euo pipefail

NB_CGROUP_ROOT=${NB_CGROUP_ROOT:-/sys/fs/cgroup/cpu}
NB_SUBNET=10.77.0
declare -a NB_NS=() NB_IP=() NB_CLEANUPS=()
declare -A NB_PID=()

nb_fail() {
  echo "netns: FAIL: $*" >&2
  exit 1
}

# Cleanups run in reverse order of registration, each even if an earlier one fails.
nb_on_exit() { NB_CLEANUPS=("$1" "${NB_CLEANUPS[@]}"); }
nb_run_cleanups() {
  local rc=$? c
  trap - EXIT TERM INT HUP
  for c in "${NB_CLEANUPS[@]}"; do eval "$c" > /dev/null 2>&1 || true; done
  NB_CLEANUPS=()
  return $rc
}

# Every process in namespace NS: TERM, then KILL what is left after 3 s.
nb_kill_ns() {
  local ns=$1 pids i
  pids=$(ip netns pids "$ns" 2> /dev/null | xargs) || true
  [ -n "$pids" ] || return 0
  kill -TERM $pids 2> /dev/null || true
  for i in $(seq 1 30); do
    pids=$(ip netns pids "$ns" 2> /dev/null | xargs) || true
    [ -n "$pids" ] || return 0
    sleep 0.1
  done
  kill -KILL $pids 2> /dev/null || true
}

# A cgroup directory, its processes killed first (rmdir fails while it holds any).
nb_remove_cgroup() {
  local dir=$1 i pids sub
  [ -d "$dir" ] || return 0
  for sub in "$dir"/*/; do
    [ -d "$sub" ] && nb_remove_cgroup "${sub%/}"
  done
  for i in $(seq 1 50); do
    pids=$(cat "$dir/cgroup.procs" 2> /dev/null | xargs) || true
    [ -z "$pids" ] && break
    kill -KILL $pids 2> /dev/null || true
    sleep 0.1
  done
  rmdir "$dir" 2> /dev/null || echo "netns: could not remove $dir (processes: $(cat "$dir/cgroup.procs" 2> /dev/null | xargs))" >&2
}

nb_remove_run() { # TAG: every namespace and the cgroup of the run tagged TAG
  local tag=$1 ns
  for ns in $(ip netns list 2> /dev/null | awk '{print $1}' | grep -E "^$tag-" || true); do nb_kill_ns "$ns"; done
  nb_remove_cgroup "$NB_CGROUP_ROOT/dtrain-netns-${tag#dnb}"
  for ns in $(ip netns list 2> /dev/null | awk '{print $1}' | grep -E "^$tag-" || true); do
    ip netns del "$ns" 2> /dev/null || true
    rm -rf "/etc/netns/$ns"
  done
}

# What runs whose harness is gone (SIGKILLed: no trap ran) left behind.
nb_sweep_stale() {
  local tag pid d
  for tag in $(ip netns list 2> /dev/null | awk '{print $1}' | grep -oE '^dnb[0-9]+' | sort -u || true); do
    pid=${tag#dnb}
    if ! kill -0 "$pid" 2> /dev/null; then
      echo "netns: removing what run $tag left (its harness, pid $pid, is gone)"
      nb_remove_run "$tag"
    fi
  done
  for d in "$NB_CGROUP_ROOT"/dtrain-netns-*; do
    [ -d "$d" ] || continue
    pid=${d##*-}
    kill -0 "$pid" 2> /dev/null || nb_remove_cgroup "$d"
  done
}

nb_init() {
  [ "$(id -u)" -eq 0 ] || nb_fail "needs root: it creates network namespaces, qdiscs and cgroups"
  local tool
  for tool in ip tc; do command -v "$tool" > /dev/null || nb_fail "needs '$tool' (apt-get install iproute2)"; done
  NB_TAG="dnb$$"
  NB_CLEANUPS=()
  trap 'nb_run_cleanups' EXIT
  trap 'exit 143' TERM
  trap 'exit 130' INT
  trap 'exit 129' HUP
  nb_sweep_stale
  nb_on_exit "nb_remove_run '$NB_TAG'"
  local err
  if ! err=$(ip netns add "$NB_TAG-preflight" 2>&1); then
    nb_fail "cannot create a network namespace ('ip netns add' said: $err)"
  fi
  ip netns del "$NB_TAG-preflight"
}

# tbf needs a bucket of at least one (GSO) packet, and at high rates enough for a timer
# tick's worth of bytes: 1 ms of the rate, at least 256 KB.
nb_tbf() { # NS DEV RATE
  local ns=$1 dev=$2 rate=$3 bits burst
  bits=$(nb_rate_bits "$rate")
  burst=$((bits / 8 / 1000))
  [ "$burst" -ge 262144 ] || burst=262144
  ip netns exec "$ns" tc qdisc replace dev "$dev" root tbf rate "$rate" burst "$burst" latency 100ms ||
    nb_fail "tc tbf rate $rate on $dev in $ns failed"
}

nb_rate_bits() { # "1gbit" "250mbit" "100kbit" -> bits/s
  local r=$1 n unit
  [[ "$r" =~ ^([0-9]+)(gbit|mbit|kbit|bit)$ ]] || nb_fail "rate '$r': want a number with gbit, mbit or kbit (e.g. 1gbit, 250mbit)"
  n=${BASH_REMATCH[1]} unit=${BASH_REMATCH[2]}
  case "$unit" in
    gbit) echo $((n * 1000000000)) ;;
    mbit) echo $((n * 1000000)) ;;
    kbit) echo $((n * 1000)) ;;
    bit) echo "$n" ;;
  esac
}

# A switch namespace with bridge br0; host i gets namespace NB_NS[i] and address
# NB_IP[i] on its eth0, whose peer is port veth$i of the bridge. RATE on eth0 (what the
# host sends) and on veth$i (what it receives): the link is limited both ways. RATE
# "none": no limit.
nb_network() { # N RATE
  local n=$1 rate=$2 i ns sw="$NB_TAG-sw"
  ip netns add "$sw"
  ip -n "$sw" link set lo up
  ip -n "$sw" link add br0 type bridge
  ip -n "$sw" link set br0 up
  for ((i = 0; i < n; i++)); do
    ns="$NB_TAG-h$i"
    NB_NS[i]=$ns
    NB_IP[i]="$NB_SUBNET.$((11 + i))"
    ip netns add "$ns"
    # The host's name resolves to its own address, as on a real host.
    mkdir -p "/etc/netns/$ns"
    printf '127.0.0.1 localhost\n%s %s\n' "${NB_IP[i]}" "$ns" > "/etc/netns/$ns/hosts"
    ip -n "$sw" link add "veth$i" type veth peer name eth0 netns "$ns"
    ip -n "$sw" link set "veth$i" master br0 up
    ip -n "$ns" link set lo up
    ip -n "$ns" addr add "${NB_IP[i]}/24" dev eth0
    ip -n "$ns" link set eth0 up
    # TCP congestion control is per namespace; a new one copies the machine's (bbr
    # here). NB_CC (--cc) sets every host's, as a cluster's hosts would be configured.
    # Outside the machine's own namespace only the "allowed" ones can be set.
    if [ -n "${NB_CC:-}" ]; then
      ip netns exec "$ns" sysctl -qw net.ipv4.tcp_congestion_control="$NB_CC" ||
        nb_fail "congestion control '$NB_CC' is not available in a namespace: want one of" \
          "net.ipv4.tcp_allowed_congestion_control ($(sysctl -n net.ipv4.tcp_allowed_congestion_control))"
    fi
    # NB_SYSCTLS: more per-namespace settings, "key=value ..." (experiments with TCP).
    for kv in ${NB_SYSCTLS:-}; do ip netns exec "$ns" sysctl -qw "${kv//,/ }" || nb_fail "sysctl $kv in $ns"; done
    if [ "$rate" != none ]; then
      nb_tbf "$ns" eth0 "$rate"
      nb_tbf "$sw" "veth$i" "$rate"
    fi
  done
}

nb_start() { # I NAME CMD...: CMD in host I as a new session, output to NB_LOGS/NAME.log
  local i=$1 name=$2
  shift 2
  setsid ip netns exec "${NB_NS[i]}" "$@" > "$NB_LOGS/$name.log" 2>&1 < /dev/null &
  NB_PID[$name]=$!
}

# The same, with the process in a cgroup whose CFS quota is CPU cores (0.33: a third of
# one). A shell joins the group, then execs `ip netns exec` and so the command: every
# thread is in the group from its start. (It joins outside the namespace: `ip netns exec`
# mounts a /sys of its own, without the cgroup hierarchy.)
nb_start_limited() { # I CPU NAME CMD...
  local i=$1 cpu=$2 name=$3 dir="$NB_CGROUP_ROOT/dtrain-netns-$$" period=100000 quota
  shift 3
  [ -w "$NB_CGROUP_ROOT" ] || nb_fail "the cgroup v1 cpu controller at $NB_CGROUP_ROOT is not writable; cannot limit $name's CPU"
  quota=$(awk -v c="$cpu" -v p="$period" 'BEGIN { q = int(c * p); if (q < 1000 || c <= 0) q = -1; print q }')
  [ "$quota" -gt 0 ] || nb_fail "CPU limit '$cpu': want cores > 0.01 (e.g. 0.33)"
  mkdir -p "$dir/$name"
  echo "$period" > "$dir/$name/cpu.cfs_period_us"
  echo "$quota" > "$dir/$name/cpu.cfs_quota_us"
  setsid sh -c 'echo $$ > "$1/cgroup.procs" && shift && exec ip netns exec "$@"' sh "$dir/$name" "${NB_NS[i]}" "$@" \
    > "$NB_LOGS/$name.log" 2>&1 < /dev/null &
  NB_PID[$name]=$!
  nb_on_exit "nb_remove_cgroup '$dir/$name'"
}

# "throttled N times (S s)" from the limited process NAME's cpu.stat.
nb_cgroup_throttling() { # NAME
  awk '$1 == "nr_throttled" {n = $2} $1 == "throttled_time" {t = $2 / 1e9}
       END {printf "throttled %d times (%.1f s)", n, t}' "$NB_CGROUP_ROOT/dtrain-netns-$$/$1/cpu.stat"
}

nb_running() { kill -0 "${NB_PID[$1]}" 2> /dev/null; }

# Waits until every named process has exited, or DEADLINE_S seconds: then says which
# are still running and what they waited for, and fails. Sets NB_RC[name] to each
# exit status; returns 1 as soon as one exits non-zero.
declare -A NB_RC=()
nb_wait() { # DEADLINE_S WHAT NAME...
  local limit=$1 deadline=$(($(date +%s) + $1)) what=$2 name left
  shift 2
  while :; do
    left=()
    for name in "$@"; do
      if [ -z "${NB_RC[$name]:-}" ]; then
        if nb_running "$name"; then
          left+=("$name")
        else
          wait "${NB_PID[$name]}" && NB_RC[$name]=0 || NB_RC[$name]=$?
          # One failed process fails the run at once (the others would wait for it).
          [ "${NB_RC[$name]}" -eq 0 ] || return 1
        fi
      fi
    done
    [ "${#left[@]}" -gt 0 ] || return 0
    if [ "$(date +%s)" -ge "$deadline" ]; then
      for name in "${left[@]}"; do
        echo "netns: $name still running after the deadline; last lines of its log:" >&2
        tail -5 "$NB_LOGS/$name.log" | sed 's/^/  | /' >&2
      done
      nb_fail "$what did not finish within ${limit}s (still running: ${left[*]})"
    fi
    sleep 0.5
  done
}

nb_link_bytes() { # I: bytes host I sent on its link (eth0's counter, seen from its namespace)
  ip netns exec "${NB_NS[$1]}" cat /sys/class/net/eth0/statistics/tx_bytes
}
