#!/usr/bin/env bash
# The main job, from a fresh machine: install, build, then train LeNet on
# Fashion-MNIST with 2 workers and 2 parameter servers (dist_sync) on loopback,
# saving checkpoints under model/; then serve the newest checkpoint with dtrain-infer
# and classify 1000 t10k images with `dtrain predict` (accuracy + a picture).
#
# It builds only what it runs (dtrain, the scheduler, server and worker, dtrain-infer);
# the test command (deploy/test.sh) installs the tests' tools and builds the rest in the
# same build directory. At the end (or where it fails) it prints how long each phase took.
set -euo pipefail
cd "$(dirname "$0")/.."

phase_names=()
phase_seconds=()
phase_started=$(date +%s)
phase_now=""
# Ends the running phase (if any) and starts `$1` (empty: none).
phase() {
  local t; t=$(date +%s)
  if [ -n "$phase_now" ]; then
    phase_names+=("$phase_now")
    phase_seconds+=($((t - phase_started)))
  fi
  phase_now="$1"
  phase_started=$t
}
report_phases() {
  local code=$?
  phase ""
  local total=0 line="" i
  for i in "${!phase_names[@]}"; do
    total=$((total + phase_seconds[i]))
    line+="${phase_names[i]} $((phase_seconds[i] / 60))m$(printf '%02d' $((phase_seconds[i] % 60)))s, "
  done
  echo "quickstart: ${line}total $((total / 60))m$(printf '%02d' $((total % 60)))s$([ "$code" -eq 0 ] || echo " (failed, exit $code)")"
}
trap report_phases EXIT

phase install
bash deploy/install-deps.sh --run
phase build
# Tests off: no test or fuzz binary is built here (deploy/test.sh turns them on again).
bash deploy/build.sh -DDTRAIN_BUILD_TESTS=OFF
phase train
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
phase "serve and predict"
DATA=/usr/share/datasets/fashion-mnist
port_file=$(mktemp -u /tmp/dtrain-infer-port.XXXXXX)
build/bin/dtrain-infer --model-prefix model/fmnist-lenet --port 0 --port-file "$port_file" \
  --wait-for-model 30 >model/infer.log 2>&1 &
infer_pid=$!
trap 'code=$?; kill -TERM "$infer_pid" 2>/dev/null; wait "$infer_pid" 2>/dev/null; rm -f "$port_file"; (exit $code); report_phases' EXIT
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
