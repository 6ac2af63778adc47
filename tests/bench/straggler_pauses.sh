#!/usr/bin/env bash
# Transient stragglers: every worker is stopped (SIGSTOP) for PAUSE seconds at a random moment
# of each PERIOD seconds, each worker at its own seeded moments, the same in every run. The
# same job runs under dist_sync, then dist_ssp --staleness S; the ratio of their training
# speeds (samples/s over the epochs, validation and start-up excluded) is the benchmark, with
# both runs' validation accuracy and the stall advice the dist_sync run printed at its end.
#
#   bash tests/bench/straggler_pauses.sh [-n WORKERS] [-S STALENESS] [--ssp-flags "FLAGS"]
#        [--pause P] [--period T] [--seed K] [-- WORKER-FLAGS]
# Defaults: 2 workers, 2 servers, staleness: what the dist_sync run advises (else 32), both
# runs with the same flags (the dist_ssp run adds --ssp-flags: the servers scale stale
# pushes down, so the default momentum 0.9 holds; docs/tuning.md), pause 0.6 s of every
# 2 s, seed 1, LeNet, 20000 examples, 2 epochs, --threads 1. Loopback,
# on this machine: a stopped worker frees its core, so a run here measures the waits, not
# the network (tests/bench/netns_cluster.sh does links).
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN="${BIN:-build/bin}"
WORKERS=2 STALENESS="" SSP_FLAGS="" PAUSE=0.6 PERIOD=2 SEED=1
while [ $# -gt 0 ]; do
  case "$1" in
    -n) WORKERS=$2; shift 2 ;;
    -S) STALENESS=$2; shift 2 ;;
    --ssp-flags) SSP_FLAGS=$2; shift 2 ;;
    --pause) PAUSE=$2; shift 2 ;;
    --period) PERIOD=$2; shift 2 ;;
    --seed) SEED=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "straggler_pauses.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
JOB=(--network lenet --num-examples 20000 --num-epochs 2 --threads 1 --seed 7 --disp-batches 100000 "$@")
WORK=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$WORK"' EXIT

# launched_worker P RANK: the pid of `dtrain launch`'s worker of that rank under process P.
source tests/bench/launched_worker.sh

# pause_worker LAUNCHER RANK: until the job ends, one pause of PAUSE s at a moment drawn
# (seeded by SEED and RANK) from each PERIOD s. A stopped process is always continued.
pause_worker() {
  local launcher=$1 rank=$2 pid="" i
  for i in $(seq 1 600); do pid=$(launched_worker "$launcher" "$rank") && break; sleep 0.1; done
  [ -n "$pid" ] || return 0
  awk -v seed="$SEED" -v rank="$rank" -v pause="$PAUSE" -v period="$PERIOD" 'BEGIN {
    srand(seed * 1000 + rank)
    for (k = 0; k < 100000; k++) { u = rand() * (period - pause); printf "%.3f %.3f\n", u, period - pause - u }
  }' | while read -r before after; do
    sleep "$before"
    kill -STOP "$pid" 2>/dev/null || break
    sleep "$PAUSE"
    kill -CONT "$pid" 2>/dev/null || break
    sleep "$after"
  done
}

# run_job NAME KV [STALENESS]: the job with every worker paused; prints samples/s and accuracy.
run_job() {
  local name=$1 kv=$2 log="$WORK/$1.log" extra=()
  # shellcheck disable=SC2206
  [ -n "${3:-}" ] && extra=(--staleness "$3" $SSP_FLAGS)
  timeout 900 "$BIN/dtrain" launch -n "$WORKERS" -s 2 --kv-store "$kv" -- "${JOB[@]}" "${extra[@]}" > "$log" 2>&1 &
  local launcher=$! r
  for r in $(seq 0 $((WORKERS - 1))); do pause_worker "$launcher" "$r" & done
  wait "$launcher" || { echo "straggler_pauses.sh: the $name job failed:" >&2; tail -20 "$log" >&2; exit 1; }
  # Samples/s of the whole job over the training time of every epoch (worker 0's lines).
  local speed acc
  speed=$(grep '^\[worker 0\].*Job: ' "$log" | grep -o 'Speed: [0-9.]*' | awk '{s += $2; n++} END {printf "%.1f", s / n}')
  acc=$(grep -o 'Validation-accuracy=[0-9.]*' "$log" | tail -1 | cut -d= -f2)
  echo "$speed $acc"
}

echo "== transient stragglers: $WORKERS workers, each stopped $PAUSE s at a random moment of each $PERIOD s (seed $SEED); ${JOB[*]}"
read -r sync_speed sync_acc <<< "$(run_job sync dist_sync)"
advice=$(grep -o 'waited .*' "$WORK/sync.log" | head -1 || true)
echo "dist_sync: $sync_speed samples/s, Validation-accuracy $sync_acc"
echo "its advice: ${advice:-none}"
if [ -z "$STALENESS" ]; then
  STALENESS=$(grep -o 'dist_ssp --staleness [0-9]*' <<< "$advice" | grep -o '[0-9]*$' || true)
  STALENESS=${STALENESS:-32}
fi
read -r ssp_speed ssp_acc <<< "$(run_job ssp dist_ssp "$STALENESS")"
echo "dist_ssp --staleness $STALENESS $SSP_FLAGS: $ssp_speed samples/s, Validation-accuracy $ssp_acc"
awk -v a="$ssp_speed" -v b="$sync_speed" -v x="$ssp_acc" -v y="$sync_acc" 'BEGIN {
  printf "dist_ssp / dist_sync = %.2fx (target >= 1.4), accuracy %+.1f pp (target within 2)\n", a / b, 100 * (x - y) }'
