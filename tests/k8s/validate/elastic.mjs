// Elastic workers (values elastic.*; README.md "Elastic workers" in helm/dtrain), for
// validate.mjs. Every training process must be told the same DTRAIN_ELASTIC (the scheduler
// refuses a node that says otherwise), or none of them; with it, the worker Job is one
// that may be scaled in place (an Indexed Job with parallelism = completions, the ranks
// its completion indices), the workers it starts with lie within the bounds, every index
// it may come to hold has a restart budget, a worker removed by a scale-down has time to
// leave at a step boundary, and the scheduler is told the lr rule.
const id = (o) => `${o.kind}/${o.metadata?.name}`;
const envValue = (c, name) => (c.env ?? []).find((e) => e.name === name)?.value;

// "MIN:MAX" -> {min, max}; undefined for none; null for text that is not two counts.
export function parseElastic(text) {
  if (text === undefined) return undefined;
  const m = /^([0-9]+):([0-9]+)$/.exec(text);
  return m ? { min: Number(m[1]), max: Number(m[2]) } : null;
}

// The bounds the worker Job's pods are told, or undefined when the job is not elastic.
export function elasticOf(worker) {
  return parseElastic(envValue(worker.spec.template.spec.containers[0], "DTRAIN_ELASTIC"));
}

// The most indices the worker Job may come to hold: MAX in an elastic job, else its
// completions. Each keeps the per-index restart budget (backoffLimit counts them all).
export function workerIndices(worker) {
  return elasticOf(worker)?.max ?? worker.spec.completions;
}

// opts.elastic: "MIN:MAX" expected (or "off"); opts.elasticLr: the scheduler's rule;
// opts.leaveGrace: the worker pods' terminationGracePeriodSeconds.
export function checkElastic(sched, server, worker, opts, problem) {
  const told = [sched, server, worker].map((w) => envValue(w.spec.template.spec.containers[0], "DTRAIN_ELASTIC"));
  if (new Set(told).size !== 1) {
    problem("chart", `DTRAIN_ELASTIC must be the same for every training process (or unset for all), got scheduler ${told[0]}, server ${told[1]}, worker ${told[2]}`);
    return;
  }
  const [text] = told;
  if (opts.elastic !== undefined && (text ?? "off") !== opts.elastic) problem("chart", `DTRAIN_ELASTIC=${text}, expected ${opts.elastic}`);
  const lrFlags = (sched.spec.template.spec.containers[0].args ?? []).filter((a) => a.startsWith("--elastic-lr"));
  if (text === undefined) {
    if (lrFlags.length) problem(id(sched), `${lrFlags.join(" ")} without DTRAIN_ELASTIC`);
    return;
  }
  const bounds = parseElastic(text);
  if (!bounds || bounds.min < 1 || bounds.min > bounds.max) return problem("chart", `DTRAIN_ELASTIC=${text} is not MIN:MAX with 1 <= MIN <= MAX`);
  const W = worker.spec.completions;
  if (W < bounds.min || W > bounds.max) problem(id(worker), `${W} workers, outside DTRAIN_ELASTIC ${text}`);
  if (worker.kind !== "Job" || worker.spec.completionMode !== "Indexed" || worker.spec.parallelism !== W) {
    problem(id(worker), "an elastic worker Job must be an Indexed Job with parallelism = completions (scaled by patching both)");
  }
  const want = opts.elasticLr ?? "scale";
  if (lrFlags.length !== 1 || lrFlags[0] !== `--elastic-lr=${want}`) problem(id(sched), `scheduler flags ${lrFlags.join(" ") || "(none)"}, expected --elastic-lr=${want}`);
  for (const w of [server, worker]) {
    if ((w.spec.template.spec.containers[0].args ?? []).some((a) => a.startsWith("--elastic-lr"))) problem(id(w), "only the scheduler takes --elastic-lr");
  }
  // Kubernetes' default, 30 s, is no decision: a leave waits for a commit on every server.
  const grace = worker.spec.template.spec.terminationGracePeriodSeconds;
  if (grace === undefined) problem(id(worker), "no terminationGracePeriodSeconds: a worker removed by a scale-down needs time to leave at a step boundary");
  else if (opts.leaveGrace !== undefined && grace !== opts.leaveGrace) problem(id(worker), `terminationGracePeriodSeconds ${grace}, expected ${opts.leaveGrace}`);
}
