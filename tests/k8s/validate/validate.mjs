// Validates rendered manifests (k8s-render -o json) against the Kubernetes API schemas
// (kubernetes-models, pinned in package-lock.json) and checks the chart's invariants.
//
//   node validate.mjs RENDERED.json [--workers N] [--servers S] [--gpus G]
//                     [--namespace NS] [--existing-claims a,b]
//
// Prints one line per problem and exits 1 if there is any; 0 and a summary otherwise.
import { readFileSync } from "node:fs";
import * as core from "kubernetes-models/v1";
import * as apps from "kubernetes-models/apps/v1";
import * as batch from "kubernetes-models/batch/v1";
import * as monitoring from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1";

const MODELS = {
  "v1/Service": core.Service,
  "v1/ConfigMap": core.ConfigMap,
  "v1/ServiceAccount": core.ServiceAccount,
  "v1/PersistentVolumeClaim": core.PersistentVolumeClaim,
  "apps/v1/Deployment": apps.Deployment,
  "apps/v1/StatefulSet": apps.StatefulSet,
  "batch/v1/Job": batch.Job,
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

function podTemplate(o) {
  return ["Job", "StatefulSet", "Deployment"].includes(o.kind) ? o.spec.template : null;
}

function main() {
  const opts = parseArgs(process.argv.slice(2));
  const docs = JSON.parse(readFileSync(opts.file, "utf8")).map((d) => d.object);
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
      if (w.spec.completionMode !== "Indexed") problem(id(w), "not an Indexed Job: pods get no stable rank/hostname");
      if (w.spec.parallelism !== w.spec.completions) problem(id(w), "parallelism != completions: all ranks must run at once");
      if (!["Never", "OnFailure"].includes(t.spec.restartPolicy)) problem(id(w), "Job pods need restartPolicy Never or OnFailure");
      if (t.spec.restartPolicy !== "Never") problem(id(w), "a finished or failed rank must not be restarted (restartPolicy Never)");
      const svc = services[t.spec.subdomain];
      if (!svc) problem(id(w), `subdomain ${t.spec.subdomain} is not a Service of the chart`);
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
    const hostname = sched.kind === "Job" ? `${sched.metadata.name}-0` : `${sched.metadata.name}-0`;
    const sub = sched.kind === "Job" ? st.spec.subdomain : sched.spec.serviceName;
    const addrRe = new RegExp(`^${hostname}\\.${sub}\\.${opts.namespace}\\.svc\\.[a-z0-9.-]+:${schedPort}$`);
    for (const w of [sched, server, worker]) {
      const c = w.spec.template.spec.containers[0];
      const where = `${id(w)} ${c.name}`;
      if (envValue(c, "DTRAIN_NUM_WORKERS") !== String(W)) problem(where, `DTRAIN_NUM_WORKERS=${envValue(c, "DTRAIN_NUM_WORKERS")}, but ${W} workers run`);
      if (envValue(c, "DTRAIN_NUM_SERVERS") !== String(S)) problem(where, `DTRAIN_NUM_SERVERS=${envValue(c, "DTRAIN_NUM_SERVERS")}, but ${S} servers run`);
      if (!addrRe.test(envValue(c, "DTRAIN_SCHEDULER_ADDR") ?? "")) problem(where, `DTRAIN_SCHEDULER_ADDR=${envValue(c, "DTRAIN_SCHEDULER_ADDR")} is not the scheduler pod's stable name and port`);
      if (envValue(c, "DTRAIN_ROLE") !== component(w)) problem(where, "DTRAIN_ROLE does not name its role");
      if (w !== sched) {
        const rank = envOf(c).DTRAIN_RANK?.valueFrom?.fieldRef?.fieldPath;
        const ordinal = w.kind === "Job" ? INDEX_ANNOTATION : "metadata.labels['apps.kubernetes.io/pod-index']";
        if (rank !== ordinal) problem(where, "DTRAIN_RANK must come from the pod's index");
      }
      if (w !== worker) {
        const grpcPort = c.ports.find((p) => p.name === "grpc")?.containerPort;
        for (const kind of ["readinessProbe", "livenessProbe"]) {
          if (c[kind]?.grpc?.port !== grpcPort) problem(where, `${kind} must be a native gRPC probe on port ${grpcPort}`);
        }
      }
    }
  }
  const infer = role("inference");
  if (infer) {
    const c = infer.spec.template.spec.containers[0];
    if (!c.readinessProbe?.grpc) problem(id(infer), "inference readiness must be a gRPC probe");
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
