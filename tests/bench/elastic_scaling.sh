#!/usr/bin/env bash
# An elastic dist_sync job on an emulated cluster (every process on its own host, each
# link limited to --rate both ways): it starts with 2 workers, grows to 4 (two workers
# started with no rank join), then shrinks to 3 (one gets SIGTERM and leaves at a step
# boundary). Prints the job's samples/s in each phase (a worker's speed line times the
# workers of the phase), each phase's ratio to the 2-worker phase, and each joiner's time
# from its start to its first step.
#
#   bash tests/bench/elastic_scaling.sh [options]   (as root)
# Options (defaults in brackets):
#   --rate R [1gbit]   --network N [lenet]   --batch B [64]   --epochs E [3]
#   --grow-at K [40]   --shrink-at K [40]   worker 0's batches (Speed lines) before each change
#   --deadline S [900]   --logs DIR (default: a temp dir, removed)
# Prints "RESULT phase2_sps=... phase4_sps=... phase3_sps=... grow_ratio=... shrink_ratio=...
# join_s=... join_s=..." last.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BIN=${BIN:-$ROOT/build/bin}
. "$HERE/netns_lib.sh"

RATE=1gbit NETWORK=lenet BATCH=64 EPOCHS=3 GROW_AT=40 SHRINK_AT=40 DEADLINE=900 LOGS=""
while [ $# -gt 0 ]; do
  [ $# -ge 2 ] || { echo "elastic_scaling.sh: $1 needs a value" >&2; exit 2; }
  case "$1" in
    --rate) RATE=$2 ;;
    --network) NETWORK=$2 ;;
    --batch) BATCH=$2 ;;
    --epochs) EPOCHS=$2 ;;
    --grow-at) GROW_AT=$2 ;;
    --shrink-at) SHRINK_AT=$2 ;;
    --deadline) DEADLINE=$2 ;;
    --logs) LOGS=$2 ;;
    *) echo "elastic_scaling.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
  shift 2
done
for n in BATCH EPOCHS GROW_AT SHRINK_AT DEADLINE; do
  [[ "${!n}" =~ ^[0-9]+$ ]] || { echo "--${n,,}: '${!n}' is not a number" >&2; exit 2; }
done
for b in dtrain-scheduler dtrain-server dtrain-worker; do
  [ -x "$BIN/$b" ] || { echo "$BIN/$b is not built" >&2; exit 2; }
done

nb_init
if [ -n "$LOGS" ]; then
  mkdir -p "$LOGS"
  NB_LOGS=$(cd "$LOGS" && pwd)
else
  NB_LOGS=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-elastic.XXXXXX")
  nb_on_exit "rm -rf '$NB_LOGS'"
fi
# Hosts: server 0 (with the scheduler), server 1, workers 0..3.
nb_network 6 "$RATE"
echo "netns: run $NB_TAG: 2 servers, up to 4 workers, each on its own host; links $RATE both ways"
sched=${NB_IP[0]} port=9091
env_common=(env DMLC_PS_ROOT_URI="$sched" DMLC_PS_ROOT_PORT="$port" DMLC_NUM_WORKER=2 DMLC_NUM_SERVER=2
  DTRAIN_ELASTIC=2:4 DTRAIN_REGISTER_TIMEOUT=120)
flags=(--kv-store dist_sync --network "$NETWORK" --batch-size "$BATCH" --num-epochs "$EPOCHS" --disp-batches 10 --threads 1)
nb_start 0 scheduler "${env_common[@]}" "$BIN/dtrain-scheduler" --port "$port" --kv-store dist_sync
nb_start 0 server0 "${env_common[@]}" DMLC_SERVER_ID=0 "$BIN/dtrain-server"
nb_start 1 server1 "${env_common[@]}" DMLC_SERVER_ID=1 "$BIN/dtrain-server"
for w in 0 1; do
  nb_start $((2 + w)) "worker$w" "${env_common[@]}" DMLC_WORKER_ID="$w" "$BIN/dtrain-worker" "${flags[@]}"
done

speed_lines() { grep -c 'Speed:' "$NB_LOGS/worker0.log" 2> /dev/null || true; }
# Waits until worker 0 printed N more speed lines than it had at FROM; fails at the deadline.
wait_lines() { # FROM N WHAT
  local until=$(($(date +%s) + DEADLINE))
  while [ "$(speed_lines)" -lt $(($1 + $2)) ]; do
    nb_running worker0 || nb_fail "worker 0 ended while waiting for $3 (log: $(tail -3 "$NB_LOGS/worker0.log"))"
    [ "$(date +%s)" -lt "$until" ] || nb_fail "worker 0 printed no $2 speed lines within ${DEADLINE}s ($3)"
    sleep 0.2
  done
}
wait_log() { # NAME TEXT WHAT [T0]: polls NAME's log for TEXT; prints the seconds since T0 (default: now)
  local t0=${4:-$(date +%s.%N)} until=$(($(date +%s) + DEADLINE))
  until grep -q -- "$2" "$NB_LOGS/$1.log" 2> /dev/null; do
    [ "$(date +%s)" -lt "$until" ] || nb_fail "no '$2' in $1's log within ${DEADLINE}s ($3)"
    sleep 0.05
  done
  awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }'
}
# The job's samples/s over worker 0's speed lines FROM..TO (1-based, skipping the first
# line after a change, which spans it), times the phase's workers.
phase_sps() { # FROM TO WORKERS
  grep 'Speed:' "$NB_LOGS/worker0.log" | sed -n "$(($1 + 1)),$2p" | grep -o 'Speed: [0-9.]*' |
    awk -v k="$3" '{ s += $2; n++ } END { if (n == 0) print 0; else printf "%.1f", k * s / n }'
}

wait_lines 0 "$GROW_AT" "the 2-worker phase"
grow_line=$(speed_lines)
t_join=$(date +%s.%N)
nb_start 4 worker2 "${env_common[@]}" "$BIN/dtrain-worker" "${flags[@]}"
nb_start 5 worker3 "${env_common[@]}" "$BIN/dtrain-worker" "${flags[@]}"
join2=$(wait_log worker2 'joins at step' "worker 2's first step" "$t_join")
join3=$(wait_log worker3 'joins at step' "worker 3's first step" "$t_join")
wait_log scheduler '4 workers from now' "the scale-up to 4" > /dev/null
four_line=$(speed_lines)
wait_lines "$four_line" "$SHRINK_AT" "the 4-worker phase"
shrink_line=$(speed_lines)
kill -TERM "${NB_PID[worker3]}"
wait_log scheduler '3 workers from now' "the scale-down to 3" > /dev/null
three_line=$(speed_lines)
wait_lines "$three_line" 10 "the 3-worker phase"
end_line=$(speed_lines)
nb_wait "$DEADLINE" "the elastic job" scheduler server0 server1 worker0 worker1 worker2 worker3 ||
  { for n in scheduler worker0 worker3; do echo "---- $n"; tail -8 "$NB_LOGS/$n.log"; done >&2; nb_fail "a process failed"; }

sps2=$(phase_sps 1 "$grow_line" 2)
sps4=$(phase_sps "$four_line" "$shrink_line" 4)
sps3=$(phase_sps "$three_line" "$end_line" 3)
grep -h 'from now' "$NB_LOGS/scheduler.log" | sed 's/^/scheduler: /'
echo "2 workers: $sps2 samples/s; 4 workers: $sps4; 3 workers: $sps3 (worker 0's speed lines x the workers)"
echo "joiners' start to first step: worker 2 ${join2}s, worker 3 ${join3}s (started $(date -d "@${t_join%.*}" +%T))"
echo "RESULT phase2_sps=$sps2 phase4_sps=$sps4 phase3_sps=$sps3" \
  "grow_ratio=$(awk -v a="$sps4" -v b="$sps2" 'BEGIN { printf "%.2f", a / b }')" \
  "shrink_ratio=$(awk -v a="$sps3" -v b="$sps2" 'BEGIN { printf "%.2f", a / b }')" \
  "join_s=$join2 join_s=$join3"
