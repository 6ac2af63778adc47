#!/usr/bin/env bash
# The test command: install, build, run every test (unit + integration) with CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash deploy/install-deps.sh
bash deploy/build.sh
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j "${CTEST_JOBS:-2}" --timeout 600 "$@"
