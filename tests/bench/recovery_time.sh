#!/bin/bash
# Recovery time (docs/recovery.md, "Recovery time"): from a SIGKILL to the job's next
# committed step, per scenario, over seeds, as p50 / p95 / max. Single faults come from
# the chaos and failover tests, pairs from the pairs test; every run also checks that
# the job ends on the uninterrupted run's weights (a failed seed is named and counted).
#
#   tests/bench/recovery_time.sh [FIRST_SEED] [LAST_SEED]     (default 1..10)
#
# Needs a built tree (build/bin). Run it on an otherwise idle machine: the figures are
# wall-clock times of real processes. Targets: a worker kill 2 s p50 (JobSet's in-place
# pod restart takes about 10 s), a replicated server kill 1 s p50 (OSDI'14's server
# recovery: 0.8 s).
set -uo pipefail
first=${1:-1} last=${2:-10}
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=$root/build/bin
for b in recovery_chaos_test recovery_server_failover_test recovery_chaos_pairs_test; do
  [ -x "$bin/$b" ] || { echo "recovery_time: $bin/$b is missing: build first (bash deploy/build.sh)" >&2; exit 2; }
done
shared=$(mktemp -d)
times=$(mktemp)
# A failed run's whole output stays here (the scenarios print the job's output on failure).
failures=${RECOVERY_TIME_FAILURES:-${TMPDIR:-/tmp}/recovery_time-failures}
trap 'rm -rf "$shared" "$times"' EXIT
failed=0 runs=0

# run BINARY FILTER: every scenario's "recovery time" line as "SCENARIO SECONDS" in $times.
run() {
  local out
  out=$(DTRAIN_CHAOS_SEED=$seed DTRAIN_TEST_SHARED_DIR=$shared "$bin/$1" --gtest_filter="$2" 2>&1)
  local code=$?
  runs=$((runs + 1))
  if [ $code -ne 0 ]; then
    failed=$((failed + 1))
    mkdir -p "$failures"
    local log="$failures/seed-$seed-$1.log"
    printf '%s\n' "$out" > "$log"
    echo "recovery_time: seed $seed: $1 $2 FAILED (whole output: $log)" >&2
    printf '%s\n' "$out" | grep -E "^\[  FAILED|Failure" | head -5 >&2
  fi
  printf '%s\n' "$out" | awk '
    /^\[ RUN      \]/ { name = $4 }
    /recovery time: / { for (i = 1; i <= NF; i++) if ($i == "time:") print name, $(i + 1) }' >> "$times"
}

for seed in $(seq "$first" "$last"); do
  echo "== seed $seed"
  run recovery_chaos_test 'ChaosTest.WorkerKilledMidStep:ChaosTest.WorkerZeroKilledMidStep:ChaosTest.SchedulerKilledMidEpoch'
  run recovery_server_failover_test 'ServerFailoverChaosTest.ServerKilledMidStepEndsBitIdentical'
  run recovery_chaos_pairs_test 'ChaosPairsTest.*-ChaosPairsTest.BothReplicasOfARangeLostFailsAtOnceNamingIt'
done

echo
echo "recovery time, kill to the job's next committed step (seeds $first..$last):"
printf '%-62s %4s %7s %7s %7s\n' scenario n p50 p95 max
sort -k1,1 -k2,2g "$times" | awk '
  function report() {
    if (n == 0) return
    p50 = v[int((n - 1) * 0.50) + 1]; p95 = v[int((n - 1) * 0.95 + 0.999) + 1]
    if (p95 == "") p95 = v[n]
    printf "%-62s %4d %6.2fs %6.2fs %6.2fs\n", cur, n, p50, p95, v[n]
  }
  $1 != cur { report(); cur = $1; n = 0 }
  { v[++n] = $2 }
  END { report() }'
echo "runs: $runs, failed: $failed"
[ "$failed" -eq 0 ]
