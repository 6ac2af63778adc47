#!/usr/bin/env bash
# One CTest of a fuzz target (registered by tests/fuzz/CMakeLists.txt):
#   run_ctest.sh FUZZER CORPUS REGRESSIONS FINDINGS SECONDS
# First every committed regression input is replayed (each once crashed), then the
# target fuzzes for SECONDS with a fixed seed, starting from the committed corpus.
# libFuzzer adds new inputs to the first corpus directory it is given only, so that is
# a scratch directory: the source tree is never written. A crash fails the test and
# leaves its input in FINDINGS (libFuzzer prints the path and the input in base64).
set -euo pipefail
fuzzer=$1 corpus=$2 regressions=$3 findings=$4 seconds=$5

rm -rf "$findings"
mkdir -p "$findings"
work=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-fuzz-ctest-XXXXXX")
# The targets' scratch files (the decoders under test read paths; the checkpoint writer
# fsyncs) go to memory where there is some: on a disk, fsync makes the checkpoint target
# seven times slower.
scratch_root="$work"
if [ -d /dev/shm ] && [ -w /dev/shm ]; then scratch_root=/dev/shm; fi
scratch=$(mktemp -d "$scratch_root/dtrain-fuzz-XXXXXX")
trap 'rm -rf "$work" "$scratch"' EXIT
mkdir "$work/corpus"
export TMPDIR="$scratch"
# A per-input timeout well above the slowest legitimate input, so a hang is a finding
# but a busy machine is not.
opts=(-rss_limit_mb=2048 -timeout=60 "-artifact_prefix=$findings/")

run() {  # run WHERE-THE-INPUT-IS ARGS...: the fuzzer, its log without per-input progress lines
  local where=$1 rc=0
  shift
  "$fuzzer" "${opts[@]}" "$@" >"$work/log" 2>&1 || rc=$?
  grep -avE '^#[0-9]+[[:space:]]+(NEW|REDUCE|pulse)' "$work/log" || true
  if [ "$rc" -ne 0 ]; then
    echo "FAILED: $(basename "$fuzzer") exited $rc; the input: $where" >&2
    exit "$rc"
  fi
}

shopt -s nullglob
replay=("$regressions"/*)
if [ ${#replay[@]} -gt 0 ]; then
  echo "== replaying ${#replay[@]} regression input(s) from $regressions"
  run "the last 'Running:' line above" "${replay[@]}"
fi
echo "== fuzzing for ${seconds}s (seed 1) from $corpus"
run "under $findings" -seed=1 "-max_total_time=$seconds" "$work/corpus" "$corpus"
