#!/usr/bin/env bash
# dtrain benchmarks, each printed as a ratio to a reference measured in the same run.
#   bash tests/bench/run.sh [throughput|transport|all]   (default: all)
# Needs a build (deploy/build.sh) and /usr/bin/python3 with python3-torch.
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN="${BIN:-build/bin}"
REF="${REF:-../shared/bench/torch_fmnist.py}"
what="${1:-all}"
EPOCHS="${EPOCHS:-1}"

throughput() {
  echo "== training throughput: dtrain launch -n 2 -s 1 -- --network lenet --batch-size 64 (epochs=$EPOCHS)"
  local log; log=$(mktemp)
  "$BIN/dtrain" launch -n 2 -s 1 --kv-store dist_sync -- --network lenet --batch-size 64 \
      --num-epochs "$EPOCHS" --disp-batches 100000 >"$log" 2>&1 || { cat "$log"; exit 1; }
  # Sum of the workers' training speeds (validation excluded, as the reference does).
  local dtrain_sps
  dtrain_sps=$(grep -o '([0-9.]* samples/sec)' "$log" | tr -d '(' | awk '{s+=$1} END {printf "%.1f", s}')
  local acc; acc=$(grep '\[worker 0\].*Training done' "$log" | grep -o 'Validation-accuracy=[0-9.]*' | cut -d= -f2)
  echo "dtrain: $dtrain_sps samples/s total, validation accuracy $acc"
  local ref; ref=$(/usr/bin/python3 "$REF" --world 2 --threads 1 --batch 64 --epochs "$EPOCHS")
  echo "torch DDP/gloo reference: $ref"
  local ref_sps; ref_sps=$(echo "$ref" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["samples_per_s_total"])')
  /usr/bin/python3 -c "print('throughput ratio dtrain/torch = %.3f (target >= 0.8)' % ($dtrain_sps / $ref_sps))"
  rm -f "$log"
}

transport() {
  echo "== transport: push+pull of a 64 MB model, 1 worker <-> 1 server, vs plain TCP on loopback"
  "$BIN/transport_bench" --server-bin "$BIN/dtrain-server" --mb 64 --rounds 10 --trials 5
}

case "$what" in
  throughput) throughput ;;
  transport) transport ;;
  all) transport; throughput ;;
  *) echo "usage: $0 [throughput|transport|all]" >&2; exit 2 ;;
esac
