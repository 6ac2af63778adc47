// How the training pods are run and scheduled: the JobSet (orchestrator: jobset), Volcano's
// PodGroup and Kueue's queue label (gang scheduling), PodDisruptionBudgets. Neither JobSet
// nor Volcano is in kubernetes-models: their fields are checked by hand, against the APIs
// jobset.x-k8s.io/v1alpha2 (sigs.k8s.io/jobset api/jobset/v1alpha2/jobset_types.go) and
// scheduling.volcano.sh/v1beta1.

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const JOBSET_SPEC = ["replicatedJobs", "network", "successPolicy", "failurePolicy", "startupPolicy", "suspend",
  "coordinator", "managedBy", "ttlSecondsAfterFinished", "volumeClaimPolicies"];
const JOBSET_ACTIONS = ["FailJobSet", "RestartJobSet", "RestartJobSetAndIgnoreMaxRestarts", "RestartJob", "RestartJobAndIgnoreMaxRestarts"];
// batch/v1 JobConditionReasons a failed Job carries.
const JOB_FAILURE_REASONS = ["BackoffLimitExceeded", "DeadlineExceeded", "FailedIndexes", "MaxFailedIndexesExceeded", "PodFailurePolicy"];
export const JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name";
export const JOBSET_RJOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name";
const GROUP_ANNOTATION = "scheduling.k8s.io/group-name";
const QUEUE_LABEL = "kueue.x-k8s.io/queue-name";

const clone = (o) => JSON.parse(JSON.stringify(o));
const id = (o) => `${o.kind}/${o.metadata?.name}`;

// The Jobs the JobSet controller makes of a JobSet: <jobset>-<rjob>-<i>, each the replicated
// job's template with the labels JobSet adds, and (enableDNSHostnames) the pods' subdomain
// set to the JobSet's network, as its pod webhook does. Marked so that problems name the JobSet.
export function jobsOfJobSet(js) {
  const out = [];
  const subdomain = js.spec?.network?.subdomain || js.metadata.name;
  for (const rj of js.spec?.replicatedJobs ?? []) {
    for (let i = 0; i < (rj.replicas ?? 1); i++) {
      const job = { apiVersion: "batch/v1", kind: "Job", metadata: clone(rj.template?.metadata ?? {}), spec: clone(rj.template?.spec ?? {}) };
      const extra = { [JOBSET_NAME_LABEL]: js.metadata.name, [JOBSET_RJOB_LABEL]: rj.name };
      job.metadata.name = `${js.metadata.name}-${rj.name}-${i}`;
      job.metadata.labels = { ...(job.metadata.labels ?? {}), ...extra };
      job.metadata.annotations = { ...(job.metadata.annotations ?? {}), "validate.mjs/jobset": js.metadata.name, "validate.mjs/template-subdomain": job.spec.template?.spec?.subdomain ?? "" };
      if (job.spec.template) {
        job.spec.template.metadata = job.spec.template.metadata ?? {};
        job.spec.template.metadata.labels = { ...(job.spec.template.metadata.labels ?? {}), ...extra };
        if (js.spec?.network?.enableDNSHostnames) job.spec.template.spec.subdomain = subdomain;
      }
      out.push(job);
    }
  }
  return out;
}

// The JobSet's own fields, and what dtrain needs of them.
export function checkJobSet(js, problem) {
  const where = id(js), s = js.spec ?? {};
  if (js.apiVersion !== "jobset.x-k8s.io/v1alpha2") problem(where, `apiVersion ${js.apiVersion}, expected jobset.x-k8s.io/v1alpha2`);
  if (!DNS_LABEL.test(js.metadata?.name ?? "") || js.metadata.name.length > 63) problem(where, "metadata.name is not a DNS label");
  for (const k of Object.keys(s)) if (!JOBSET_SPEC.includes(k)) problem(where, `spec.${k} is no field of a JobSet`);
  const rjobs = s.replicatedJobs ?? [];
  if (!rjobs.length) problem(where, "spec.replicatedJobs is empty");
  const names = rjobs.map((r) => r.name);
  if (new Set(names).size !== names.length) problem(where, "replicatedJobs names are not unique");
  for (const r of rjobs) {
    const w = `${where} replicatedJobs[${r.name}]`;
    for (const k of Object.keys(r)) if (!["name", "groupName", "template", "replicas", "dependsOn"].includes(k)) problem(w, `${k} is no field of a ReplicatedJob`);
    if (!DNS_LABEL.test(r.name ?? "")) problem(w, "name is not a DNS label");
    if (!Number.isInteger(r.replicas ?? 1) || (r.replicas ?? 1) < 0) problem(w, "replicas must be an integer >= 0");
    if (!r.template?.spec?.template) problem(w, "template.spec.template (the pods) missing");
    // The longest pod hostname: <jobset>-<rjob>-<job index>-<pod index>.
    const host = `${js.metadata.name}-${r.name}-${(r.replicas ?? 1) - 1}-${(r.template?.spec?.completions ?? 1) - 1}`;
    if (host.length > 63) problem(w, `pod hostname ${host} is over 63 characters`);
    if (r.template?.spec?.ttlSecondsAfterFinished !== undefined) problem(w, "ttlSecondsAfterFinished on a child Job: the JobSet's own ttlSecondsAfterFinished deletes its Jobs");
  }
  // dtrain's pods find each other by name: DNS hostnames on, not-ready addresses published.
  const n = s.network ?? {};
  for (const k of Object.keys(n)) if (!["enableDNSHostnames", "subdomain", "publishNotReadyAddresses"].includes(k)) problem(where, `spec.network.${k} is no field`);
  if (n.enableDNSHostnames !== true) problem(where, "spec.network.enableDNSHostnames must be true: every pod is told the scheduler's DNS name");
  if (n.publishNotReadyAddresses === false) problem(where, "spec.network.publishNotReadyAddresses is false: pods must reach the scheduler before it is Ready");
  // Success: when the workers have finished (the scheduler and servers follow on their own).
  const sp = s.successPolicy;
  const workers = rjobs.find((r) => r.template?.metadata?.labels?.["app.kubernetes.io/component"] === "worker");
  if (!sp) problem(where, "no successPolicy: the JobSet would wait for the scheduler and servers too");
  else {
    if (!["All", "Any"].includes(sp.operator)) problem(where, `successPolicy.operator ${sp.operator}`);
    for (const t of sp.targetReplicatedJobs ?? []) if (!names.includes(t)) problem(where, `successPolicy targets ${t}, no replicated job`);
    if (sp.operator !== "All" || JSON.stringify(sp.targetReplicatedJobs) !== JSON.stringify([workers?.name])) {
      problem(where, `successPolicy must be operator All on [${workers?.name}] (training ends when every worker has), got ${sp.operator} ${JSON.stringify(sp.targetReplicatedJobs)}`);
    }
  }
  // Failure: a child Job that dtrain's podFailurePolicy failed (exit 1, 2, 127) is final;
  // a restart of the whole JobSet would fail the same way.
  const fp = s.failurePolicy ?? {};
  for (const k of Object.keys(fp)) if (!["maxRestarts", "restartStrategy", "rules"].includes(k)) problem(where, `spec.failurePolicy.${k} is no field`);
  if (!Number.isInteger(fp.maxRestarts ?? 0) || (fp.maxRestarts ?? 0) < 0) problem(where, "failurePolicy.maxRestarts must be an integer >= 0");
  (fp.rules ?? []).forEach((r, i) => {
    const w = `${where} failurePolicy.rules[${i}]`;
    if (!JOBSET_ACTIONS.includes(r.action)) problem(w, `action ${r.action}`);
    if (r.name !== undefined && !/^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$/.test(r.name)) problem(w, `name ${r.name}`);
    for (const x of r.onJobFailureReasons ?? []) if (!JOB_FAILURE_REASONS.includes(x)) problem(w, `onJobFailureReasons: ${x} is no Job failure reason`);
    for (const t of r.targetReplicatedJobs ?? []) if (!names.includes(t)) problem(w, `targets ${t}, no replicated job`);
  });
  const first = (fp.rules ?? []).find((r) => !(r.onJobFailureReasons?.length) || r.onJobFailureReasons.includes("PodFailurePolicy"));
  if (first?.action !== "FailJobSet") {
    problem(where, `a child Job failed by its podFailurePolicy (dtrain's final exit statuses) must fail the JobSet, got ${first?.action ?? "RestartJobSet (no rule)"}`);
  }
}

// Volcano's PodGroup, by hand.
export function checkPodGroup(pg, problem) {
  const where = id(pg), s = pg.spec ?? {};
  if (pg.apiVersion !== "scheduling.volcano.sh/v1beta1") problem(where, `apiVersion ${pg.apiVersion}`);
  for (const k of Object.keys(s)) if (!["minMember", "minResources", "minTaskMember", "queue", "priorityClassName"].includes(k)) problem(where, `spec.${k} is no field of a PodGroup`);
  if (!Number.isInteger(s.minMember) || s.minMember < 1) problem(where, "spec.minMember must be an integer >= 1");
}

// Gang scheduling: with a PodGroup, every training pod is Volcano's and in the group, and the
// group's minMember is all of them; without one, no pod names a group. Kueue's label on the
// workload (the JobSet, or each Job) when a queue is expected.
export function checkGang(docs, training, infer, opts, problem) {
  const groups = docs.filter((o) => o.kind === "PodGroup");
  const pods = training.reduce((n, w) => n + w.spec.completions, 0);
  if (groups.length > 1) problem("chart", "more than one PodGroup");
  const [pg] = groups;
  if (opts.volcano !== undefined && Boolean(pg) !== (opts.volcano === "on")) problem("chart", `PodGroup ${pg ? "rendered" : "missing"}, expected volcano ${opts.volcano}`);
  for (const w of training) {
    const t = w.spec.template, group = t.metadata.annotations?.[GROUP_ANNOTATION];
    if (pg) {
      if (group !== pg.metadata.name) problem(id(w), `pods are not in PodGroup ${pg.metadata.name} (annotation ${GROUP_ANNOTATION}=${group})`);
      if (t.spec.schedulerName !== "volcano") problem(id(w), `schedulerName ${t.spec.schedulerName}: Volcano's PodGroup needs the volcano scheduler`);
    } else if (group !== undefined) problem(id(w), `annotation ${GROUP_ANNOTATION}=${group} names no PodGroup`);
  }
  if (pg && pg.spec.minMember !== pods) problem(id(pg), `minMember ${pg.spec.minMember}, expected ${pods} (the scheduler, every server and every worker)`);
  if (infer?.spec.template.metadata.annotations?.[GROUP_ANNOTATION] !== undefined) problem(id(infer), "inference is not part of the training gang");
  if (opts.kueueQueue !== undefined) {
    const jobsets = docs.filter((o) => o.kind === "JobSet");
    const holders = jobsets.length ? jobsets : training;
    for (const h of holders) {
      if (h.metadata.labels?.[QUEUE_LABEL] !== (opts.kueueQueue || undefined)) problem(id(h), `label ${QUEUE_LABEL}=${h.metadata.labels?.[QUEUE_LABEL]}, expected ${opts.kueueQueue || "none"}`);
    }
    // Under a JobSet, Kueue manages the JobSet: a label on its child Jobs would make them workloads of their own.
    if (jobsets.length) for (const w of training) if (w.metadata.labels?.[QUEUE_LABEL] !== undefined) problem(id(w), `${QUEUE_LABEL} on a child Job of a JobSet`);
  }
}

// PodDisruptionBudgets: each selects pods of the chart; for Job pods (no scale subresource)
// only an integer minAvailable works, within the pods there are.
export function checkDisruptionBudgets(docs, workloads, opts, problem) {
  const subset = (sel, labels) => Object.entries(sel ?? {}).every(([k, v]) => labels?.[k] === v);
  const pdbs = docs.filter((o) => o.kind === "PodDisruptionBudget");
  if (opts.pdb !== undefined && (pdbs.length > 0) !== (opts.pdb === "on")) problem("chart", `${pdbs.length} PodDisruptionBudgets, expected pdb ${opts.pdb}`);
  for (const p of pdbs) {
    const sel = p.spec.selector?.matchLabels;
    const ws = workloads.filter((w) => subset(sel, w.spec.template.metadata.labels));
    if (!ws.length) { problem(id(p), "selects no pod of the chart"); continue; }
    if (p.spec.minAvailable !== undefined && p.spec.maxUnavailable !== undefined) problem(id(p), "minAvailable and maxUnavailable are exclusive");
    if (ws.some((w) => w.kind === "Job")) {
      if (p.spec.maxUnavailable !== undefined || !Number.isInteger(p.spec.minAvailable)) {
        problem(id(p), "Job pods have no scale subresource: only an integer minAvailable works");
      }
      const pods = ws.reduce((n, w) => n + w.spec.completions, 0);
      if (p.spec.minAvailable > pods) problem(id(p), `minAvailable ${p.spec.minAvailable} > the ${pods} pods it selects`);
      const want = opts.pdbMinAvailable?.[ws[0].metadata.labels?.["app.kubernetes.io/component"]];
      if (want !== undefined && p.spec.minAvailable !== want) problem(id(p), `minAvailable ${p.spec.minAvailable}, expected ${want}`);
    }
  }
}
