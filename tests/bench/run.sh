#!/usr/bin/env bash
# dtrain benchmarks, each printed as a ratio to a reference measured in the same run.
#   bash tests/bench/run.sh [throughput|transport|metrics|snapshots|replication|infer|tls|netns|resnet|all]   (default: all)
# Needs a build (deploy/build.sh) and /usr/bin/python3 with python3-torch.
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN="${BIN:-build/bin}"
REF="${REF:-tests/bench/torch_reference.py}"

# One `dtrain launch -n 2 -s 3` lenet run with --replication $1; prints the workers'
# mean step time in ms (batch 64 over their summed samples/s).
replicated_step_ms() {
  local log; log=$(mktemp)
  "$BIN/dtrain" launch -n 2 -s 3 --replication "$1" --kv-store dist_sync -- --network lenet --batch-size 64 \
      --num-epochs "$EPOCHS" --num-examples "${EXAMPLES:-20000}" --disp-batches 100000 >"$log" 2>&1 \
      || { cat "$log" >&2; exit 1; }
  grep -o '([0-9.]* samples/sec)' "$log" | tr -d '(' | awk '{s+=$1} END {printf "%.3f", 64 * 2 * 1000 / s}'
  rm -f "$log"
}

# Step time with --replication 2 vs 1 (alternating rounds, median ratio) and the
# recovery time from a server's SIGKILL to the next completed step (the failover
# CTest's figure, over SEEDS seeds).
replication() {
  local rounds="${ROUNDS:-4}"
  echo "== replication: dtrain launch -n 2 -s 3 lenet, --replication 2 vs 1, alternating, x$rounds (epochs=$EPOCHS)"
  local results=""
  for r in $(seq 1 "$rounds"); do
    local one two
    if [ $((r % 2)) -eq 1 ]; then one=$(replicated_step_ms 1); two=$(replicated_step_ms 2); else two=$(replicated_step_ms 2); one=$(replicated_step_ms 1); fi
    echo "round $r: step time replication 1: $one ms, replication 2: $two ms"
    results="$results $one $two"
  done
  /usr/bin/python3 - $results <<'PY'
import statistics, sys
v = [float(x) for x in sys.argv[1:]]
pairs = [v[i:i + 2] for i in range(0, len(v), 2)]
ratio = statistics.median(b / a for a, b in pairs)
print("step time: replication 1 mean %.2f ms, replication 2 mean %.2f ms; median ratio 2/1 = %.3f (target <= 1.15)"
      % (statistics.mean(p[0] for p in pairs), statistics.mean(p[1] for p in pairs), ratio))
PY
  echo "== failover recovery: SIGKILL of a server to the next completed step (seeds 1..${SEEDS:-3})"
  for seed in $(seq 1 "${SEEDS:-3}"); do
    DTRAIN_CHAOS_SEED=$seed "$BIN/recovery_server_failover_test" | grep -E "SIGKILL|recovery time|FAILED" || true
  done
}

what="${1:-all}"
EPOCHS="${EPOCHS:-1}"

throughput() {
  # WORKER_FLAGS: more dtrain-worker flags, e.g. "--no-overlap" (the sequential step; overlap is the default).
  echo "== training throughput: dtrain launch -n 2 -s 1 -- --network lenet --batch-size 64 ${WORKER_FLAGS:-}" \
    "(epochs=$EPOCHS)"
  local log; log=$(mktemp)
  # shellcheck disable=SC2086  # WORKER_FLAGS is a list of flags
  "$BIN/dtrain" launch -n 2 -s 1 --kv-store dist_sync -- --network lenet --batch-size 64 \
      --num-epochs "$EPOCHS" --disp-batches 100000 ${WORKER_FLAGS:-} >"$log" 2>&1 || { cat "$log"; exit 1; }
  # Sum of the workers' training speeds (validation excluded, as the reference does).
  local dtrain_sps
  dtrain_sps=$(grep -o '([0-9.]* samples/sec)' "$log" | tr -d '(' | awk '{s+=$1} END {printf "%.1f", s}')
  local acc; acc=$(grep '\[worker 0\].*Training done' "$log" | grep -o 'Validation-accuracy=[0-9.]*' | cut -d= -f2)
  echo "dtrain: $dtrain_sps samples/s total, validation accuracy $acc"
  local ref; ref=$(/usr/bin/python3 "$REF" --world 2 --threads 1 --batch 64 --epochs "$EPOCHS")
  echo "torch DDP/gloo reference: $ref"
  local ref_sps; ref_sps=$(echo "$ref" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["samples_per_s_total"])')
  /usr/bin/python3 -c "print('throughput ratio dtrain/torch = %.3f (target >= 0.8)' % ($dtrain_sps / $ref_sps))"
  # The same reference with dtrain's LeNet layer order and layout (pool before tanh, on
  # channels-last activations; docs/architecture.md): what is left of the ratio is the
  # system's, not the model code's.
  local same_ref; same_ref=$(/usr/bin/python3 "$REF" --lenet-layout dtrain --world 2 --threads 1 --batch 64 --epochs "$EPOCHS")
  echo "torch DDP/gloo, dtrain's LeNet layout: $same_ref"
  local same_sps; same_sps=$(echo "$same_ref" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["samples_per_s_total"])')
  /usr/bin/python3 -c "print('throughput ratio dtrain/torch with the same layout = %.3f' % ($dtrain_sps / $same_sps))"
  rm -f "$log"
}

# One `dtrain launch -n 2 -s 1` lenet run with metrics "off" or "on"; prints the sum of
# the workers' training speeds and the CPU seconds the whole job used (every process, as
# its parent reaped it: robust where other work on the machine makes speeds noisy).
# On: every endpoint is scraped each second meanwhile (Prometheus' default is 15 s).
train_sps() {
  local log; log=$(mktemp)
  local cpu; cpu=$(mktemp)
  local sd; sd=$(mktemp -u /tmp/dtrain-bench-sd-XXXXXX.json)
  local flags=()
  [ "$1" = on ] && flags=(--metrics-file-sd "$sd")
  /usr/bin/python3 -c 'import resource, subprocess, sys
code = subprocess.call(sys.argv[2:])
r = resource.getrusage(resource.RUSAGE_CHILDREN)
open(sys.argv[1], "w").write("%.2f\n" % (r.ru_utime + r.ru_stime))
sys.exit(code)' "$cpu" "$BIN/dtrain" launch -n 2 -s 1 --kv-store dist_sync "${flags[@]}" -- --network lenet \
      --batch-size 64 --num-epochs "$EPOCHS" --disp-batches 100000 >"$log" 2>&1 &
  local pid=$!
  if [ "$1" = on ]; then
    while kill -0 "$pid" 2>/dev/null; do
      if [ -f "$sd" ]; then
        for t in $(grep -o '127.0.0.1:[0-9]*' "$sd"); do curl -s -m 1 "http://$t/metrics" >/dev/null || true; done
      fi
      sleep 1
    done
  fi
  wait "$pid" || { cat "$log" >&2; exit 1; }
  grep -q 'metrics: Prometheus targets written' "$log" || [ "$1" = off ] || { echo "metrics were not on" >&2; exit 1; }
  local sps; sps=$(grep -o '([0-9.]* samples/sec)' "$log" | tr -d '(' | awk '{s+=$1} END {printf "%.1f", s}')
  echo "$sps $(cat "$cpu")"
  rm -f "$log" "$cpu" "$sd"
}

metrics() {
  local rounds="${ROUNDS:-4}"
  echo "== metrics cost: the throughput run with metrics off and on (scraped every 1 s), alternating, x$rounds (epochs=$EPOCHS)"
  local results=""
  for r in $(seq 1 "$rounds"); do
    local off on
    # Alternate which goes first, so a drift of the machine's speed favours neither.
    if [ $((r % 2)) -eq 1 ]; then off=$(train_sps off); on=$(train_sps on); else on=$(train_sps on); off=$(train_sps off); fi
    echo "round $r: off ${off% *} samples/s (${off#* } CPU s), on ${on% *} samples/s (${on#* } CPU s)"
    results="$results $off $on"
  done
  /usr/bin/python3 - $results <<'PY'
import statistics, sys
v = [float(x) for x in sys.argv[1:]]
rounds = [v[i:i + 4] for i in range(0, len(v), 4)]  # off_sps off_cpu on_sps on_cpu
off = [r[0] for r in rounds]; on = [r[2] for r in rounds]
speed = statistics.median(r[2] / r[0] for r in rounds)
cpu = statistics.median(r[3] / r[1] for r in rounds)
print("samples/s: off mean %.1f (min %.1f, max %.1f), on mean %.1f; median on/off = %.4f (%+.2f%%, target within 2%%)"
      % (statistics.mean(off), min(off), max(off), statistics.mean(on), speed, (speed - 1) * 100))
print("CPU seconds of the job: median on/off = %.4f (%+.2f%%)" % (cpu, (cpu - 1) * 100))
PY
}

# One `dtrain launch -n 2 -s 1` lenet run with the launch flags given; prints the sum of
# the workers' training speeds.
launch_sps() {
  local log; log=$(mktemp)
  "$BIN/dtrain" launch -n 2 -s 1 --kv-store dist_sync "$@" -- --network lenet --batch-size 64 \
      --num-epochs "$EPOCHS" --disp-batches 100000 >"$log" 2>&1 || { cat "$log" >&2; exit 1; }
  grep -o '([0-9.]* samples/sec)' "$log" | tr -d '(' | awk '{s+=$1} END {printf "%.1f", s}'
  rm -f "$log"
}

# Server snapshots: the throughput run (-n 2 -s 1, lenet) with and without
# --snapshot-every "$SNAP_EVERY" (default 100), alternating, x$ROUNDS; the ratio of step
# times (the inverse of the samples/s ratio) is the snapshot cost per step.
snap_sps() {
  local dir; dir=$(mktemp -d /tmp/dtrain-bench-snap-XXXXXX)
  if [ "$1" = on ]; then
    launch_sps --snapshot-every "${SNAP_EVERY:-100}" --snapshot-dir "$dir"
    compgen -G "$dir/server-*-step-*.snapshot" >/dev/null || { echo "no snapshot was written" >&2; exit 1; }
  else
    launch_sps
  fi
  echo
  rm -rf "$dir"
}

snapshots() {
  local rounds="${ROUNDS:-4}"
  echo "== snapshot cost: the throughput run with --snapshot-every ${SNAP_EVERY:-100} and without, alternating, x$rounds (epochs=$EPOCHS)"
  local results=""
  for r in $(seq 1 "$rounds"); do
    local off on
    if [ $((r % 2)) -eq 1 ]; then off=$(snap_sps off); on=$(snap_sps on); else on=$(snap_sps on); off=$(snap_sps off); fi
    echo "round $r: without ${off} samples/s, with ${on} samples/s"
    results="$results $off $on"
  done
  /usr/bin/python3 - $results <<'PY'
import statistics, sys
v = [float(x) for x in sys.argv[1:]]
pairs = [(v[i], v[i + 1]) for i in range(0, len(v), 2)]
ratio = statistics.median(off / on for off, on in pairs)  # step time with / without
print("step time with/without snapshots: median ratio %.4f (%+.2f%% per step)" % (ratio, (ratio - 1) * 100))
PY
}

transport() {
  echo "== transport: push+pull of a 64 MB model, 1 worker <-> 1 server, vs plain TCP on loopback"
  "$BIN/transport_bench" --server-bin "$BIN/dtrain-server" --mb 64 --rounds 10 --trials 5
}

infer() {
  echo "== inference: Predict and ModelInfer (Open Inference Protocol) p50/p99, throughput and CPU per image, 8 clients, batch 1 and 64, vs in-process forward (load: $(cut -d' ' -f1-3 /proc/loadavg))"
  local dir; dir=$(mktemp -d)
  # A small LeNet checkpoint to serve (seconds); the model's accuracy does not matter here.
  "$BIN/dtrain-worker" --kv-store local --network lenet --num-epochs 1 --num-examples 2000 \
      --model-prefix "$dir/m" >"$dir/train.log" 2>&1 || { cat "$dir/train.log"; exit 1; }
  "$BIN/infer_bench" --infer-bin "$BIN/dtrain-infer" --model-prefix "$dir/m" --clients 8 --batches 1,64 \
      --seconds 3 --trials "${TRIALS:-3}" ${INFER_BENCH_FLAGS:-}   # e.g. INFER_BENCH_FLAGS="--max-batch-size 1" (no batching)
  rm -rf "$dir"
}

tls() {
  # The first count of each list is what dtrain-worker uses by default (--connections-per-server
  # 0: 1 in plaintext, 2 with TLS), and the ratios are to the first plaintext count.
  local tls_conn="${TLS_CONNECTIONS:-2,1,4}" plain_conn="${PLAIN_CONNECTIONS:-1,2}"
  echo "== TLS transport: push+pull of a 64 MB model, 1 worker <-> 1 server, mutual TLS over $tls_conn" \
    "connections vs plaintext over $plain_conn (same run, alternating)"
  "$BIN/tls_bench" --server-bin "$BIN/dtrain-server" --mb 64 --rounds 5 --trials 5 \
      --connections "$tls_conn" --plain-connections "$plain_conn"
  local rounds="${ROUNDS:-3}"
  echo "== TLS training throughput: the throughput run with and without --tls, alternating, x$rounds (epochs=$EPOCHS)"
  local results=""
  for r in $(seq 1 "$rounds"); do
    local off on
    if [ $((r % 2)) -eq 1 ]; then off=$(launch_sps); on=$(launch_sps --tls); else on=$(launch_sps --tls); off=$(launch_sps); fi
    echo "round $r: plaintext $off samples/s, --tls $on samples/s"
    results="$results $off $on"
  done
  /usr/bin/python3 - $results <<'PY'
import statistics, sys
v = [float(x) for x in sys.argv[1:]]
pairs = [(v[i], v[i + 1]) for i in range(0, len(v), 2)]
ratio = statistics.median(on / off for off, on in pairs)
print("training throughput --tls/plaintext: median %.4f (target >= 0.95)" % ratio)
PY
}

# dtrain vs DDP/gloo on the emulated cluster (tests/bench/netns_cluster.sh; root): each
# process on its own network-namespace host, links limited by tbf. Parameters:
#   RATES (default "1gbit"; e.g. "250mbit 1gbit 10gbit"), NETWORK (lenet; or mlp),
#   HIDDEN (mlp widths, e.g. 2048,2048), THREADS (1), EPOCHS (1), BATCH (64),
#   EXAMPLES (0: the whole set), WORKERS (2), SERVERS (2), STRAGGLER_CPU (e.g. 0.33), CC (congestion control: reno, bbr), LINK_TRACE=1 (--link-trace).
#   sudo RATES="1gbit" NETWORK=lenet bash tests/bench/run.sh netns
#   sudo RATES=250mbit NETWORK=mlp HIDDEN=2048,2048 EXAMPLES=6000 bash tests/bench/run.sh netns
netns() {
  local rate
  for rate in ${RATES:-1gbit}; do
    echo "== netns cluster: ${NETWORK:-lenet}${HIDDEN:+ --hidden $HIDDEN}, ${WORKERS:-2} workers + ${SERVERS:-2} servers," \
      "each on its own host, $rate links (epochs=$EPOCHS, threads=${THREADS:-1})"
    BIN="$BIN" REF="$REF" bash tests/bench/netns_cluster.sh --rate "$rate" --network "${NETWORK:-lenet}" \
      ${HIDDEN:+--hidden "$HIDDEN"} --workers "${WORKERS:-2}" --servers "${SERVERS:-2}" --threads "${THREADS:-1}" \
      --batch "${BATCH:-64}" --epochs "$EPOCHS" --num-examples "${EXAMPLES:-0}" \
      ${STRAGGLER_CPU:+--straggler-cpu "$STRAGGLER_CPU"} ${CC:+--cc "$CC"} ${LINK_TRACE:+--link-trace}
  done
}

case "$what" in
  throughput) throughput ;;
  transport) transport ;;
  metrics) metrics ;;
  snapshots) snapshots ;;
  infer) infer ;;
  tls) tls ;;
  replication) replication ;;
  netns) netns ;;
  resnet) BIN="$BIN" REF="$REF" EPOCHS="$EPOCHS" bash tests/bench/resnet_throughput.sh ;;
  all) transport; throughput; metrics; snapshots; replication; infer; tls ;;
  *) echo "usage: $0 [throughput|transport|metrics|snapshots|replication|infer|tls|netns|resnet|all]" >&2; exit 2 ;;
esac
