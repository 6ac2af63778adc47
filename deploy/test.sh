#!/usr/bin/env bash
# The test command: install, build, run every test (unit + integration) with CTest.
# The console shows what failed (with its output) and the summary; the full log of
# every test, passed ones included, is in build/ctest.log.
set -euo pipefail
cd "$(dirname "$0")/.."
bash deploy/install-deps.sh
bash deploy/build.sh
build_dir="${BUILD_DIR:-build}"
# Passed tests' two progress lines are left out so that a failure's output is what
# one reads first, even in a CI excerpt of a few hundred lines.
ctest --test-dir "$build_dir" --output-on-failure -j "${CTEST_JOBS:-2}" --timeout 600 \
  --output-log "$build_dir/ctest.log" "$@" |
  grep --line-buffered -vE '^ +Start +[0-9]+: |^ *[0-9]+/[0-9]+ Test +#[0-9]+: .* Passed +[0-9.]+ sec$'
