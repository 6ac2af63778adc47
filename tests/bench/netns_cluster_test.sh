#!/usr/bin/env bash
# The emulated-cluster harness (tests/bench/netns_cluster.sh), run for real on a tiny job:
#   1. dtrain and the DDP/gloo reference each run on their namespace hosts over tbf-limited
#      links, one worker in a CPU cgroup: the workers talked over their namespace
#      addresses, bytes went through the links' qdiscs, the cgroup throttled the
#      straggler, a ratio came out, and nothing of the run is left afterwards;
#   2. the harness SIGTERMed mid-training: its trap removes every namespace, process and
#      cgroup;
#   3. the harness SIGKILLed mid-training (no trap runs): what it left is removed by
#      `netns_cluster.sh clean` (which every run does first).
#   bash tests/bench/netns_cluster_test.sh SRC_DIR BUILD_DIR     (as root; exit 77: skipped)
set -euo pipefail
SRC=$(cd "${1:-.}" && pwd)
BUILD=$(cd "${2:-build}" && pwd)
HARNESS="$SRC/tests/bench/netns_cluster.sh"
CG=/sys/fs/cgroup/cpu

if [ "$(id -u)" -ne 0 ]; then
  echo "SKIP: the netns cluster test needs root (network namespaces, tc qdiscs, cgroups); run ctest as root"
  exit 77
fi
for tool in ip tc; do
  command -v "$tool" > /dev/null || { echo "SKIP: '$tool' is not installed (apt-get install iproute2)"; exit 77; }
done
[ -w "$CG" ] || { echo "SKIP: the cgroup v1 cpu controller ($CG) is not writable here"; exit 77; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-netns-test.XXXXXX")
HPID=""
cleanup() {
  [ -z "$HPID" ] || kill -KILL "$HPID" 2> /dev/null || true
  BIN="$BUILD/bin" bash "$HARNESS" clean > /dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT
passed=0
failed=0
ok() { echo "ok   $*"; passed=$((passed + 1)); }
bad() { echo "FAIL $*"; failed=$((failed + 1)); }

# What run dnb<PID> may have left: namespaces, their /etc/netns, its cgroup.
leftovers() { # PID
  {
    ip netns list | awk '{print $1}' | grep -E "^dnb$1-" || true
    ls -d /etc/netns/dnb"$1"-* 2> /dev/null || true
    ls -d "$CG/dtrain-netns-$1" 2> /dev/null || true
  } | xargs
}
alive() { # PIDS...: those still running (a zombie waiting for its reaper is not)
  local p out=""
  for p in "$@"; do
    [ -r "/proc/$p/stat" ] && [ "$(awk '{print $3}' "/proc/$p/stat" 2> /dev/null)" != Z ] && out+=" $p"
  done
  echo "$out"
}
wait_exit() { # PID SECONDS WHAT
  local i
  for ((i = 0; i < $2 * 10; i++)); do
    kill -0 "$1" 2> /dev/null || return 0
    sleep 0.1
  done
  bad "$3: still running after $2 s"
  return 1
}
wait_for_log() { # FILE PATTERN SECONDS PID: until FILE has PATTERN (or PID exits)
  local i
  for ((i = 0; i < $3 * 5; i++)); do
    grep -q "$2" "$1" 2> /dev/null && return 0
    kill -0 "$4" 2> /dev/null || { bad "the harness ended before $1 said '$2'"; return 1; }
    sleep 0.2
  done
  bad "$1 did not say '$2' within $3 s"
  return 1
}
ns_pids() { # PID: every process in run dnb<PID>'s namespaces
  local ns
  for ns in $(ip netns list | awk '{print $1}' | grep -E "^dnb$1-"); do ip netns pids "$ns"; done | xargs
}

export BIN="$BUILD/bin"
TINY=(--rate 100mbit --network mlp --workers 2 --servers 1 --num-examples 1280 --batch 64 --epochs 1 --deadline 180)

# ---- 1. a tiny job, both sides, one straggler -------------------------------------------
echo "== 1. tiny job: dtrain (1 server, 2 workers) and DDP/gloo, 100mbit links, worker 1 at 0.5 CPU," \
  "reno congestion control, link trace"
bash "$HARNESS" "${TINY[@]}" --straggler-cpu 0.5 --cc reno --link-trace --logs "$WORK/one" > "$WORK/one.out" 2>&1 &
HPID=$!
wait "$HPID" && rc=0 || rc=$?
sed 's/^/  | /' "$WORK/one.out"
if [ "$rc" -eq 0 ] && grep -q '^RESULT .*ratio=[0-9.]\+ ' "$WORK/one.out"; then
  ok "the harness ran both sides and printed a ratio"
else
  bad "the harness exited $rc or printed no ratio"
fi
for w in 0 1; do
  ip=$(grep -o "worker $w 10\.77\.0\.[0-9]*" "$WORK/one.out" | awk '{print $3}' || true)
  if [ -n "$ip" ] && grep -q "$ip" "$WORK/one/worker$w.log" && grep -q "$ip" "$WORK/one/scheduler.log"; then
    ok "dtrain worker $w ran at its namespace address $ip (its log and the scheduler's say so)"
  else
    bad "dtrain worker $w: namespace address '${ip}' not in its log and the scheduler's"
  fi
done
if grep -q "straggler: worker 1 ran in cgroup .* throttled [1-9]" "$WORK/one.out"; then
  ok "the straggler's cgroup quota throttled it: $(grep -o 'worker 1 ran in cgroup.*' "$WORK/one.out" | head -1)"
else
  bad "no sign that the CPU quota throttled worker 1"
fi
# Each worker host pushed the model's gradients through its link: > 1 MB over 20 steps.
mb=$(grep '^dtrain:' "$WORK/one.out" | grep -o 'servers, workers): .*' | cut -d: -f2 | tr -d ' ' || true)
if awk -F, '{ exit !($2 > 1 && $3 > 1) }' <<< "$mb"; then
  ok "bytes went through the workers' shaped links (MB sent per host: $mb)"
else
  bad "the links' qdiscs saw too few bytes (MB per host: '$mb')"
fi
if grep -q "qdisc tbf .* rate 100Mbit" "$WORK/one.out"; then
  ok "the links were limited: $(grep -o 'qdisc tbf.*' "$WORK/one.out")"
else
  bad "no tbf qdisc at 100Mbit was reported on the links"
fi
# --link-trace: each side's summary names every host, and the busy workers' links were
# used at a plausible fraction of the rate (tbf passes at most the rate, plus its bucket).
for side in dtrain torch; do
  lines=$(grep -A3 "^$side links over" "$WORK/one.out" || true)
  use=$(grep -o 'worker0 *sent [0-9.]*%' <<< "$lines" | grep -o '[0-9.]*%' | tr -d '%' || true)
  if grep -q server0 <<< "$lines" && grep -q worker1 <<< "$lines" && [ -n "$use" ] &&
    awk -v u="$use" 'BEGIN { exit !(u > 1 && u < 120) }'; then
    ok "$side's link trace: worker 0 sent at $use% of the rate while bytes moved"
  else
    bad "$side's link trace missing or implausible: '${lines}'"
  fi
done
if grep -q '^RESULT .* cc=reno ' "$WORK/one.out" && [ -s "$WORK/one/links-dtrain-worker0.txt" ]; then
  ok "the result names the congestion control (reno) and the samples were kept"
else
  bad "no cc=reno in the result, or no samples in $WORK/one"
fi
left=$(leftovers "$HPID")
if [ -z "$left" ]; then ok "nothing left after the run"; else bad "left after the run: $left"; fi
# A congestion control the kernel does not have is refused before anything starts.
if out=$(bash "$HARNESS" "${TINY[@]}" --cc nosuchcc 2>&1); then
  bad "--cc nosuchcc was accepted"
elif grep -q "congestion control 'nosuchcc' is not available" <<< "$out"; then
  ok "--cc nosuchcc refused: $(grep -o "congestion control 'nosuchcc'.*" <<< "$out")"
else
  bad "--cc nosuchcc failed without naming it: $out"
fi

# ---- 2. SIGTERM mid-training ------------------------------------------------------------
echo "== 2. the harness SIGTERMed while the workers train"
bash "$HARNESS" --only dtrain --rate 10mbit --network mlp --workers 2 --servers 1 --num-examples 60000 \
  --deadline 300 --logs "$WORK/two" > "$WORK/two.out" 2>&1 &
HPID=$!
if wait_for_log "$WORK/two/worker1.log" "training mlp" 60 "$HPID"; then
  procs=$(ns_pids "$HPID")
  kill -TERM "$HPID"
  if wait_exit "$HPID" 30 "the harness after SIGTERM"; then
    left=$(leftovers "$HPID")
    still=$(alive $procs)
    if [ -z "$left" ] && [ -z "$still" ]; then
      ok "after SIGTERM: its $(wc -w <<< "$procs") processes ended, no namespace, /etc/netns entry or cgroup left"
    else
      bad "after SIGTERM, left: ${left:-} processes:${still:-}"
    fi
  fi
fi

# ---- 3. SIGKILL mid-training, then `clean` ------------------------------------------------
echo "== 3. the harness SIGKILLed while the workers train (one in a cgroup), then 'netns_cluster.sh clean'"
bash "$HARNESS" --only dtrain --rate 10mbit --network mlp --workers 2 --servers 1 --num-examples 60000 \
  --straggler-cpu 0.5 --deadline 300 --logs "$WORK/three" > "$WORK/three.out" 2>&1 &
HPID=$!
if wait_for_log "$WORK/three/worker1.log" "training mlp" 60 "$HPID"; then
  procs=$(ns_pids "$HPID")
  kill -KILL "$HPID"
  wait_exit "$HPID" 10 "the harness after SIGKILL" || true
  left=$(leftovers "$HPID")
  if [ -n "$left" ]; then echo "  after SIGKILL (no trap) these remain, as expected: $left"; fi
  bash "$HARNESS" clean > "$WORK/clean.out" 2>&1 || true
  sed 's/^/  | /' "$WORK/clean.out"
  left=$(leftovers "$HPID")
  still=$(alive $procs)
  if [ -z "$left" ] && [ -z "$still" ]; then
    ok "after SIGKILL and clean: its $(wc -w <<< "$procs") processes ended, nothing left"
  else
    bad "after SIGKILL and clean, left: ${left:-} processes:${still:-}"
  fi
fi
HPID=""

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
