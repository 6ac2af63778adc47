// The chart's claims and who mounts them, for validate.mjs (README.md "Storage" in
// helm/dtrain). A claim without ReadWriteMany attaches to one node at a time: every pod
// that mounts it must be held on one node by a required podAffinity (topologyKey
// kubernetes.io/hostname) whose selector takes in all of them, itself included, or some of
// them would wait forever in ContainerCreating (Multi-Attach) or Pending (a node-local
// volume). A claim asking for ReadWriteMany must name a class: the cluster's default is
// ReadWriteOnce on stock clusters, and the claim would stay Pending.
import { selects } from "./security.mjs";

const id = (o) => `${o.kind}/${o.metadata?.name}`;
const HOST = "kubernetes.io/hostname";

// opts.claims: { NAME: "rwo" | "rwx" } the access the named rendered claims must have.
export function checkClaims(docs, workloads, opts, problem) {
  const claims = docs.filter((o) => o.kind === "PersistentVolumeClaim");
  const release = workloads[0]?.metadata.labels?.["app.kubernetes.io/instance"];
  for (const [name, want] of Object.entries(opts.claims ?? {})) {
    const c = claims.find((x) => x.metadata.name === name);
    if (!c) { problem("chart", `claim ${name} not rendered`); continue; }
    const rwx = (c.spec.accessModes ?? []).includes("ReadWriteMany");
    if ((want === "rwx") !== rwx) problem(id(c), `access modes ${c.spec.accessModes}, expected ${want === "rwx" ? "ReadWriteMany" : "ReadWriteOnce"}`);
  }
  for (const c of claims) {
    const modes = c.spec.accessModes ?? [];
    if (!modes.length) problem(id(c), "no access modes");
    const users = workloads.filter((w) => (w.spec.template.spec.volumes ?? []).some((v) => v.persistentVolumeClaim?.claimName === c.metadata.name));
    if (modes.includes("ReadWriteMany")) {
      if (c.spec.storageClassName === undefined) problem(id(c), "ReadWriteMany on the cluster's default class, which on stock clusters provides ReadWriteOnce only");
      continue;
    }
    for (const w of users) {
      const t = w.spec.template;
      const terms = t.spec.affinity?.podAffinity?.requiredDuringSchedulingIgnoredDuringExecution ?? [];
      const term = terms.find((x) => x.topologyKey === HOST && users.every((u) => selects(x.labelSelector, u.spec.template.metadata.labels)));
      if (!term) {
        problem(id(w), `mounts ${modes.join(",")} claim ${c.metadata.name} without a required podAffinity (${HOST}) that selects every pod mounting it (${users.map(id).join(", ")})`);
        continue;
      }
      if (term.labelSelector?.matchLabels?.["app.kubernetes.io/instance"] !== release) problem(id(w), `its podAffinity for claim ${c.metadata.name} is not limited to this release's pods`);
      const others = workloads.filter((o) => !users.includes(o) && selects(term.labelSelector, o.spec.template.metadata.labels));
      if (others.length) problem(id(w), `its podAffinity for claim ${c.metadata.name} also pulls ${others.map(id).join(", ")}, which do not mount it`);
    }
  }
}
