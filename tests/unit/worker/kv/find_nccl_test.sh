#!/usr/bin/env bash
# services/worker/kv/find_nccl.cmake in a throwaway project: DTRAIN_CUDA=ON without a CUDA
# toolkit stops the configure naming what is missing; AUTO without it builds for the CPU;
# AUTO with this machine's toolkit and NCCL (CI has both) turns the NCCL aggregator on.
# Usage: find_nccl_test.sh SOURCE_DIR CMAKE
set -uo pipefail
src="$1"
cmake="$2"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.20)
project(find_nccl_test LANGUAGES CXX)
set(DTRAIN_WITH_NCCL OFF)
set(DTRAIN_TORCH_CUDA OFF)
include("$src/services/worker/kv/find_nccl.cmake")
message(STATUS "RESULT nccl=\${DTRAIN_WITH_NCCL}")
CMAKE
failures=0
configure() {  # configure NAME ARGS...: output in $work/NAME.log, status returned
  local name="$1"; shift
  rm -rf "$work/b"
  "$cmake" -S "$work" -B "$work/b" "$@" > "$work/$name.log" 2>&1
}
expect() {  # expect NAME TEXT
  if grep -q -- "$2" "$work/$1.log"; then echo "ok: $1: $2"; else
    echo "FAIL: $1: no '$2' in:"; cat "$work/$1.log"; failures=$((failures + 1)); fi
}

if configure on_missing -DDTRAIN_CUDA=ON -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=TRUE -DNCCL_ROOT=/nonexistent; then
  echo "FAIL: on_missing: the configure succeeded"; failures=$((failures + 1))
fi
expect on_missing "DTRAIN_CUDA=ON but the CUDA toolkit"
expect on_missing "configure with -DDTRAIN_CUDA=AUTO/OFF"

configure auto_missing -DDTRAIN_CUDA=AUTO -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=TRUE -DNCCL_ROOT=/nonexistent \
  || { echo "FAIL: auto_missing: the configure failed"; failures=$((failures + 1)); }
expect auto_missing "building for the CPU only"
expect auto_missing "RESULT nccl=OFF"

if [ -f /usr/local/cuda/include/nccl.h ] || [ -f /usr/include/nccl.h ]; then
  configure auto_found -DDTRAIN_CUDA=AUTO || { echo "FAIL: auto_found: the configure failed"; failures=$((failures + 1)); }
  expect auto_found "RESULT nccl=ON"
else
  echo "skip: auto_found: no CUDA toolkit with NCCL on this machine"
fi
echo "$failures failed"
[ "$failures" -eq 0 ]
