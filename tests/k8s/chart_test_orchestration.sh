# Sourced by chart_test.sh (its helpers: render_ok, render_refused, expect_json, expect_eq,
# doc_of, job_of, mutant, ok, bad; $RENDER, $CHART, $BASE, $WORK, $VALIDATE). The
# orchestrators (Indexed Jobs, one JobSet), gang scheduling (Kueue, Volcano), the values
# clusters need, PodDisruptionBudgets, shared claims without a ReadWriteMany class,
# `helm upgrade` of training values, the wait command in NOTES.txt.

echo "== orchestrator: jobs (Indexed Jobs) or jobset (one JobSet); gang scheduling"
for o in jobs jobset; do
  render_ok "$o" "--orchestrator $o --workers 3 --servers 2 --volcano off --pdb off" --set "orchestrator=$o,workers=3"
  render_ok "$o, replication, snapshots on a claim, namespace ml" "--orchestrator $o --replication 2 --servers 3 --snapshot-volume pvc --namespace ml" \
    -n ml --set "orchestrator=$o,replication=2,servers=3,snapshotEvery=50,server.snapshotVolume=claim"
  render_ok "$o, tls cert-manager, network policy" "--orchestrator $o --tls certManager --network-policy on --workers 3" \
    --set "orchestrator=$o,workers=3,$CM,networkPolicy.enabled=true"
  render_ok "$o, Kueue" "--orchestrator $o --kueue-queue team-a --volcano off" --set "orchestrator=$o,gang.kueue.queueName=team-a"
  render_ok "$o, Volcano" "--orchestrator $o --volcano on" --set "orchestrator=$o,gang.volcano.enabled=true,gang.volcano.queue=research,workers=3"
  render_ok "$o, minimal" "--orchestrator $o --workers 1 --servers 1" -f "$CHART/ci/minimal-values.yaml" --set "orchestrator=$o"
done
render_ok "jobset, maxRestarts 2, ttl" "--orchestrator jobset" --set orchestrator=jobset,jobset.maxRestarts=2,job.ttlSecondsAfterFinished=3600,job.activeDeadlineSeconds=86400

# The JobSet, field by field.
js=$(doc_of "$WORK/jobset.json" JobSet dtrain)
expect_json "JobSet" "$js" '[s.apiVersion, s.spec.network, s.spec.successPolicy]' \
  '["jobset.x-k8s.io/v1alpha2",{"enableDNSHostnames":true,"publishNotReadyAddresses":true,"subdomain":"dtrain"},{"operator":"All","targetReplicatedJobs":["workers"]}]'
expect_json "JobSet" "$js" 's.spec.failurePolicy' '{"maxRestarts":0,"rules":[{"action":"FailJobSet","name":"dtrainGaveUp","onJobFailureReasons":["PodFailurePolicy"]}]}'
expect_json "JobSet" "$js" 's.spec.replicatedJobs.map((r) => [r.name, r.replicas, r.template.spec.completions, r.template.spec.backoffLimitPerIndex ?? null])' \
  '[["scheduler",1,1,3],["servers",1,2,null],["workers",1,3,3]]'
expect_json "JobSet" "$js" 's.spec.replicatedJobs.map((r) => r.template.spec.template.spec.subdomain)' '["dtrain","dtrain","dtrain"]'
expect_json "JobSet" "$js" 's.spec.replicatedJobs[2].template.spec.template.spec.containers[0].env.find((e) => e.name === "DTRAIN_SCHEDULER_ADDR").value' \
  '"dtrain-scheduler-0-0.dtrain.default.svc.cluster.local:9091"'
expect_json "JobSet" "$js" '[s.metadata.annotations["dtrain.io/job-id"], s.spec.replicatedJobs[0].template.spec.template.spec.containers[0].env.find((e) => e.name === "DTRAIN_JOB_ID").value].every((x) => /^dtrain-[a-z0-9]{8}$/.test(x))' 'true'
expect_json "JobSet" "$js" '[s.spec.ttlSecondsAfterFinished ?? null, s.spec.replicatedJobs.map((r) => r.template.spec.ttlSecondsAfterFinished ?? null)]' '[null,[null,null,null]]'
expect_json "JobSet headless Service" "$(doc_of "$WORK/jobset.json" Service dtrain)" '[s.spec.clusterIP, s.spec.publishNotReadyAddresses, s.spec.selector]' \
  '["None",true,{"jobset.sigs.k8s.io/jobset-name":"dtrain"}]'
expect_eq "jobset: no plain Jobs" "$(node -e 'console.log(JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).filter((d) => d.object.kind === "Job").length)' "$WORK/jobset.json")" 0
js=$(doc_of "$WORK/jobset, maxRestarts 2, ttl.json" JobSet dtrain)
expect_json "JobSet maxRestarts=2" "$js" '[s.spec.failurePolicy.maxRestarts, s.spec.ttlSecondsAfterFinished, s.spec.replicatedJobs.map((r) => r.template.spec.activeDeadlineSeconds)]' '[2,3600,[86400,86400,86400]]'
js=$(doc_of "$WORK/jobset, replication, snapshots on a claim, namespace ml.json" JobSet dtrain)
expect_json "JobSet replication=2" "$js" 's.spec.replicatedJobs[1].template.spec.maxFailedIndexes' '1'
c=$(doc_of "$WORK/jobset, tls cert-manager, network policy.json" Certificate dtrain-worker-tls)
expect_json "JobSet cert-manager workers" "$c" 's.spec.dnsNames.slice(0, 2)' \
  '["dtrain-workers-0-0.dtrain.default.svc.cluster.local","dtrain-workers-0-1.dtrain.default.svc.cluster.local"]'
expect_json "JobSet Kueue" "$(doc_of "$WORK/jobset, Kueue.json" JobSet dtrain)" 's.metadata.labels["kueue.x-k8s.io/queue-name"]' '"team-a"'
for c in scheduler server worker; do
  j=$(doc_of "$WORK/jobs, Kueue.json" Job "dtrain-$c")
  expect_json "jobs Kueue $c" "$j" 's.metadata.labels["kueue.x-k8s.io/queue-name"]' '"team-a"'
  expect_json "jobs $c: no gang" "$(job_of "$WORK/jobs.json" "$c")" '[s.template.spec.schedulerName ?? null, s.template.metadata.annotations["scheduling.k8s.io/group-name"] ?? null]' '[null,null]'
  expect_json "jobs Volcano $c" "$(job_of "$WORK/jobs, Volcano.json" "$c")" '[s.template.spec.schedulerName, s.template.metadata.annotations["scheduling.k8s.io/group-name"]]' '["volcano","dtrain"]'
done
for o in jobs jobset; do
  expect_json "$o Volcano PodGroup" "$(doc_of "$WORK/$o, Volcano.json" PodGroup dtrain)" '[s.apiVersion, s.spec]' \
    '["scheduling.volcano.sh/v1beta1",{"minMember":6,"queue":"research"}]'
  expect_json "$o Volcano: inference not in the gang" "$(doc_of "$WORK/$o, Volcano.json" Deployment dtrain-inference)" \
    '[s.spec.template.spec.schedulerName ?? null, s.spec.template.metadata.annotations["scheduling.k8s.io/group-name"] ?? null]' '[null,null]'
done

echo "== the values clusters need: priority, scheduler, runtime class, spread, extra env and volumes, PDBs, global"
cat > "$WORK/cluster-values.yaml" <<'EOF'
workers: 3
servers: 3
replication: 2
priorityClassName: training
schedulerName: my-scheduler
extraEnv: [{name: TZ, value: UTC}]
extraVolumes: [{name: ca-bundle, configMap: {name: corp-ca}}]
extraVolumeMounts: [{name: ca-bundle, mountPath: /etc/ssl/corp, readOnly: true}]
global:
  imageRegistry: registry.example.internal
  imagePullSecrets: [regcred]
  storageClass: ignored
podDisruptionBudget:
  enabled: true
worker:
  gpus: 2
  runtimeClassName: nvidia
  priorityClassName: training-gpu
  topologySpreadConstraints:
    - {maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: ScheduleAnyway, labelSelector: {matchLabels: {app.kubernetes.io/component: worker}}}
  extraEnv: [{name: NCCL_DEBUG, value: INFO}]
  extraVolumes: [{name: shm, emptyDir: {medium: Memory}}]
  extraVolumeMounts: [{name: shm, mountPath: /dev/shm}]
server:
  topologySpreadConstraints:
    - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app.kubernetes.io/component: server}}}
inference:
  extraEnv: [{name: GRPC_VERBOSITY, value: ERROR}]
EOF
for o in jobs jobset; do
  render_ok "$o, every cluster value" "--orchestrator $o --gpus 2 --workers 3 --servers 3 --pdb on --pdb-min-available scheduler=1,server=2,worker=3" \
    -f "$WORK/cluster-values.yaml" --set "orchestrator=$o"
done
f="$WORK/jobs, every cluster value.json"
w=$(job_of "$f" worker)
expect_json "cluster values worker" "$w" '[s.template.spec.priorityClassName, s.template.spec.schedulerName, s.template.spec.runtimeClassName, s.template.spec.topologySpreadConstraints[0].topologyKey]' \
  '["training-gpu","my-scheduler","nvidia","kubernetes.io/hostname"]'
expect_json "cluster values worker" "$w" 's.template.spec.containers[0].args.filter((a) => a.startsWith("--gpus"))' '["--gpus=0,1"]'
expect_json "cluster values worker" "$w" 's.template.spec.containers[0].resources.limits["nvidia.com/gpu"]' '2'
expect_json "cluster values worker" "$w" 's.template.spec.containers[0].env.slice(-2)' '[{"name":"TZ","value":"UTC"},{"name":"NCCL_DEBUG","value":"INFO"}]'
expect_json "cluster values worker" "$w" '[s.template.spec.volumes.slice(-2).map((v) => v.name), s.template.spec.containers[0].volumeMounts.slice(-2).map((m) => m.mountPath)]' \
  '[["ca-bundle","shm"],["/etc/ssl/corp","/dev/shm"]]'
expect_json "cluster values worker" "$w" '[s.template.spec.containers[0].image, s.template.spec.initContainers[0].image, s.template.spec.imagePullSecrets]' \
  '["registry.example.internal/dtrain:0.1.0","registry.example.internal/dtrain:0.1.0",[{"name":"regcred"}]]'
sv=$(job_of "$f" server)
expect_json "cluster values server" "$sv" '[s.template.spec.priorityClassName, s.template.spec.runtimeClassName ?? null, s.template.spec.topologySpreadConstraints[0].whenUnsatisfiable]' \
  '["training",null,"DoNotSchedule"]'
expect_json "cluster values server" "$sv" '[s.template.spec.containers[0].env.at(-1), s.template.spec.containers[0].args ?? null]' '[{"name":"TZ","value":"UTC"},null]'
i=$(doc_of "$f" Deployment dtrain-inference)
expect_json "cluster values inference" "$i" '[s.spec.template.spec.priorityClassName, s.spec.template.spec.schedulerName, s.spec.template.spec.containers[0].env.slice(-2).map((e) => e.name), s.spec.template.spec.volumes.at(-1).name]' \
  '["training","my-scheduler",["TZ","GRPC_VERBOSITY"],"ca-bundle"]'
expect_json "PDB worker" "$(doc_of "$f" PodDisruptionBudget dtrain-worker)" 's.spec' \
  '{"minAvailable":3,"selector":{"matchLabels":{"app.kubernetes.io/component":"worker","app.kubernetes.io/instance":"dtrain","app.kubernetes.io/name":"dtrain"}}}'
expect_json "PDB server (replication 2 of 3)" "$(doc_of "$f" PodDisruptionBudget dtrain-server)" 's.spec.minAvailable' '2'
expect_json "PDB scheduler" "$(doc_of "$f" PodDisruptionBudget dtrain-scheduler)" 's.spec.minAvailable' '1'
expect_json "PDB inference" "$(doc_of "$f" PodDisruptionBudget dtrain-inference)" '[s.spec.maxUnavailable, s.spec.minAvailable ?? null]' '[1,null]'
render_ok "PDB, own minimums" "--pdb on --pdb-min-available worker=1,server=2,scheduler=1" \
  --set podDisruptionBudget.enabled=true,podDisruptionBudget.workerMinAvailable=1,podDisruptionBudget.serverMinAvailable=2,inference.enabled=false
expect_json "jobset every value" "$(doc_of "$WORK/jobset, every cluster value.json" JobSet dtrain)" \
  's.spec.replicatedJobs.map((r) => [r.template.spec.template.spec.priorityClassName, r.template.spec.template.spec.runtimeClassName ?? null])' \
  '[["training",null],["training",null],["training-gpu","nvidia"]]'
render_ok "worker.gpus=1, ci gpu-values" "--gpus 1" -f "$CHART/ci/gpu-values.yaml"
expect_json "ci gpu worker" "$(job_of "$WORK/worker.gpus=1, ci gpu-values.json" worker)" \
  '[s.template.spec.runtimeClassName, s.template.spec.containers[0].args.filter((a) => a.startsWith("--gpus"))]' '["nvidia",["--gpus=0"]]'

echo "== values refused, naming the value"
render_refused orchestrator=statefulset "orchestrator" --set orchestrator=statefulset
render_refused "Volcano and Kueue" "gang.volcano.enabled and gang.kueue.queueName are exclusive" --set gang.volcano.enabled=true,gang.kueue.queueName=q
render_refused "Volcano with another scheduler" "but schedulerName is my-scheduler" --set gang.volcano.enabled=true,schedulerName=my-scheduler
render_refused "Volcano queue, Volcano off" "gang.volcano.queue is set but gang.volcano.enabled is false" --set gang.volcano.queue=q
render_refused "jobset.maxRestarts with Jobs" "jobset.maxRestarts is set but orchestrator is jobs" --set jobset.maxRestarts=1
render_refused "Kueue queue not a name" "gang.kueue.queueName" --set gang.kueue.queueName=Team_A
render_refused "an extra volume named data" "extraVolumes" --set 'extraVolumes[0].name=data,extraVolumes[0].emptyDir.medium=Memory'
render_refused "an extra volume without a source" "extraVolumes" --set 'worker.extraVolumes[0].name=x'
render_refused "an extra mount without a path" "mountPath" --set 'worker.extraVolumeMounts[0].name=x'
render_refused "extraEnv key" "Additional property val is not allowed" --set 'extraEnv[0].name=A,extraEnv[0].val=b'
render_refused priorityClassName "priorityClassName" --set priorityClassName=High
render_refused runtimeClassName "worker.runtimeClassName" --set worker.runtimeClassName=Nvidia_GPU
render_refused "topologySpreadConstraints" "whenUnsatisfiable" \
  --set 'worker.topologySpreadConstraints[0].maxSkew=1,worker.topologySpreadConstraints[0].topologyKey=k,worker.topologySpreadConstraints[0].whenUnsatisfiable=Never'
render_refused "PDB minimum" "podDisruptionBudget.workerMinAvailable" --set podDisruptionBudget.workerMinAvailable=-1
render_refused "PDB key" "Additional property maxUnavailable is not allowed" --set podDisruptionBudget.maxUnavailable=1

echo "== claims asked to be ReadWriteMany need a class or an existing claim (by default none is asked)"
noclass=persistence.data.storageClassName=,persistence.checkpoints.storageClassName=,persistence.snapshots.storageClassName=
rwx='persistence.data.accessModes[0]=ReadWriteMany,persistence.checkpoints.accessModes[0]=ReadWriteMany,persistence.snapshots.accessModes[0]=ReadWriteMany'
render_refused "ReadWriteMany on the cluster's default class" \
  "persistence.data: 2 pods mount this claim at once (2 worker(s)), so it must be ReadWriteMany, but persistence.data.storageClassName is empty" --set "$noclass,$rwx"
render_refused "checkpoints: a worker and inference" "persistence.checkpoints: 2 pods mount this claim at once (1 worker(s), 1 inference pod(s))" \
  --set "$noclass,$rwx,workers=1"
render_refused "checkpoints: snapshots" "(1 worker(s), 2 server(s) writing snapshots)" --set "$noclass,$rwx,workers=1,inference.enabled=false,snapshotEvery=10"
render_refused "snapshots claim" "persistence.snapshots: 2 pods mount this claim at once (2 server(s))" \
  --set "$noclass,$rwx,workers=1,inference.enabled=false,snapshotEvery=10,server.snapshotVolume=claim,persistence.checkpoints.storageClassName=nfs"
render_ok "defaults on the cluster's default class" "--workers 2 --claims dtrain-checkpoints=rwo" --set "$noclass"
render_ok "one worker, no inference, default class" "--workers 1" --set "$noclass,workers=1,inference.enabled=false"
render_ok "default class, ReadWriteOnce (one node)" "" \
  --set "$noclass,persistence.data.accessModes[0]=ReadWriteOnce,persistence.checkpoints.accessModes[0]=ReadWriteOnce"
render_ok "default class, existing claims" "--existing-claims d,c" --set "$noclass,persistence.data.existingClaim=d,persistence.checkpoints.existingClaim=c"
expect_eq "ReadWriteOnce: no storageClassName" "$(node -e 'console.log(JSON.stringify(JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).map((d) => d.object)
  .filter((o) => o.kind === "PersistentVolumeClaim").map((o) => [o.spec.accessModes, o.spec.storageClassName ?? null])))' "$WORK/default class, ReadWriteOnce (one node).json")" \
  '[[["ReadWriteOnce"],null],[["ReadWriteOnce"],null]]'

echo "== helm upgrade: training values refused while the Jobs or the JobSet exist (lookup)"
# --lookup gives the renderer's lookup the objects a cluster would hold: an earlier
# rendering, as Helm installed it; --upgrade renders as helm upgrade.
upgrade() { # NAME OLD-ARGS -- NEW-ARGS: renders OLD as the cluster, then NEW as an upgrade over it
  local name=$1 old=() new=()
  shift
  while [ "$1" != -- ]; do old+=("$1"); shift; done
  shift
  new=("$@")
  "$RENDER" -f "$BASE" "${old[@]}" dtrain "$CHART" > "$WORK/cluster.yaml" || { bad "upgrade $name: the install did not render"; return 1; }
  "$RENDER" -f "$BASE" --upgrade --lookup "$WORK/cluster.yaml" "${new[@]}" dtrain "$CHART" > "$WORK/upgrade.yaml" 2> "$WORK/upgrade.err"
}
upgrade_ok() { # NAME OLD-ARGS -- NEW-ARGS: must render, keeping the installed job id
  local name=$1
  if upgrade "$@"; then
    local was now
    was=$(grep -m1 'dtrain.io/job-id:' "$WORK/cluster.yaml") now=$(grep -m1 'dtrain.io/job-id:' "$WORK/upgrade.yaml")
    if [ -n "$was" ] && [ "$was" = "$now" ] && [ "$(grep -A1 'name: DTRAIN_JOB_ID' "$WORK/upgrade.yaml" | grep -c "${was#*: }")" -ge 3 ]; then
      ok "upgrade $name: accepted, job id kept (${was#*: })"
    else
      bad "upgrade $name: job id '$was' became '$now'"
    fi
  else
    bad "upgrade $name: refused: $(cat "$WORK/upgrade.err")"
  fi
}
upgrade_refused() { # NAME PATTERN OLD-ARGS -- NEW-ARGS
  local name=$1 pattern=$2
  shift 2
  if upgrade "$name" "$@"; then
    bad "upgrade $name: accepted, must be refused"
  elif grep -qF -- "$pattern" "$WORK/upgrade.err"; then
    ok "upgrade $name: refused: $(sed 's/.*error calling fail: //' "$WORK/upgrade.err" | grep -o "helm upgrade cannot.*changed [^.]*")"
  else
    bad "upgrade $name: refused without '$pattern': $(cat "$WORK/upgrade.err")"
  fi
}
JS="-a jobset.x-k8s.io/v1alpha2"
upgrade_ok "same values" --
upgrade_ok "inference, monitors, policies, budgets, job ttl" -- \
  --set inference.replicas=2,metrics.podMonitor.enabled=true,networkPolicy.enabled=true,podDisruptionBudget.enabled=true,job.ttlSecondsAfterFinished=60
upgrade_refused "workers=3" "while its Job dtrain-scheduler exists: changed workers." -- --set workers=3
upgrade_refused "train.lr, image.tag" "changed image, train." -- --set train.lr=0.2,image.tag=0.2.0
upgrade_refused "a value file's key removed" "changed worker." --set worker.gpus=1 --
# shellcheck disable=SC2086
upgrade_ok "jobset, same values" --set orchestrator=jobset $JS -- --set orchestrator=jobset $JS
# shellcheck disable=SC2086
upgrade_refused "jobset workers=4" "while its JobSet dtrain exists: changed workers." --set orchestrator=jobset -- --set orchestrator=jobset,workers=4 $JS
# shellcheck disable=SC2086
upgrade_refused "jobset activeDeadlineSeconds (replicated jobs are immutable)" "changed job. A Job's pod template is immutable" \
  --set orchestrator=jobset -- --set orchestrator=jobset,job.activeDeadlineSeconds=600 $JS
# shellcheck disable=SC2086
upgrade_ok "jobset ttlSecondsAfterFinished" --set orchestrator=jobset -- --set orchestrator=jobset,job.ttlSecondsAfterFinished=600 $JS
# shellcheck disable=SC2086
upgrade_refused "jobset to jobs" "while its JobSet dtrain exists: changed job, orchestrator." --set orchestrator=jobset -- $JS
upgrade_refused "jobs to jobset" "while its Job dtrain-scheduler exists: changed job, orchestrator." -- --set orchestrator=jobset
# Without the JobSet API the cluster has no JobSet to find (Helm's lookup of an unknown kind fails: not looked up).
if upgrade "jobset, cluster without the JobSet API" --set orchestrator=jobset -- --set orchestrator=jobset,workers=4; then
  ok "upgrade jobset without jobset.x-k8s.io/v1alpha2 served: not looked up"
else
  bad "upgrade jobset without the JobSet API: $(cat "$WORK/upgrade.err")"
fi
# A Job of an older chart (no hashes): not checked; its job id still read from its environment.
"$RENDER" -f "$BASE" dtrain "$CHART" | sed '/dtrain.io\//d; /^  annotations:$/d' > "$WORK/cluster.yaml"
if "$RENDER" -f "$BASE" --upgrade --lookup "$WORK/cluster.yaml" --set inference.replicas=3 dtrain "$CHART" > "$WORK/upgrade.yaml" &&
  [ "$(grep -A1 'name: DTRAIN_JOB_ID' "$WORK/cluster.yaml" | sed -n 2p)" = "$(grep -A1 'name: DTRAIN_JOB_ID' "$WORK/upgrade.yaml" | sed -n 2p)" ]; then
  ok "upgrade over an older chart's Jobs: accepted, job id read from the scheduler's environment"
else
  bad "upgrade over an older chart's Jobs"
fi

echo "== NOTES.txt: a wait that returns on failure too"
for o in jobs jobset; do
  notes="$WORK/$o.notes"
  if grep -q -- '--timeout=24h' "$notes"; then bad "NOTES ($o) still waits 24 h for completion only"; fi
  cmd=$(grep -m1 '^  while s=\$(kubectl' "$notes" || true)
  [ -n "$cmd" ] || { bad "NOTES ($o) has no wait loop"; continue; }
  # Run it with a fake kubectl (conditions after a few polls) and no real sleeping.
  for case in "Complete:0" "Completed:0" "Failed:1" "FailureTarget Failed:1" "gone:1"; do
    final=${case%:*} want=${case##*:}
    [ "$o" = jobs ] && [ "$final" = Completed ] && continue
    [ "$o" = jobset ] && [ "$final" = Complete ] && continue
    # The loop polls in a command substitution: the fake counts its calls in a file.
    : > "$WORK/kubectl.calls"
    got=$(FINAL="$final" CALLS="$WORK/kubectl.calls" timeout 10 bash -c 'sleep() { :; };
      kubectl() { echo "$*" >> "$CALLS"; if [ "$(wc -l < "$CALLS")" -lt 3 ]; then echo "Suspended"; elif [ "$FINAL" = gone ]; then return 1; else echo "$FINAL"; fi; }
      '"$cmd"'' > /dev/null 2>&1; echo $?)
    if [ "$got" = "$want" ] && [ "$(wc -l < "$WORK/kubectl.calls")" -ge 3 ]; then ok "NOTES ($o) wait: polls, ends on '$final' with status $got"; else bad "NOTES ($o) wait: on '$final' status $got, expected $want"; fi
  done
done
notes_want "jobset" "$WORK/jobset.notes" "get jobset/dtrain -o jsonpath" "exec job/dtrain-scheduler-0 -- dtrain status" "Orchestrator: JobSet dtrain"
notes_want "jobs" "$WORK/jobs.notes" "get job/dtrain-worker -o jsonpath" "exec job/dtrain-scheduler -- dtrain status" \
  "helm upgrade\` refuses to change a training" "Image: dtrain:0.1.0 is not on any public registry"
notes_want "jobs, Kueue" "$WORK/jobs, Kueue.notes" "Kueue LocalQueue team-a" "waitForPodsReady"
notes_want "jobs, Volcano" "$WORK/jobs, Volcano.notes" "Volcano PodGroup dtrain: all 6 training pods"
if grep -q "not on any public registry" "$WORK/jobs, every cluster value.notes"; then bad "NOTES warns about the image with global.imageRegistry set"; else ok "NOTES: no image warning with a registry"; fi

echo "== validate.mjs refuses broken orchestration"
f="$WORK/jobset, every cluster value.json"
mutant "a JobSet that succeeds on any job" "successPolicy must be operator All on" "$f" \
  'kind("JobSet").spec.successPolicy = {operator: "Any"}'
mutant "a JobSet that restarts after dtrain gave up" "must fail the JobSet" "$f" \
  'kind("JobSet").spec.failurePolicy = {maxRestarts: 3}'
mutant "a JobSet without DNS hostnames" "enableDNSHostnames must be true" "$f" \
  'kind("JobSet").spec.network.enableDNSHostnames = false'
mutant "a JobSet field that is not" "is no field of a JobSet" "$f" 'kind("JobSet").spec.restartPolicy = "Never"'
mutant "a JobSet pod told another subdomain" "but the JobSet puts its pods under dtrain" "$f" \
  'kind("JobSet").spec.replicatedJobs[1].template.spec.template.spec.subdomain = "dtrain-server"'
mutant "a JobSet worker told the Jobs' scheduler name" "is not the scheduler pod's stable name" "$f" \
  'kind("JobSet").spec.replicatedJobs[2].template.spec.template.spec.containers[0].env.find((e) => e.name === "DTRAIN_SCHEDULER_ADDR").value = "dtrain-scheduler-0.dtrain-scheduler.default.svc.cluster.local:9091"'
mutant "a worker without --gpus" "GPU flag '' for nvidia.com/gpu 2" "$f" \
  'const c = kind("JobSet").spec.replicatedJobs[2].template.spec.template.spec.containers[0]; c.args = c.args.filter((a) => !a.startsWith("--gpus"))'
mutant "a mount of no volume" "volumeMount shm names no volume" "$f" \
  'const p = kind("JobSet").spec.replicatedJobs[2].template.spec.template.spec; p.volumes = p.volumes.filter((v) => v.name !== "shm")'
mutant "a Job PDB with maxUnavailable" "only an integer minAvailable works" "$f" \
  'const s = kind("PodDisruptionBudget", "dtrain-worker").spec; delete s.minAvailable; s.maxUnavailable = 1'
mutant "a PDB that selects nothing" "selects no pod of the chart" "$f" \
  'kind("PodDisruptionBudget", "dtrain-server").spec.selector.matchLabels["app.kubernetes.io/component"] = "servers"'
f="$WORK/jobs, Volcano.json"
mutant "a PodGroup short of the workers" "minMember 3, expected 6" "$f" 'kind("PodGroup").spec.minMember = 3'
mutant "a pod outside the PodGroup" "are not in PodGroup dtrain" "$f" \
  'delete kind("Job", "dtrain-worker").spec.template.metadata.annotations["scheduling.k8s.io/group-name"]'
mutant "a gang pod on the default scheduler" "needs the volcano scheduler" "$f" \
  'delete kind("Job", "dtrain-server").spec.template.spec.schedulerName'
mutant "a PodGroup field that is not" "is no field of a PodGroup" "$f" 'kind("PodGroup").spec.minAvailable = 6'
mutant "a Job without its Kueue queue" "expected team-a" "$WORK/jobs, Kueue.json" \
  'delete kind("Job", "dtrain-server").metadata.labels["kueue.x-k8s.io/queue-name"]' "--kueue-queue team-a"
mutant "a JobSet without its Kueue queue" "expected team-a" "$WORK/jobset, Kueue.json" \
  'delete kind("JobSet").metadata.labels["kueue.x-k8s.io/queue-name"]' "--kueue-queue team-a"
