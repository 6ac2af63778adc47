// The certificates the chart makes itself (tls.enabled with neither tls.existingSecret nor
// cert-manager; helm/dtrain/templates/tls-secrets.yaml), for security.mjs: each role's
// Secret is parsed and its certificate checked as the services will (chains to the job's
// CA, the identity they read from the common name, the pods' DNS names, the key is the
// certificate's), and the CA's key is in no Secret that any pod mounts.
import { X509Certificate, createPrivateKey, createPublicKey } from "node:crypto";

const id = (o) => `${o.kind}/${o.metadata?.name}`;
const pem = (s, key) => Buffer.from(s.data?.[key] ?? "", "base64").toString("utf8");
const commonName = (cert) => /(?:^|\n)CN=([^\n]*)/.exec(cert.subject)?.[1] ?? "";
const dnsNames = (cert) => (cert.subjectAltName ?? "").split(", ").filter((n) => n.startsWith("DNS:")).map((n) => n.slice(4));
const publicDer = (key) => createPublicKey(key).export({ type: "spki", format: "der" }).toString("base64");

function parseCert(text, where, problem) {
  try {
    return new X509Certificate(text);
  } catch (e) {
    problem(where, `not a PEM certificate: ${e.message}`);
    return null;
  }
}

// secrets: role -> the Secret name its pods mount (inference included); dnsOf(role): the
// DNS names its certificate must carry. Returns nothing; reports through problem().
export function checkGeneratedTls(docs, workloads, secrets, dnsOf, problem) {
  const rendered = Object.fromEntries(docs.filter((o) => o.kind === "Secret").map((s) => [s.metadata.name, s]));
  const caCerts = new Set();
  const now = Date.now();
  for (const [role, name] of Object.entries(secrets)) {
    const s = rendered[name];
    if (!s) { problem("chart", `the ${role} pods mount Secret ${name}, which the chart does not render`); continue; }
    const where = id(s);
    if (s.type !== "kubernetes.io/tls") problem(where, `type ${s.type}, expected kubernetes.io/tls`);
    for (const k of ["ca.crt", "tls.crt", "tls.key"]) if (!pem(s, k)) problem(where, `key ${k} missing`);
    if (Object.keys(s.data ?? {}).some((k) => !["ca.crt", "tls.crt", "tls.key"].includes(k))) {
      problem(where, `holds more than ca.crt, tls.crt, tls.key: ${Object.keys(s.data).join(", ")}`);
    }
    const ca = parseCert(pem(s, "ca.crt"), `${where} ca.crt`, problem);
    const cert = parseCert(pem(s, "tls.crt"), `${where} tls.crt`, problem);
    if (!ca || !cert) continue;
    caCerts.add(ca.raw.toString("base64"));
    if (!ca.ca) problem(where, "ca.crt is not a CA certificate");
    if (!cert.checkIssued(ca) || !cert.verify(ca.publicKey)) problem(where, "tls.crt is not signed by ca.crt");
    if (cert.ca) problem(where, "tls.crt is a CA certificate: a pod could sign identities with it");
    if (Date.parse(cert.validTo) <= now || Date.parse(ca.validTo) <= now) problem(where, "expired");
    try {
      if (!cert.checkPrivateKey(createPrivateKey(pem(s, "tls.key")))) problem(where, "tls.key is not the key of tls.crt");
    } catch (e) {
      problem(where, `tls.key: ${e.message}`);
    }
    const identity = commonName(cert).split(".")[0];
    if (identity !== IDENTITY[role]) problem(where, `common name ${commonName(cert)}: identity ${identity}, expected ${IDENTITY[role]} for the ${role} pods`);
    const names = new Set(dnsNames(cert));
    for (const n of dnsOf(role)) if (!names.has(n)) problem(where, `lacks the DNS name ${n}`);
    if (!cert.checkIP("127.0.0.1")) problem(where, "lacks IP 127.0.0.1 (probes and tools dial it)");
    if (cert.publicKey.asymmetricKeyType !== "ec") problem(where, `a ${cert.publicKey.asymmetricKeyType} key, expected ECDSA P-256 (as dtrain certs makes)`);
  }
  if (caCerts.size > 1) problem("chart", "the roles' Secrets name different CAs: one CA for the job");
  if (new Set(Object.values(secrets)).size !== Object.keys(secrets).length) problem("chart", "each role has a Secret of its own");
  const jobs = new Set(Object.values(secrets).map((n) => rendered[n]).filter(Boolean)
    .map((s) => { try { return commonName(new X509Certificate(pem(s, "tls.crt"))).split(".").slice(1).join("."); } catch { return "?"; } }));
  if (jobs.size > 1) problem("chart", `the certificates name several jobs: ${[...jobs].join(", ")}`);

  // The CA's key: rendered (so that upgrades keep the CA) but in no Secret a pod mounts.
  const [caB64] = caCerts;
  if (!caB64) return;
  const caPub = new X509Certificate(Buffer.from(caB64, "base64")).publicKey.export({ type: "spki", format: "der" }).toString("base64");
  const holdsCaKey = (s) => Object.values(s.data ?? {}).some((v) => {
    const text = Buffer.from(v, "base64").toString("utf8");
    if (!text.includes("PRIVATE KEY")) return false;
    try { return publicDer(text) === caPub; } catch { return false; }
  });
  const caKeySecrets = Object.values(rendered).filter(holdsCaKey).map((s) => s.metadata.name);
  if (!caKeySecrets.length) problem("chart", "no rendered Secret holds the CA's key: `helm upgrade` could not keep the CA");
  for (const w of workloads) {
    const t = w.spec.template.spec;
    for (const v of t.volumes ?? []) {
      const names = [v.secret?.secretName, ...(v.projected?.sources ?? []).map((p) => p.secret?.name)].filter(Boolean);
      for (const n of names) {
        if (caKeySecrets.includes(n)) problem(id(w), `volume ${v.name} mounts Secret ${n}, which holds the CA's key`);
      }
    }
    for (const c of [...(t.initContainers ?? []), ...t.containers]) {
      for (const e of [...(c.env ?? []).map((x) => x.valueFrom?.secretKeyRef?.name), ...(c.envFrom ?? []).map((x) => x.secretRef?.name)]) {
        if (e && caKeySecrets.includes(e)) problem(`${id(w)} ${c.name}`, `reads Secret ${e}, which holds the CA's key`);
      }
    }
  }
}

// The identity (first label of the common name) each role's certificate carries.
export const IDENTITY = { scheduler: "scheduler", server: "server", worker: "worker", inference: "infer" };
