#!/usr/bin/env bash
# One emulated pod index through its life, as the kubelet and the Job controller would run
# it (called by netns_test.sh, one per pod, in its own process group):
#
#   pod_run.sh PLAN POD NETNS RUN IMAGE_PATH
#
# A pod: fresh emptyDirs, its init containers in order, then its main container, each by
# tests/k8s/pod_exec.sh in the pod's network namespace. When a Job's pod fails, what the Job
# does next comes from the plan (k8s-render --plan: POD/job and POD/on-failure, i.e. the
# rendered backoffLimitPerIndex, maxFailedIndexes, backoffLimit and podFailurePolicy):
#   Count   the index's failures + 1; within backoffLimitPerIndex (or, without it, the Job's
#           backoffLimit over all its pods) a new pod takes the index after the Job
#           controller's back-off: DTRAIN_K8S_BACKOFF_S (10 s), doubled per failure of the
#           index, at most 360 s; past it the index fails;
#   Ignore  a new pod, not counted (the back-off still grows, as for Kubernetes);
#   FailJob the Job fails; FailIndex: the index fails.
# An index that fails fails the Job once more indexes failed than maxFailedIndexes.
# Emulated pods carry no conditions: DisruptionTarget rules never match here.
#
# RUN holds the run: RUN/volumes/pvc/CLAIM and RUN/volumes/secret/SECRET/KEY (the Secrets'
# data; made by the caller), RUN/volumes/pod/POD/VOLUME (the emptyDirs, and each secret
# volume's files as the kubelet projects them: the keys or items, defaultMode, group
# fsGroup; made here anew for each pod), RUN/roots, RUN/logs/POD.CONTAINER.log (the
# current pod's; an earlier pod's are POD.CONTAINER.previous-N.log, `kubectl logs
# --previous`), RUN/status/POD and RUN/jobs/WORKLOAD.*. RUN/status/POD lines:
#   start N                          pod N of the index started (0, 1, ...)
#   attempt N init|main NAME EXIT    a container of pod N ended
#   restart N ACTION DELAY WHY       the Job controller replaces pod N (ACTION: Count, Ignore)
#   phase Succeeded|Failed WHY       the index is done (last line)
# RUN/jobs/WORKLOAD.failed holds why the Job failed; the caller then stops its other pods,
# whose runners end "phase Failed" too.
set -uo pipefail
plan=$1 pod=$2 ns=$3 run=$4 image_path=$5
here=$(cd "$(dirname "$0")" && pwd)
status="$run/status/$pod"
workload=$(awk -v p="$pod" '$1 == p { print $3 }' "$plan/pods")
kind=$(awk -v p="$pod" '$1 == p { print $2 }' "$plan/pods")
limit() { awk -v k="$1" '$1 == k { print $2 }' "$plan/pod/$pod/job"; }
phase() { echo "phase $*" >> "$status"; exit 0; }
job_failed() { # WHY: the first reason stays
  (set -o noclobber; echo "$*" > "$run/jobs/$workload.failed") 2> /dev/null || true
  phase Failed "$*"
}

empty_dirs() {
  rm -rf "$run/volumes/pod/$pod"
  local dir
  for dir in $(cat "$plan"/pod/"$pod"/c/*/mounts | awk '$2 == "emptyDir" {print $3}' | sort -u); do
    mkdir -p "$run/volumes/pod/$pod/$dir"
    chmod 1777 "$run/volumes/pod/$pod/$dir"
  done
  local _path _kind vol _mode secret dmode items fsgroup key file
  fsgroup=$(awk '$1 == "fsgroup" { print $2; exit }' "$plan"/pod/"$pod"/c/*/security)
  while read -r _path _kind vol _mode secret dmode items; do
    [ -d "$run/volumes/pod/$pod/$vol" ] && continue
    mkdir -p "$run/volumes/pod/$pod/$vol"
    if [ ! -d "$run/volumes/secret/$secret" ]; then
      echo "pod_run: Secret $secret does not exist (the pod would wait in ContainerCreating)" >&2
      continue
    fi
    if [ "$items" = - ]; then items=$(cd "$run/volumes/secret/$secret" && ls | sed 's/.*/&=&/' | paste -sd,); fi
    for item in ${items//,/ }; do
      key=${item%%=*} file=${item#*=}
      cp "$run/volumes/secret/$secret/$key" "$run/volumes/pod/$pod/$vol/$file" || continue
      chmod "$(printf '%o' "$dmode")" "$run/volumes/pod/$pod/$vol/$file"
      if [ "$fsgroup" != - ]; then chgrp "$fsgroup" "$run/volumes/pod/$pod/$vol/$file"; fi
    done
    chmod 755 "$run/volumes/pod/$pod/$vol"
  done < <(cat "$plan"/pod/"$pod"/c/*/mounts | awk '$2 == "secret"' | sort -u)
}

n=0        # pods of this index so far
failures=0 # counted failures of this index
while :; do
  if [ -e "$run/jobs/$workload.failed" ]; then phase Failed "its Job failed: $(cat "$run/jobs/$workload.failed")"; fi
  empty_dirs
  for log in "$run/logs/$pod".*.log; do
    case "$log" in *.previous-*.log | *"*"*) continue ;; esac
    mv "$log" "${log%.log}.previous-$((n - 1)).log"
  done
  echo "start $n" >> "$status"
  rc=0
  while read -r ckind cname; do
    ip netns exec "$ns" unshare --uts bash "$here/pod_exec.sh" \
      "$plan" "$pod" "$cname" "$run/volumes" "$run/roots" "$image_path" \
      > "$run/logs/$pod.$cname.log" 2>&1 && rc=0 || rc=$?
    echo "attempt $n $ckind $cname $rc" >> "$status"
    [ "$rc" -eq 0 ] || break # a failed init container fails the pod
  done < "$plan/pod/$pod/containers"
  if [ "$rc" -eq 0 ]; then phase Succeeded; fi
  if [ "$kind" != Job ]; then phase Failed "$ckind container $cname exited $rc"; fi
  if [ -e "$run/jobs/$workload.failed" ]; then phase Failed "its Job failed: $(cat "$run/jobs/$workload.failed")"; fi

  # The Job controller: the podFailurePolicy's action for this container and exit code.
  action=$(awk -v c="$cname" -v e="$rc" '$1 == c && $2 == e { print $3 }' "$plan/pod/$pod/on-failure")
  why="$ckind container $cname exited $rc"
  per_index=$(limit backoffLimitPerIndex)
  case "$action" in
    FailJob) job_failed "$why: FailJob (podFailurePolicy)" ;;
    Ignore) ;;
    Count | FailIndex)
      failures=$((failures + 1))
      out=""
      if [ "$action" = FailIndex ]; then
        out="$why: FailIndex (podFailurePolicy)"
      elif [ "$per_index" != - ]; then
        [ "$failures" -le "$per_index" ] || out="$why: index out of restarts ($failures failures, backoffLimitPerIndex $per_index)"
      else
        echo "$pod" >> "$run/jobs/$workload.failures"
        total=$(wc -l < "$run/jobs/$workload.failures")
        [ "$total" -le "$(limit backoffLimit)" ] || job_failed "$why: $total failures, backoffLimit $(limit backoffLimit)"
      fi
      if [ -n "$out" ]; then
        echo "$pod" >> "$run/jobs/$workload.failed-indexes"
        max=$(limit maxFailedIndexes)
        if [ "$max" != - ] && [ "$(wc -l < "$run/jobs/$workload.failed-indexes")" -gt "$max" ]; then
          job_failed "$out; more failed indexes than maxFailedIndexes $max"
        fi
        phase Failed "$out"
      fi
      ;;
    *) job_failed "$why: no action in the plan for it" ;;
  esac
  delay=${DTRAIN_K8S_BACKOFF_S:-10}
  for ((i = 0; i < n; i++)); do delay=$((delay * 2)); done
  [ "$delay" -le 360 ] || delay=360
  echo "restart $n $action ${delay}s $why (failures of this index: $failures of ${per_index/-/(backoffLimit)})" >> "$status"
  sleep "$delay"
  n=$((n + 1))
done
