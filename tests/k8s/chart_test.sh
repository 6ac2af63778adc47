#!/usr/bin/env bash
# Renders helm/dtrain offline (no helm binary: tests/k8s/render, Helm's template engine
# and values.schema.json) for the default values, every ci/*-values.yaml and a range of
# --set values; validates every document against the Kubernetes API schemas and checks the
# chart's invariants (tests/k8s/validate); checks that bad values are refused and that
# deploy/k8s/dtrain-rendered.yaml is what the chart renders.
#
#   bash tests/k8s/chart_test.sh SRC_DIR BUILD_DIR
set -euo pipefail
. "$(dirname "$0")/lib.sh"
k8s_init "${1:-.}" "${2:-build}"
k8s_build_renderer
k8s_chart_copy
k8s_node_modules
# Most renderings below start from ReadWriteMany claims of a named class, as an install on a
# cluster with NFS would (pods on any node); the stock cluster's defaults (the data set from
# the image, a ReadWriteOnce checkpoint claim whose pods share a node) are tested apart,
# with BASE_ARGS empty.
BASE="$WORK/rwx-values.yaml"
printf 'persistence:\n  data: {storageClassName: nfs-client}\n  checkpoints: {storageClassName: nfs-client}\n  snapshots: {storageClassName: nfs-client}\n' > "$BASE"
BASE_ARGS=(-f "$BASE")

passed=0
failed=0
ok() { echo "ok   $*"; passed=$((passed + 1)); }
bad() { echo "FAIL $*"; failed=$((failed + 1)); }

# render_ok NAME "VALIDATE ARGS" RENDER-ARGS...: renders, validates, checks invariants.
render_ok() {
  local name=$1 vargs=$2
  shift 2
  local out="$WORK/$name.json" err="$WORK/$name.err"
  if ! "$RENDER" -o json --notes "$WORK/$name.notes" ${BASE_ARGS[@]+"${BASE_ARGS[@]}"} "$@" dtrain "$CHART" > "$out" 2> "$err"; then
    bad "$name: render failed: $(cat "$err")"
    return
  fi
  # shellcheck disable=SC2086
  if node "$VALIDATE" "$out" $vargs > "$WORK/$name.val" 2>&1; then
    ok "$name: $(tail -1 "$WORK/$name.val" | sed 's/^ *ok: //')"
  else
    bad "$name:"
    cat "$WORK/$name.val"
  fi
}

# render_refused NAME PATTERN RENDER-ARGS...: must fail, with PATTERN in the message.
render_refused() {
  local name=$1 pattern=$2
  shift 2
  if "$RENDER" ${BASE_ARGS[@]+"${BASE_ARGS[@]}"} "$@" dtrain "$CHART" > /dev/null 2> "$WORK/refused.err"; then
    bad "refused/$name: rendered, but must be refused ($*)"
  elif grep -q -- "$pattern" "$WORK/refused.err"; then
    ok "refused/$name: $(grep -m1 -- "$pattern" "$WORK/refused.err" | sed 's/^[- ]*//')"
  else
    bad "refused/$name: refused without naming '$pattern': $(cat "$WORK/refused.err")"
  fi
}

echo "== default values and ci/ values"
render_ok defaults "--workers 2 --servers 2 --gpus 0"
for f in "$CHART"/ci/*.yaml; do
  render_ok "ci-$(basename "$f" .yaml)" "--existing-claims dtrain-data,dtrain-checkpoints" -f "$f"
done
render_ok ci-gpu-expect "--workers 4 --servers 2 --gpus 1" -f "$CHART/ci/gpu-values.yaml"

echo "== --set workers=N: N worker replicas, every process told N"
for n in 1 3 8; do
  render_ok "workers=$n" "--workers $n --servers 2" --set "workers=$n"
done
render_ok "workers=5,servers=3" "--workers 5 --servers 3" --set workers=5,servers=3
render_ok "worker.gpus=2" "--gpus 2" --set worker.gpus=2
render_ok "floats from --set" "" --set train.lr=0.05,train.wd=1e-5,inference.watchInterval=2.5
render_ok "namespace ml" "--namespace ml" -n ml
render_ok "release name holding the chart name" "" --set fullnameOverride=my-dtrain-run

echo "== recovery: workers and the scheduler restarted in place, servers by default not (docs/recovery.md)"
render_ok "recovery defaults" "--max-restarts 3 --rejoin-timeout 300"
render_ok "recovery.maxRestarts=0" "--max-restarts 0" --set recovery.maxRestarts=0
render_ok "recovery.maxRestarts=5,workers=4" "--max-restarts 5 --workers 4" --set recovery.maxRestarts=5,workers=4
render_ok "recovery.rejoinTimeout=0" "--rejoin-timeout 0" --set recovery.rejoinTimeout=0
render_ok "recovery.rejoinTimeout=90.5" "--rejoin-timeout 90.5" --set recovery.rejoinTimeout=90.5
render_ok "recovery.jobId=run-7" "--job-id run-7" --set recovery.jobId=run-7
# What the rendering says, field by field (validate.mjs checks the same by meaning).
job_of() { # RENDERED.json COMPONENT: that component's Job as JSON
  node -e 'const [f, c] = process.argv.slice(1);
    const o = JSON.parse(require("fs").readFileSync(f, "utf8")).map((d) => d.object)
      .find((o) => o.kind === "Job" && o.metadata.labels["app.kubernetes.io/component"] === c);
    console.log(JSON.stringify(o.spec));' "$1" "$2"
}
expect_json() { # NAME JSON JS-EXPRESSION-OVER-s EXPECTED
  local got
  got=$(node -e 'const s = JSON.parse(process.argv[1]); console.log(JSON.stringify(eval(process.argv[2])));' "$2" "$3")
  if [ "$got" = "$4" ]; then ok "$1: $3 = $got"; else bad "$1: $3 = $got, expected $4"; fi
}
w=$(job_of "$WORK/recovery defaults.json" worker)
expect_json worker "$w" s.backoffLimitPerIndex 3
expect_json worker "$w" s.maxFailedIndexes 0
expect_json worker "$w" s.backoffLimit 6
expect_json worker "$w" s.template.spec.restartPolicy '"Never"'
expect_json worker "$w" 's.podFailurePolicy.rules.map((r) => r.action)' '["Ignore","FailJob"]'
expect_json worker "$w" 's.podFailurePolicy.rules[0].onPodConditions' '[{"status":"True","type":"DisruptionTarget"}]'
expect_json worker "$w" 's.podFailurePolicy.rules[1].onExitCodes' '{"operator":"In","values":[1,2,127]}'
expect_json worker "$w" 's.template.spec.containers[0].env.filter((e) => e.name === "DTRAIN_REJOIN_TIMEOUT").map((e) => e.value)' '["300"]'
sc=$(job_of "$WORK/recovery defaults.json" scheduler)
expect_json scheduler "$sc" '[s.backoffLimitPerIndex, s.maxFailedIndexes, s.backoffLimit]' '[3,0,3]'
expect_json scheduler "$sc" s.podFailurePolicy \
  '{"rules":[{"action":"Ignore","onPodConditions":[{"status":"True","type":"DisruptionTarget"}]},{"action":"FailJob","onExitCodes":{"operator":"In","values":[1,2,127]}}]}'
expect_json scheduler "$sc" 's.template.spec.subdomain + " " + s.template.spec.containers[0].name' '"dtrain-scheduler scheduler"'
sv=$(job_of "$WORK/recovery defaults.json" server)
expect_json server "$sv" '[s.backoffLimit, s.backoffLimitPerIndex ?? null, s.podFailurePolicy ?? null]' '[0,null,null]'
w=$(job_of "$WORK/recovery.maxRestarts=0.json" worker)
expect_json "maxRestarts=0 worker" "$w" '[s.backoffLimitPerIndex, s.backoffLimit]' '[0,0]'
w=$(job_of "$WORK/recovery.maxRestarts=5,workers=4.json" worker)
expect_json "maxRestarts=5 workers=4" "$w" '[s.backoffLimitPerIndex, s.backoffLimit]' '[5,20]'
# The job id: one per install, shared by every pod; a new install gets another.
ids_of() { grep -A1 'name: DTRAIN_JOB_ID' "$1" | sed -n 's/.*value: "\(.*\)"/\1/p' | sort | uniq -c | awk '{print $1, $2}'; }
"$RENDER" "${BASE_ARGS[@]}" dtrain "$CHART" > "$WORK/id1.yaml"
"$RENDER" "${BASE_ARGS[@]}" dtrain "$CHART" > "$WORK/id2.yaml"
id1=$(ids_of "$WORK/id1.yaml") id2=$(ids_of "$WORK/id2.yaml")
if [[ "$id1" =~ ^3\ dtrain-[a-z0-9]{8}$ ]] && [[ "$id2" =~ ^3\ dtrain-[a-z0-9]{8}$ ]] && [ "$id1" != "$id2" ]; then
  ok "DTRAIN_JOB_ID: one per install in all 3 Jobs (${id1#3 }), another for the next install (${id2#3 })"
else
  bad "DTRAIN_JOB_ID: expected one dtrain-<8 random> shared by the 3 Jobs, new per install; got '$id1' and '$id2'"
fi

echo "== recovery II: replication and snapshots; servers restarted in place when their shard outlives the pod"
env_of() { # JOB-SPEC-JSON-EXPRESSION: the main container's DTRAIN_REPLICATION and DTRAIN_SNAPSHOT_* as NAME=VALUE
  echo 's.template.spec.containers[0].env.filter((e) => /^DTRAIN_(REPLICATION|SNAPSHOT_)/.test(e.name)).map((e) => `${e.name}=${e.value}`)'
}
claims_of() { # RENDERED.json: the PersistentVolumeClaims' names
  node -e 'console.log(JSON.stringify(JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"))
    .map((d) => d.object).filter((o) => o.kind === "PersistentVolumeClaim").map((o) => o.metadata.name).sort()))' "$1"
}
expect_eq() { # NAME GOT EXPECTED
  if [ "$2" = "$3" ]; then ok "$1: $2"; else bad "$1: $2, expected $3"; fi
}
render_ok "replication=2" "--replication 2 --servers 2 --snapshot-every 0 --job-id run-7" --set replication=2,recovery.jobId=run-7
render_ok "replication=3,servers=4,maxRestarts=2" "--replication 3 --servers 4 --max-restarts 2" \
  --set replication=3,servers=4,recovery.maxRestarts=2
render_ok "replication=2,servers=2" "--replication 2" --set replication=2,servers=2
render_ok "snapshotEvery=50" "--replication 1 --snapshot-every 50 --snapshot-volume pvc --job-id run-7" --set snapshotEvery=50,recovery.jobId=run-7
render_ok "snapshotEvery=50 on a claim" "--snapshot-every 50 --snapshot-volume pvc --job-id run-7" \
  --set snapshotEvery=50,server.snapshotVolume=claim,recovery.jobId=run-7,persistence.snapshots.mountPath=/snap/
render_ok "snapshotEvery=50 on an existing claim" "--snapshot-volume pvc --existing-claims my-snapshots" \
  --set snapshotEvery=50,server.snapshotVolume=claim,persistence.snapshots.existingClaim=my-snapshots
render_ok "snapshotEvery=50 on an emptyDir" "--snapshot-every 50 --snapshot-volume emptyDir --job-id run-7" \
  --set snapshotEvery=50,server.snapshotVolume=emptyDir,recovery.jobId=run-7
render_ok "replication=2, snapshots on an emptyDir" "--replication 2 --snapshot-volume emptyDir" \
  --set replication=2,snapshotEvery=50,server.snapshotVolume=emptyDir
render_ok "snapshotVolume=claim, snapshotEvery=0" "--snapshot-every 0" --set server.snapshotVolume=claim

# replication: every role is told (the scheduler refuses a node that says another number).
for c in scheduler server worker; do
  j=$(job_of "$WORK/replication=2.json" "$c")
  expect_json "replication=2 $c" "$j" "$(env_of)" '["DTRAIN_REPLICATION=2"]'
  j=$(job_of "$WORK/recovery defaults.json" "$c")
  expect_json "defaults $c" "$j" "$(env_of)" '[]'
done
# train.tcpCongestion: the servers' and workers' connections (the scheduler's carry little).
render_ok "tcpCongestion=reno" "" --set train.tcpCongestion=reno
for c in scheduler server worker; do
  want='[]'
  [ "$c" = scheduler ] || want='["reno"]'
  expect_json "tcpCongestion=reno $c" "$(job_of "$WORK/tcpCongestion=reno.json" "$c")" \
    's.template.spec.containers[0].env.filter((e) => e.name === "DTRAIN_TCP_CONGESTION").map((e) => e.value)' "$want"
done
render_refused "tcpCongestion not a name" "tcpCongestion" --set "train.tcpCongestion=reno;rm"
# The server Job restarts an index in place, as the worker Job does, and keeps the index as
# rank and DNS name; R-1 servers may run out of restarts without failing the Job.
sv=$(job_of "$WORK/replication=2.json" server)
expect_json "replication=2 server" "$sv" '[s.completionMode, s.completions, s.parallelism, s.backoffLimitPerIndex, s.maxFailedIndexes, s.backoffLimit]' '["Indexed",2,2,3,1,6]'
expect_json "replication=2 server" "$sv" s.podFailurePolicy \
  '{"rules":[{"action":"Ignore","onPodConditions":[{"status":"True","type":"DisruptionTarget"}]},{"action":"FailJob","onExitCodes":{"operator":"In","values":[1,2,127]}}]}'
expect_json "replication=2 server" "$sv" '[s.template.spec.restartPolicy, s.template.spec.subdomain]' '["Never","dtrain-server"]'
expect_json "replication=2 server" "$sv" 's.template.spec.containers[0].env.find((e) => e.name === "DTRAIN_RANK").valueFrom.fieldRef.fieldPath' \
  "\"metadata.annotations['batch.kubernetes.io/job-completion-index']\""
expect_json "replication=2 server" "$sv" 's.template.spec.volumes.map((v) => v.name)' '["tmp","tls"]'
sv=$(job_of "$WORK/replication=3,servers=4,maxRestarts=2.json" server)
expect_json "replication=3 servers=4 maxRestarts=2" "$sv" '[s.backoffLimitPerIndex, s.maxFailedIndexes, s.backoffLimit]' '[2,2,8]'
# Snapshots on the checkpoint claim (the default volume): a directory per job.
sv=$(job_of "$WORK/snapshotEvery=50.json" server)
expect_json "snapshotEvery=50 server" "$sv" '[s.backoffLimitPerIndex, s.maxFailedIndexes, s.backoffLimit]' '[3,0,6]'
expect_json "snapshotEvery=50 server" "$sv" "$(env_of)" '["DTRAIN_SNAPSHOT_EVERY=50","DTRAIN_SNAPSHOT_DIR=/checkpoints/snapshots/run-7"]'
expect_json "snapshotEvery=50 server" "$sv" 's.template.spec.containers[0].volumeMounts.filter((m) => m.name !== "tls")' \
  '[{"mountPath":"/tmp","name":"tmp"},{"mountPath":"/checkpoints","name":"checkpoints"}]'
expect_json "snapshotEvery=50 server" "$sv" 's.template.spec.volumes.find((v) => v.name === "checkpoints")' '{"name":"checkpoints","persistentVolumeClaim":{"claimName":"dtrain-checkpoints"}}'
for c in scheduler worker; do
  expect_json "snapshotEvery=50 $c" "$(job_of "$WORK/snapshotEvery=50.json" "$c")" "$(env_of)" '[]'
done
expect_eq "snapshotEvery=50: claims" "$(claims_of "$WORK/snapshotEvery=50.json")" '["dtrain-checkpoints","dtrain-data"]'
# ... on a claim of their own, created or existing.
sv=$(job_of "$WORK/snapshotEvery=50 on a claim.json" server)
expect_json "snapshots on a claim" "$sv" "$(env_of)" '["DTRAIN_SNAPSHOT_EVERY=50","DTRAIN_SNAPSHOT_DIR=/snap/run-7"]'
expect_json "snapshots on a claim" "$sv" '[s.template.spec.containers[0].volumeMounts.find((m) => m.name === "snapshots"), s.template.spec.volumes.find((v) => v.name === "snapshots")]' \
  '[{"mountPath":"/snap/","name":"snapshots"},{"name":"snapshots","persistentVolumeClaim":{"claimName":"dtrain-snapshots"}}]'
expect_eq "snapshots on a claim: claims" "$(claims_of "$WORK/snapshotEvery=50 on a claim.json")" '["dtrain-checkpoints","dtrain-data","dtrain-snapshots"]'
sv=$(job_of "$WORK/snapshotEvery=50 on an existing claim.json" server)
expect_json "snapshots on an existing claim" "$sv" 's.template.spec.volumes.find((v) => v.name === "snapshots").persistentVolumeClaim.claimName' '"my-snapshots"'
expect_eq "snapshots on an existing claim: claims" "$(claims_of "$WORK/snapshotEvery=50 on an existing claim.json")" '["dtrain-checkpoints","dtrain-data"]'
expect_eq "snapshotVolume=claim without snapshots: claims" "$(claims_of "$WORK/snapshotVolume=claim, snapshotEvery=0.json")" '["dtrain-checkpoints","dtrain-data"]'
expect_json "snapshotVolume=claim without snapshots" "$(job_of "$WORK/snapshotVolume=claim, snapshotEvery=0.json" server)" \
  '[s.backoffLimit, s.template.spec.volumes.map((v) => v.name), s.template.spec.containers[0].env.filter((e) => /SNAPSHOT/.test(e.name))]' '[0,["tmp","tls"],[]]'
# ... on an emptyDir: lost with the pod, so it does not make servers restartable.
sv=$(job_of "$WORK/snapshotEvery=50 on an emptyDir.json" server)
expect_json "snapshots on an emptyDir" "$sv" '[s.backoffLimit, s.backoffLimitPerIndex ?? null, s.podFailurePolicy ?? null]' '[0,null,null]'
expect_json "snapshots on an emptyDir" "$sv" "$(env_of)" '["DTRAIN_SNAPSHOT_EVERY=50","DTRAIN_SNAPSHOT_DIR=/snapshots/run-7"]'
expect_json "snapshots on an emptyDir" "$sv" 's.template.spec.volumes.find((v) => v.name === "snapshots")' '{"emptyDir":{},"name":"snapshots"}'
sv=$(job_of "$WORK/replication=2, snapshots on an emptyDir.json" server)
expect_json "replication=2, snapshots on an emptyDir" "$sv" '[s.backoffLimitPerIndex, s.maxFailedIndexes]' '[3,1]'

render_ok "kube-version 1.29" "" --kube-version 1.29.0
render_ok "kube-version 1.33 (GKE style)" "" --kube-version v1.33.2-gke.1111000

echo "== bad values are refused"
render_refused workers=0 "workers: Must be greater than or equal to 1" --set workers=0
render_refused workers=abc "workers: Invalid type" --set workers=abc
render_refused servers=0 "servers: Must be greater than or equal to 1" --set servers=0
render_refused kvStore=local "kvStore" --set kvStore=local
render_refused network=resnet "network" --set network=resnet
render_refused unknown-key "Additional property wrokers is not allowed" --set wrokers=3
render_refused unknown-nested-key "Additional property numEpoch is not allowed" --set train.numEpoch=3
render_refused gpus=-1 "worker.gpus" --set worker.gpus=-1
render_refused gpus-in-requests "worker.resources" --set 'worker.resources.requests.nvidia\.com/gpu=1'
render_refused gpus-in-limits "worker.resources" --set 'worker.resources.limits.nvidia\.com/gpu=1'
render_refused lr=0 "train.lr" --set train.lr=0
render_refused lr=-0.1 "train.lr" --set train.lr=-0.1
render_refused optimizer "train.optimizer" --set train.optimizer=rmsprop
render_refused empty-image "image.repository" --set image.repository=
render_refused modelName "train.modelName" --set train.modelName=../x
render_refused accessMode "accessModes" --set 'persistence.data.accessModes[0]=ReadWriteSometimes'
render_refused metrics-port "metrics.port" --set metrics.port=70000
render_refused maxRestarts=-1 "recovery.maxRestarts: Must be greater than or equal to 0" --set recovery.maxRestarts=-1
render_refused maxRestarts=abc "recovery.maxRestarts: Invalid type" --set recovery.maxRestarts=abc
render_refused maxRestarts=1000 "recovery.maxRestarts: Must be less than or equal to 100" --set recovery.maxRestarts=1000
render_refused rejoinTimeout=-5 "recovery.rejoinTimeout" --set recovery.rejoinTimeout=-5
render_refused rejoinTimeout=soon "recovery.rejoinTimeout" --set recovery.rejoinTimeout=soon
render_refused "jobId with a space" "recovery.jobId" --set-string 'recovery.jobId=my job'
render_refused "jobId of 65 characters" "recovery.jobId" --set "recovery.jobId=$(printf 'a%.0s' $(seq 65))"
render_refused job.backoffLimit "Additional property backoffLimit is not allowed" --set job.backoffLimit=2
render_refused "replication=3 > servers=2" "replication (3) must not exceed servers (2)" --set replication=3
render_refused "replication=2 > servers=1" "replication (2) must not exceed servers (1)" --set replication=2,servers=1
render_refused replication=0 "replication: Must be greater than or equal to 1" --set replication=0
render_refused replication=two "replication: Invalid type" --set replication=two
render_refused snapshotEvery=-1 "snapshotEvery: Must be greater than or equal to 0" --set snapshotEvery=-1
render_refused snapshotEvery=1.5 "snapshotEvery: Invalid type" --set snapshotEvery=1.5
render_refused snapshotVolume=hostPath "server.snapshotVolume" --set server.snapshotVolume=hostPath
render_refused snapshots.mountPath "persistence.snapshots.mountPath" --set persistence.snapshots.mountPath=snap
render_refused "kube-version 1.28" "chart requires kubeVersion: >=1.29.0-0 which is incompatible with Kubernetes v1.28.9" --kube-version 1.28.9

# Without the dashboard file the chart must say what is missing (helm fails the same way:
# it follows the link files/dtrain-dashboard.json when loading the chart).
dash="$WORK/repo/deploy/grafana/dtrain-dashboard.json"
cp "$dash" "$WORK/dashboard.json"
rm "$dash"
render_refused missing-dashboard "dtrain-dashboard.json"
: > "$dash"
render_refused empty-dashboard "dtrain-dashboard.json.*missing or empty"
render_ok "empty dashboard, disabled" "" --set metrics.grafanaDashboard.enabled=false
cp "$WORK/dashboard.json" "$dash"

echo "== TLS, NetworkPolicies, inference authentication (README.md, TLS and network policy)"
# validate.mjs checks by meaning (security.mjs): every training pod has DTRAIN_TLS_CERT/KEY/CA
# in a Secret volume mounted read-only, exec probes (`dtrain health`) instead of the
# kubelet's plaintext gRPC probes, Certificates field by field, the token from a Secret,
# and what the NetworkPolicies let in. The ci/ files were rendered above; with expectations:
render_ok "tls from a Secret" "--tls existingSecret --tls-secret dtrain-tls --inference-tls-secret dtrain-infer-tls \
  --token-secret dtrain-infer-token:token --network-policy on --metrics-namespace monitoring --inference-from any" \
  -f "$CHART/ci/tls-secret-values.yaml"
render_ok "tls from cert-manager" "--tls certManager --workers 3 --token-secret fmnist-tokens:tokens.txt \
  --network-policy on --metrics-namespace monitoring --inference-from restricted" -f "$CHART/ci/tls-certmanager-values.yaml"
CM=tls.enabled=true,tls.certManager.enabled=true,tls.certManager.issuerRef.name=dtrain-ca
render_ok "tls cert-manager, namespace ml, 5 workers, 3 servers, replication" "--tls certManager --namespace ml --workers 5 --servers 3 --replication 2" \
  -n ml --set "$CM,workers=5,servers=3,replication=2,clusterDomain=k8s.example"
render_ok "tls cert-manager, no inference" "--tls certManager --network-policy on" --set "$CM,inference.enabled=false"
render_ok "tls Secret, no inference" "--tls existingSecret --tls-secret my-tls" --set tls.enabled=true,tls.existingSecret=my-tls,inference.enabled=false
render_ok "tls, metrics off, networkPolicy" "--tls certManager --network-policy on" --set "$CM,metrics.enabled=false,networkPolicy.enabled=true"
render_ok "networkPolicy without TLS" "--tls off --network-policy on --metrics-namespace monitoring --inference-from any" --set tls.enabled=false
# (Helm merges maps: `{}` would keep the default's matchLabels; null removes them.)
printf 'networkPolicy:\n  enabled: true\n  metricsNamespaceSelector:\n    matchLabels: null\n  inferenceFrom:\n    - ipBlock: {cidr: 10.0.0.0/8}\n    - podSelector: {matchLabels: {app: web}}\n' > "$WORK/np-values.yaml"
render_ok "networkPolicy: metrics from every namespace, inference from a CIDR" "--network-policy on --metrics-namespace anywhere --inference-from restricted" \
  -f "$WORK/np-values.yaml"
render_ok "inference token without TLS" "--tls off --token-secret t:token" --set tls.enabled=false,inference.auth.tokenSecret.name=t
# By default: mutual TLS with the chart's own certificates, and the policies.
render_ok "defaults: mutual TLS, the chart's certificates, policies" "--tls generated --network-policy on --metrics-namespace monitoring --inference-from any"
render_ok "tls.enabled=false: plaintext" "--tls off --network-policy on" --set tls.enabled=false
render_ok "tls.enabled=false, networkPolicy.enabled=false" "--tls off --network-policy off" --set tls.enabled=false,networkPolicy.enabled=false
render_ok "the chart's certificates, ns ml, 5 workers, jobset" "--tls generated --namespace ml --workers 5 --orchestrator jobset" \
  -n ml --set workers=5,orchestrator=jobset,clusterDomain=k8s.example
render_ok "the chart's certificates, no inference" "--tls generated" --set inference.enabled=false

doc_of() { # RENDERED.json KIND NAME: that object as JSON
  node -e 'const [f, k, n] = process.argv.slice(1);
    const o = JSON.parse(require("fs").readFileSync(f, "utf8")).map((d) => d.object)
      .find((o) => o.kind === k && o.metadata.name === n);
    console.log(JSON.stringify(o ?? null));' "$1" "$2" "$3"
}
f="$WORK/tls from cert-manager.json"
c=$(doc_of "$f" Certificate dtrain-worker-tls)
expect_json "cert-manager worker" "$c" '[s.spec.commonName, s.spec.secretName]' '["worker.dtrain","dtrain-worker-tls"]'
expect_json "cert-manager worker" "$c" 's.spec.dnsNames' \
  '["dtrain-worker-0.dtrain-worker.default.svc.cluster.local","dtrain-worker-1.dtrain-worker.default.svc.cluster.local","dtrain-worker-2.dtrain-worker.default.svc.cluster.local","localhost"]'
expect_json "cert-manager worker" "$c" '[s.spec.ipAddresses, s.spec.usages, s.spec.privateKey]' \
  '[["127.0.0.1"],["digital signature","server auth","client auth"],{"algorithm":"ECDSA","encoding":"PKCS8","rotationPolicy":"Always","size":256}]'
expect_json "cert-manager worker" "$c" '[s.spec.issuerRef, s.spec.duration, s.spec.renewBefore]' \
  '[{"group":"cert-manager.io","kind":"ClusterIssuer","name":"dtrain-ca"},"8760h","720h"]'
c=$(doc_of "$f" Certificate dtrain-scheduler-tls)
expect_json "cert-manager scheduler" "$c" '[s.spec.commonName, s.spec.dnsNames]' \
  '["scheduler.dtrain",["dtrain-scheduler-0.dtrain-scheduler.default.svc.cluster.local","localhost"]]'
c=$(doc_of "$f" Certificate dtrain-inference-tls)
expect_json "cert-manager inference" "$c" '[s.spec.commonName, s.spec.dnsNames]' \
  '["infer.dtrain",["dtrain-inference","dtrain-inference.default","dtrain-inference.default.svc","dtrain-inference.default.svc.cluster.local","fmnist.example.internal","localhost"]]'
expect_eq "cert-manager: Certificates" "$(node -e 'console.log(JSON.stringify(JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"))
  .map((d) => d.object).filter((o) => o.kind === "Certificate").map((o) => o.metadata.name).sort()))' "$f")" \
  '["dtrain-inference-tls","dtrain-scheduler-tls","dtrain-server-tls","dtrain-worker-tls"]'
c=$(doc_of "$WORK/tls cert-manager, namespace ml, 5 workers, 3 servers, replication.json" Certificate dtrain-server-tls)
expect_json "cert-manager servers in ml" "$c" 's.spec.dnsNames' \
  '["dtrain-server-0.dtrain-server.ml.svc.k8s.example","dtrain-server-1.dtrain-server.ml.svc.k8s.example","dtrain-server-2.dtrain-server.ml.svc.k8s.example","localhost"]'
tls_env='s.template.spec.containers[0].env.filter((e) => /^DTRAIN_TLS_/.test(e.name)).map((e) => `${e.name}=${e.value}`)'
for comp in scheduler server worker; do
  j=$(job_of "$f" $comp)
  expect_json "cert-manager $comp" "$j" "$tls_env" \
    '["DTRAIN_TLS_CERT=/etc/dtrain/tls/tls.crt","DTRAIN_TLS_KEY=/etc/dtrain/tls/tls.key","DTRAIN_TLS_CA=/etc/dtrain/tls/ca.crt"]'
  expect_json "cert-manager $comp" "$j" '[s.template.spec.volumes.find((v) => v.name === "tls"), s.template.spec.containers[0].volumeMounts.find((m) => m.name === "tls")]' \
    "[{\"name\":\"tls\",\"secret\":{\"defaultMode\":288,\"secretName\":\"dtrain-$comp-tls\"}},{\"mountPath\":\"/etc/dtrain/tls\",\"name\":\"tls\",\"readOnly\":true}]"
  j=$(job_of "$WORK/tls from a Secret.json" $comp)
  expect_json "Secret $comp" "$j" 's.template.spec.volumes.find((v) => v.name === "tls").secret.secretName' '"dtrain-tls"'
  j=$(job_of "$WORK/tls.enabled=false: plaintext.json" $comp)
  expect_json "tls.enabled=false $comp" "$j" "[$tls_env, s.template.spec.volumes.map((v) => v.name).includes(\"tls\")]" '[[],false]'
  j=$(job_of "$WORK/recovery defaults.json" $comp)
  expect_json "defaults $comp" "$j" "[$tls_env.length, s.template.spec.volumes.find((v) => v.name === \"tls\").secret.secretName]" "[3,\"dtrain-$comp-tls\"]"
done
j=$(job_of "$f" scheduler)
expect_json "cert-manager scheduler probes" "$j" '[s.template.spec.containers[0].readinessProbe, s.template.spec.containers[0].livenessProbe.exec]' \
  '[{"exec":{"command":["dtrain","health","--addr=127.0.0.1:9091","--tls-ca=/etc/dtrain/tls/ca.crt","--tls-cert=/etc/dtrain/tls/tls.crt","--tls-key=/etc/dtrain/tls/tls.key","--timeout=4"]},"periodSeconds":5,"timeoutSeconds":5},{"command":["dtrain","health","--addr=127.0.0.1:9091","--tls-ca=/etc/dtrain/tls/ca.crt","--tls-cert=/etc/dtrain/tls/tls.crt","--tls-key=/etc/dtrain/tls/tls.key","--timeout=4"]}]'
inf_of() { doc_of "$1" Deployment dtrain-inference; }
i=$(inf_of "$f")
expect_json "cert-manager inference" "$i" 's.spec.template.spec.containers[0].readinessProbe.exec.command.slice(0, 4)' \
  '["dtrain","health","--addr=127.0.0.1:50051","--service=dtrain.v1.Inference"]'
expect_json "cert-manager inference" "$i" '[s.spec.template.spec.containers[0].args.at(-1), s.spec.template.spec.volumes.at(-1)]' \
  '["--auth-token-file=/etc/dtrain/auth/tokens.txt",{"name":"auth-token","secret":{"defaultMode":288,"items":[{"key":"tokens.txt","path":"tokens.txt"}],"secretName":"fmnist-tokens"}}]'
expect_json "cert-manager inference" "$i" 's.spec.template.spec.volumes.find((v) => v.name === "tls").secret.secretName' '"dtrain-inference-tls"'
i=$(inf_of "$WORK/tls from a Secret.json")
expect_json "Secret inference" "$i" 's.spec.template.spec.volumes.find((v) => v.name === "tls").secret.secretName' '"dtrain-infer-tls"'
i=$(inf_of "$WORK/inference token without TLS.json")
expect_json "token without TLS" "$i" '[s.spec.template.spec.containers[0].readinessProbe.grpc, s.spec.template.spec.containers[0].args.at(-1)]' \
  '[{"port":50051,"service":"dtrain.v1.Inference"},"--auth-token-file=/etc/dtrain/auth/token"]'
# The training policy: gRPC ports from the release's training pods, metrics from "monitoring".
p=$(doc_of "$WORK/tls from a Secret.json" NetworkPolicy dtrain-training)
expect_json "NetworkPolicy training" "$p" 's.spec.ingress.map((r) => r.ports.map((p) => p.port))' '[[9091,9092],[9100]]'
expect_json "NetworkPolicy training" "$p" '[s.spec.ingress[0].from, s.spec.ingress[1].from]' \
  '[[{"podSelector":{"matchExpressions":[{"key":"app.kubernetes.io/component","operator":"In","values":["scheduler","server","worker"]}],"matchLabels":{"app.kubernetes.io/instance":"dtrain","app.kubernetes.io/name":"dtrain"}}}],[{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"monitoring"}}}]]'
p=$(doc_of "$WORK/tls from cert-manager.json" NetworkPolicy dtrain-inference)
expect_json "NetworkPolicy inference" "$p" 's.spec.ingress[0]' '{"from":[{"namespaceSelector":{"matchLabels":{"team":"web"}}}],"ports":[{"port":50051,"protocol":"TCP"}]}'
p=$(doc_of "$WORK/tls, metrics off, networkPolicy.json" NetworkPolicy dtrain-training)
expect_json "NetworkPolicy, metrics off" "$p" 's.spec.ingress.length' '1'
"$RENDER" -o json "${BASE_ARGS[@]}" --set "$CM,recovery.jobId=run-7" dtrain "$CHART" > "$WORK/cn.json"
expect_json "cert-manager, recovery.jobId=run-7" "$(doc_of "$WORK/cn.json" Certificate dtrain-scheduler-tls)" 's.spec.commonName' '"scheduler.run-7"'

# The checks catch what they are for: each broken rendering below must be refused by validate.mjs.
mutant() { # NAME PATTERN RENDERED.json JS-OVER-docs [VALIDATE ARGS]
  local name=$1 pattern=$2 src=$3 js=$4 vargs=${5:-}
  node -e 'const fs = require("fs"); const d = JSON.parse(fs.readFileSync(process.argv[1], "utf8"));
    const docs = d.map((x) => x.object);
    const kind = (k, n) => docs.find((o) => o.kind === k && (!n || o.metadata.name === n));
    const main = (n) => kind("Job", n).spec.template.spec.containers[0];
    eval(process.argv[2]); fs.writeFileSync(process.argv[3], JSON.stringify(d));' "$src" "$js" "$WORK/mutant.json"
  # shellcheck disable=SC2086
  if node "$VALIDATE" "$WORK/mutant.json" $vargs > "$WORK/mutant.out" 2>&1; then
    bad "validate.mjs accepts $name"
  elif grep -q -- "$pattern" "$WORK/mutant.out"; then
    ok "validate.mjs refuses $name: $(grep -m1 -- "$pattern" "$WORK/mutant.out" | sed 's/^ *FAIL //')"
  else
    bad "validate.mjs refuses $name, but not naming '$pattern': $(cat "$WORK/mutant.out")"
  fi
}
f="$WORK/tls from cert-manager.json"
s="$WORK/tls from a Secret.json"
mutant "a worker without DTRAIN_TLS_CA" "DTRAIN_TLS_CA missing" "$f" \
  'const c = main("dtrain-worker"); c.env = c.env.filter((e) => e.name !== "DTRAIN_TLS_CA")'
mutant "a scheduler without TLS" "all or nothing" "$f" \
  'const c = main("dtrain-scheduler"); c.env = c.env.filter((e) => !/^DTRAIN_TLS_/.test(e.name))'
mutant "the TLS Secret mounted writable" "mounted read-only" "$f" \
  'main("dtrain-server").volumeMounts.find((m) => m.name === "tls").readOnly = false'
mutant "the TLS files in an emptyDir" "not a Secret" "$f" \
  'kind("Job", "dtrain-worker").spec.template.spec.volumes.find((v) => v.name === "tls").secret = undefined;
   kind("Job", "dtrain-worker").spec.template.spec.volumes.find((v) => v.name === "tls").emptyDir = {}'
mutant "a world-readable key" "world-readable" "$f" \
  'kind("Job", "dtrain-worker").spec.template.spec.volumes.find((v) => v.name === "tls").secret.defaultMode = 420'
mutant "a native gRPC probe with TLS" "cannot speak TLS" "$f" \
  'main("dtrain-server").readinessProbe = {grpc: {port: 9092}}'
mutant "a probe without the client certificate" "tls-cert" "$f" \
  'const p = main("dtrain-scheduler").livenessProbe.exec; p.command = p.command.filter((a) => !a.startsWith("--tls-cert"))'
mutant "a worker certificate naming a server" "identity server, expected worker" "$f" \
  'kind("Certificate", "dtrain-worker-tls").spec.commonName = "server.dtrain"'
mutant "a Certificate without the pods' names" "lacks the pod DNS name" "$f" \
  'kind("Certificate", "dtrain-worker-tls").spec.dnsNames.splice(1, 1)'
mutant "a Certificate field cert-manager has not" "is no field" "$f" \
  'kind("Certificate", "dtrain-server-tls").spec.keyAlgorithm = "ecdsa"'
mutant "a Certificate without an issuer" "issuerRef.name is required" "$f" \
  'kind("Certificate", "dtrain-server-tls").spec.issuerRef = {}'
mutant "an RSA key" "ECDSA P-256" "$f" \
  'kind("Certificate", "dtrain-server-tls").spec.privateKey = {algorithm: "RSA", size: 2048}'
mutant "a common name over 64 characters" "at most 64" "$f" \
  'kind("Certificate", "dtrain-server-tls").spec.commonName = "server." + "x".repeat(60)'
mutant "inference with the training Secret" "may join the job" "$s" \
  'kind("Deployment").spec.template.spec.volumes.find((v) => v.name === "tls").secret.secretName = "dtrain-tls"'
mutant "the token file outside a Secret" "in no Secret volume" "$s" \
  'const c = kind("Deployment").spec.template.spec.containers[0]; c.args = c.args.map((a) => a.replace("/etc/dtrain/auth/", "/tmp/"))'
mutant "training ports open to another namespace" "only this release's pods" "$f" \
  'kind("NetworkPolicy", "dtrain-training").spec.ingress[0].from.push({namespaceSelector: {}})'
mutant "training ports open to anyone" "open to anyone" "$f" \
  'delete kind("NetworkPolicy", "dtrain-training").spec.ingress[0].from'
mutant "training ports open to inference" "admits the release's inference pods" "$f" \
  'kind("NetworkPolicy", "dtrain-training").spec.ingress[0].from[0].podSelector.matchExpressions[0].values.push("inference")'
mutant "servers unreachable for workers" "does not admit the worker pods" "$f" \
  'kind("NetworkPolicy", "dtrain-training").spec.ingress[0].from[0].podSelector.matchExpressions[0].values.pop()'
mutant "no metrics rule" "metrics port 9100 admits nobody" "$f" \
  'kind("NetworkPolicy", "dtrain-training").spec.ingress.pop()'
mutant "inference unselected" "selected by no NetworkPolicy" "$f" \
  'kind("NetworkPolicy", "dtrain-inference").spec.podSelector.matchLabels["app.kubernetes.io/component"] = "nothing"'

echo "== TLS values refused, naming the value"
render_refused "inferenceSecret with the chart's certificates" "without it the chart makes inference's certificate" --set tls.inferenceSecret=x
render_refused "a common name over 64 characters, the chart's certificates" "tls.generated: the common name" \
  --set "recovery.jobId=$(printf 'j%.0s' $(seq 60))"
render_refused "validityDays=0" "tls.generated.validityDays" --set tls.generated.validityDays=0
render_refused "tls from both sources" "tls.existingSecret and tls.certManager.enabled are exclusive" \
  --set "$CM,tls.existingSecret=dtrain-tls"
render_refused "cert-manager without an issuer" "tls.certManager.enabled needs tls.certManager.issuerRef.name" \
  --set tls.enabled=true,tls.certManager.enabled=true
render_refused "Secret without inferenceSecret" "tls.existingSecret with inference.enabled needs tls.inferenceSecret" \
  --set tls.enabled=true,tls.existingSecret=dtrain-tls
render_refused "inferenceSecret with cert-manager" "tls.inferenceSecret goes with tls.existingSecret" \
  --set "$CM,tls.inferenceSecret=x"
render_refused "existingSecret with tls off" "tls.existingSecret is set but tls.enabled is false" --set tls.enabled=false,tls.existingSecret=dtrain-tls
render_refused "inferenceSecret with tls off" "tls.inferenceSecret is set but tls.enabled is false" --set tls.enabled=false,tls.inferenceSecret=x
render_refused "cert-manager with tls off" "tls.certManager.enabled is set but tls.enabled is false" \
  --set tls.enabled=false,tls.certManager.enabled=true,tls.certManager.issuerRef.name=ca
render_refused "a common name over 64 characters" "over X.509's 64; set a shorter recovery.jobId" \
  --set "$CM,recovery.jobId=$(printf 'j%.0s' $(seq 60))"
render_refused "Secret name in capitals" "tls.existingSecret" --set tls.enabled=true,tls.existingSecret=MyTLS,inference.enabled=false
render_refused "duration not a duration" "tls.certManager.duration" --set "$CM,tls.certManager.duration=90d"
render_refused "issuer kind" "tls.certManager.issuerRef.kind" --set "$CM,tls.certManager.issuerRef.kind=issuer"
render_refused "unknown tls key" "Additional property secret is not allowed" --set tls.secret=x
render_refused "token key empty" "inference.auth.tokenSecret.key" --set inference.auth.tokenSecret.name=t,inference.auth.tokenSecret.key=
render_refused "metricsNamespaceSelector key" "Additional property matchLabel is not allowed" \
  --set networkPolicy.metricsNamespaceSelector.matchLabel.x=y
printf 'networkPolicy:\n  inferenceFrom:\n    - {}\n' > "$WORK/np-bad.yaml"
render_refused "an empty inferenceFrom peer" "networkPolicy.inferenceFrom" -f "$WORK/np-bad.yaml"
printf 'networkPolicy:\n  inferenceFrom:\n    - cidr: 10.0.0.0/8\n' > "$WORK/np-bad.yaml"
render_refused "a peer that is no NetworkPolicyPeer" "Additional property cidr is not allowed" -f "$WORK/np-bad.yaml"

echo "== NOTES.txt"
notes="$WORK/defaults.notes"
for want in "logs -f --prefix" "app.kubernetes.io/component=worker" "port-forward svc/dtrain-inference" \
    "dtrain predict --server localhost:50051" "ConfigMap dtrain-dashboard" "helm uninstall dtrain" \
    "up to 3 times per rank" "A parameter server pod lost: the job fails" "dtrain status" \
    "set replication >= 2 or snapshotEvery"; do
  if grep -qF -- "$want" "$notes"; then ok "NOTES has '$want'"; else bad "NOTES lacks '$want'"; fi
done
notes_has() { # NAME FILE WANT...
  local name=$1 file=$2 want
  shift 2
  for want in "$@"; do
    if grep -qF -- "$want" "$file"; then ok "NOTES ($name) has '$want'"; else bad "NOTES ($name) lacks '$want'"; fi
  done
  if grep -qF "A parameter server pod lost: the job fails" "$file"; then bad "NOTES ($name) says a server's loss fails the job"; fi
}
notes_has replication=2 "$WORK/replication=2.notes" "(2 copies of each key range)" "served at once by their other copies" \
  "Up to 1 server(s) may be lost"
notes_has snapshotEvery=50 "$WORK/snapshotEvery=50.notes" "rolls back to the newest step every server has a snapshot of" \
  "go to /checkpoints/snapshots/run-7" "on the claim dtrain-checkpoints"
notes_want() { # NAME FILE WANT...
  local name=$1 file=$2 want
  shift 2
  for want in "$@"; do
    if grep -qF -- "$want" "$file"; then ok "NOTES ($name) has '$want'"; else bad "NOTES ($name) lacks '$want'"; fi
  done
}
notes_want "tls from cert-manager" "$WORK/tls from cert-manager.notes" "Transport: mutual TLS" "(ClusterIssuer dtrain-ca)" \
  "get certificates -l app.kubernetes.io/instance=dtrain" "NetworkPolicies dtrain-training and dtrain-inference" \
  "grpcurl -cacert ca.crt -H \"authorization: Bearer" "--tls-ca ca.crt --auth-token-file token"
notes_want "tls from a Secret" "$WORK/tls from a Secret.notes" "Secret dtrain-tls (inference: dtrain-infer-tls)" \
  "get secret dtrain-infer-tls -o jsonpath='{.data.ca\\.crt}'"
notes_want "token without TLS" "$WORK/inference token without TLS.notes" "cross the network in clear"
notes_want defaults "$WORK/defaults.notes" "Transport: mutual TLS" "the chart: its own CA (Secret dtrain-ca, mounted by no pod)" \
  "NetworkPolicies dtrain-training and dtrain-inference" "get secret dtrain-client-tls -o jsonpath='{.data.tls\\.key}'" \
  "grpcurl -cacert ca.crt -cert client.crt -key client.key"
notes_want "tls.enabled=false" "$WORK/tls.enabled=false: plaintext.notes" "Transport: plaintext (tls.enabled=false)" "grpcurl -plaintext" "dtrain.v1.Inference/Predict"
notes_want "networkPolicy.enabled=false" "$WORK/tls.enabled=false, networkPolicy.enabled=false.notes" "No NetworkPolicy (networkPolicy.enabled=false)"
if grep -qF "A parameter server pod lost: the job fails" "$WORK/snapshotEvery=50 on an emptyDir.notes" &&
  grep -qF "on an emptyDir, which dies with the pod" "$WORK/snapshotEvery=50 on an emptyDir.notes"; then
  ok "NOTES (snapshots on an emptyDir): a server's loss still fails the job; the emptyDir dies with the pod"
else
  bad "NOTES (snapshots on an emptyDir) must say a server's loss fails the job and why"
fi

echo "== a stock cluster: only workers=3 (no storage class, no certificates given)"
# What `helm install dtrain ./helm/dtrain --set workers=3` renders: the data set from the
# image, one ReadWriteOnce checkpoint claim of the default class whose pods share a node,
# mutual TLS with the chart's certificates, the NetworkPolicies.
BASE_ARGS=()
STOCK="--tls generated --network-policy on --claims dtrain-checkpoints=rwo"
render_ok "stock: workers=3" "--workers 3 $STOCK" --set workers=3
render_ok "stock: workers=3, image" "--workers 3 $STOCK" --set workers=3,image.repository=registry.example.internal/dtrain,image.tag=0.1.0
render_ok "stock: workers=3, jobset" "--workers 3 --orchestrator jobset $STOCK" --set workers=3,orchestrator=jobset
for f in "$CHART"/ci/*.yaml; do
  render_ok "stock: ci-$(basename "$f" .yaml)" "--existing-claims dtrain-data,dtrain-checkpoints" -f "$f"
done
render_ok "stock: snapshots on the checkpoint claim" "--snapshot-every 50 $STOCK" --set workers=3,snapshotEvery=50
render_ok "stock: snapshots on a claim of their own" "--snapshot-every 50 --tls generated --claims dtrain-checkpoints=rwo,dtrain-snapshots=rwo" \
  --set workers=3,snapshotEvery=50,server.snapshotVolume=claim
render_ok "stock: user affinity kept" "--workers 3 $STOCK" --set workers=3 \
  --set 'worker.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight=50' \
  --set 'worker.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm.topologyKey=topology.kubernetes.io/zone' \
  --set 'worker.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm.labelSelector.matchLabels.app=cache' \
  --set 'worker.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey=kubernetes.io/hostname' \
  --set 'worker.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector.matchLabels.app=noisy'
render_ok "stock: data on a ReadWriteOnce claim" "--workers 3 --claims dtrain-data=rwo,dtrain-checkpoints=rwo" \
  --set workers=3,'persistence.data.accessModes[0]=ReadWriteOnce'
# ReadWriteMany stays one value away: a named class.
render_ok "RWX: checkpoints.storageClassName" "--workers 3 --claims dtrain-checkpoints=rwx" --set workers=3,persistence.checkpoints.storageClassName=nfs-client
render_ok "RWX: data and checkpoints classes" "--workers 3 --claims dtrain-data=rwx,dtrain-checkpoints=rwx" \
  --set workers=3,persistence.data.storageClassName=cephfs,persistence.checkpoints.storageClassName=cephfs
render_ok "RWX: existing claims" "--workers 3 --existing-claims my-data,my-ckpt" \
  --set workers=3,persistence.data.existingClaim=my-data,persistence.checkpoints.existingClaim=my-ckpt
f="$WORK/stock: workers=3.json"
expect_eq "stock: claims" "$(claims_of "$f")" '["dtrain-checkpoints"]'
w=$(job_of "$f" worker)
expect_json "stock worker" "$w" 's.template.spec.volumes.find((v) => v.name === "data")' '{"emptyDir":{"sizeLimit":"1Gi"},"name":"data"}'
expect_json "stock worker" "$w" 's.template.spec.initContainers.map((c) => [c.name, c.command[0], c.env[0].value])' '[["seed-data","dtrain-seed-data","/data/fashion-mnist"]]'
expect_json "stock worker" "$w" '[s.template.metadata.labels["dtrain.io/mounts-checkpoints"], s.template.spec.volumes.find((v) => v.name === "checkpoints").persistentVolumeClaim.claimName]' '["true","dtrain-checkpoints"]'
AFF='{"podAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":[{"labelSelector":{"matchLabels":{"app.kubernetes.io/instance":"dtrain","dtrain.io/mounts-checkpoints":"true"}},"topologyKey":"kubernetes.io/hostname"}]}}'
expect_json "stock worker" "$w" 's.template.spec.affinity' "$AFF"
i=$(doc_of "$f" Deployment dtrain-inference)
expect_json "stock inference" "$i" '[s.spec.template.metadata.labels["dtrain.io/mounts-checkpoints"], s.spec.template.spec.volumes[0].persistentVolumeClaim]' \
  '["true",{"claimName":"dtrain-checkpoints","readOnly":true}]'
expect_json "stock inference" "$i" 's.spec.template.spec.affinity' "$AFF"
for c in scheduler server; do
  expect_json "stock $c" "$(job_of "$f" $c)" '[s.template.spec.affinity ?? null, s.template.metadata.labels["dtrain.io/mounts-checkpoints"] ?? null]' '[null,null]'
done
expect_json "stock: snapshots, server" "$(job_of "$WORK/stock: snapshots on the checkpoint claim.json" server)" 's.template.spec.affinity' "$AFF"
expect_json "stock: user affinity kept" "$(job_of "$WORK/stock: user affinity kept.json" worker)" \
  '[s.template.spec.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution.length, s.template.spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution.map((t) => t.topologyKey), s.template.spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector]' \
  '[1,["kubernetes.io/hostname"],{"matchLabels":{"app":"noisy"}}]'
# A required podAffinity of the user's beside the chart's would leave the first pod Pending.
render_refused "required podAffinity with a ReadWriteOnce claim" "worker.affinity has required podAffinity terms" --set workers=3 \
  --set 'worker.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey=topology.kubernetes.io/zone' \
  --set 'worker.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector.matchLabels.app=cache'
render_ok "required podAffinity with a ReadWriteMany claim" "--workers 3 --claims dtrain-checkpoints=rwx" --set workers=3,persistence.checkpoints.storageClassName=nfs-client \
  --set 'worker.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey=topology.kubernetes.io/zone' \
  --set 'worker.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector.matchLabels.app=cache'
f="$WORK/RWX: checkpoints.storageClassName.json"
expect_json "RWX worker" "$(job_of "$f" worker)" '[s.template.spec.affinity ?? null, s.template.metadata.labels["dtrain.io/mounts-checkpoints"] ?? null]' '[null,null]'
expect_json "RWX claim" "$(doc_of "$f" PersistentVolumeClaim dtrain-checkpoints)" '[s.spec.accessModes, s.spec.storageClassName]' '[["ReadWriteMany"],"nfs-client"]'
expect_eq "RWX: data and checkpoints classes: claims" "$(claims_of "$WORK/RWX: data and checkpoints classes.json")" '["dtrain-checkpoints","dtrain-data"]'
notes_want "stock" "$WORK/stock: workers=3.notes" "data set: the image's, copied into each worker's emptyDir" \
  "checkpoints: claim dtrain-checkpoints (ReadWriteOnce, class the cluster's default)" \
  "The worker and inference pods mount claim dtrain-checkpoints, which is not ReadWriteMany" \
  "Transport: mutual TLS" "NetworkPolicies dtrain-training and dtrain-inference"
notes_want "RWX" "$WORK/RWX: checkpoints.storageClassName.notes" "checkpoints: claim dtrain-checkpoints (ReadWriteMany, class nfs-client)"
render_refused "ReadWriteMany asked on the default class" "persistence.checkpoints: 4 pods mount this claim at once" \
  --set workers=3,'persistence.checkpoints.accessModes[0]=ReadWriteMany'
render_refused "no data set at all" "persistence.data.seed=false leaves the workers no data set" --set workers=3,persistence.data.seed=false

# The certificates, as a TLS client sees them (openssl): each role's chains to the job's CA
# and names the identity the services check; the CA's key is mounted by no pod.
secrets_of() { # RENDERED.json DIR: each Secret's keys as files DIR/NAME.KEY
  mkdir -p "$2"
  node -e 'const [f, d] = process.argv.slice(1); const fs = require("fs");
    for (const o of JSON.parse(fs.readFileSync(f, "utf8")).map((x) => x.object).filter((o) => o.kind === "Secret"))
      for (const [k, v] of Object.entries(o.data ?? {})) fs.writeFileSync(`${d}/${o.metadata.name}.${k}`, Buffer.from(v, "base64"));' "$1" "$2"
}
certs="$WORK/certs-stock"
secrets_of "$WORK/stock: workers=3.json" "$certs"
for r in scheduler:scheduler server:server worker:worker inference:infer client:client; do
  comp=${r%%:*} identity=${r#*:}
  if v=$(openssl verify -CAfile "$certs/dtrain-ca.tls.crt" "$certs/dtrain-$comp-tls.tls.crt" 2>&1) &&
    cmp -s "$certs/dtrain-ca.tls.crt" "$certs/dtrain-$comp-tls.ca.crt"; then
    ok "openssl: dtrain-$comp-tls chains to the CA in dtrain-ca, and its ca.crt is that CA"
  else
    bad "openssl: dtrain-$comp-tls does not chain to dtrain-ca: $v"
  fi
  subj=$(openssl x509 -in "$certs/dtrain-$comp-tls.tls.crt" -noout -subject -nameopt RFC2253)
  expect_eq "openssl: dtrain-$comp-tls subject" "$subj" "subject=CN=$identity.dtrain"
  if [ "$(openssl pkey -in "$certs/dtrain-$comp-tls.tls.key" -pubout)" = "$(openssl x509 -in "$certs/dtrain-$comp-tls.tls.crt" -noout -pubkey)" ]; then
    ok "openssl: dtrain-$comp-tls tls.key is its certificate's key"
  else
    bad "openssl: dtrain-$comp-tls tls.key is not its certificate's key"
  fi
done
expect_eq "openssl: worker SANs" "$(openssl x509 -in "$certs/dtrain-worker-tls.tls.crt" -noout -ext subjectAltName | tail -1 | sed 's/^ *//')" \
  "DNS:dtrain-worker-0.dtrain-worker.default.svc.cluster.local, DNS:dtrain-worker-1.dtrain-worker.default.svc.cluster.local, DNS:dtrain-worker-2.dtrain-worker.default.svc.cluster.local, DNS:localhost, IP Address:127.0.0.1"
expect_eq "openssl: CA" "$(openssl x509 -in "$certs/dtrain-ca.tls.crt" -noout -ext basicConstraints | tail -1 | sed 's/^ *//')" "CA:TRUE"
mounted=$(node -e 'const mounted = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).map((d) => d.object)
  .filter((o) => ["Job", "Deployment"].includes(o.kind)).flatMap((w) => w.spec.template.spec.volumes ?? [])
  .filter((v) => v.secret).map((v) => v.secret.secretName);
  console.log(JSON.stringify([...new Set(mounted)].sort()))' "$WORK/stock: workers=3.json")
expect_eq "Secrets mounted by the pods (dtrain-ca, dtrain-client-tls in none)" "$mounted" \
  '["dtrain-inference-tls","dtrain-scheduler-tls","dtrain-server-tls","dtrain-worker-tls"]'
cakey=$(openssl pkey -in "$certs/dtrain-ca.tls.key" -pubout)
for k in "$certs"/*.tls.key; do
  case "$k" in */dtrain-ca.tls.key) continue ;; esac
  if [ "$(openssl pkey -in "$k" -pubout)" = "$cakey" ]; then bad "$(basename "$k") is the CA's key"; fi
done
ok "no Secret but dtrain-ca holds the CA's key"

# helm upgrade keeps them (lookup finds the Secrets); a new rendering without them makes new ones.
cluster_of() { # RENDERED.json OUT.yaml [JS-OVER-docs]: the objects as the cluster holds them (for --lookup)
  node -e 'const fs = require("fs"); const docs = JSON.parse(fs.readFileSync(process.argv[1], "utf8")).map((d) => d.object);
    const kind = (k, n) => docs.find((o) => o.kind === k && o.metadata.name === n);
    eval(process.argv[3] ?? ""); fs.writeFileSync(process.argv[2], docs.map((o) => JSON.stringify(o)).join("\n---\n") + "\n");' "$@"
}
secret_data() { # RENDERED.json: every Secret's name and data, sorted
  node -e 'console.log(JSON.stringify(JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).map((d) => d.object)
    .filter((o) => o.kind === "Secret").map((o) => [o.metadata.name, o.data]).sort()))' "$1"
}
f="$WORK/stock: workers=3.json"
cluster_of "$f" "$WORK/stock-cluster.yaml"
"$RENDER" -o json --upgrade --lookup "$WORK/stock-cluster.yaml" --set workers=3,inference.replicas=2 dtrain "$CHART" > "$WORK/stock-upgrade.json"
installed=$(secret_data "$f")
if [ "$installed" = "$(secret_data "$WORK/stock-upgrade.json")" ] && [ "$(echo "$installed" | grep -o '"[a-z-]*-tls"' | wc -l)" = 5 ]; then
  ok "helm upgrade (lookup finds the Secrets): the CA and the 5 certificates kept, byte for byte"
else
  bad "helm upgrade made new certificates: pods started since would not trust the running ones"
fi
if [ "$(secret_data "$WORK/stock: workers=3, image.json")" != "$installed" ]; then
  ok "an install that finds no Secret makes a new CA"
else
  bad "two installs got the same CA"
fi
# A role Secret whose ca.crt is no longer the CA's is issued anew; the others are kept.
cluster_of "$f" "$WORK/stock-cluster-stale.yaml" 'kind("Secret", "dtrain-worker-tls").data["ca.crt"] = Buffer.from("another CA").toString("base64")'
"$RENDER" -o json --upgrade --lookup "$WORK/stock-cluster-stale.yaml" --set workers=3 dtrain "$CHART" > "$WORK/stock-stale.json"
if node "$VALIDATE" "$WORK/stock-stale.json" --workers 3 --tls generated > "$WORK/stock-stale.val" 2>&1 &&
  [ "$(doc_of "$WORK/stock-stale.json" Secret dtrain-worker-tls)" != "$(doc_of "$f" Secret dtrain-worker-tls)" ] &&
  [ "$(doc_of "$WORK/stock-stale.json" Secret dtrain-server-tls)" = "$(doc_of "$f" Secret dtrain-server-tls)" ]; then
  ok "helm upgrade: a role Secret that no longer names the CA is issued anew, the others kept"
else
  bad "helm upgrade: a role Secret of another CA was kept, or the others changed: $(cat "$WORK/stock-stale.val")"
fi
# validate.mjs catches what its generated-certificate checks are for.
mutant "the CA's Secret mounted by a worker" "holds the CA's key" "$f" \
  'kind("Job", "dtrain-worker").spec.template.spec.volumes.find((v) => v.name === "tls").secret.secretName = "dtrain-ca"' "--tls generated"
OTHER="$WORK/stock: workers=3, image.json" mutant "a worker certificate of another CA" "not signed by ca.crt" "$f" \
  'const u = JSON.parse(require("fs").readFileSync(process.env.OTHER, "utf8")).map((x) => x.object).find((o) => o.metadata.name === "dtrain-worker-tls");
   kind("Secret", "dtrain-worker-tls").data["tls.crt"] = u.data["tls.crt"]; kind("Secret", "dtrain-worker-tls").data["tls.key"] = u.data["tls.key"]'
mutant "the workers given the servers' certificate" "identity server, expected worker" "$f" \
  'kind("Secret", "dtrain-worker-tls").data = kind("Secret", "dtrain-server-tls").data'
mutant "a key that is not the certificate's" "tls.key is not the key of tls.crt" "$f" \
  'kind("Secret", "dtrain-worker-tls").data["tls.key"] = kind("Secret", "dtrain-server-tls").data["tls.key"]'
mutant "inference without the podAffinity of the ReadWriteOnce claim" "without a required podAffinity" "$f" \
  'delete kind("Deployment", "dtrain-inference").spec.template.spec.affinity'
mutant "a worker not labelled as mounting the ReadWriteOnce claim" "without a required podAffinity" "$f" \
  'delete kind("Job", "dtrain-worker").spec.template.metadata.labels["dtrain.io/mounts-checkpoints"]'
mutant "a ReadWriteMany claim on the default class" "ReadWriteMany on the cluster's default class" "$f" \
  'kind("PersistentVolumeClaim", "dtrain-checkpoints").spec.accessModes = ["ReadWriteMany"]'
BASE_ARGS=(-f "$BASE")

. "$(dirname "$0")/chart_test_orchestration.sh"
. "$(dirname "$0")/chart_test_elastic.sh"

echo "== deploy/k8s/dtrain-rendered.yaml is the chart's rendering"
# The job id is made anew by each rendering: compared as a placeholder. Plain manifests
# rendered once for everyone must not carry a CA of their own: without TLS and policies.
mask_job_id() { sed -E -e '/name: DTRAIN_JOB_ID$/{n;s/value: ".*"/value: "<job id>"/}' -e 's|^(    dtrain.io/job-id:) ".*"|\1 "<job id>"|'; }
"$RENDER" --set metrics.grafanaDashboard.enabled=false,persistence.data.storageClassName=nfs-client,persistence.checkpoints.storageClassName=nfs-client \
  --set tls.enabled=false,networkPolicy.enabled=false \
  dtrain "$CHART" | mask_job_id > "$WORK/rendered.yaml"
example="$SRC/deploy/k8s/dtrain-rendered.yaml"
if [ ! -f "$example" ]; then
  bad "$example missing"
elif diff -u <(sed -n '/^---$/,$p' "$example" | mask_job_id) "$WORK/rendered.yaml" > "$WORK/example.diff"; then
  ok "deploy/k8s/dtrain-rendered.yaml is up to date"
else
  bad "deploy/k8s/dtrain-rendered.yaml is stale; regenerate it (deploy/k8s/README.md):"
  head -40 "$WORK/example.diff"
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
