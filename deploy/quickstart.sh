#!/usr/bin/env bash
# The main job, from a fresh machine: install, build, then train LeNet on
# Fashion-MNIST with 2 workers and 2 parameter servers (dist_sync) on loopback,
# saving checkpoints under model/; then serve the newest checkpoint with dtrain-infer
# and classify 1000 t10k images with `dtrain predict` (accuracy + a picture).
set -euo pipefail
cd "$(dirname "$0")/.."
bash deploy/install-deps.sh
bash deploy/build.sh
EPOCHS="${EPOCHS:-3}"
mkdir -p model
# The quickstart starts over each time it runs: a prefix holds one run's checkpoints, so
# the previous run's are deleted rather than mixed with this one's.
build/bin/dtrain launch -n 2 -s 2 --kv-store dist_sync -- \
  --network lenet --num-epochs "$EPOCHS" --batch-size 64 --lr 0.1 --lr-step-epochs 2 \
  --model-prefix model/fmnist-lenet --overwrite-checkpoints
echo "quickstart: checkpoints in model/:"
ls -l model/

# Serve the newest checkpoint, stopped (SIGTERM) however this script ends.
DATA=/usr/share/datasets/fashion-mnist
port_file=$(mktemp -u /tmp/dtrain-infer-port.XXXXXX)
build/bin/dtrain-infer --model-prefix model/fmnist-lenet --port 0 --port-file "$port_file" \
  --wait-for-model 30 >model/infer.log 2>&1 &
infer_pid=$!
trap 'kill -TERM "$infer_pid" 2>/dev/null; wait "$infer_pid" 2>/dev/null; rm -f "$port_file"' EXIT
for _ in $(seq 1 300); do   # up to 30 s for the port
  [ -s "$port_file" ] && break
  kill -0 "$infer_pid" 2>/dev/null || { cat model/infer.log; exit 1; }
  sleep 0.1
done
[ -s "$port_file" ] || { echo "quickstart: dtrain-infer did not start"; cat model/infer.log; exit 1; }
port=$(cat "$port_file")
echo "quickstart: dtrain-infer serving on 127.0.0.1:$port (log: model/infer.log)"
# --wait: dtrain predict retries until the server has loaded the model.
build/bin/dtrain predict --server "127.0.0.1:$port" --wait 30 \
  --images "$DATA/t10k-images-idx3-ubyte.gz" --labels "$DATA/t10k-labels-idx1-ubyte.gz" \
  --limit 1000 --render model/predictions.png >model/predictions.txt
head -n 5 model/predictions.txt
echo "..."
grep -E '^(accuracy=|picture:)' model/predictions.txt
echo "quickstart: one line per image in model/predictions.txt, the picture in model/predictions.png"
