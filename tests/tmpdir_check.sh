#!/bin/bash
# The tests' TMPDIR (set by tests/CMakeLists.txt on every test), as a CTest fixture:
#   tmpdir_check.sh setup DIR [SHARED]   empties DIR (and SHARED, tests' shared results) before the tests
#   tmpdir_check.sh check DIR   after them: fails listing whatever a test left there
# Tests must remove what they create (RAII, traps); leftovers pile up in /tmp otherwise.
set -euo pipefail
mode=$1 dir=$2
case "$mode" in
  setup)
    rm -rf "$dir"
    mkdir -p "$dir"
    if [ -n "${3:-}" ]; then rm -rf "$3"; mkdir -p "$3"; fi
    ;;
  check)
    [ -d "$dir" ] || { echo "FAIL: $dir is missing (the setup test did not run?)" >&2; exit 1; }
    left=$(cd "$dir" && find . -mindepth 1 -maxdepth 1 -printf '%P\n' | sort)
    if [ -n "$left" ]; then
      echo "FAIL: tests left these behind in their TMPDIR $dir:" >&2
      # Names say who: dtrain-test-SUITE.TEST-* (integration), dtrain-worker-* (unit TempDir).
      echo "$left" | sed 's/^/  /' >&2
      rm -rf "$dir"/* "$dir"/.[!.]* 2>/dev/null || true
      exit 1
    fi
    echo "ok: $dir is empty"
    ;;
  *) echo "usage: $0 setup|check DIR" >&2; exit 2 ;;
esac
