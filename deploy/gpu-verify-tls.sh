# shellcheck shell=bash disable=SC2154  # say, report, BUILD, LOGS, PYTHON, data: gpu-verify.sh's
# The tls stage of deploy/gpu-verify.sh (sourced by it; uses its say, report, BUILD, LOGS,
# PYTHON and data). Not a GPU check: the GPU machine is the only one lent here with idle cores
# (16), and mutual TLS's targets (push+pull >= 0.8x plaintext, training >= 0.95x) are bounded
# on the shared 2-core machine by the CPU each GB costs at both ends (docs/security.md, "What
# it costs"). So the figures come out as INFO lines naming the target and whether it was met,
# and a target missed does not change the verification's exit status; a run that fails or
# passes its time limit (as in the other stages) is a FAIL naming its log.
#   GPU_VERIFY_TLS_MB (64), GPU_VERIFY_TLS_TRIALS (5), GPU_VERIFY_TLS_CONNECTIONS (2,1,4,8),
#   GPU_VERIFY_TLS_EXAMPLES (training examples per run, 20000),
#   GPU_VERIFY_TLS_ROUNDS (alternating training rounds, 3) make it smaller.

# tls_met RATIO TARGET: "met" or "not met".
tls_met() { awk -v r="$1" -v g="$2" 'BEGIN { print (r >= g) ? "met" : "not met" }'; }

# tls_training_sps LOG [--tls]: the summed samples/s of the throughput run's two workers;
# the run's output goes to LOG (one per run, so no other run's figures are summed).
tls_training_sps() {
  local log=$1
  shift
  timeout 300 "$BUILD/bin/dtrain" launch -n 2 -s 1 --kv-store dist_sync "$@" -- --network lenet --batch-size 64 \
    --num-epochs 1 --disp-batches 100000 --num-examples "${GPU_VERIFY_TLS_EXAMPLES:-20000}" \
    "${data[@]}" > "$log" 2>&1 || return 1
  grep -o '([0-9.]* samples/sec)' "$log" | tr -d '(' | awk '{s += $1} END {printf "%.1f", s}'
}

stage_tls() {
  local log="$LOGS/tls-transport.log" json
  say "gpu-verify: tls: push+pull with mutual TLS against plaintext ($(nproc) cores)"
  if ! timeout 600 "$BUILD/bin/tls_bench" --server-bin "$BUILD/bin/dtrain-server" --mb "${GPU_VERIFY_TLS_MB:-64}" --rounds 5 \
       --trials "${GPU_VERIFY_TLS_TRIALS:-5}" --connections "${GPU_VERIFY_TLS_CONNECTIONS:-2,1,4,8}" \
       --plain-connections 1,2 > "$log" 2>&1; then
    report "tls push+pull" FAIL "$log" "$(why "$log")"
    return
  fi
  json=$(grep '^{"model_mb"' "$log" | tail -1)
  # The best connection count's ratio, then each count's and plaintext's, on one line.
  local figures best
  figures=$("$PYTHON" -c '
import json, sys
d = json.loads(sys.argv[1])
rows = d["tls_by_connections"]
best = max(rows, key=lambda r: r["ratio"])
print("%.3f %s; plaintext %.2f GB/s, %.2f CPU s/GB" % (best["ratio"], "; ".join(
    "%d connection%s %.3fx (%.2f GB/s, %.2f CPU s/GB)" % (
        r["connections"], "" if r["connections"] == 1 else "s", r["ratio"], r["GBps"], r["cpu_s_per_GB"])
    for r in rows), d["plaintext_push_pull_GBps"], d["plaintext_cpu_s_per_GB"]))' "$json" 2>> "$log") \
    || { report "tls push+pull" FAIL "$log" "no figures in its output"; return; }
  best=${figures%% *}
  report "tls push+pull" INFO "$log" "best ${best}x plaintext, target 0.8 $(tls_met "$best" 0.8); ${figures#* }"

  local r on off ons=() offs=() plain tls
  for r in $(seq 1 "${GPU_VERIFY_TLS_ROUNDS:-3}"); do
    plain="$LOGS/tls-training-$r-plaintext.log" tls="$LOGS/tls-training-$r-tls.log"
    # Alternating which goes first, so that a drift in the machine's speed falls on both.
    if [ $((r % 2)) -eq 1 ]; then
      off=$(tls_training_sps "$plain") || { report "tls training" FAIL "$plain" "$(why "$plain")"; return; }
      on=$(tls_training_sps "$tls" --tls) || { report "tls training" FAIL "$tls" "$(why "$tls")"; return; }
    else
      on=$(tls_training_sps "$tls" --tls) || { report "tls training" FAIL "$tls" "$(why "$tls")"; return; }
      off=$(tls_training_sps "$plain") || { report "tls training" FAIL "$plain" "$(why "$plain")"; return; }
    fi
    offs+=("$off") ons+=("$on")
  done
  local ratio
  ratio=$("$PYTHON" -c '
import statistics, sys
on = [float(x) for x in sys.argv[1].split()]; off = [float(x) for x in sys.argv[2].split()]
print("%.3f" % statistics.median(a / b for a, b in zip(on, off)))' "${ons[*]}" "${offs[*]}")
  report "tls training" INFO "$LOGS/tls-training-*.log" "median ${ratio}x plaintext over ${#ons[@]} alternating rounds, target 0.95 $(
    tls_met "$ratio" 0.95) (samples/s, plaintext: ${offs[*]}; --tls: ${ons[*]})"
}
