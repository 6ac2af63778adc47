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
    "dtrain.v1.Inference/Predict" "ConfigMap dtrain-dashboard" "helm uninstall dtrain"; do
  if grep -qF -- "$want" "$notes"; then ok "NOTES has '$want'"; else bad "NOTES lacks '$want'"; fi
done

echo "== deploy/k8s/dtrain-rendered.yaml is the chart's rendering"
"$RENDER" --set metrics.grafanaDashboard.enabled=false dtrain "$CHART" > "$WORK/rendered.yaml"
example="$SRC/deploy/k8s/dtrain-rendered.yaml"
if [ ! -f "$example" ]; then
  bad "$example missing"
elif diff -u <(sed -n '/^---$/,$p' "$example") "$WORK/rendered.yaml" > "$WORK/example.diff"; then
  ok "deploy/k8s/dtrain-rendered.yaml is up to date"
else
  bad "deploy/k8s/dtrain-rendered.yaml is stale; regenerate it (deploy/k8s/README.md):"
  head -40 "$WORK/example.diff"
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
