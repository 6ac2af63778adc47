#!/usr/bin/env bash
# The TensorFlow 1 style seed launch, for real: three network-namespace hosts on one bridge
# (tests/bench/netns_lib.sh), a ps on the first and two workers on the others, each
# started with the TensorFlow 1 style command a seed user typed on every machine:
#   dtrain run --ps_hosts=H0:2222 --worker_hosts=H1:2222,H2:2222 --job_name=J --task_index=N -- TRAINING-FLAGS
# (the data set is on the one filesystem every host sees, as on a shared NFS mount).
#   train     every host exits 0 and both workers end with the same weights-fnv64;
#   tf_config the same cluster in TF_CONFIG with a chief (worker 0's host): the same weights;
#   index     a --task_index out of range, and one naming another host's entry, are
#             refused at once, naming the list and what this host is;
#   mismatch  worker 1 started with another --ps_hosts than worker 0 is refused by the
#             scheduler (on worker 0), naming both lists.
#   bash tests/integration/tf_cluster/tf_cluster_netns_test.sh SRC_DIR BUILD_DIR   (as root; exit 77: skipped)
set -euo pipefail
SRC=$(cd "${1:-.}" && pwd)
BUILD=$(cd "${2:-build}" && pwd)
if [ "$(id -u)" -ne 0 ]; then
  echo "SKIP: the TF1 cluster spec test needs root (it creates network namespaces); run ctest as root"
  exit 77
fi
command -v ip > /dev/null || { echo "SKIP: 'ip' is not installed (apt-get install iproute2)"; exit 77; }
for bin in dtrain dtrain-scheduler dtrain-server dtrain-worker; do
  [ -x "$BUILD/bin/$bin" ] || { echo "FAIL: $BUILD/bin/$bin is not built"; exit 1; }
done
[ -d /usr/share/datasets/fashion-mnist ] || { echo "FAIL: the data set is missing (apt-get install dataset-fashion-mnist)"; exit 1; }

. "$SRC/tests/bench/netns_lib.sh"
nb_init   # traps: every namespace and process of this run goes, whatever ends it
NB_LOGS=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-tf-cluster.XXXXXX")
nb_on_exit "rm -rf '$NB_LOGS'"
nb_network 3 none
PS="${NB_IP[0]}:2222"
W0="${NB_IP[1]}:2222"
W1="${NB_IP[2]}:2222"
DTRAIN="$BUILD/bin/dtrain"
TRAIN=(--network lenet --num-epochs 1 --num-examples 1200 --num-test-examples 500 --batch-size 50 --threads 1
  --disp-batches 10)

passed=0
failed=0
ok() { echo "ok   $*"; passed=$((passed + 1)); }
bad() { echo "FAIL $*"; failed=$((failed + 1)); }
show() { # NAME: the last lines of its log
  echo "---- $1 (last 15 lines)"
  tail -15 "$NB_LOGS/$1.log" | sed 's/^/  | /'
}

# ---- train: the seed's three commands -------------------------------------------------
spec=(--ps_hosts="$PS" --worker_hosts="$W0,$W1")
nb_start 0 ps0 "$DTRAIN" run "${spec[@]}" --job_name=ps --task_index=0 -- "${TRAIN[@]}"
nb_start 1 worker0 "$DTRAIN" run "${spec[@]}" --job_name=worker --task_index=0 -- "${TRAIN[@]}"
nb_start 2 worker1 "$DTRAIN" run "${spec[@]}" --job_name=worker --task_index=1 -- "${TRAIN[@]}"
start=$(date +%s)
# nb_wait returns 1 when one exits non-zero, and fails the test naming who is left at the deadline.
if nb_wait 100 "the TF1-style job" worker0 worker1 ps0; then
  ok "ps 0, worker 0 (with the scheduler) and worker 1 exited 0 after $(($(date +%s) - start)) s"
else
  bad "the TF1-style job failed"
  for n in ps0 worker0 worker1; do show "$n"; done
fi
fnv0=$(grep -o 'weights-fnv64=[0-9a-f]*' "$NB_LOGS/worker0.log" | tail -1 || true)
fnv1=$(grep -o 'weights-fnv64=[0-9a-f]*' "$NB_LOGS/worker1.log" | tail -1 || true)
if [ -n "$fnv0" ] && [ "$fnv0" = "$fnv1" ]; then
  ok "both workers end with the same weights ($fnv0)"
else
  bad "weights differ or are missing: worker 0 '$fnv0', worker 1 '$fnv1'"
fi
if grep -q "serving at $PS" "$NB_LOGS/worker0.log"; then
  ok "the scheduler (on worker 0's host) saw server 0 serving at its listed address $PS"
else
  bad "the scheduler's log does not show server 0 at $PS"
fi
for i in 0 1 2; do nb_kill_ns "${NB_NS[i]}"; done

# ---- tf_config: the same cluster as TF_CONFIG, with worker 0's host as the chief ------------
# The chief is worker rank 0 and TF_CONFIG's worker 0 is rank 1: the same ranks on the same
# hosts as above, so the same weights, bit for bit.
cluster="{\"chief\": [\"$W0\"], \"worker\": [\"$W1\"], \"ps\": [\"$PS\"], \"evaluator\": [\"${NB_IP[0]}:2300\"]}"
tf_config() { echo "{\"cluster\": $cluster, \"task\": {\"type\": \"$1\", \"index\": $2}}"; }
nb_start 0 tc-ps env TF_CONFIG="$(tf_config ps 0)" "$DTRAIN" run -- "${TRAIN[@]}"
nb_start 1 tc-chief env TF_CONFIG="$(tf_config chief 0)" "$DTRAIN" run -- "${TRAIN[@]}"
nb_start 2 tc-worker env TF_CONFIG="$(tf_config worker 0)" "$DTRAIN" run -- "${TRAIN[@]}"
if nb_wait 100 "the TF_CONFIG job" tc-chief tc-worker tc-ps; then
  ok "TF_CONFIG: ps 0, the chief (with the scheduler) and worker 0 exited 0"
else
  bad "the TF_CONFIG job failed"
  for n in tc-ps tc-chief tc-worker; do show "$n"; done
fi
fnv_chief=$(grep -o 'weights-fnv64=[0-9a-f]*' "$NB_LOGS/tc-chief.log" | tail -1 || true)
fnv_worker=$(grep -o 'weights-fnv64=[0-9a-f]*' "$NB_LOGS/tc-worker.log" | tail -1 || true)
if [ -n "$fnv0" ] && [ "$fnv_chief" = "$fnv0" ] && [ "$fnv_worker" = "$fnv0" ]; then
  ok "TF_CONFIG: the chief and the worker end with the flags launch's weights ($fnv0)"
else
  bad "TF_CONFIG: weights chief '$fnv_chief', worker '$fnv_worker', flags launch '$fnv0'"
fi
if grep -q "cluster.evaluator (${NB_IP[0]}:2300) is ignored" "$NB_LOGS/tc-ps.log"; then
  ok "TF_CONFIG: the evaluator in the cluster is ignored with a note"
else
  bad "TF_CONFIG: no note about the ignored evaluator"
fi
for i in 0 1 2; do nb_kill_ns "${NB_NS[i]}"; done

# ---- index: refused before anything starts ------------------------------------------------
expect_refusal() { # WHAT HOST NAME EXPECTED-TEXT ARGS...
  local what=$1 host=$2 name=$3 text=$4 rc=0
  shift 4
  ip netns exec "${NB_NS[$host]}" "$DTRAIN" run "$@" > "$NB_LOGS/$name.log" 2>&1 < /dev/null || rc=$?
  if [ "$rc" -ne 0 ] && grep -qF -- "$text" "$NB_LOGS/$name.log"; then
    ok "$what: refused (exit $rc): $(grep -F -- "$text" "$NB_LOGS/$name.log" | head -1 | cut -c1-220)"
  else
    bad "$what: exit $rc, no '$text' in its output"
    show "$name"
  fi
}
expect_refusal "--task_index=2 with two workers" 2 index-range "--worker_hosts lists 2 hosts ($W0,$W1), so it must be 0..1" \
  "${spec[@]}" --job_name=worker --task_index=2 -- "${TRAIN[@]}"
expect_refusal "worker 1's host started as worker 0" 2 index-swapped \
  "makes this task worker 0 at $W0, which is not an address of this machine; this machine is listed as worker 1 ($W1)" \
  "${spec[@]}" --job_name=worker --task_index=0 -- "${TRAIN[@]}"

# ---- mismatch: worker 1 told another ps port ----------------------------------------------
bad_ps="${NB_IP[0]}:2223"
nb_start 1 mm-worker0 "$DTRAIN" run "${spec[@]}" --job_name=worker --task_index=0 -- "${TRAIN[@]}"
nb_start 2 mm-worker1 "$DTRAIN" run --ps_hosts="$bad_ps" --worker_hosts="$W0,$W1" --job_name=worker --task_index=1 -- "${TRAIN[@]}"
want="worker 1's --ps_hosts is $bad_ps but the scheduler's (worker 0's) is $PS"
rc=0
nb_wait 60 "the mismatched worker 1" mm-worker1 || rc=$?
if [ "$rc" -ne 0 ] && grep -qF "$want" "$NB_LOGS/mm-worker1.log"; then
  ok "mismatched --ps_hosts: worker 1 refused: $(grep -F "$want" "$NB_LOGS/mm-worker1.log" | head -1 | cut -c1-240)"
else
  bad "mismatched --ps_hosts: worker 1 (exit $rc) does not say '$want'"
  show mm-worker1
fi
if grep -qF "refused registration" "$NB_LOGS/mm-worker0.log" && grep -qF "$want" "$NB_LOGS/mm-worker0.log"; then
  ok "the scheduler on worker 0's host logged the refusal"
else
  bad "the scheduler's log (worker 0's host) does not show the refusal"
  show mm-worker0
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
