#!/usr/bin/env bash
# The test command: install, build, run every test (unit + integration) with CTest.
# The console shows what failed (with its output) and the summary; the full log of
# every test, passed ones included, is in build/ctest.log.
set -euo pipefail
cd "$(dirname "$0")/.."
bash deploy/install-deps.sh
build_dir="${BUILD_DIR:-build}"
# A CUDA LibTorch's headers, so the build compiles the worker's GPU code too
# (dtrain_cuda_compile_check); fails here, saying why, when they cannot be fetched.
if [ -d /usr/local/cuda ] || command -v nvcc >/dev/null; then
  bash deploy/fetch-torch-cuda-headers.sh "$build_dir"
fi
# Tests on: the quickstart may have configured the same build directory without them.
bash deploy/build.sh -DDTRAIN_BUILD_TESTS=ON
# Passed tests' two progress lines are left out so that a failure's output is what
# one reads first, even in a CI excerpt of a few hundred lines.
ctest --test-dir "$build_dir" --output-on-failure -j "${CTEST_JOBS:-2}" --timeout 600 \
  --output-log "$build_dir/ctest.log" "$@" |
  grep --line-buffered -vE '^ +Start +[0-9]+: |^ *[0-9]+/[0-9]+ Test +#[0-9]+: .* Passed +[0-9.]+ sec$'
