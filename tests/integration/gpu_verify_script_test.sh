#!/usr/bin/env bash
# deploy/gpu-verify.sh is run where a GPU is lent, which is rare; between those sessions its
# stages would rot unseen (its first GPU run found three faults a CPU rehearsal had not been
# there to find). This runs its resnet, bench and tls stages on the CPU (GPU_VERIFY_ON_CPU=1:
# one CPU replica, the trainer's replica path without CUDA; a CPU PyTorch reference), small:
# LeNet, 3000 examples. The stages must pass: both workers' weights equal, accuracy as
# without replicas, a worker SIGKILLed after batch 10 ending on the same weights, a ratio
# for each bench mode, and the tls stage's two ratios (8 MB, one round). Then a kill that
# can never happen (after batch 999) must make the script fail, naming it.
#   gpu_verify_script_test.sh SOURCE_DIR BUILD_DIR
set -uo pipefail
SRC=$1 BUILD=$2
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*" >&2; cat "$WORK"/*/summary.txt >&2 2>/dev/null; exit 1; }
verify() {  # LOGS KILL_AT
  (cd "$SRC" && GPU_VERIFY_ON_CPU=1 GPU_BUILD_DIR="$BUILD" GPU_VERIFY_LOGS="$1" GPU_VERIFY_STAGES="resnet bench tls" \
     GPU_VERIFY_RESNET="--network lenet --num-examples 3000" GPU_VERIFY_KILL_AT="$2" GPU_VERIFY_BENCH=lenet \
     GPU_VERIFY_BENCH_EXAMPLES=3000 GPU_VERIFY_TLS_MB=8 GPU_VERIFY_TLS_TRIALS=1 GPU_VERIFY_TLS_CONNECTIONS=2,1 \
     GPU_VERIFY_TLS_EXAMPLES=3000 GPU_VERIFY_TLS_ROUNDS=1 PYTHON=/usr/bin/python3 bash deploy/gpu-verify.sh stages)
}

verify "$WORK/good" 10 > "$WORK/good.out" 2>&1 || { cat "$WORK/good.out" >&2; fail "the stages failed on the CPU"; }
summary="$WORK/good/summary.txt"
grep -q '^PASS: --network lenet --num-examples 3000: dtrain launch -n 2 -s 1 --kv-store dist_device_sync -- --cpu-replicas 1: Validation-accuracy' "$summary" \
  || fail "no PASS for the 2-worker job"
grep -q '^PASS: .*worker 1 SIGKILLed after batch 10 (--max-restarts 1): both workers end on [0-9a-f]\{16\}, the uninterrupted run' "$summary" \
  || fail "no PASS for the killed worker"
for mode in dist_device_sync device; do
  grep -q "^INFO: bench lenet-b256 $mode: [0-9.]*x PyTorch (dtrain [0-9.]* samples/s, PyTorch [0-9.]*); per step: compute" "$summary" \
    || fail "no ratio for $mode"
done
# The tls stage's figures (INFO whatever they are: this machine's 2 cores bound them).
grep -q '^INFO: tls push+pull: best [0-9.]*x plaintext, target 0.8 \(met\|not met\); 2 connections [0-9.]*x (.*; 1 connection [0-9.]*x' "$summary" \
  || fail "no push+pull ratio from the tls stage"
grep -q '^INFO: tls training: median [0-9.]*x plaintext over 1 alternating rounds, target 0.95 \(met\|not met\) (samples/s, plaintext: [0-9.]*; --tls: [0-9.]*)' "$summary" \
  || fail "no training ratio from the tls stage"

verify "$WORK/bad" 999 > "$WORK/bad.out" 2>&1 && fail "a kill after batch 999 of 23 passed"
grep -q '^FAIL: .*SIGKILLed after batch 999 (--max-restarts 1): worker 1 never reached batch 999' "$WORK/bad/summary.txt" \
  || fail "the impossible kill did not fail by name"
echo "gpu_verify_script_test: PASS"
