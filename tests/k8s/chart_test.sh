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

passed=0
failed=0
ok() { echo "ok   $*"; passed=$((passed + 1)); }
bad() { echo "FAIL $*"; failed=$((failed + 1)); }

# render_ok NAME "VALIDATE ARGS" RENDER-ARGS...: renders, validates, checks invariants.
render_ok() {
  local name=$1 vargs=$2
  shift 2
  local out="$WORK/$name.json" err="$WORK/$name.err"
  if ! "$RENDER" -o json --notes "$WORK/$name.notes" "$@" dtrain "$CHART" > "$out" 2> "$err"; then
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
  if "$RENDER" "$@" dtrain "$CHART" > /dev/null 2> "$WORK/refused.err"; then
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

echo "== recovery: workers and the scheduler restarted in place, servers not (docs/recovery.md)"
render_ok "recovery defaults" "--max-restarts 3 --rejoin-timeout 300"
render_ok "recovery.maxRestarts=0" "--max-restarts 0" --set recovery.maxRestarts=0
render_ok "recovery.maxRestarts=5,workers=4" "--max-restarts 5 --workers 4" --set recovery.maxRestarts=5,workers=4
render_ok "recovery.rejoinTimeout=0" "--rejoin-timeout 0" --set recovery.rejoinTimeout=0
render_ok "recovery.rejoinTimeout=90.5" "--rejoin-timeout 90.5" --set recovery.rejoinTimeout=90.5
render_ok "recovery.jobId=run-7" "--job-id run-7" --set recovery.jobId=run-7
render_ok "recovery.snapshotEvery=100" "--snapshot-every 100 --max-restarts 3" --set recovery.snapshotEvery=100
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
sv=$(job_of "$WORK/recovery.snapshotEvery=100.json" server)
expect_json "server with snapshots" "$sv" '[s.backoffLimitPerIndex, s.backoffLimit]' '[3,6]'
expect_json "server with snapshots" "$sv" \
  's.template.spec.containers[0].env.filter((e) => e.name.startsWith("DTRAIN_SNAPSHOT")).map((e) => e.value)' \
  '["100","/checkpoints/fmnist-lenet-snapshots"]'
render_refused recovery.snapshotEvery=-1 "snapshotEvery: Must be greater than or equal to 0" --set recovery.snapshotEvery=-1
w=$(job_of "$WORK/recovery.maxRestarts=0.json" worker)
expect_json "maxRestarts=0 worker" "$w" '[s.backoffLimitPerIndex, s.backoffLimit]' '[0,0]'
w=$(job_of "$WORK/recovery.maxRestarts=5,workers=4.json" worker)
expect_json "maxRestarts=5 workers=4" "$w" '[s.backoffLimitPerIndex, s.backoffLimit]' '[5,20]'
# The job id: one per install, shared by every pod; a new install gets another.
ids_of() { grep -A1 'name: DTRAIN_JOB_ID' "$1" | sed -n 's/.*value: "\(.*\)"/\1/p' | sort | uniq -c | awk '{print $1, $2}'; }
"$RENDER" dtrain "$CHART" > "$WORK/id1.yaml"
"$RENDER" dtrain "$CHART" > "$WORK/id2.yaml"
id1=$(ids_of "$WORK/id1.yaml") id2=$(ids_of "$WORK/id2.yaml")
if [[ "$id1" =~ ^3\ dtrain-[a-z0-9]{8}$ ]] && [[ "$id2" =~ ^3\ dtrain-[a-z0-9]{8}$ ]] && [ "$id1" != "$id2" ]; then
  ok "DTRAIN_JOB_ID: one per install in all 3 Jobs (${id1#3 }), another for the next install (${id2#3 })"
else
  bad "DTRAIN_JOB_ID: expected one dtrain-<8 random> shared by the 3 Jobs, new per install; got '$id1' and '$id2'"
fi
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

echo "== NOTES.txt"
notes="$WORK/defaults.notes"
for want in "logs -f --prefix" "app.kubernetes.io/component=worker" "port-forward svc/dtrain-inference" \
    "dtrain.v1.Inference/Predict" "ConfigMap dtrain-dashboard" "helm uninstall dtrain" \
    "up to 3 times per rank" "A parameter server pod lost: the job fails" "dtrain status"; do
  if grep -qF -- "$want" "$notes"; then ok "NOTES has '$want'"; else bad "NOTES lacks '$want'"; fi
done

echo "== deploy/k8s/dtrain-rendered.yaml is the chart's rendering"
# The job id is made anew by each rendering: compared as a placeholder.
mask_job_id() { sed -E '/name: DTRAIN_JOB_ID$/{n;s/value: ".*"/value: "<job id>"/}'; }
"$RENDER" --set metrics.grafanaDashboard.enabled=false dtrain "$CHART" | mask_job_id > "$WORK/rendered.yaml"
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
