{{/*
The chart's name, overridable with nameOverride.
*/}}
{{- define "dtrain.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The full name: <release>-<chart> unless the release name already holds the chart name.
Cut to 45 characters: a pod's hostname is <fullname>-<component>-<index> and must stay
within 63 (component "scheduler" is the longest, with room for a 4-digit index).
*/}}
{{- define "dtrain.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 45 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 45 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 45 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
Chart name and version, for the helm.sh/chart label.
*/}}
{{- define "dtrain.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Labels on every object.
*/}}
{{- define "dtrain.labels" -}}
helm.sh/chart: {{ include "dtrain.chart" . }}
{{ include "dtrain.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: dtrain
{{- end }}

{{/*
Labels that select the release's pods.
*/}}
{{- define "dtrain.selectorLabels" -}}
app.kubernetes.io/name: {{ include "dtrain.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
Per-component names and labels. Call with (dict "ctx" $ "component" "worker").
*/}}
{{- define "dtrain.componentName" -}}
{{- printf "%s-%s" (include "dtrain.fullname" .ctx) .component }}
{{- end }}

{{- define "dtrain.componentLabels" -}}
{{ include "dtrain.labels" .ctx }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "dtrain.componentSelectorLabels" -}}
{{ include "dtrain.selectorLabels" .ctx }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/*
The ServiceAccount the pods run as.
*/}}
{{- define "dtrain.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "dtrain.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
The image, for a component that may override it: (dict "ctx" $ "override" .Values.worker.image).
*/}}
{{- define "dtrain.image" -}}
{{- $o := .override | default dict }}
{{- $repo := $o.repository | default .ctx.Values.image.repository }}
{{- with (.ctx.Values.global | default dict).imageRegistry }}{{ $repo = printf "%s/%s" (trimSuffix "/" .) $repo }}{{ end }}
{{- $tag := $o.tag | default .ctx.Values.image.tag | default .ctx.Chart.AppVersion }}
{{- printf "%s:%s" $repo $tag }}
{{- end }}

{{/*
The scheduler's stable DNS name: pod 0 of its indexed Job under its headless Service.
*/}}
{{- define "dtrain.schedulerHost" -}}
{{- include "dtrain.podHost" (dict "ctx" . "component" "scheduler" "index" 0) }}
{{- end }}

{{/*
Orchestrators (README.md "Orchestrators"). orchestrator jobs: one Indexed Job per role,
named <fullname>-<component>, whose pod <index> is <job>-<index> under the role's headless
Service <fullname>-<component>. orchestrator jobset: one JobSet <fullname> whose replicated
job <rjob> (scheduler, servers, workers) makes the one Job <fullname>-<rjob>-0, whose pod
<index> is <fullname>-<rjob>-0-<index> under the JobSet's headless Service <fullname>.
*/}}
{{- define "dtrain.replicatedJob" -}}
{{- get (dict "scheduler" "scheduler" "server" "servers" "worker" "workers") .component -}}
{{- end }}

{{/*
The headless Service a role's pods are under (their subdomain). Call with (dict "ctx" $ "component" "worker").
*/}}
{{- define "dtrain.subdomain" -}}
{{- if eq .ctx.Values.orchestrator "jobset" -}}
{{- include "dtrain.fullname" .ctx -}}
{{- else -}}
{{- include "dtrain.componentName" . -}}
{{- end -}}
{{- end }}

{{/*
A training pod's stable DNS name. Call with (dict "ctx" $ "component" "worker" "index" 3).
*/}}
{{- define "dtrain.podHost" -}}
{{- $v := .ctx.Values -}}
{{- $host := printf "%s-%d" (include "dtrain.componentName" .) (int .index) -}}
{{- if eq $v.orchestrator "jobset" -}}
{{- $host = printf "%s-%s-0-%d" (include "dtrain.fullname" .ctx) (include "dtrain.replicatedJob" .) (int .index) -}}
{{- end -}}
{{- printf "%s.%s.%s.svc.%s" $host (include "dtrain.subdomain" .) .ctx.Release.Namespace $v.clusterDomain -}}
{{- end }}

{{/*
The GPUs a worker passes as --gpus: 0,...,worker.gpus-1, the container's devices as CUDA
numbers them (the device plugin exposes exactly the allotted GPUs).
*/}}
{{- define "dtrain.gpuList" -}}
{{- $ids := list -}}
{{- range $i := until (int .Values.worker.gpus) }}{{ $ids = append $ids (toString $i) }}{{ end -}}
{{- join "," $ids -}}
{{- end }}

{{/*
Extra list values, the chart-wide one then the role's: (dict "ctx" $ "role" .Values.worker
"key" "extraEnv"). Empty when both are.
*/}}
{{- define "dtrain.extraList" -}}
{{- $l := concat (index .ctx.Values .key | default list) (index .role .key | default list) -}}
{{- with $l }}{{ toYaml . }}{{ end -}}
{{- end }}

{{/*
Labels of the training workload (each Job, or the JobSet): Kueue's queue.
*/}}
{{- define "dtrain.jobLabels" -}}
{{- with .Values.gang.kueue.queueName -}}
kueue.x-k8s.io/queue-name: {{ . | quote }}
{{- end -}}
{{- end }}

{{/*
Annotations of the training workload: its job id and the hashes of the values its pod
templates are made of, which `helm upgrade` compares (dtrain.checkUpgrade).
*/}}
{{- define "dtrain.jobAnnotations" -}}
dtrain.io/job-id: {{ include "dtrain.jobId" . | quote }}
dtrain.io/training-values-sha256: {{ include "dtrain.trainingHashes" . | quote }}
{{- end }}

{{/*
The scheduler for training pods: volcano with gang.volcano, else schedulerName.
*/}}
{{- define "dtrain.schedulerName" -}}
{{- if and .training .ctx.Values.gang.volcano.enabled -}}
volcano
{{- else -}}
{{- .ctx.Values.schedulerName -}}
{{- end -}}
{{- end }}

{{- define "dtrain.podGroupName" -}}
{{- include "dtrain.fullname" . -}}
{{- end }}

{{- define "dtrain.schedulerAddr" -}}
{{- printf "%s:%d" (include "dtrain.schedulerHost" .) (int .Values.scheduler.port) }}
{{- end }}

{{- define "dtrain.claimName" -}}
{{- $claim := index .ctx.Values.persistence .volume }}
{{- $claim.existingClaim | default (printf "%s-%s" (include "dtrain.fullname" .ctx) .volume) }}
{{- end }}

{{/*
The model prefix on the checkpoint volume, shared by worker 0 (writes) and inference (reads).
*/}}
{{- define "dtrain.modelPrefix" -}}
{{- printf "%s/%s" (trimSuffix "/" .Values.persistence.checkpoints.mountPath) .Values.train.modelName }}
{{- end }}

{{- define "dtrain.dataDir" -}}
{{- printf "%s/%s" (trimSuffix "/" .Values.persistence.data.mountPath) .Values.persistence.data.dir }}
{{- end }}

{{/*
Elastic workers (values elastic.*): "MIN:MAX", or empty when the job is not elastic.
*/}}
{{- define "dtrain.elastic" -}}
{{- $e := .Values.elastic | default dict -}}
{{- if gt (int $e.maxWorkers) 0 -}}
{{- printf "%d:%d" (int $e.minWorkers) (int $e.maxWorkers) -}}
{{- end -}}
{{- end }}

{{/*
The most workers the job may run at once: elastic.maxWorkers in an elastic job (the worker
Job may be scaled up to it), else workers.
*/}}
{{- define "dtrain.mostWorkers" -}}
{{- if include "dtrain.elastic" . -}}
{{- int .Values.elastic.maxWorkers -}}
{{- else -}}
{{- int .Values.workers -}}
{{- end -}}
{{- end }}

{{/*
Environment every training process reads (common/cluster_flags.h): where the scheduler is,
how big the job is, which kvstore mode. Call with (dict "ctx" $ "role" "worker").
*/}}
{{- define "dtrain.clusterEnv" -}}
{{- $v := .ctx.Values -}}
- name: DTRAIN_ROLE
  value: {{ .role | quote }}
- name: DTRAIN_SCHEDULER_ADDR
  value: {{ include "dtrain.schedulerAddr" .ctx | quote }}
- name: DTRAIN_NUM_WORKERS
  value: {{ $v.workers | quote }}
- name: DTRAIN_NUM_SERVERS
  value: {{ $v.servers | quote }}
- name: DTRAIN_KV_STORE
  value: {{ $v.kvStore | quote }}
- name: DTRAIN_REGISTER_TIMEOUT
  value: {{ $v.train.registerTimeout | quote }}
{{- if gt (int $v.replication) 1 }}
# Copies of each key range, told to every role: workers push to every copy, and the
# scheduler refuses a node that says another number. Unset: 1.
- name: DTRAIN_REPLICATION
  value: {{ $v.replication | quote }}
{{- end }}
{{- with include "dtrain.elastic" .ctx }}
# Elastic workers, told to every role: the scheduler refuses a node that says otherwise.
# DTRAIN_NUM_WORKERS stays the count the job started with (the lr rule's base).
- name: DTRAIN_ELASTIC
  value: {{ . | quote }}
{{- end }}
# Recovery: one id for every pod of the release (another job's processes are refused), and
# how long the others wait for a dead worker's replacement.
- name: DTRAIN_JOB_ID
  value: {{ include "dtrain.jobId" .ctx | quote }}
- name: DTRAIN_REJOIN_TIMEOUT
  value: {{ $v.recovery.rejoinTimeout | quote }}
{{- if ne .role "scheduler" }}
# The rank is the pod's index in its Job, as a StatefulSet's ordinal would be.
- name: DTRAIN_RANK
  valueFrom:
    fieldRef:
      fieldPath: metadata.annotations['batch.kubernetes.io/job-completion-index']
# Others reach a server or worker at its pod IP (told to them by the scheduler).
- name: DTRAIN_NODE_HOST
  valueFrom:
    fieldRef:
      fieldPath: status.podIP
- name: DTRAIN_SYNC_TIMEOUT
  value: {{ $v.train.syncTimeout | quote }}
{{- with $v.train.tcpCongestion }}
- name: DTRAIN_TCP_CONGESTION
  value: {{ . | quote }}
{{- end }}
{{- end }}
{{ include "dtrain.metricsEnv" .ctx }}
{{- end }}

{{- define "dtrain.metricsEnv" -}}
{{- if .Values.metrics.enabled -}}
- name: DTRAIN_METRICS_PORT
  value: {{ .Values.metrics.port | quote }}
{{- end }}
{{- end }}

{{- define "dtrain.metricsPort" -}}
{{- if .Values.metrics.enabled -}}
- name: metrics
  containerPort: {{ .Values.metrics.port }}
  protocol: TCP
{{- end }}
{{- end }}

{{/*
Pod annotations: Prometheus's conventional scrape annotations plus the component's own.
Call with (dict "ctx" $ "extra" .Values.worker.podAnnotations).
*/}}
{{- define "dtrain.podAnnotations" -}}
{{- $a := dict }}
{{- if and .ctx.Values.metrics.enabled .ctx.Values.metrics.podAnnotations }}
{{- $_ := set $a "prometheus.io/scrape" "true" }}
{{- $_ := set $a "prometheus.io/port" (toString .ctx.Values.metrics.port) }}
{{- $_ := set $a "prometheus.io/path" "/metrics" }}
{{- end }}
{{- if and .training .ctx.Values.gang.volcano.enabled }}
{{- $_ := set $a "scheduling.k8s.io/group-name" (include "dtrain.podGroupName" .ctx) }}
{{- end }}
{{- $a = merge (deepCopy (.extra | default dict)) $a }}
{{- with $a -}}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/*
Pod-level settings shared by every pod: service account, security, pull secrets, placement.
Call with (dict "ctx" $ "role" .Values.worker "training" true); "training" for the
scheduler, server and worker pods (the gang), not inference.
*/}}
{{- define "dtrain.podCommon" -}}
serviceAccountName: {{ include "dtrain.serviceAccountName" .ctx }}
automountServiceAccountToken: false
enableServiceLinks: false
{{- $pull := .ctx.Values.imagePullSecrets | default list }}
{{- range ((.ctx.Values.global | default dict).imagePullSecrets | default list) }}
{{- $pull = append $pull (ternary (dict "name" .) . (kindIs "string" .)) }}
{{- end }}
{{- with $pull }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with include "dtrain.schedulerName" . }}
schedulerName: {{ . }}
{{- end }}
{{- with (.role.priorityClassName | default .ctx.Values.priorityClassName) }}
priorityClassName: {{ . }}
{{- end }}
{{- with .role.runtimeClassName }}
runtimeClassName: {{ . }}
{{- end }}
{{- with .role.topologySpreadConstraints }}
topologySpreadConstraints:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .ctx.Values.podSecurityContext }}
securityContext:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .role.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .role.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with include "dtrain.affinity" . }}
affinity:
  {{- . | nindent 2 }}
{{- end }}
{{- end }}

{{/*
A pod's affinity: the role's own, plus, for each ReadWriteOnce claim the pod mounts, a
required podAffinity to the other pods that mount it (dtrain.nodeSharedClaims): such a
claim attaches to one node at a time, so all its pods must run there. The first of them
may go anywhere (Kubernetes schedules a pod whose terms match no pod but itself), the
others follow it. Call with podCommon's dict plus "component".
*/}}
{{- define "dtrain.affinity" -}}
{{- $aff := deepCopy (.role.affinity | default dict) -}}
{{- range $claim := splitList "," (include "dtrain.nodeSharedClaims" .) -}}
{{- if $claim -}}
{{- $pa := $aff.podAffinity | default dict -}}
{{- $terms := $pa.requiredDuringSchedulingIgnoredDuringExecution | default list -}}
{{- $sel := dict "app.kubernetes.io/instance" $.ctx.Release.Name (printf "dtrain.io/mounts-%s" $claim) "true" -}}
{{- $term := dict "labelSelector" (dict "matchLabels" $sel) "topologyKey" "kubernetes.io/hostname" -}}
{{- $_ := set $pa "requiredDuringSchedulingIgnoredDuringExecution" (append $terms $term) -}}
{{- $_ := set $aff "podAffinity" $pa -}}
{{- end -}}
{{- end -}}
{{- with $aff }}{{ toYaml . }}{{ end -}}
{{- end }}

{{/*
The pod labels that mark the ReadWriteOnce claims a pod mounts (dtrain.affinity selects them).
Call with (dict "ctx" $ "component" "worker").
*/}}
{{- define "dtrain.claimLabels" -}}
{{- $l := list -}}
{{- range $claim := splitList "," (include "dtrain.nodeSharedClaims" .) -}}
{{- if $claim }}{{ $l = append $l (printf "dtrain.io/mounts-%s: \"true\"" $claim) }}{{ end -}}
{{- end -}}
{{- join "\n" $l -}}
{{- end }}

{{/*
"true" when the workers read the data set from a claim (persistence.data.existingClaim,
storageClassName or accessModes set); otherwise from the image, copied by the seed-data
init container into an emptyDir of each worker pod.
*/}}
{{- define "dtrain.dataOnClaim" -}}
{{- $d := .Values.persistence.data -}}
{{- if or $d.existingClaim $d.storageClassName $d.accessModes -}}
true
{{- end -}}
{{- end }}

{{/*
A claim's access modes, comma-separated: persistence.<volume>.accessModes, else
ReadWriteMany for the data claim, an existing claim or a named class (NFS, CephFS: the
classes one names for sharing), else ReadWriteOnce: the cluster's default class, which
on stock clusters (local-path, hostpath, cloud block disks) provides nothing else.
Call with (dict "ctx" $ "volume" "checkpoints").
*/}}
{{- define "dtrain.claimAccessModes" -}}
{{- $c := index .ctx.Values.persistence .volume -}}
{{- if $c.accessModes -}}
{{- join "," $c.accessModes -}}
{{- else if or (eq .volume "data") $c.existingClaim $c.storageClassName -}}
ReadWriteMany
{{- else -}}
ReadWriteOnce
{{- end -}}
{{- end }}

{{/*
The claims a component's pods mount, comma-separated: the workers the data claim (when
the data set is on one) and the checkpoints, inference the checkpoints, the servers the
claim their snapshots go to. Call with (dict "ctx" $ "component" "worker").
*/}}
{{- define "dtrain.claimsOf" -}}
{{- $v := .ctx.Values -}}
{{- $l := list -}}
{{- if eq .component "worker" -}}
{{- if eq (include "dtrain.dataOnClaim" .ctx) "true" }}{{ $l = append $l "data" }}{{ end -}}
{{- $l = append $l "checkpoints" -}}
{{- else if eq .component "inference" -}}
{{- $l = append $l "checkpoints" -}}
{{- else if and (eq .component "server") (gt (int $v.snapshotEvery) 0) (ne $v.server.snapshotVolume "emptyDir") -}}
{{- $l = append $l (ternary "checkpoints" "snapshots" (eq $v.server.snapshotVolume "checkpoints")) -}}
{{- end -}}
{{- join "," $l -}}
{{- end }}

{{/*
Those of dtrain.claimsOf that are not ReadWriteMany: the pods that mount one share a node.
*/}}
{{- define "dtrain.nodeSharedClaims" -}}
{{- $out := list -}}
{{- range $claim := splitList "," (include "dtrain.claimsOf" .) -}}
{{- if and $claim (not (has "ReadWriteMany" (splitList "," (include "dtrain.claimAccessModes" (dict "ctx" $.ctx "volume" $claim))))) -}}
{{- $out = append $out $claim -}}
{{- end -}}
{{- end -}}
{{- join "," $out -}}
{{- end }}

{{/*
The job's id (DTRAIN_JOB_ID), the same in every pod of the release: recovery.jobId, else
<release>-<8 random characters>. Made once per rendering: the root chart's templates share
one .Values, so the first call keeps it there for the others. `helm upgrade` reads it back
from the scheduler Job or the JobSet (lookup: its dtrain.io/job-id annotation, or for a Job
of an older chart its scheduler's environment), so that an upgrade leaves the Jobs, which
are immutable, as they are; `helm template` and an install make a new one.
*/}}
{{- define "dtrain.jobId" -}}
{{- $r := .Values.recovery -}}
{{- if $r.jobId -}}
{{- $r.jobId -}}
{{- else -}}
{{- if not (hasKey $r "madeJobId") -}}
{{- $job := include "dtrain.existingWorkload" . | fromJson -}}
{{- $id := dig "metadata" "annotations" "dtrain.io/job-id" "" $job -}}
{{- range (dig "spec" "template" "spec" "containers" list $job) -}}
{{- range (.env | default list) -}}
{{- if eq .name "DTRAIN_JOB_ID" }}{{ $id = .value }}{{ end -}}
{{- end -}}
{{- end -}}
{{- $_ := set $r "madeJobId" ($id | default (printf "%s-%s" (.Release.Name | trunc 55 | trimSuffix "-") (randAlphaNum 8 | lower))) -}}
{{- end -}}
{{- $r.madeJobId -}}
{{- end -}}
{{- end }}

{{/*
Job-level settings. Call with (dict "ctx" $ "completions" N "restartable" true), and
"maxFailedIndexes" M for a role that can go on without M of its indexes (default 0).

Restartable roles (workers, the scheduler, servers whose shard outlives the pod) have a pod
whose process died replaced in place:
the same index, so the same rank, hostname and DNS name (docs/recovery.md). Kubernetes
>= 1.29 (backoffLimitPerIndex beta, on by default; GA in 1.33; podFailurePolicy GA in 1.31):
- a pod Kubernetes took away (preemption, drain, API eviction, taint eviction, node loss:
  condition DisruptionTarget) is replaced and not counted, whatever its process said;
- dtrain's own exit statuses, in any container, are decisions that a restart would repeat
  (1: the job failed, this process was fenced by a newer one, it belongs to another job,
  its data or checkpoint is wrong, the image has no data set to seed; 2: bad flags; 127:
  `dtrain run` found no binary): the Job fails;
- anything else, i.e. a process killed by a signal (137: SIGKILL or the OOM killer,
  139: SIGSEGV, 134: SIGABRT), counts against backoffLimitPerIndex;
- one index out of restarts fails the Job (maxFailedIndexes 0: no rank can be left out),
  which stops its other pods. Servers with replication R are the exception: any R-1 of
  them may be gone for good and every key range still has a live copy, so their Job
  fails only when R indexes have (maxFailedIndexes R-1) and the others serve on.
backoffLimit (the Job's total) is the sum of the per-index limits, never the tighter one;
it is also the limit that remains where a cluster drops the per-index fields.
A replacement starts only once the failed pod is gone (podFailurePolicy implies
podReplacementPolicy Failed): never two processes of one rank from Kubernetes.

Servers are restartable like this only where their shard outlives the pod
(dtrain.serversRestartable). Otherwise the restart budget is 0 and there is no policy: a
new server would start with none of its shard, which cannot help, so the first failure of
a server pod, disruptions included, fails its Job at once (and the scheduler the job)
rather than after a back-off spent on a restart that is bound to fail.
*/}}
{{- define "dtrain.jobSpec" -}}
{{- $v := .ctx.Values -}}
completionMode: Indexed
completions: {{ .completions }}
parallelism: {{ .completions }}
{{- if .restartable }}
{{- $n := int $v.recovery.maxRestarts }}
backoffLimitPerIndex: {{ $n }}
maxFailedIndexes: {{ .maxFailedIndexes | default 0 }}
{{- /* Every index the Job may come to hold (an elastic worker Job grows up to maxWorkers)
keeps its own budget: failures of indices scaled away still count against backoffLimit. */}}
backoffLimit: {{ mul $n (.indices | default .completions) }}
podFailurePolicy:
  rules:
    - action: Ignore
      onPodConditions:
        - type: DisruptionTarget
          status: "True"
    - action: FailJob
      onExitCodes:
        operator: In
        values: [1, 2, 127]
{{- else }}
backoffLimit: 0
{{- end }}
{{- if and (eq $v.orchestrator "jobs") (not (kindIs "invalid" $v.job.ttlSecondsAfterFinished)) }}
ttlSecondsAfterFinished: {{ $v.job.ttlSecondsAfterFinished }}
{{- end }}
{{- if not (kindIs "invalid" $v.job.activeDeadlineSeconds) }}
activeDeadlineSeconds: {{ $v.job.activeDeadlineSeconds }}
{{- end }}
{{- end }}

{{/*
"true" when a server pod that fails is replaced in place (empty otherwise): its shard
survives it, on a live copy (replication >= 2: the replacement copies its ranges back) or
in snapshots on a volume that outlives the pod (the job rolls back to them). emptyDir
snapshots die with the pod: alone they do not make servers restartable.
*/}}
{{- define "dtrain.serversRestartable" -}}
{{- $v := .Values -}}
{{- if or (gt (int $v.replication) 1) (and (gt (int $v.snapshotEvery) 0) (ne $v.server.snapshotVolume "emptyDir")) -}}
true
{{- end -}}
{{- end }}

{{/*
Snapshots (snapshotEvery > 0): the server's volume, where it is mounted, and the directory
(DTRAIN_SNAPSHOT_DIR), one per job id so that another install's files are never in the way.
*/}}
{{- define "dtrain.snapshotMountPath" -}}
{{- if eq .Values.server.snapshotVolume "checkpoints" -}}
{{- .Values.persistence.checkpoints.mountPath -}}
{{- else -}}
{{- .Values.persistence.snapshots.mountPath -}}
{{- end -}}
{{- end }}

{{- define "dtrain.snapshotDir" -}}
{{- $base := trimSuffix "/" (include "dtrain.snapshotMountPath" .) -}}
{{- if eq .Values.server.snapshotVolume "checkpoints" -}}
{{- printf "%s/snapshots/%s" $base (include "dtrain.jobId" .) -}}
{{- else -}}
{{- printf "%s/%s" $base (include "dtrain.jobId" .) -}}
{{- end -}}
{{- end }}

{{/*
TLS (tls.enabled; README.md "TLS and network policy"). Every TLS pod mounts one Secret
read-only at dtrain.tlsDir, with keys ca.crt, tls.crt and tls.key: its role's Secret
(<fullname>-<component>-tls) from cert-manager or made by the chart (tls-secrets.yaml),
else tls.existingSecret for the training pods and tls.inferenceSecret for inference.
Call with (dict "ctx" $ "component" "worker").
*/}}
{{- define "dtrain.tlsDir" -}}
/etc/dtrain/tls
{{- end }}

{{/*
"true" when the chart makes the certificates itself: TLS on, and neither a Secret of the
user's nor cert-manager named.
*/}}
{{- define "dtrain.tlsGenerated" -}}
{{- $t := .Values.tls -}}
{{- if and $t.enabled (not $t.existingSecret) (not $t.certManager.enabled) -}}
true
{{- end -}}
{{- end }}

{{- define "dtrain.tlsSecretName" -}}
{{- $t := .ctx.Values.tls -}}
{{- if or $t.certManager.enabled (eq (include "dtrain.tlsGenerated" .ctx) "true") -}}
{{- printf "%s-tls" (include "dtrain.componentName" (dict "ctx" .ctx "component" .component)) -}}
{{- else if eq .component "inference" -}}
{{- $t.inferenceSecret -}}
{{- else -}}
{{- $t.existingSecret -}}
{{- end -}}
{{- end }}

{{/*
The files' paths, told to the process through the environment every dtrain program reads
(common/tls/tls_flags.h): DTRAIN_TLS_CERT, DTRAIN_TLS_KEY, DTRAIN_TLS_CA.
*/}}
{{- define "dtrain.tlsEnv" -}}
{{- $d := include "dtrain.tlsDir" . -}}
# Mutual TLS: this pod's certificate and key, and the job's CA (the Secret mounted at {{ $d }}).
- name: DTRAIN_TLS_CERT
  value: {{ printf "%s/tls.crt" $d | quote }}
- name: DTRAIN_TLS_KEY
  value: {{ printf "%s/tls.key" $d | quote }}
- name: DTRAIN_TLS_CA
  value: {{ printf "%s/ca.crt" $d | quote }}
{{- end }}

{{- define "dtrain.tlsVolumeMount" -}}
- name: tls
  mountPath: {{ include "dtrain.tlsDir" . }}
  readOnly: true
{{- end }}

{{/*
Group-readable (the pods' fsGroup owns the files), as the key is the process's only secret.
*/}}
{{- define "dtrain.tlsVolume" -}}
- name: tls
  secret:
    secretName: {{ include "dtrain.tlsSecretName" . }}
    defaultMode: 0440
{{- end }}

{{/*
The kubelet's native gRPC probe cannot speak TLS (and a cluster server wants a client
certificate in the handshake): with TLS on, the probe is `dtrain health`, the same
grpc.health.v1 Check, run in the container with its own certificate over loopback.
Call with (dict "ctx" $ "port" N "service" "dtrain.v1.Inference").
*/}}
{{- define "dtrain.tlsHealthProbe" -}}
{{- $d := include "dtrain.tlsDir" .ctx -}}
# The kubelet's gRPC probe is plaintext: the same Check by `dtrain health`, over TLS.
exec:
  command:
    - dtrain
    - health
    - --addr=127.0.0.1:{{ .port }}
    {{- with .service }}
    - --service={{ . }}
    {{- end }}
    - --tls-ca={{ $d }}/ca.crt
    - --tls-cert={{ $d }}/tls.crt
    - --tls-key={{ $d }}/tls.key
    - --timeout=4
timeoutSeconds: 5
{{- end }}

{{/*
The job name in the certificates' common names (<role>.<job>): recovery.jobId, else the
release name (not the made job id, which changes with every install).
*/}}
{{- define "dtrain.tlsJob" -}}
{{- .Values.recovery.jobId | default .Release.Name -}}
{{- end }}

{{/*
Checks across values, which values.schema.json cannot express. Included by server.yaml.
*/}}
{{- define "dtrain.checkValues" -}}
{{- $v := .Values -}}
{{- if gt (int $v.replication) (int $v.servers) -}}
{{- fail (printf "replication (%d) must not exceed servers (%d): each copy of a key range lives on another server" (int $v.replication) (int $v.servers)) -}}
{{- end -}}
{{- $t := $v.tls -}}
{{- $cm := $t.certManager -}}
{{- if $t.enabled -}}
{{- if and $t.existingSecret $cm.enabled -}}
{{- fail "tls.existingSecret and tls.certManager.enabled are exclusive: the certificates come from a Secret you made or from cert-manager, not both" -}}
{{- end -}}
{{- if and $t.existingSecret $v.inference.enabled (not $t.inferenceSecret) -}}
{{- fail "tls.existingSecret with inference.enabled needs tls.inferenceSecret (the inference server's ca.crt, tls.crt, tls.key, e.g. from dtrain certs --names node,infer): the training Secret's certificate may join the job and is not given to inference" -}}
{{- end -}}
{{- if and $cm.enabled $t.inferenceSecret -}}
{{- fail "tls.inferenceSecret goes with tls.existingSecret; with tls.certManager.enabled inference gets its own Certificate: remove tls.inferenceSecret" -}}
{{- end -}}
{{- if and (not $t.existingSecret) (not $cm.enabled) $t.inferenceSecret -}}
{{- fail "tls.inferenceSecret goes with tls.existingSecret; without it the chart makes inference's certificate: remove tls.inferenceSecret (or set tls.existingSecret too)" -}}
{{- end -}}
{{- if and $cm.enabled (not $cm.issuerRef.name) -}}
{{- fail "tls.certManager.enabled needs tls.certManager.issuerRef.name: the Issuer or ClusterIssuer that signs the certificates" -}}
{{- end -}}
{{- $cn := printf "scheduler.%s" (include "dtrain.tlsJob" .) -}}
{{- if and (not $t.existingSecret) (gt (len $cn) 64) -}}
{{- fail (printf "tls.%s: the common name %s is %d characters, over X.509's 64; set a shorter recovery.jobId (or release name)" (ternary "certManager" "generated" $cm.enabled) $cn (len $cn)) -}}
{{- end -}}
{{- else -}}
{{- range $k := list "existingSecret" "inferenceSecret" -}}
{{- if index $t $k -}}
{{- fail (printf "tls.%s is set but tls.enabled is false: set tls.enabled=true (or remove tls.%s)" $k $k) -}}
{{- end -}}
{{- end -}}
{{- if $cm.enabled -}}
{{- fail "tls.certManager.enabled is set but tls.enabled is false: set tls.enabled=true (or tls.certManager.enabled=false)" -}}
{{- end -}}
{{- end -}}
{{- include "dtrain.checkGang" . -}}
{{- include "dtrain.checkElastic" . -}}
{{- include "dtrain.checkStorage" . -}}
{{- include "dtrain.checkUpgrade" . -}}
{{- end }}

{{/*
The release's training workload as the cluster has it, as JSON ({} when there is none, and
always under `helm template`, whose lookup finds nothing): the scheduler Job
(orchestrator jobs) or the JobSet (orchestrator jobset; looked up only where the cluster
serves jobset.x-k8s.io/v1alpha2: Helm's lookup of an unknown kind fails). Either is looked
up whatever orchestrator is set now, so that switching it on upgrade is seen.
*/}}
{{- define "dtrain.existingWorkload" -}}
{{- $obj := lookup "batch/v1" "Job" .Release.Namespace (include "dtrain.componentName" (dict "ctx" . "component" "scheduler")) | default dict -}}
{{- if and (not $obj) (.Capabilities.APIVersions.Has "jobset.x-k8s.io/v1alpha2") -}}
{{- $obj = lookup "jobset.x-k8s.io/v1alpha2" "JobSet" .Release.Namespace (include "dtrain.fullname" .) | default dict -}}
{{- end -}}
{{- toJson $obj -}}
{{- end }}

{{/*
A short hash of each top-level value the training pods are made of, as JSON
({"workers": "<12 hex>", ...}); the Jobs and the JobSet carry it as the annotation
dtrain.io/training-values-sha256. Every value counts unless it is known to stay outside
the Jobs' immutable pod templates: inference, networkPolicy, podDisruptionBudget, job (a
Job's ttlSecondsAfterFinished and activeDeadlineSeconds may change; a JobSet's replicated
jobs may not, so with orchestrator jobset activeDeadlineSeconds counts), metrics but for
enabled, port and podAnnotations, tls but for what the pods mount, recovery but for the
job id made at install.
*/}}
{{- define "dtrain.trainingHashes" -}}
{{- $v := .Values -}}
{{- $out := dict -}}
{{- $skip := list "inference" "networkPolicy" "podDisruptionBudget" -}}
{{- if eq $v.orchestrator "jobs" }}{{ $skip = append $skip "job" }}{{ end -}}
{{- /* elastic only once set: a release made before the chart had it hashes the same. */ -}}
{{- if not (include "dtrain.elastic" .) }}{{ $skip = append $skip "elastic" }}{{ end -}}
{{- range $k, $val := $v -}}
{{- if not (has $k $skip) -}}
{{- if eq $k "job" }}{{ $val = pick $val "activeDeadlineSeconds" }}{{ end -}}
{{- if eq $k "metrics" }}{{ $val = pick $val "enabled" "port" "podAnnotations" }}{{ end -}}
{{- if eq $k "recovery" }}{{ $val = omit $val "madeJobId" }}{{ end -}}
{{- if eq $k "tls" }}{{ $val = dict "enabled" $val.enabled "existingSecret" $val.existingSecret "certManager" ($val.certManager | default dict).enabled }}{{ end -}}
{{- $_ := set $out $k (toJson $val | sha256sum | trunc 12) -}}
{{- end -}}
{{- end -}}
{{- toJson $out -}}
{{- end }}

{{/*
`helm upgrade` of a release whose training workload exists: the Jobs' pod templates (and
a JobSet's replicated jobs) are immutable, so a changed training value would fail half-way
through the upgrade with the API server's "field is immutable". Refused here instead,
naming the values, before anything is changed. Not checked when the workload is gone
(finished and deleted by job.ttlSecondsAfterFinished: an upgrade then trains anew) or
carries no hashes (made by an older chart).
*/}}
{{- define "dtrain.checkUpgrade" -}}
{{- $old := include "dtrain.existingWorkload" . | fromJson -}}
{{- $was := dig "metadata" "annotations" "dtrain.io/training-values-sha256" "" $old -}}
{{- if $was -}}
{{- $was = fromJson $was -}}
{{- $now := include "dtrain.trainingHashes" . | fromJson -}}
{{- $changed := list -}}
{{- range $k, $h := $now }}{{ if ne (toString (get $was $k)) (toString $h) }}{{ $changed = append $changed $k }}{{ end }}{{ end -}}
{{- range $k, $h := $was }}{{ if not (hasKey $now $k) }}{{ $changed = append $changed $k }}{{ end }}{{ end -}}
{{- if $changed -}}
{{- fail (printf "helm upgrade cannot change the training of release %s while its %s %s exists: changed %s. A Job's pod template is immutable, so the upgrade would fail half-way. Change only inference.*, metrics.podMonitor/serviceMonitor/grafanaDashboard, networkPolicy.*, podDisruptionBudget.* or %s; to train with new values, helm uninstall %s (the claims are kept) and helm install again (train.loadEpoch resumes from a checkpoint)" .Release.Name $old.kind $old.metadata.name (join ", " (sortAlpha $changed)) (ternary "job.*" "job.ttlSecondsAfterFinished" (eq .Values.orchestrator "jobs")) .Release.Name) -}}
{{- end -}}
{{- end -}}
{{- end }}

{{/*
A created claim that asks for ReadWriteMany (persistence.*.accessModes) with no
storageClassName gets the cluster's default class, which on most clusters (gp2,
standard-rwo, local-path...) provides ReadWriteOnce only: the claim would stay Pending and
the job with it, silently. Refused unless the claim names a class (or "-" with a
pre-provisioned volume) or is an existing claim. By default no claim asks for it
(dtrain.claimAccessModes).
*/}}
{{- define "dtrain.checkStorage" -}}
{{- $v := .Values -}}
{{- $p := $v.persistence -}}
{{- $inference := ternary (int $v.inference.replicas) 0 $v.inference.enabled -}}
{{- $snap := gt (int $v.snapshotEvery) 0 -}}
{{- $w := int (include "dtrain.mostWorkers" .) -}}
{{- $users := dict
  "data" (list $w (printf "%d worker(s)" $w))
  "checkpoints" (list (add $w $inference (ternary (int $v.servers) 0 (and $snap (eq $v.server.snapshotVolume "checkpoints")))) (printf "%d worker(s)%s%s" $w (ternary (printf ", %d inference pod(s)" $inference) "" (gt $inference 0)) (ternary (printf ", %d server(s) writing snapshots" (int $v.servers)) "" (and $snap (eq $v.server.snapshotVolume "checkpoints")))))
  "snapshots" (list (ternary (int $v.servers) 0 (and $snap (eq $v.server.snapshotVolume "claim"))) (printf "%d server(s)" (int $v.servers))) -}}
{{- range $name := list "data" "checkpoints" "snapshots" -}}
{{- $c := index $p $name | default dict -}}
{{- $u := get $users $name -}}
{{- if and (gt (int (index $u 0)) 1) (not $c.existingClaim) (not $c.storageClassName) (has "ReadWriteMany" ($c.accessModes | default list)) -}}
{{- fail (printf "persistence.%s: %d pods mount this claim at once (%s), so it must be ReadWriteMany, but persistence.%s.storageClassName is empty: the cluster's default class, ReadWriteOnce on most clusters, would leave the claim Pending and the job waiting. Set persistence.%s.storageClassName to a class that provides ReadWriteMany (nfs-client, cephfs: deploy/k8s/), or persistence.%s.existingClaim, or persistence.%s.accessModes={ReadWriteOnce} (its pods then share one node)" $name (int (index $u 0)) (index $u 1) $name $name $name $name) -}}
{{- end -}}
{{- end -}}
{{- range $c := list "worker" "server" "inference" -}}
{{- $claims := include "dtrain.nodeSharedClaims" (dict "ctx" $ "component" $c) -}}
{{- $own := dig "podAffinity" "requiredDuringSchedulingIgnoredDuringExecution" list ((index $v $c).affinity | default dict) -}}
{{- if and $claims $own (or (ne $c "inference") $v.inference.enabled) -}}
{{- fail (printf "%s.affinity has required podAffinity terms, and the %s pods mount claim(s) %s, which are not ReadWriteMany and so hold their pods on one node by a required podAffinity of the chart's: Kubernetes lets the first of those pods schedule only when no term of it matches any pod, so they would stay Pending. Make the claim ReadWriteMany (persistence.<claim>.storageClassName, e.g. nfs-client), or make your terms preferredDuringSchedulingIgnoredDuringExecution" $c $c $claims) -}}
{{- end -}}
{{- end -}}
{{- if and (ne (include "dtrain.dataOnClaim" .) "true") (not $p.data.seed) -}}
{{- fail "persistence.data.seed=false leaves the workers no data set: without a data claim (persistence.data.existingClaim or storageClassName) they read the image's, which seed copies in. Set persistence.data.seed=true, or put your data set on a claim" -}}
{{- end -}}
{{- end }}

{{/*
Elastic workers: both bounds or neither, MIN <= MAX, workers within them, and what the
elastic protocol needs (dist_sync: every step merged from one set of workers; the worker
Job scaled in place, which a JobSet's controller would not leave alone).
*/}}
{{- define "dtrain.checkElastic" -}}
{{- $v := .Values -}}
{{- $e := $v.elastic | default dict -}}
{{- $min := int $e.minWorkers -}}
{{- $max := int $e.maxWorkers -}}
{{- if or (gt $min 0) (gt $max 0) -}}
{{- if or (eq $min 0) (eq $max 0) -}}
{{- fail (printf "elastic.minWorkers (%d) and elastic.maxWorkers (%d) go together: set both (MIN >= 1) for an elastic job, or neither" $min $max) -}}
{{- end -}}
{{- if gt $min $max -}}
{{- fail (printf "elastic.minWorkers (%d) is above elastic.maxWorkers (%d)" $min $max) -}}
{{- end -}}
{{- if or (lt (int $v.workers) $min) (gt (int $v.workers) $max) -}}
{{- fail (printf "workers (%d) must be within elastic.minWorkers..elastic.maxWorkers (%d..%d): the job starts with that many" (int $v.workers) $min $max) -}}
{{- end -}}
{{- if ne $v.kvStore "dist_sync" -}}
{{- fail (printf "elastic workers need kvStore dist_sync (every step merged from one set of workers), got %s" $v.kvStore) -}}
{{- end -}}
{{- if ne $v.orchestrator "jobs" -}}
{{- fail "elastic workers need orchestrator jobs: the worker Job is scaled by patching its parallelism and completions, which a JobSet's controller owns" -}}
{{- end -}}
{{- else if ne ($e.lr | default "scale") "scale" -}}
{{- fail "elastic.lr is set but the job is not elastic: set elastic.minWorkers and elastic.maxWorkers (or remove elastic.lr)" -}}
{{- end -}}
{{- end }}

{{/*
Gang scheduling and scheduler values that do not go together.
*/}}
{{- define "dtrain.checkGang" -}}
{{- $v := .Values -}}
{{- $g := $v.gang -}}
{{- if and $g.volcano.enabled $g.kueue.queueName -}}
{{- fail "gang.volcano.enabled and gang.kueue.queueName are exclusive: Kueue admits workloads for the default scheduler, Volcano schedules its own PodGroups; pick one" -}}
{{- end -}}
{{- if and $g.volcano.enabled $v.schedulerName (ne $v.schedulerName "volcano") -}}
{{- fail (printf "gang.volcano.enabled schedules the training pods with volcano, but schedulerName is %s: leave schedulerName empty (or volcano)" $v.schedulerName) -}}
{{- end -}}
{{- if and $g.volcano.queue (not $g.volcano.enabled) -}}
{{- fail "gang.volcano.queue is set but gang.volcano.enabled is false: set gang.volcano.enabled=true (or remove the queue)" -}}
{{- end -}}
{{- if and (gt (int $v.jobset.maxRestarts) 0) (ne $v.orchestrator "jobset") -}}
{{- fail "jobset.maxRestarts is set but orchestrator is jobs: it is the JobSet's failurePolicy; set orchestrator=jobset (per-rank restarts are recovery.maxRestarts)" -}}
{{- end -}}
{{- end }}
