#!/usr/bin/env bash
# The main job, from a fresh machine: install, build, then train LeNet on
# Fashion-MNIST with 2 workers and 2 parameter servers (dist_sync) on loopback,
# saving checkpoints under model/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash deploy/install-deps.sh
bash deploy/build.sh
EPOCHS="${EPOCHS:-3}"
mkdir -p model
build/bin/dtrain launch -n 2 -s 2 --kv-store dist_sync -- \
  --network lenet --num-epochs "$EPOCHS" --batch-size 64 --lr 0.1 --lr-step-epochs 2 \
  --model-prefix model/fmnist-lenet
echo "quickstart: checkpoints in model/:"
ls -l model/
