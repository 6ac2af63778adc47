#!/usr/bin/env bash
# resnet 20 training throughput: `dtrain launch -n 2 -s 1 -- --network resnet
# --num-layers 20` against PyTorch DDP/gloo with 2 processes (tests/bench/torch_reference.py --network
# resnet, the same architecture, parameter for parameter), in the same run, same batch per
# worker, one thread per worker, same examples; printed as a ratio (target >= 0.9).
#   bash tests/bench/run.sh resnet        (or this script; EXAMPLES, EPOCHS, BATCH, LAYERS, and
#   WORKER_FLAGS: more dtrain-worker flags, e.g. "--no-overlap"; overlap is the default)
# Both sides count training only: dtrain's figure is the workers' "Training done" speed
# (its end-of-epoch batch-norm recalibration and validation excluded), the reference's
# its training loop.
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN="${BIN:-build/bin}"
REF="${REF:-tests/bench/torch_reference.py}"
EPOCHS="${EPOCHS:-1}"
EXAMPLES="${EXAMPLES:-6000}"
BATCH="${BATCH:-64}"
LAYERS="${LAYERS:-20}"

echo "== resnet $LAYERS training throughput: dtrain launch -n 2 -s 1 vs DDP/gloo, 2 workers, batch $BATCH," \
  "1 thread each, $EXAMPLES examples, epochs=$EPOCHS ${WORKER_FLAGS:-}"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# shellcheck disable=SC2086  # WORKER_FLAGS is a list of flags
"$BIN/dtrain" launch -n 2 -s 1 --kv-store dist_sync -- --network resnet --num-layers "$LAYERS" \
    --batch-size "$BATCH" --num-epochs "$EPOCHS" --num-examples "$EXAMPLES" --num-test-examples 1000 \
    --threads 1 --augment off --disp-batches 100000 ${WORKER_FLAGS:-} >"$log" 2>&1 || { cat "$log"; exit 1; }
# The sum of the workers' training speeds.
dtrain_sps=$(grep 'Training done' "$log" | grep -o '([0-9.]* samples/sec)' | tr -d '(' | awk '{s+=$1} END {printf "%.1f", s}')
acc=$(grep '\[worker 0\].*Training done' "$log" | grep -o 'Validation-accuracy=[0-9.]*' | cut -d= -f2)
echo "dtrain: $dtrain_sps samples/s total, validation accuracy $acc (1000 test images)"
ref=$(/usr/bin/python3 "$REF" --network resnet --num-layers "$LAYERS" --world 2 --threads 1 --batch "$BATCH" \
    --epochs "$EPOCHS" --num-examples "$EXAMPLES")
echo "torch DDP/gloo reference: $ref"
ref_sps=$(echo "$ref" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["samples_per_s_total"])')
/usr/bin/python3 -c "print('resnet throughput ratio dtrain/torch = %.3f (target >= 0.9)' % ($dtrain_sps / $ref_sps))"
