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
{{- $tag := $o.tag | default .ctx.Values.image.tag | default .ctx.Chart.AppVersion }}
{{- printf "%s:%s" $repo $tag }}
{{- end }}

{{/*
The scheduler's stable DNS name: pod 0 of its indexed Job under its headless Service.
*/}}
{{- define "dtrain.schedulerHost" -}}
{{- $svc := include "dtrain.componentName" (dict "ctx" . "component" "scheduler") }}
{{- printf "%s-0.%s.%s.svc.%s" $svc $svc .Release.Namespace .Values.clusterDomain }}
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
{{- $a = merge (deepCopy (.extra | default dict)) $a }}
{{- with $a -}}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/*
Pod-level settings shared by every pod: service account, security, pull secrets, placement.
Call with (dict "ctx" $ "role" .Values.worker).
*/}}
{{- define "dtrain.podCommon" -}}
serviceAccountName: {{ include "dtrain.serviceAccountName" .ctx }}
automountServiceAccountToken: false
enableServiceLinks: false
{{- with .ctx.Values.imagePullSecrets }}
imagePullSecrets:
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
{{- with .role.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/*
The job's id (DTRAIN_JOB_ID), the same in every pod of the release: recovery.jobId, else
<release>-<8 random characters>. Made once per rendering: the root chart's templates share
one .Values, so the first call keeps it there for the others. `helm upgrade` reads it back
from the scheduler Job (lookup), so that an upgrade leaves the Jobs, which are immutable,
as they are; `helm template` and an install make a new one.
*/}}
{{- define "dtrain.jobId" -}}
{{- $r := .Values.recovery -}}
{{- if $r.jobId -}}
{{- $r.jobId -}}
{{- else -}}
{{- if not (hasKey $r "madeJobId") -}}
{{- $id := "" -}}
{{- $job := lookup "batch/v1" "Job" .Release.Namespace (include "dtrain.componentName" (dict "ctx" . "component" "scheduler")) -}}
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
backoffLimit: {{ mul $n .completions }}
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
{{- if not (kindIs "invalid" $v.job.ttlSecondsAfterFinished) }}
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
Checks across values, which values.schema.json cannot express. Included by server.yaml.
*/}}
{{- define "dtrain.checkValues" -}}
{{- $v := .Values -}}
{{- if gt (int $v.replication) (int $v.servers) -}}
{{- fail (printf "replication (%d) must not exceed servers (%d): each copy of a key range lives on another server" (int $v.replication) (int $v.servers)) -}}
{{- end -}}
{{- end }}
