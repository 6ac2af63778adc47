// Validates rendered manifests (k8s-render -o json) against the Kubernetes API schemas
// (kubernetes-models, pinned in package-lock.json) and checks the chart's invariants.
//
//   node validate.mjs RENDERED.json [--workers N] [--servers S] [--gpus G]
//                     [--namespace NS] [--existing-claims a,b]
//                     [--max-restarts R] [--rejoin-timeout T] [--job-id ID]
//                     [--replication R] [--snapshot-every N] [--snapshot-volume pvc|emptyDir]
//                     [--tls off|existingSecret|certManager|generated] [--tls-secret NAME] [--inference-tls-secret NAME]
//                     [--token-secret NAME:KEY] [--network-policy on|off] [--metrics-namespace NS]
//                     [--inference-from any|restricted]
//                     [--orchestrator jobs|jobset] [--volcano on|off] [--kueue-queue Q] [--pdb on|off]
//                     [--pdb-min-available worker=N,server=M] [--claims NAME=rwo|rwx,...]
//                     [--elastic MIN:MAX|off] [--elastic-lr scale|keep] [--leave-grace S]
//
// A JobSet is checked by hand and expanded into the Jobs its controller makes, which are then
// checked as the chart's own Jobs are (orchestration.mjs).
//
// Prints one line per problem and exits 1 if there is any; 0 and a summary otherwise.
import { readFileSync } from "node:fs";
import * as core from "kubernetes-models/v1";
import * as apps from "kubernetes-models/apps/v1";
import * as batch from "kubernetes-models/batch/v1";
import * as networking from "kubernetes-models/networking.k8s.io/v1";
import * as policy from "kubernetes-models/policy/v1";
import * as monitoring from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1";
import { checkCertificate, checkTls, checkNetworkPolicies } from "./security.mjs";
import { checkClaims } from "./storage.mjs";
import { checkElastic, workerIndices } from "./elastic.mjs";
import { jobsOfJobSet, checkJobSet, checkPodGroup, checkGang, checkDisruptionBudgets } from "./orchestration.mjs";

const MODELS = {
  "v1/Service": core.Service,
  "v1/ConfigMap": core.ConfigMap,
  "v1/ServiceAccount": core.ServiceAccount,
  "v1/Secret": core.Secret,
  "v1/PersistentVolumeClaim": core.PersistentVolumeClaim,
  "apps/v1/Deployment": apps.Deployment,
  "apps/v1/StatefulSet": apps.StatefulSet,
  "batch/v1/Job": batch.Job,
  "networking.k8s.io/v1/NetworkPolicy": networking.NetworkPolicy,
  "policy/v1/PodDisruptionBudget": policy.PodDisruptionBudget,
  "monitoring.coreos.com/v1/PodMonitor": monitoring.PodMonitor,
  "monitoring.coreos.com/v1/ServiceMonitor": monitoring.ServiceMonitor,
};
const TRAINING_ROLES = ["scheduler", "server", "worker"];
const INDEX_ANNOTATION = "metadata.annotations['batch.kubernetes.io/job-completion-index']";

function parseArgs(argv) {
  const opts = { file: null, namespace: "default", existingClaims: [] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = () => argv[++i];
    if (a === "--workers") opts.workers = Number(next());
    else if (a === "--servers") opts.servers = Number(next());
    else if (a === "--gpus") opts.gpus = Number(next());
    else if (a === "--namespace") opts.namespace = next();
    else if (a === "--existing-claims") opts.existingClaims = next().split(",").filter(Boolean);
    else if (a === "--max-restarts") opts.maxRestarts = Number(next());
    else if (a === "--rejoin-timeout") opts.rejoinTimeout = next();
    else if (a === "--job-id") opts.jobId = next();
    else if (a === "--replication") opts.replication = Number(next());
    else if (a === "--snapshot-every") opts.snapshotEvery = Number(next());
    else if (a === "--snapshot-volume") opts.snapshotVolume = next();
    else if (a === "--tls") opts.tls = next();
    else if (a === "--tls-secret") opts.tlsSecret = next();
    else if (a === "--inference-tls-secret") opts.inferenceTlsSecret = next();
    else if (a === "--token-secret") opts.tokenSecret = next();
    else if (a === "--network-policy") opts.networkPolicy = next();
    else if (a === "--metrics-namespace") opts.metricsNamespace = next();
    else if (a === "--inference-from") opts.inferenceFrom = next();
    else if (a === "--orchestrator") opts.orchestrator = next();
    else if (a === "--volcano") opts.volcano = next();
    else if (a === "--kueue-queue") opts.kueueQueue = next();
    else if (a === "--pdb") opts.pdb = next();
    else if (a === "--elastic") opts.elastic = next();
    else if (a === "--elastic-lr") opts.elasticLr = next();
    else if (a === "--leave-grace") opts.leaveGrace = Number(next());
    else if (a === "--claims") opts.claims = Object.fromEntries(next().split(",").map((kv) => kv.split("=")));
    else if (a === "--pdb-min-available") opts.pdbMinAvailable = Object.fromEntries(next().split(",").map((kv) => kv.split("=")).map(([k, v]) => [k, Number(v)]));
    else if (!opts.file) opts.file = a;
    else throw new Error(`unexpected argument ${a}`);
  }
  if (!opts.file) throw new Error("usage: node validate.mjs RENDERED.json [--workers N] ...");
  return opts;
}

const problems = [];
const problem = (where, msg) => problems.push(`${where}: ${msg}`);
const id = (o) => `${o.kind}/${o.metadata?.name}`;
const subset = (sel, labels) =>
  Object.entries(sel ?? {}).every(([k, v]) => labels?.[k] === v);
const envOf = (c) => Object.fromEntries((c.env ?? []).map((e) => [e.name, e]));
const envValue = (c, name) => envOf(c)[name]?.value;

function validateSchema(o) {
  // cert-manager's CRDs are not in kubernetes-models: its fields are checked by hand.
  if (`${o.apiVersion}/${o.kind}` === "cert-manager.io/v1/Certificate") return checkCertificate(o, problem);
  if (o.kind === "JobSet") return checkJobSet(o, problem);
  if (o.kind === "PodGroup") return checkPodGroup(o, problem);
  const Model = MODELS[`${o.apiVersion}/${o.kind}`];
  if (!Model) return problem(id(o), `no schema for ${o.apiVersion} ${o.kind}`);
  try {
    new Model(o).validate();
  } catch (e) {
    const details = (e.errors ?? []).map((x) => `${x.instancePath || "/"} ${x.message}`).join("; ");
    problem(id(o), `invalid ${o.kind}: ${details || e.message}`);
  }
}

function checkLabels(o) {
  const l = o.metadata?.labels ?? {};
  for (const k of ["app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/managed-by", "helm.sh/chart"]) {
    if (!l[k]) problem(id(o), `label ${k} missing`);
  }
}

// The Job controller's decision for a failed pod (pkg/controller/job/pod_failure_policy.go):
// the first rule that matches wins; none: Count. `exit` is the container's exit code,
// `conditions` the pod's condition types with status True.
export function podFailureAction(job, container, exit, conditions = []) {
  for (const rule of job.spec.podFailurePolicy?.rules ?? []) {
    if (rule.onExitCodes) {
      const r = rule.onExitCodes;
      if (r.containerName && r.containerName !== container) continue;
      if (exit === 0) continue; // successful containers are not checked
      if ((r.operator === "In") === r.values.includes(exit)) return rule.action;
    } else if ((rule.onPodConditions ?? []).some((p) => (p.status ?? "True") === "True" && conditions.includes(p.type))) {
      return rule.action;
    }
  }
  return "Count";
}

// What the API server's Job validation refuses (pkg/apis/batch/validation), for the fields
// the chart sets: the schemas above check types only.
function checkJobApiRules(w) {
  const spec = w.spec, t = spec.template.spec;
  const names = [...(t.initContainers ?? []), ...t.containers].map((c) => c.name);
  if (spec.backoffLimitPerIndex !== undefined) {
    if (spec.completionMode !== "Indexed") problem(id(w), "backoffLimitPerIndex needs completionMode Indexed");
    if (t.restartPolicy !== "Never") problem(id(w), "backoffLimitPerIndex needs restartPolicy Never");
  }
  if (spec.maxFailedIndexes !== undefined) {
    if (spec.backoffLimitPerIndex === undefined) problem(id(w), "maxFailedIndexes needs backoffLimitPerIndex");
    if (spec.maxFailedIndexes > spec.completions) problem(id(w), "maxFailedIndexes > completions");
  }
  const rules = spec.podFailurePolicy?.rules;
  if (!rules) return;
  if (t.restartPolicy !== "Never") problem(id(w), "podFailurePolicy needs restartPolicy Never");
  if (rules.length > 20) problem(id(w), "more than 20 podFailurePolicy rules");
  if (spec.podReplacementPolicy !== undefined && spec.podReplacementPolicy !== "Failed") {
    problem(id(w), "with podFailurePolicy, podReplacementPolicy must be Failed");
  }
  rules.forEach((r, i) => {
    const where = `${id(w)} podFailurePolicy.rules[${i}]`;
    if (!r.onExitCodes === !r.onPodConditions) problem(where, "exactly one of onExitCodes and onPodConditions");
    if (r.action === "FailIndex" && spec.backoffLimitPerIndex === undefined) problem(where, "FailIndex needs backoffLimitPerIndex");
    const e = r.onExitCodes;
    if (e) {
      if (e.containerName && !names.includes(e.containerName)) problem(where, `containerName ${e.containerName} is no container of the pod`);
      if (!e.values.length || e.values.length > 255) problem(where, "1 to 255 exit codes");
      if (e.values.some((v, j) => j > 0 && v <= e.values[j - 1])) problem(where, "exit codes must be sorted and unique");
      if (e.operator === "In" && e.values.includes(0)) problem(where, "0 cannot be used with operator In");
    }
    for (const p of r.onPodConditions ?? []) {
      if (!["True", "False", "Unknown", undefined].includes(p.status)) problem(where, `condition status ${p.status}`);
    }
  });
}

// Where a server's snapshots go (DTRAIN_SNAPSHOT_EVERY > 0): the volume holding
// DTRAIN_SNAPSHOT_DIR, or null. Returns {every, dir, mount, volume} or null when off.
function serverSnapshots(w) {
  const t = w.spec.template.spec, c = t.containers[0];
  const every = Number(envValue(c, "DTRAIN_SNAPSHOT_EVERY") ?? 0);
  if (!(every > 0)) return null;
  const dir = envValue(c, "DTRAIN_SNAPSHOT_DIR") ?? "";
  const mount = (c.volumeMounts ?? [])
    .filter((m) => dir === m.mountPath || dir.startsWith(`${m.mountPath.replace(/\/$/, "")}/`))
    .sort((a, b) => b.mountPath.length - a.mountPath.length)[0];
  const volume = mount && (t.volumes ?? []).find((v) => v.name === mount.name);
  return { every, dir, mount, volume };
}

// Servers are restarted in place only where their shard outlives the pod: replication >= 2
// (a live copy) or snapshots on a claim (an emptyDir dies with the pod).
function serversRestartable(w, replication) {
  const snap = serverSnapshots(w);
  return replication > 1 || Boolean(snap?.volume?.persistentVolumeClaim);
}

// Recovery (docs/recovery.md, the chart's README "What survives what"): workers and the
// scheduler are replaced in place when killed, not when they exit with a status of their
// own; servers too where their shard survives them (serversRestartable), else never.
function checkRecovery(w, role, opts, replication) {
  const spec = w.spec, main = w.spec.template.spec.containers[0].name;
  const act = (exit, cond) => podFailureAction(w, main, exit, cond);
  if (role === "server" && !serversRestartable(w, replication)) {
    if (spec.backoffLimitPerIndex !== undefined || spec.backoffLimit !== 0) {
      problem(id(w), "servers whose shard dies with them are not restartable: backoffLimit 0, no backoffLimitPerIndex");
    }
    if (act(137, ["DisruptionTarget"]) === "Ignore" || act(137) === "Ignore") problem(id(w), "a server's failure must fail its Job");
    return;
  }
  const n = spec.backoffLimitPerIndex;
  if (n === undefined) return problem(id(w), `${role}: no backoffLimitPerIndex (restarts in place)`);
  if (opts.maxRestarts !== undefined && n !== opts.maxRestarts) problem(id(w), `backoffLimitPerIndex ${n}, expected ${opts.maxRestarts}`);
  // Any R-1 servers may be gone for good: every key range keeps a live copy.
  const maxFailed = role === "server" ? replication - 1 : 0;
  if (spec.maxFailedIndexes !== maxFailed) {
    problem(id(w), `maxFailedIndexes ${spec.maxFailedIndexes}, expected ${maxFailed}: ${role === "server" ? `replication ${replication} survives ${maxFailed} servers lost` : "a rank out of restarts fails the job"}`);
  }
  // Every index the Job may come to hold keeps a budget (an elastic worker Job: up to MAX).
  const indices = role === "worker" ? workerIndices(w) : spec.completions;
  if (spec.backoffLimit !== n * indices) problem(id(w), `backoffLimit ${spec.backoffLimit}, expected ${n} x ${indices}`);
  const want = [
    [137, [], "Count", "a process killed (SIGKILL, OOM) is restarted"],
    [139, [], "Count", "a crash (SIGSEGV) is restarted"],
    [137, ["DisruptionTarget"], "Ignore", "a pod Kubernetes took away is replaced without counting"],
    [143, ["DisruptionTarget"], "Ignore", "a pod Kubernetes took away is replaced without counting"],
    [1, [], "FailJob", "exit 1 (failed job, fenced, another job) is final"],
    [2, [], "FailJob", "exit 2 (bad flags) is final"],
  ];
  for (const [exit, cond, action, why] of want) {
    const got = act(exit, cond);
    if (got !== action) problem(id(w), `exit ${exit}${cond.length ? ` with ${cond}` : ""}: ${got}, expected ${action} (${why})`);
  }
}

// Snapshots: only servers write them, into a writable volume (the root is read-only; /tmp
// is the pod's own), one directory per job id.
function checkSnapshots(server, worker, opts, jobIds) {
  const snap = serverSnapshots(server);
  if (envValue(worker.spec.template.spec.containers[0], "DTRAIN_SNAPSHOT_EVERY") !== undefined) problem(id(worker), "only servers take DTRAIN_SNAPSHOT_EVERY");
  const every = snap?.every ?? 0;
  if (opts.snapshotEvery !== undefined && every !== opts.snapshotEvery) problem(id(server), `DTRAIN_SNAPSHOT_EVERY=${every}, expected ${opts.snapshotEvery}`);
  if (!snap) {
    if (envValue(server.spec.template.spec.containers[0], "DTRAIN_SNAPSHOT_DIR") !== undefined) problem(id(server), "DTRAIN_SNAPSHOT_DIR without snapshots");
    return;
  }
  const where = `${id(server)} DTRAIN_SNAPSHOT_DIR=${snap.dir}`;
  if (!snap.mount || !snap.volume) return problem(where, "is on no volume of the pod (the root filesystem is read-only)");
  if (snap.mount.mountPath === "/tmp") problem(where, "is in /tmp");
  if (snap.mount.readOnly) problem(where, `volume ${snap.volume.name} is mounted read-only`);
  const [jobId] = jobIds;
  if (!snap.dir.split("/").includes(jobId)) problem(where, `no directory of its own for job ${jobId}`);
  const kind = snap.volume.persistentVolumeClaim ? "pvc" : snap.volume.emptyDir ? "emptyDir" : "other";
  if (opts.snapshotVolume !== undefined && kind !== opts.snapshotVolume) problem(where, `on a ${kind} volume, expected ${opts.snapshotVolume}`);
}

function podTemplate(o) {
  return ["Job", "StatefulSet", "Deployment"].includes(o.kind) ? o.spec.template : null;
}

function main() {
  const opts = parseArgs(process.argv.slice(2));
  const rendered = JSON.parse(readFileSync(opts.file, "utf8")).map((d) => d.object);
  // A JobSet stands for the Jobs its controller makes of it: those are checked as Jobs.
  const docs = rendered.flatMap((o) => (o.kind === "JobSet" ? [o, ...jobsOfJobSet(o)] : [o]));
  const jobsets = docs.filter((o) => o.kind === "JobSet");
  if (opts.orchestrator !== undefined && (jobsets.length > 0) !== (opts.orchestrator === "jobset")) {
    problem("chart", `${jobsets.length} JobSet(s), expected orchestrator ${opts.orchestrator}`);
  }
  if (jobsets.length && docs.some((o) => o.kind === "Job" && !o.metadata.annotations?.["validate.mjs/jobset"])) {
    problem("chart", "Jobs beside a JobSet: the roles must run in one or the other");
  }
  for (const o of docs) {
    validateSchema(o);
    checkLabels(o);
  }
  const byKind = (k) => docs.filter((o) => o.kind === k);
  const services = Object.fromEntries(byKind("Service").map((s) => [s.metadata.name, s]));
  const workloads = docs.filter(podTemplate);
  const component = (o) => o.metadata.labels?.["app.kubernetes.io/component"];
  const role = (r) => workloads.find((w) => component(w) === r);

  // Workloads: a defined end (no restart loop), stable names, parallel start.
  for (const w of workloads) {
    const t = w.spec.template;
    if (w.kind === "Job") {
      checkJobApiRules(w);
      if (w.spec.completionMode !== "Indexed") problem(id(w), "not an Indexed Job: pods get no stable rank/hostname");
      if (w.spec.parallelism !== w.spec.completions) problem(id(w), "parallelism != completions: all ranks must run at once");
      if (!["Never", "OnFailure"].includes(t.spec.restartPolicy)) problem(id(w), "Job pods need restartPolicy Never or OnFailure");
      if (t.spec.restartPolicy !== "Never") problem(id(w), "a finished or failed rank must not be restarted (restartPolicy Never)");
      const svc = services[t.spec.subdomain];
      if (!svc) problem(id(w), `subdomain ${t.spec.subdomain} is not a Service of the chart`);
      const tsub = w.metadata.annotations?.["validate.mjs/template-subdomain"];
      if (tsub !== undefined && tsub !== t.spec.subdomain) problem(id(w), `pod template subdomain ${tsub}, but the JobSet puts its pods under ${t.spec.subdomain}`);
    }
    if (w.kind === "StatefulSet") {
      if (!services[w.spec.serviceName]) problem(id(w), `serviceName ${w.spec.serviceName} is not a Service of the chart`);
      if (w.spec.podManagementPolicy !== "Parallel") problem(id(w), "podManagementPolicy must be Parallel");
      if (!subset(w.spec.selector?.matchLabels, t.metadata.labels)) problem(id(w), "selector is not a subset of the pod labels");
    }
    if (w.kind === "Deployment" && !subset(w.spec.selector?.matchLabels, t.metadata.labels)) {
      problem(id(w), "selector is not a subset of the pod labels");
    }
    const headless = services[w.kind === "Job" ? t.spec.subdomain : w.spec.serviceName];
    if (headless) {
      if (headless.spec.clusterIP !== "None") problem(id(headless), "must be headless (clusterIP: None)");
      if (headless.spec.publishNotReadyAddresses !== true) problem(id(headless), "must publishNotReadyAddresses");
      if (!subset(headless.spec.selector, t.metadata.labels)) problem(id(headless), `selector does not select ${id(w)}'s pods`);
    }
    // Security: non-root, read-only root filesystem.
    if (t.spec.securityContext?.runAsNonRoot !== true) problem(id(w), "pod must runAsNonRoot");
    for (const c of [...(t.spec.initContainers ?? []), ...t.spec.containers]) {
      const sc = c.securityContext ?? {};
      if (sc.readOnlyRootFilesystem !== true) problem(`${id(w)} ${c.name}`, "readOnlyRootFilesystem must be true");
      if (sc.allowPrivilegeEscalation !== false) problem(`${id(w)} ${c.name}`, "allowPrivilegeEscalation must be false");
      if (!(c.volumeMounts ?? []).some((m) => m.mountPath === "/tmp")) problem(`${id(w)} ${c.name}`, "no writable /tmp (emptyDir) on a read-only root");
      // GPUs: only in limits, only for workers.
      if (c.resources?.requests?.["nvidia.com/gpu"] !== undefined) problem(`${id(w)} ${c.name}`, "nvidia.com/gpu in requests");
      const g = c.resources?.limits?.["nvidia.com/gpu"];
      if (g !== undefined && !(component(w) === "worker" && c.name === "worker")) problem(`${id(w)} ${c.name}`, "GPUs outside the worker container");
      if (component(w) === "worker" && c.name === "worker" && opts.gpus !== undefined && (g ?? 0) !== opts.gpus) {
        problem(`${id(w)} ${c.name}`, `nvidia.com/gpu limit ${g ?? 0}, expected ${opts.gpus}`);
      }
      // The worker uses the GPUs it was given: --gpus 0,...,N-1, as CUDA numbers them in the container.
      if (component(w) === "worker" && c.name === "worker") {
        const flag = (c.args ?? []).filter((a) => a.startsWith("--gpus")).join(" ");
        const want = g ? `--gpus=${Array.from({ length: Number(g) }, (_, i) => i).join(",")}` : "";
        if (flag !== want) problem(`${id(w)} ${c.name}`, `GPU flag '${flag}' for nvidia.com/gpu ${g ?? 0}, expected '${want}'`);
      }
    }
    // Every volume mount names a volume of the pod (extraVolumeMounts without extraVolumes).
    const volumeNames = new Set((t.spec.volumes ?? []).map((v) => v.name));
    if (volumeNames.size !== (t.spec.volumes ?? []).length) problem(id(w), "two volumes of the same name");
    for (const c of [...(t.spec.initContainers ?? []), ...t.spec.containers]) {
      for (const m of c.volumeMounts ?? []) if (!volumeNames.has(m.name)) problem(`${id(w)} ${c.name}`, `volumeMount ${m.name} names no volume of the pod`);
      const names = (c.env ?? []).map((e) => e.name);
      const dup = names.find((n, i) => names.indexOf(n) !== i);
      if (dup) problem(`${id(w)} ${c.name}`, `env ${dup} set twice`);
    }
    // Volumes: claims exist (or are declared existing).
    const claims = new Set([...byKind("PersistentVolumeClaim").map((p) => p.metadata.name), ...opts.existingClaims]);
    for (const v of t.spec.volumes ?? []) {
      if (v.persistentVolumeClaim && !claims.has(v.persistentVolumeClaim.claimName)) {
        problem(id(w), `volume ${v.name}: claim ${v.persistentVolumeClaim.claimName} is neither rendered nor an existing claim`);
      }
    }
    // Metrics: a named port matching the annotations and the env.
    const main = t.spec.containers[0];
    const mport = (main.ports ?? []).find((p) => p.name === "metrics");
    const ann = t.metadata.annotations ?? {};
    if (mport) {
      if (ann["prometheus.io/scrape"] !== undefined && ann["prometheus.io/port"] !== String(mport.containerPort)) {
        problem(id(w), "prometheus.io/port does not match the metrics port");
      }
      if (envValue(main, "DTRAIN_METRICS_PORT") !== String(mport.containerPort)) problem(id(w), "DTRAIN_METRICS_PORT does not match the metrics port");
    }
  }

  // Every Service selects some pods; every ServiceMonitor/PodMonitor too.
  const podLabels = workloads.map((w) => w.spec.template.metadata.labels);
  for (const s of Object.values(services)) {
    if (!podLabels.some((l) => subset(s.spec.selector, l))) problem(id(s), "selects no pod of the chart");
    for (const p of s.spec.ports ?? []) {
      if (typeof p.targetPort !== "string") continue;
      const ok = workloads.some((w) => subset(s.spec.selector, w.spec.template.metadata.labels) &&
        w.spec.template.spec.containers.some((c) => (c.ports ?? []).some((cp) => cp.name === p.targetPort)));
      if (!ok) problem(id(s), `targetPort ${p.targetPort} is no container port of the selected pods`);
    }
  }
  for (const pm of byKind("PodMonitor")) {
    if (!podLabels.some((l) => subset(pm.spec.selector.matchLabels, l))) problem(id(pm), "selects no pod");
  }
  for (const sm of byKind("ServiceMonitor")) {
    if (!Object.values(services).some((s) => subset(sm.spec.selector.matchLabels, s.metadata.labels))) problem(id(sm), "selects no Service");
  }
  for (const cm of byKind("ConfigMap")) {
    for (const [k, v] of Object.entries(cm.data ?? {})) {
      if (k.endsWith(".json")) {
        try { JSON.parse(v); } catch (e) { problem(id(cm), `${k} is not JSON: ${e.message}`); }
      }
    }
  }

  // The training roles: every process is told the scheduler's stable name and the counts.
  const sched = role("scheduler"), server = role("server"), worker = role("worker");
  // TLS and NetworkPolicies (security.mjs): returns whether the training pods speak TLS.
  const tlsOn = checkTls(docs, { sched, server, worker, infer: role("inference") }, opts, problem);
  checkNetworkPolicies(docs, workloads, opts, problem);
  checkClaims(docs, workloads, opts, problem);
  checkDisruptionBudgets(docs, workloads, opts, problem);
  if (sched && server && worker) checkGang(docs, [sched, server, worker], role("inference"), opts, problem);
  if (!sched || !server || !worker) {
    problem("chart", "scheduler, server and worker workloads must all be rendered");
  } else {
    const replicas = (w) => (w.kind === "Job" ? w.spec.completions : w.spec.replicas);
    const W = replicas(worker), S = replicas(server);
    if (replicas(sched) !== 1) problem(id(sched), "exactly one scheduler");
    if (opts.workers !== undefined && W !== opts.workers) problem(id(worker), `${W} worker replicas, expected ${opts.workers}`);
    if (opts.servers !== undefined && S !== opts.servers) problem(id(server), `${S} server replicas, expected ${opts.servers}`);
    const st = sched.spec.template;
    const schedPort = st.spec.containers[0].ports.find((p) => p.name === "grpc")?.containerPort;
    const hostname = `${sched.metadata.name}-0`; // a Job's index 0 or a StatefulSet's ordinal 0: a replacement keeps it
    const release = sched.metadata.labels?.["app.kubernetes.io/instance"];
    const jobIds = new Set(), rejoin = new Set(), replications = new Set();
    for (const w of [sched, server, worker]) {
      replications.add(Number(envValue(w.spec.template.spec.containers[0], "DTRAIN_REPLICATION") ?? 1));
    }
    // Every process is told the same replication (unset: 1); the scheduler refuses others.
    const [R] = replications;
    if (replications.size !== 1 || !(R >= 1 && R <= S)) {
      problem("chart", `DTRAIN_REPLICATION must be one value in 1..${S} for every process (unset: 1), got ${[...replications].join(", ")}`);
    } else if (opts.replication !== undefined && R !== opts.replication) {
      problem("chart", `DTRAIN_REPLICATION=${R}, expected ${opts.replication}`);
    }
    const sub = sched.kind === "Job" ? st.spec.subdomain : sched.spec.serviceName;
    const addrRe = new RegExp(`^${hostname}\\.${sub}\\.${opts.namespace}\\.svc\\.[a-z0-9.-]+:${schedPort}$`);
    for (const w of [sched, server, worker]) {
      const c = w.spec.template.spec.containers[0];
      const where = `${id(w)} ${c.name}`;
      if (envValue(c, "DTRAIN_NUM_WORKERS") !== String(W)) problem(where, `DTRAIN_NUM_WORKERS=${envValue(c, "DTRAIN_NUM_WORKERS")}, but ${W} workers run`);
      if (envValue(c, "DTRAIN_NUM_SERVERS") !== String(S)) problem(where, `DTRAIN_NUM_SERVERS=${envValue(c, "DTRAIN_NUM_SERVERS")}, but ${S} servers run`);
      if (!addrRe.test(envValue(c, "DTRAIN_SCHEDULER_ADDR") ?? "")) problem(where, `DTRAIN_SCHEDULER_ADDR=${envValue(c, "DTRAIN_SCHEDULER_ADDR")} is not the scheduler pod's stable name and port`);
      if (envValue(c, "DTRAIN_ROLE") !== component(w)) problem(where, "DTRAIN_ROLE does not name its role");
      jobIds.add(envValue(c, "DTRAIN_JOB_ID"));
      rejoin.add(envValue(c, "DTRAIN_REJOIN_TIMEOUT"));
      if (w.kind === "Job") checkRecovery(w, component(w), opts, R);
      if (w !== sched) {
        const rank = envOf(c).DTRAIN_RANK?.valueFrom?.fieldRef?.fieldPath;
        const ordinal = w.kind === "Job" ? INDEX_ANNOTATION : "metadata.labels['apps.kubernetes.io/pod-index']";
        if (rank !== ordinal) problem(where, "DTRAIN_RANK must come from the pod's index");
      }
      if (w !== worker && !tlsOn) {
        const grpcPort = c.ports.find((p) => p.name === "grpc")?.containerPort;
        for (const kind of ["readinessProbe", "livenessProbe"]) {
          if (c[kind]?.grpc?.port !== grpcPort) problem(where, `${kind} must be a native gRPC probe on port ${grpcPort}`);
        }
      }
    }
    // One job id for the whole release, as the scheduler and servers fence by it.
    const [jobId] = jobIds;
    if (jobIds.size !== 1 || !jobId) {
      problem("chart", `DTRAIN_JOB_ID must be one non-empty id for every pod, got ${[...jobIds].join(", ")}`);
    } else if (opts.jobId !== undefined ? jobId !== opts.jobId : !jobId.startsWith(`${release}-`)) {
      problem("chart", `DTRAIN_JOB_ID=${jobId}, expected ${opts.jobId ?? `${release}-<random>`}`);
    } else if (Buffer.byteLength(jobId) > 64) {
      problem("chart", `DTRAIN_JOB_ID=${jobId} is over 64 bytes`);
    }
    checkSnapshots(server, worker, opts, jobIds);
    checkElastic(sched, server, worker, opts, problem);
    const [rt] = rejoin;
    if (rejoin.size !== 1 || rt === undefined || (opts.rejoinTimeout !== undefined && rt !== opts.rejoinTimeout)) {
      problem("chart", `DTRAIN_REJOIN_TIMEOUT must be the same in every pod${opts.rejoinTimeout !== undefined ? ` (${opts.rejoinTimeout})` : ""}, got ${[...rejoin].join(", ")}`);
    }
  }
  const infer = role("inference");
  if (infer) {
    const c = infer.spec.template.spec.containers[0];
    if (!tlsOn && !c.readinessProbe?.grpc) problem(id(infer), "inference readiness must be a gRPC probe");
    if (!(c.volumeMounts ?? []).some((m) => m.readOnly && worker?.spec.template.spec.containers[0].volumeMounts.some((wm) => wm.mountPath === m.mountPath))) {
      problem(id(infer), "inference must mount the workers' checkpoint volume read-only");
    }
  }

  if (problems.length) {
    for (const p of problems) console.error(`  FAIL ${p}`);
    process.exit(1);
  }
  const kinds = docs.map((o) => o.kind).reduce((m, k) => ((m[k] = (m[k] ?? 0) + 1), m), {});
  console.log(`  ok: ${docs.length} documents valid (${Object.entries(kinds).map(([k, n]) => `${n} ${k}`).join(", ")}); invariants hold`);
}

try {
  main();
} catch (e) {
  console.error(`validate.mjs: ${e.stack ?? e}`);
  process.exit(2);
}
