#!/bin/bash
# The long chaos run (docs/recovery.md): every recovery scenario over many seeds, each
# seed moving the kill moments: single faults, then two at once (chaos_pairs_test.cc).
# CI runs seed 1 only (ctest -R 'Chaos|AsyncRejoin|HandRestart|ServerFailover').
#   tests/integration/recovery/run_chaos.sh [FIRST_SEED] [LAST_SEED]   (default 1..20)
# Needs a built tree (build/bin). Prints each scenario's recovery time; exits non-zero
# on the first failing seed, naming it.
set -euo pipefail
first=${1:-1} last=${2:-20}
root=$(cd "$(dirname "$0")/../../.." && pwd)
bin=$root/build/bin
shared=$(mktemp -d)
trap 'rm -rf "$shared"' EXIT
for seed in $(seq "$first" "$last"); do
  rm -f "$shared"/*
  echo "== seed $seed"
  if ! DTRAIN_CHAOS_SEED=$seed DTRAIN_TEST_SHARED_DIR=$shared "$bin/recovery_chaos_test" | grep -E "recovery time|signal|OK|FAILED"; then
    echo "chaos: seed $seed failed" >&2
    exit 1
  fi
  DTRAIN_CHAOS_SEED=$seed "$bin/recovery_async_test" | grep -E "accuracy|OK|FAILED" || { echo "chaos: async seed $seed failed" >&2; exit 1; }
  # Servers (--replication 2): failover, rejoin, a worker killed beside replicas.
  if ! DTRAIN_CHAOS_SEED=$seed "$bin/recovery_server_failover_test" | grep -E "recovery time|rejoin time|SIGKILL|OK|FAILED"; then
    echo "chaos: server failover seed $seed failed" >&2
    exit 1
  fi
  # Two faults at once: the scheduler with a worker or a server, two workers, two servers
  # of three with --replication 3, at seeded moments.
  if ! DTRAIN_CHAOS_SEED=$seed DTRAIN_TEST_SHARED_DIR=$shared "$bin/recovery_chaos_pairs_test" | grep -E "recovery time|failed after|SIGKILL|OK|FAILED"; then
    echo "chaos: pairs seed $seed failed" >&2
    exit 1
  fi
done
echo "chaos: seeds $first..$last passed"
