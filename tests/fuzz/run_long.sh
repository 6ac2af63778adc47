#!/usr/bin/env bash
# Long fuzzing runs, outside CI (docs/fuzzing.md):
#   tests/fuzz/run_long.sh [-t SECONDS] [-j JOBS] [-o OUTDIR] [-k] [TARGET...]
# Runs each target (all by default) for SECONDS (default 3600), JOBS targets at a time
# (default 1). Each target starts from its committed corpus and its regression inputs;
# what it learns goes to OUTDIR/<target>/corpus (outside the source tree), crashes,
# leaks, timeouts and out-of-memory inputs to OUTDIR/<target>/findings, its log to
# OUTDIR/<target>/log. A target stops at its first finding, unless -k (keep going:
# libFuzzer's fork mode, which records every crash, leak, timeout and OOM and goes on).
# Exits non-zero if any target found something.
#
# Needs the fuzzers built: `bash deploy/build.sh` (they land in build/fuzz), or set
# FUZZ_BIN to another directory holding *_fuzzer.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
seconds=3600
jobs=1
out=""
keep_going=()
while getopts "t:j:o:kh" opt; do
  case $opt in
    t) seconds=$OPTARG ;;
    j) jobs=$OPTARG ;;
    o) out=$OPTARG ;;
    k) keep_going=(-fork=1 -ignore_crashes=1 -ignore_ooms=1 -ignore_timeouts=1) ;;
    *) sed -n '2,14p' "$0"; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
bin=${FUZZ_BIN:-$root/${BUILD_DIR:-build}/fuzz}
out=${out:-$(mktemp -d "${TMPDIR:-/tmp}/dtrain-fuzz-long-XXXXXX")}
mkdir -p "$out"
out=$(cd "$out" && pwd)

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for f in "$bin"/*_fuzzer; do targets+=("$(basename "$f" _fuzzer)"); done
fi
if [ ${#targets[@]} -eq 0 ] || [ ! -x "$bin/${targets[0]}_fuzzer" ]; then
  echo "run_long: no fuzzers in $bin (build them with: bash deploy/build.sh)" >&2
  exit 2
fi
echo "run_long: ${targets[*]}: ${seconds}s each, $jobs at a time; findings under $out"

one() {  # one target, in the foreground of its own subshell
  local t=$1 dir="$out/$1"
  mkdir -p "$dir/corpus" "$dir/findings"
  # Scratch files in memory where possible (see run_ctest.sh).
  local scratch_root="$dir"
  if [ -d /dev/shm ] && [ -w /dev/shm ]; then scratch_root=/dev/shm; fi
  local scratch
  scratch=$(mktemp -d "$scratch_root/dtrain-fuzz-$t-XXXXXX")
  local seeds=("$here/corpus/$t")
  [ -d "$here/regressions/$t" ] && seeds+=("$here/regressions/$t")
  local rc=0
  # A long run may grow inputs beyond the seeds' sizes: allow up to 64 KiB.
  TMPDIR="$scratch" "$bin/${t}_fuzzer" -max_total_time="$seconds" -max_len=65536 -rss_limit_mb=2048 \
    -timeout=60 -print_final_stats=1 "-artifact_prefix=$dir/findings/" ${keep_going[@]+"${keep_going[@]}"} \
    "$dir/corpus" "${seeds[@]}" >"$dir/log" 2>&1 || rc=$?
  rm -rf "$scratch"
  local found
  found=$(find "$dir/findings" -type f | wc -l)
  echo "run_long: $t: exit $rc, $found finding(s), corpus $(find "$dir/corpus" -type f | wc -l) inputs"
  [ "$rc" -eq 0 ] && [ "$found" -eq 0 ]
}

failed=0
pids=()
for t in "${targets[@]}"; do
  one "$t" &
  pids+=($!)
  # At most $jobs at a time: wait for the oldest before starting another.
  if [ ${#pids[@]} -ge "$jobs" ]; then
    wait "${pids[0]}" || failed=1
    pids=("${pids[@]:1}")
  fi
done
for p in "${pids[@]}"; do wait "$p" || failed=1; done

echo "run_long: findings (if any) under $out/*/findings; logs in $out/*/log"
find "$out" -path '*/findings/*' -type f
exit $failed
