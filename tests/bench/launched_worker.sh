# Sourced by deploy/gpu-verify.sh and tests/bench/straggler_pauses.sh.
# launched_worker P RANK: prints the pid of the dtrain-worker of rank RANK among the
# descendants of process P (a `timeout`, then `dtrain launch`, then its children); its
# environment names the rank. Fails when there is none (yet).
launched_worker() {
  local p=$1 rank=$2 c
  for c in $(cat "/proc/$p/task/$p/children" 2>/dev/null || pgrep -P "$p"); do
    if grep -q dtrain-worker "/proc/$c/cmdline" 2>/dev/null \
       && tr '\0' '\n' < "/proc/$c/environ" 2>/dev/null | grep -qx "DTRAIN_RANK=$rank"; then
      echo "$c"
      return 0
    fi
    launched_worker "$c" "$rank" && return 0
  done
  return 1
}
