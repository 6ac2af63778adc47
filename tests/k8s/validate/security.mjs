// The chart's security objects and wiring, for validate.mjs (README.md "TLS and network
// policy" in helm/dtrain): cert-manager Certificates checked field by field (its CRDs are
// not in kubernetes-models), every TLS pod's DTRAIN_TLS_* files in a mounted Secret, exec
// probes where the kubelet's plaintext gRPC probe cannot reach, the inference token from a
// Secret, and what the NetworkPolicies let through.
import { isIP } from "node:net";
import { checkGeneratedTls, IDENTITY } from "./generated_tls.mjs";

const id = (o) => `${o.kind}/${o.metadata?.name}`;
const envOf = (c) => Object.fromEntries((c?.env ?? []).map((e) => [e.name, e]));
const component = (o) => o?.metadata?.labels?.["app.kubernetes.io/component"];
const TLS_ENV = { DTRAIN_TLS_CERT: "tls.crt", DTRAIN_TLS_KEY: "tls.key", DTRAIN_TLS_CA: "ca.crt" };
const TRAINING = ["scheduler", "server", "worker"];

const DNS_LABEL = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;
const isDnsName = (n) =>
  typeof n === "string" && n.length <= 253 && n.replace(/^\*\./, "").split(".").every((l) => DNS_LABEL.test(l));
const isSubdomain = (n) => isDnsName(n) && !n.startsWith("*");
const GO_DURATION = /^([0-9]+(\.[0-9]+)?(h|m|s|ms|us|µs|ns))+$/;
const seconds = (d) => {
  const unit = { h: 3600, m: 60, s: 1, ms: 1e-3, us: 1e-6, "µs": 1e-6, ns: 1e-9 };
  return [...d.matchAll(/([0-9.]+)(h|ms|m|s|us|µs|ns)/g)].reduce((t, [, n, u]) => t + Number(n) * unit[u], 0);
};

// cert-manager.io/v1 Certificate (cert-manager 1.x API reference; the webhook's rules).
const CERT_SPEC_FIELDS = new Set(["subject", "literalSubject", "commonName", "duration", "renewBefore",
  "renewBeforePercentage", "dnsNames", "ipAddresses", "uris", "otherNames", "emailAddresses", "secretName",
  "secretTemplate", "keystores", "issuerRef", "isCA", "usages", "privateKey", "encodeUsagesInRequest",
  "revisionHistoryLimit", "additionalOutputFormats", "nameConstraints"]);
const KEY_USAGES = new Set(["signing", "digital signature", "content commitment", "key encipherment",
  "key agreement", "data encipherment", "cert sign", "crl sign", "encipher only", "decipher only", "any",
  "server auth", "client auth", "code signing", "email protection", "s/mime", "ipsec end system",
  "ipsec tunnel", "ipsec user", "timestamping", "ocsp signing", "microsoft sgc", "netscape sgc"]);

export function checkCertificate(o, problem) {
  const where = id(o), s = o.spec ?? {};
  if (!isSubdomain(o.metadata?.name ?? "")) problem(where, "metadata.name is not a DNS subdomain");
  for (const k of Object.keys(s)) if (!CERT_SPEC_FIELDS.has(k)) problem(where, `spec.${k} is no field of a cert-manager.io/v1 Certificate`);
  if (!isSubdomain(s.secretName ?? "")) problem(where, `spec.secretName ${s.secretName} is not a Secret name`);
  const ref = s.issuerRef ?? {};
  if (typeof ref.name !== "string" || !ref.name) problem(where, "spec.issuerRef.name is required");
  for (const k of Object.keys(ref)) if (!["name", "kind", "group"].includes(k)) problem(where, `spec.issuerRef.${k} is no field`);
  if (ref.kind !== undefined && !/^[A-Z][A-Za-z0-9]*$/.test(ref.kind)) problem(where, `spec.issuerRef.kind ${ref.kind}`);
  if (!(s.commonName || s.dnsNames?.length || s.ipAddresses?.length || s.uris?.length || s.emailAddresses?.length)) {
    problem(where, "at least one of commonName, dnsNames, ipAddresses, uris, emailAddresses");
  }
  if (s.commonName !== undefined && (typeof s.commonName !== "string" || s.commonName.length > 64)) {
    problem(where, `spec.commonName must be a string of at most 64 characters: ${s.commonName}`);
  }
  for (const n of s.dnsNames ?? []) if (!isDnsName(n)) problem(where, `spec.dnsNames: ${n} is not a DNS name`);
  if (new Set(s.dnsNames ?? []).size !== (s.dnsNames ?? []).length) problem(where, "spec.dnsNames has duplicates");
  for (const a of s.ipAddresses ?? []) if (!isIP(a)) problem(where, `spec.ipAddresses: ${a} is not an IP address`);
  for (const u of s.usages ?? []) if (!KEY_USAGES.has(u)) problem(where, `spec.usages: ${u} is not a cert-manager key usage`);
  const pk = s.privateKey ?? {};
  for (const k of Object.keys(pk)) if (!["rotationPolicy", "encoding", "algorithm", "size"].includes(k)) problem(where, `spec.privateKey.${k} is no field`);
  if (pk.algorithm !== undefined && !["RSA", "ECDSA", "Ed25519"].includes(pk.algorithm)) problem(where, `spec.privateKey.algorithm ${pk.algorithm}`);
  if (pk.algorithm === "ECDSA" && pk.size !== undefined && ![256, 384, 521].includes(pk.size)) problem(where, `ECDSA size ${pk.size}`);
  if (pk.encoding !== undefined && !["PKCS1", "PKCS8"].includes(pk.encoding)) problem(where, `spec.privateKey.encoding ${pk.encoding}`);
  if (pk.rotationPolicy !== undefined && !["Never", "Always"].includes(pk.rotationPolicy)) problem(where, `spec.privateKey.rotationPolicy ${pk.rotationPolicy}`);
  for (const k of ["duration", "renewBefore"]) {
    if (s[k] !== undefined && !(typeof s[k] === "string" && GO_DURATION.test(s[k]))) problem(where, `spec.${k} ${s[k]} is not a Go duration`);
  }
  if (s.duration && s.renewBefore && GO_DURATION.test(s.duration) && GO_DURATION.test(s.renewBefore) &&
      seconds(s.renewBefore) >= seconds(s.duration)) {
    problem(where, `spec.renewBefore ${s.renewBefore} must be shorter than spec.duration ${s.duration}`);
  }
  if (s.duration && GO_DURATION.test(s.duration) && seconds(s.duration) < 3600) problem(where, "spec.duration under cert-manager's minimum of 1h");
  for (const k of Object.keys(s.secretTemplate ?? {})) if (!["labels", "annotations"].includes(k)) problem(where, `spec.secretTemplate.${k} is no field`);
}

// The Secret volume that holds `path` in container `c` of pod spec `t`, and the key the
// file is: {volume, mount, key} or null.
function secretFile(t, c, path) {
  const mount = (c.volumeMounts ?? [])
    .filter((m) => path.startsWith(`${m.mountPath.replace(/\/$/, "")}/`))
    .sort((a, b) => b.mountPath.length - a.mountPath.length)[0];
  if (!mount) return null;
  const volume = (t.volumes ?? []).find((v) => v.name === mount.name);
  const rel = path.slice(mount.mountPath.replace(/\/$/, "").length + 1);
  if (!volume?.secret) return { volume, mount, key: null };
  const items = volume.secret.items;
  const key = items ? items.find((i) => i.path === rel)?.key ?? null : rel;
  return { volume, mount, key };
}

// DTRAIN_TLS_* of one container: each a file of a Secret volume mounted read-only, the key
// it names. Returns the Secret's name (one for the three files), or null.
function checkTlsFiles(w, c, want, problem) {
  const where = `${id(w)} ${c.name}`, t = w.spec.template.spec, env = envOf(c);
  const secrets = new Set();
  for (const [name, key] of Object.entries(TLS_ENV)) {
    if (!want.includes(name)) continue;
    const path = env[name]?.value;
    if (!path) { problem(where, `${name} missing: a TLS pod gets all of ${want.join(", ")}`); continue; }
    const f = secretFile(t, c, path);
    if (!f?.volume) { problem(where, `${name}=${path} is on no volume of the pod`); continue; }
    if (!f.volume.secret) { problem(where, `${name}=${path} is on volume ${f.volume.name}, not a Secret`); continue; }
    if (f.mount.readOnly !== true) problem(where, `volume ${f.volume.name} (${name}) must be mounted read-only`);
    if (f.key !== key) problem(where, `${name}=${path} is key ${f.key} of Secret ${f.volume.secret.secretName}, expected ${key}`);
    if ((f.volume.secret.defaultMode ?? 0o644) & 0o007) problem(where, `Secret volume ${f.volume.name} is world-readable (defaultMode)`);
    secrets.add(f.volume.secret.secretName);
  }
  if (secrets.size > 1) problem(where, `the TLS files come from several Secrets: ${[...secrets].join(", ")}`);
  return secrets.size === 1 ? [...secrets][0] : null;
}

// With TLS the kubelet's gRPC probe (plaintext) fails the handshake: the probe must be
// `dtrain health` over loopback with the container's own files.
function checkHealthProbe(w, c, kind, port, service, problem) {
  const where = `${id(w)} ${c.name} ${kind}`, p = c[kind];
  if (!p) return problem(where, "missing");
  if (p.grpc) return problem(where, "a native gRPC probe cannot speak TLS");
  const cmd = p.exec?.command ?? [];
  if (cmd[0] !== "dtrain" || cmd[1] !== "health") return problem(where, `must exec dtrain health, got ${JSON.stringify(cmd)}`);
  const env = envOf(c);
  const flag = (f) => cmd.find((a) => a.startsWith(`--${f}=`))?.slice(f.length + 3);
  if (flag("addr") !== `127.0.0.1:${port}`) problem(where, `--addr=${flag("addr")}, expected 127.0.0.1:${port}`);
  if ((flag("service") ?? "") !== service) problem(where, `--service=${flag("service")}, expected ${service || "(none)"}`);
  for (const [f, e] of [["tls-ca", "DTRAIN_TLS_CA"], ["tls-cert", "DTRAIN_TLS_CERT"], ["tls-key", "DTRAIN_TLS_KEY"]]) {
    if (flag(f) !== env[e]?.value) problem(where, `--${f}=${flag(f)} is not ${e}=${env[e]?.value}`);
  }
  const timeout = Number(flag("timeout") ?? 1);
  if (!(timeout < (p.timeoutSeconds ?? 1))) problem(where, `--timeout=${timeout} must end before the probe's timeoutSeconds ${p.timeoutSeconds ?? 1}`);
}

// The pods' DNS names under their headless Service, as the Certificate must carry them.
function podDnsNames(w, domainOf) {
  const t = w.spec.template.spec, n = w.kind === "Job" ? w.spec.completions : w.spec.replicas;
  return Array.from({ length: n }, (_, i) => `${w.metadata.name}-${i}.${t.subdomain}.${domainOf}`);
}

// Returns whether the training pods speak TLS. opts.tls: off | existingSecret | certManager |
// generated (the chart's own Secrets: generated_tls.mjs).
export function checkTls(docs, roles, opts, problem) {
  const { sched, server, worker, infer } = roles;
  const training = [sched, server, worker].filter(Boolean);
  const main = (w) => w.spec.template.spec.containers[0];
  const hasTls = (w) => Object.keys(TLS_ENV).some((e) => envOf(main(w))[e] !== undefined);
  const on = training.filter(hasTls);
  const certs = docs.filter((o) => o.kind === "Certificate");
  const certBySecret = Object.fromEntries(certs.map((c) => [c.spec?.secretName, c]));
  if (on.length !== 0 && on.length !== training.length) {
    problem("chart", `TLS in ${on.map(component).join(", ")} but not in the other training pods: mutual TLS is all or nothing`);
  }
  const tlsOn = on.length > 0;
  const renderedSecrets = new Set(docs.filter((o) => o.kind === "Secret").map((o) => o.metadata.name));
  const mode = !tlsOn ? "off" : certs.length ? "certManager" : renderedSecrets.has(envSecret(on[0])) ? "generated" : "existingSecret";
  if (opts.tls !== undefined && opts.tls !== mode) problem("chart", `TLS ${mode}, expected ${opts.tls}`);
  if (!tlsOn) {
    if (certs.length) problem("chart", "Certificates rendered without TLS");
    if (infer && Object.keys(TLS_ENV).some((e) => envOf(main(infer))[e])) problem(id(infer), "TLS on inference without TLS in training");
    checkToken(infer, opts, problem);
    return false;
  }
  const ns = opts.namespace ?? "default";
  const secrets = new Map();
  for (const w of training) {
    const c = main(w), role = component(w);
    const secret = checkTlsFiles(w, c, Object.keys(TLS_ENV), problem);
    if (!secret) continue;
    secrets.set(role, secret);
    if (w !== worker) {
      const port = c.ports.find((p) => p.name === "grpc")?.containerPort;
      for (const kind of ["readinessProbe", "livenessProbe"]) checkHealthProbe(w, c, kind, port, "", problem);
    }
    if (mode === "certManager") {
      const cert = certBySecret[secret];
      if (!cert) { problem(id(w), `Secret ${secret} is issued by no rendered Certificate`); continue; }
      const identity = String(cert.spec.commonName ?? "").split(".")[0];
      if (identity !== IDENTITY[role]) problem(id(cert), `common name ${cert.spec.commonName}: identity ${identity}, expected ${IDENTITY[role]} for the ${role} pods`);
      const names = new Set(cert.spec.dnsNames ?? []);
      const domain = (envOf(c).DTRAIN_SCHEDULER_ADDR?.value ?? "").split(`.${ns}.svc.`)[1]?.split(":")[0];
      for (const n of podDnsNames(w, `${ns}.svc.${domain}`)) if (!names.has(n)) problem(id(cert), `lacks the pod DNS name ${n}`);
      if (cert.metadata.labels?.["app.kubernetes.io/instance"] !== w.metadata.labels?.["app.kubernetes.io/instance"]) problem(id(cert), "not of this release");
    } else if (mode === "existingSecret" && opts.tlsSecret !== undefined && secret !== opts.tlsSecret) {
      problem(id(w), `TLS Secret ${secret}, expected ${opts.tlsSecret}`);
    }
  }
  if (mode === "certManager") {
    if (new Set(secrets.values()).size !== secrets.size) problem("chart", "with cert-manager each role has a Secret of its own");
    const jobs = new Set(certs.map((c) => String(c.spec.commonName).split(".").slice(1).join(".")));
    if (jobs.size !== 1) problem("chart", `the Certificates name several jobs: ${[...jobs].join(", ")}`);
    const issuers = new Set(certs.map((c) => JSON.stringify(c.spec.issuerRef)));
    if (issuers.size !== 1) problem("chart", "the Certificates must share one issuer (one CA for the job)");
    for (const cert of certs) {
      const u = cert.spec.usages ?? [];
      if (!u.includes("server auth") || !u.includes("client auth")) problem(id(cert), "every dtrain certificate serves and dials: server auth and client auth");
      if (cert.spec.privateKey?.algorithm !== "ECDSA" || cert.spec.privateKey?.size !== 256) problem(id(cert), "ECDSA P-256 keys (as dtrain certs makes)");
    }
  } else if (mode === "existingSecret" && new Set(secrets.values()).size > 1) {
    problem("chart", `one Secret for every training pod (tls.existingSecret), got ${[...new Set(secrets.values())].join(", ")}`);
  }
  if (infer) {
    const c = main(infer);
    const secret = checkTlsFiles(infer, c, ["DTRAIN_TLS_CERT", "DTRAIN_TLS_KEY"], problem);
    if (secret && [...secrets.values()].includes(secret)) {
      problem(id(infer), `inference mounts the training Secret ${secret}: its certificate may join the job`);
    }
    if (secret && mode === "certManager") {
      const cert = certBySecret[secret];
      if (!cert) problem(id(infer), `Secret ${secret} is issued by no rendered Certificate`);
      else if (String(cert.spec.commonName).split(".")[0] !== "infer") problem(id(cert), `inference's identity must be infer, got ${cert.spec.commonName}`);
    } else if (secret && mode === "existingSecret" && opts.inferenceTlsSecret !== undefined && secret !== opts.inferenceTlsSecret) {
      problem(id(infer), `TLS Secret ${secret}, expected ${opts.inferenceTlsSecret}`);
    }
    const port = c.ports.find((p) => p.name === "grpc")?.containerPort;
    checkHealthProbe(infer, c, "readinessProbe", port, "dtrain.v1.Inference", problem);
    if (c.livenessProbe?.grpc) problem(id(infer), "livenessProbe: a native gRPC probe cannot speak TLS");
  }
  if (mode === "generated") {
    const domain = (envOf(main(sched)).DTRAIN_SCHEDULER_ADDR?.value ?? "").split(`.${ns}.svc.`)[1]?.split(":")[0];
    const byRole = Object.fromEntries(secrets);
    if (infer && envSecret(infer)) byRole.inference = envSecret(infer);
    const workloadOf = { scheduler: sched, server, worker };
    const dnsOf = (role) => {
      if (role !== "inference") return podDnsNames(workloadOf[role], `${ns}.svc.${domain}`);
      const n = infer.metadata.name;
      return [n, `${n}.${ns}`, `${n}.${ns}.svc`, `${n}.${ns}.svc.${domain}`];
    };
    checkGeneratedTls(docs, [...training, ...(infer ? [infer] : [])], byRole, dnsOf, problem);
  }
  if (mode === "certManager") {
    const wanted = new Set([...secrets.values(), ...(infer ? [envSecret(infer)] : [])]);
    for (const cert of certs) if (!wanted.has(cert.spec.secretName)) problem(id(cert), `Secret ${cert.spec.secretName} is mounted by no pod`);
  }
  checkToken(infer, opts, problem);
  return true;
}

function envSecret(w) {
  const c = w.spec.template.spec.containers[0];
  const path = envOf(c).DTRAIN_TLS_CERT?.value;
  return path ? secretFile(w.spec.template.spec, c, path)?.volume?.secret?.secretName : undefined;
}

// The inference token: --auth-token-file names a key of a Secret mounted read-only.
function checkToken(infer, opts, problem) {
  const c = infer?.spec.template.spec.containers[0];
  const arg = (c?.args ?? []).find((a) => a.startsWith("--auth-token-file="));
  if (!arg) {
    if (opts.tokenSecret) problem(infer ? id(infer) : "chart", `no --auth-token-file, expected the token from ${opts.tokenSecret}`);
    return;
  }
  const path = arg.slice("--auth-token-file=".length);
  const f = secretFile(infer.spec.template.spec, c, path);
  if (!f?.volume?.secret) return problem(id(infer), `--auth-token-file=${path} is in no Secret volume`);
  if (f.mount.readOnly !== true) problem(id(infer), `token volume ${f.volume.name} must be mounted read-only`);
  if ((f.volume.secret.defaultMode ?? 0o644) & 0o007) problem(id(infer), `token volume ${f.volume.name} is world-readable`);
  const got = `${f.volume.secret.secretName}:${f.key}`;
  if (opts.tokenSecret !== undefined && got !== opts.tokenSecret) problem(id(infer), `token from ${got}, expected ${opts.tokenSecret}`);
}

// metav1.LabelSelector over a label map: matchLabels and matchExpressions both hold.
export function selects(sel, labels = {}) {
  if (!sel) return false;
  const okLabels = Object.entries(sel.matchLabels ?? {}).every(([k, v]) => labels[k] === v);
  const okExpr = (sel.matchExpressions ?? []).every((e) => {
    const has = Object.hasOwn(labels, e.key);
    switch (e.operator) {
      case "In": return has && e.values.includes(labels[e.key]);
      case "NotIn": return !has || !e.values.includes(labels[e.key]);
      case "Exists": return has;
      case "DoesNotExist": return !has;
      default: return false;
    }
  });
  return okLabels && okExpr;
}

// What the NetworkPolicies let into each pod. opts.networkPolicy on|off says whether they
// must exist; opts.metricsNamespace the namespace allowed on the metrics port;
// opts.inferenceFrom any|restricted.
export function checkNetworkPolicies(docs, workloads, opts, problem) {
  const policies = docs.filter((o) => o.kind === "NetworkPolicy");
  if (opts.networkPolicy === "off" && policies.length) problem("chart", "NetworkPolicies rendered, expected none");
  if (opts.networkPolicy === "on" && !policies.length) problem("chart", "no NetworkPolicy rendered");
  if (!policies.length) return;
  const pods = workloads.map((w) => ({ w, labels: w.spec.template.metadata.labels, c: w.spec.template.spec.containers[0] }));
  const release = workloads[0]?.metadata.labels?.["app.kubernetes.io/instance"];
  const trainingPods = pods.filter((p) => TRAINING.includes(component(p.w)));
  const portNumber = (pod, port) => (typeof port === "number" ? port : (pod.c.ports ?? []).find((p) => p.name === port)?.containerPort);
  for (const np of policies) {
    if (!(np.spec.policyTypes ?? []).includes("Ingress")) problem(id(np), "policyTypes must include Ingress");
    if (!pods.some((p) => selects(np.spec.podSelector, p.labels))) problem(id(np), "selects no pod of the chart");
  }
  // The ingress rules of the policies that select `pod`, flattened to {port, from} pairs
  // (port null: every port; from null: every source).
  const admits = (pod) => policies.filter((np) => selects(np.spec.podSelector, pod.labels))
    .flatMap((np) => (np.spec.ingress ?? []).flatMap((r) => (r.ports?.length ? r.ports : [null])
      .map((p) => ({ np, port: p && portNumber(pod, p.port), from: r.from?.length ? r.from : null }))));
  for (const pod of pods) {
    const where = `${id(pod.w)} pods`;
    const rules = admits(pod);
    if (!policies.some((np) => selects(np.spec.podSelector, pod.labels))) { problem(where, "selected by no NetworkPolicy: open to anyone"); continue; }
    if (rules.some((r) => r.port === null)) problem(where, "a rule admits every port");
    const grpc = (pod.c.ports ?? []).find((p) => p.name === "grpc")?.containerPort;
    const metrics = (pod.c.ports ?? []).find((p) => p.name === "metrics")?.containerPort;
    if (TRAINING.includes(component(pod.w))) {
      for (const r of rules.filter((x) => x.port !== metrics)) {
        if (!r.from) { problem(where, `port ${r.port} open to anyone`); continue; }
        for (const peer of r.from) {
          if (peer.ipBlock || peer.namespaceSelector || !peer.podSelector) problem(where, `port ${r.port} admits ${JSON.stringify(peer)}: only this release's pods may reach the training ports`);
          else if (peer.podSelector.matchLabels?.["app.kubernetes.io/instance"] !== release) problem(where, `port ${r.port} admits pods of other releases`);
          else if (pods.some((p) => !TRAINING.includes(component(p.w)) && selects(peer.podSelector, p.labels))) problem(where, `port ${r.port} admits the release's ${component(pods.find((p) => !TRAINING.includes(component(p.w)) && selects(peer.podSelector, p.labels)).w)} pods`);
        }
      }
      if (grpc !== undefined) {
        for (const other of trainingPods) {
          if (!rules.some((r) => r.port === grpc && r.from?.some((peer) => peer.podSelector && !peer.namespaceSelector && selects(peer.podSelector, other.labels)))) {
            problem(where, `port ${grpc} does not admit the ${component(other.w)} pods`);
          }
        }
      }
    }
    if (component(pod.w) === "inference" && grpc !== undefined) {
      const open = rules.filter((r) => r.port === grpc);
      if (!open.length) problem(where, `inference port ${grpc} admits nobody`);
      const anyone = open.some((r) => !r.from);
      if (opts.inferenceFrom === "any" && !anyone) problem(where, `inference port ${grpc} should admit anyone`);
      if (opts.inferenceFrom === "restricted" && anyone) problem(where, `inference port ${grpc} admits anyone`);
    }
    if (metrics !== undefined) {
      const m = rules.filter((r) => r.port === metrics);
      if (!m.length) problem(where, `metrics port ${metrics} admits nobody: Prometheus cannot scrape`);
      for (const r of m) {
        if (!r.from) { problem(where, `metrics port ${metrics} open to anyone`); continue; }
        for (const peer of r.from) {
          if (!peer.namespaceSelector || peer.podSelector || peer.ipBlock) problem(where, `metrics port admits ${JSON.stringify(peer)}, expected a namespaceSelector`);
          else if (opts.metricsNamespace !== undefined && !selects(peer.namespaceSelector, { "kubernetes.io/metadata.name": opts.metricsNamespace })) {
            problem(where, `metrics port does not admit namespace ${opts.metricsNamespace}`);
          }
        }
      }
    }
  }
}
