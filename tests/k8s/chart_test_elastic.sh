# Sourced by chart_test.sh after chart_test_orchestration.sh (its helpers: render_ok,
# render_refused, expect_json, job_of, mutant, upgrade_ok, upgrade_refused, ok, bad;
# $RENDER, $CHART, $WORK). Elastic workers (values elastic.*): every training pod told
# DTRAIN_ELASTIC=MIN:MAX, the scheduler its --elastic-lr, a worker Job that may be scaled
# in place (validate/elastic.mjs), and bad bounds refused by the chart's own check.

echo "== elastic workers: DTRAIN_ELASTIC on every training pod, the worker Job scalable"
render_ok "elastic 2:4" "--workers 2 --elastic 2:4 --elastic-lr scale --leave-grace 120" \
  --set workers=2,elastic.minWorkers=2,elastic.maxWorkers=4
render_ok "elastic 1:8, lr keep, grace 300, workers=3" "--workers 3 --elastic 1:8 --elastic-lr keep --leave-grace 300" \
  --set workers=3,elastic.minWorkers=1,elastic.maxWorkers=8,elastic.lr=keep,elastic.leaveGraceSeconds=300
render_ok "not elastic by default" "--elastic off"
e="$WORK/elastic 2:4.json"
elastic_env='s.template.spec.containers[0].env.filter((e) => e.name === "DTRAIN_ELASTIC").map((e) => e.value)'
for c in scheduler server worker; do
  expect_json "elastic 2:4 $c" "$(job_of "$e" "$c")" "$elastic_env" '["2:4"]'
done
expect_json "elastic 2:4 scheduler" "$(job_of "$e" scheduler)" \
  's.template.spec.containers[0].args.filter((a) => a.startsWith("--elastic"))' '["--elastic-lr=scale"]'
w=$(job_of "$e" worker)
expect_json "elastic 2:4 worker" "$w" '[s.completionMode, s.completions, s.parallelism]' '["Indexed",2,2]'
expect_json "elastic 2:4 worker" "$w" '[s.backoffLimitPerIndex, s.backoffLimit]' '[3,12]'
expect_json "elastic 2:4 worker" "$w" 's.template.spec.terminationGracePeriodSeconds' '120'
expect_json "elastic 2:4 worker" "$w" \
  's.template.spec.containers[0].env.find((e) => e.name === "DTRAIN_RANK").valueFrom.fieldRef.fieldPath' \
  "\"metadata.annotations['batch.kubernetes.io/job-completion-index']\""
expect_json "elastic 2:4 worker" "$w" \
  's.template.spec.containers[0].env.filter((e) => e.name === "DTRAIN_NUM_WORKERS").map((e) => e.value)' '["2"]'
for c in scheduler server worker; do
  expect_json "not elastic $c" "$(job_of "$WORK/not elastic by default.json" "$c")" "$elastic_env" '[]'
done
scale_cmd="kubectl -n default patch job dtrain-worker --type merge -p '{\"spec\":{\"parallelism\":N,\"completions\":N}}'"
if grep -qF -- "$scale_cmd" "$WORK/elastic 2:4.notes" && ! grep -q "Elastic workers" "$WORK/not elastic by default.notes"; then
  ok "NOTES: the scale command for an elastic job only"
else
  bad "NOTES: expected '$scale_cmd' for elastic 2:4 and no elastic note otherwise"
fi

echo "== elastic workers: bad bounds refused, naming the values"
render_refused "elastic MIN > MAX" "elastic.minWorkers (3) is above elastic.maxWorkers (2)" \
  --set workers=2,elastic.minWorkers=3,elastic.maxWorkers=2
render_refused "workers above elastic MAX" "workers (5) must be within elastic.minWorkers..elastic.maxWorkers (2..4)" \
  --set workers=5,elastic.minWorkers=2,elastic.maxWorkers=4
render_refused "workers below elastic MIN" "workers (1) must be within elastic.minWorkers..elastic.maxWorkers (2..4)" \
  --set workers=1,elastic.minWorkers=2,elastic.maxWorkers=4
render_refused "elastic MAX alone" "elastic.minWorkers (0) and elastic.maxWorkers (4) go together" --set elastic.maxWorkers=4
render_refused "elastic.lr without bounds" "elastic.lr is set but the job is not elastic" --set elastic.lr=keep
render_refused "elastic dist_async" "elastic workers need kvStore dist_sync" \
  --set kvStore=dist_async,elastic.minWorkers=2,elastic.maxWorkers=4
render_refused "elastic jobset" "elastic workers need orchestrator jobs" \
  --set orchestrator=jobset,elastic.minWorkers=2,elastic.maxWorkers=4
render_refused "elastic.lr=double" "elastic.lr" --set elastic.minWorkers=2,elastic.maxWorkers=4,elastic.lr=double
render_refused "elastic.minWorkers=-1" "elastic.minWorkers: Must be greater than or equal to 0" --set elastic.minWorkers=-1

mutant "a server not told DTRAIN_ELASTIC" "must be the same for every training process" "$e" \
  'main("dtrain-server").env = main("dtrain-server").env.filter((x) => x.name !== "DTRAIN_ELASTIC")'
mutant "an elastic scheduler without --elastic-lr" "expected --elastic-lr=scale" "$e" \
  'main("dtrain-scheduler").args = main("dtrain-scheduler").args.filter((a) => !a.startsWith("--elastic-lr"))'
mutant "an elastic worker Job budgeting only its first indices" "backoffLimit 6, expected 3 x 4" "$e" \
  'kind("Job", "dtrain-worker").spec.backoffLimit = 6'
mutant "an elastic worker without a leave grace" "no terminationGracePeriodSeconds" "$e" \
  'delete kind("Job", "dtrain-worker").spec.template.spec.terminationGracePeriodSeconds'
mutant "workers outside the elastic bounds" "5 workers, outside DTRAIN_ELASTIC 2:4" "$e" \
  'const j = kind("Job", "dtrain-worker"); j.spec.completions = j.spec.parallelism = 5'

upgrade_ok "elastic, same values" --set elastic.minWorkers=2,elastic.maxWorkers=4 -- \
  --set elastic.minWorkers=2,elastic.maxWorkers=4
upgrade_refused "elastic on a running job" "changed elastic." -- --set elastic.minWorkers=2,elastic.maxWorkers=4
