{{/*
The pod templates of the training roles, shared by both orchestrators: the Jobs
(orchestrator: jobs; scheduler.yaml, server.yaml, worker.yaml) and the JobSet's replicated
jobs (orchestrator: jobset; jobset.yaml). Each is a Job's spec.template (metadata and spec).
Call with the root context.
*/}}

{{- define "dtrain.scheduler.podTemplate" -}}
metadata:
  labels:
    {{- include "dtrain.componentSelectorLabels" (dict "ctx" . "component" "scheduler") | nindent 4 }}
    {{- with .Values.scheduler.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- include "dtrain.podAnnotations" (dict "ctx" . "extra" .Values.scheduler.podAnnotations "training" true) | nindent 2 }}
spec:
  restartPolicy: Never
  # Hostname <scheduler pod>-0 under the headless Service: every pod is told this name
  # (dtrain.podHost), and a replacement pod keeps it.
  subdomain: {{ include "dtrain.subdomain" (dict "ctx" . "component" "scheduler") }}
  {{- include "dtrain.podCommon" (dict "ctx" . "role" .Values.scheduler "component" "scheduler" "training" true) | nindent 2 }}
  containers:
    - name: scheduler
      image: {{ include "dtrain.image" (dict "ctx" .) | quote }}
      imagePullPolicy: {{ .Values.image.pullPolicy }}
      command: ["dtrain", "run"]
      args:
        - --exit-grace={{ .Values.scheduler.exitGrace }}
        {{- if include "dtrain.elastic" . }}
        - --elastic-lr={{ .Values.elastic.lr }}
        {{- end }}
      env:
        {{- include "dtrain.clusterEnv" (dict "ctx" . "role" "scheduler") | nindent 8 }}
        - name: DTRAIN_PORT
          value: {{ .Values.scheduler.port | quote }}
        - name: DTRAIN_HEARTBEAT_TIMEOUT
          value: {{ .Values.scheduler.heartbeatTimeout | quote }}
        {{- if .Values.tls.enabled }}
        {{- include "dtrain.tlsEnv" . | nindent 8 }}
        {{- end }}
        {{- with include "dtrain.extraList" (dict "ctx" . "role" .Values.scheduler "key" "extraEnv") }}{{ . | nindent 8 }}{{ end }}
      ports:
        - name: grpc
          containerPort: {{ .Values.scheduler.port }}
          protocol: TCP
        {{- include "dtrain.metricsPort" . | nindent 8 }}
      # grpc.health.v1 (grpc::EnableDefaultHealthCheckService), probed natively by the kubelet.
      readinessProbe:
        {{- if .Values.tls.enabled }}
        {{- include "dtrain.tlsHealthProbe" (dict "ctx" . "port" .Values.scheduler.port) | nindent 8 }}
        {{- else }}
        grpc:
          port: {{ .Values.scheduler.port }}
        {{- end }}
        periodSeconds: 5
      livenessProbe:
        {{- if .Values.tls.enabled }}
        {{- include "dtrain.tlsHealthProbe" (dict "ctx" . "port" .Values.scheduler.port) | nindent 8 }}
        {{- else }}
        grpc:
          port: {{ .Values.scheduler.port }}
        {{- end }}
        initialDelaySeconds: 10
        periodSeconds: 10
        failureThreshold: 6
      {{- with .Values.scheduler.resources }}
      resources:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .Values.securityContext }}
      securityContext:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      volumeMounts:
        - name: tmp
          mountPath: /tmp
        {{- if .Values.tls.enabled }}
        {{- include "dtrain.tlsVolumeMount" . | nindent 8 }}
        {{- end }}
        {{- with include "dtrain.extraList" (dict "ctx" . "role" .Values.scheduler "key" "extraVolumeMounts") }}{{ . | nindent 8 }}{{ end }}
  volumes:
    - name: tmp
      emptyDir: {}
    {{- if .Values.tls.enabled }}
    {{- include "dtrain.tlsVolume" (dict "ctx" . "component" "scheduler") | nindent 4 }}
    {{- end }}
    {{- with include "dtrain.extraList" (dict "ctx" . "role" .Values.scheduler "key" "extraVolumes") }}{{ . | nindent 4 }}{{ end }}
{{- end }}

{{- define "dtrain.server.podTemplate" -}}
{{- $restartable := eq (include "dtrain.serversRestartable" .) "true" -}}
{{- $snapshots := gt (int .Values.snapshotEvery) 0 -}}
{{- $snapVolume := .Values.server.snapshotVolume -}}
metadata:
  labels:
    {{- include "dtrain.componentSelectorLabels" (dict "ctx" . "component" "server") | nindent 4 }}
    {{- with include "dtrain.claimLabels" (dict "ctx" . "component" "server") }}{{ . | nindent 4 }}{{ end }}
    {{- with .Values.server.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- include "dtrain.podAnnotations" (dict "ctx" . "extra" .Values.server.podAnnotations "training" true) | nindent 2 }}
spec:
  restartPolicy: Never
  subdomain: {{ include "dtrain.subdomain" (dict "ctx" . "component" "server") }}
  {{- include "dtrain.podCommon" (dict "ctx" . "role" .Values.server "component" "server" "training" true) | nindent 2 }}
  containers:
    - name: server
      image: {{ include "dtrain.image" (dict "ctx" .) | quote }}
      imagePullPolicy: {{ .Values.image.pullPolicy }}
      command: ["dtrain", "run"]
      env:
        {{- include "dtrain.clusterEnv" (dict "ctx" . "role" "server") | nindent 8 }}
        - name: DTRAIN_PORT
          value: {{ .Values.server.port | quote }}
        {{- if $snapshots }}
        # Shard snapshots: every N steps, the newest two kept, server-<rank>-step-<S>.snapshot.
        - name: DTRAIN_SNAPSHOT_EVERY
          value: {{ .Values.snapshotEvery | quote }}
        - name: DTRAIN_SNAPSHOT_DIR
          value: {{ include "dtrain.snapshotDir" . | quote }}
        {{- end }}
        {{- if .Values.tls.enabled }}
        {{- include "dtrain.tlsEnv" . | nindent 8 }}
        {{- end }}
        {{- with include "dtrain.extraList" (dict "ctx" . "role" .Values.server "key" "extraEnv") }}{{ . | nindent 8 }}{{ end }}
      ports:
        - name: grpc
          containerPort: {{ .Values.server.port }}
          protocol: TCP
        {{- include "dtrain.metricsPort" . | nindent 8 }}
      readinessProbe:
        {{- if .Values.tls.enabled }}
        {{- include "dtrain.tlsHealthProbe" (dict "ctx" . "port" .Values.server.port) | nindent 8 }}
        {{- else }}
        grpc:
          port: {{ .Values.server.port }}
        {{- end }}
        periodSeconds: 5
      livenessProbe:
        {{- if .Values.tls.enabled }}
        {{- include "dtrain.tlsHealthProbe" (dict "ctx" . "port" .Values.server.port) | nindent 8 }}
        {{- else }}
        grpc:
          port: {{ .Values.server.port }}
        {{- end }}
        initialDelaySeconds: 10
        periodSeconds: 10
        failureThreshold: 6
      {{- with .Values.server.resources }}
      resources:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .Values.securityContext }}
      securityContext:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      volumeMounts:
        - name: tmp
          mountPath: /tmp
        {{- if .Values.tls.enabled }}
        {{- include "dtrain.tlsVolumeMount" . | nindent 8 }}
        {{- end }}
        {{- with include "dtrain.extraList" (dict "ctx" . "role" .Values.server "key" "extraVolumeMounts") }}{{ . | nindent 8 }}{{ end }}
        {{- if $snapshots }}
        - name: {{ if eq $snapVolume "checkpoints" }}checkpoints{{ else }}snapshots{{ end }}
          mountPath: {{ include "dtrain.snapshotMountPath" . }}
        {{- end }}
  volumes:
    - name: tmp
      emptyDir: {}
    {{- if .Values.tls.enabled }}
    {{- include "dtrain.tlsVolume" (dict "ctx" . "component" "server") | nindent 4 }}
    {{- end }}
    {{- with include "dtrain.extraList" (dict "ctx" . "role" .Values.server "key" "extraVolumes") }}{{ . | nindent 4 }}{{ end }}
    {{- if $snapshots }}
    {{- if eq $snapVolume "emptyDir" }}
    # Lost with the pod: a replaced server finds no snapshot here.
    - name: snapshots
      emptyDir: {}
    {{- else }}
    - name: {{ if eq $snapVolume "checkpoints" }}checkpoints{{ else }}snapshots{{ end }}
      persistentVolumeClaim:
        claimName: {{ include "dtrain.claimName" (dict "ctx" . "volume" (ternary "checkpoints" "snapshots" (eq $snapVolume "checkpoints"))) }}
    {{- end }}
    {{- end }}
{{- end }}

{{- define "dtrain.worker.podTemplate" -}}
{{- $t := .Values.train -}}
{{- $data := .Values.persistence.data -}}
{{- $ckpt := .Values.persistence.checkpoints -}}
metadata:
  labels:
    {{- include "dtrain.componentSelectorLabels" (dict "ctx" . "component" "worker") | nindent 4 }}
    {{- with include "dtrain.claimLabels" (dict "ctx" . "component" "worker") }}{{ . | nindent 4 }}{{ end }}
    {{- with .Values.worker.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- include "dtrain.podAnnotations" (dict "ctx" . "extra" .Values.worker.podAnnotations "training" true) | nindent 2 }}
spec:
  restartPolicy: Never
  subdomain: {{ include "dtrain.subdomain" (dict "ctx" . "component" "worker") }}
  {{- if include "dtrain.elastic" . }}
  # A worker removed by a scale-down trains on until its leave is committed, then exits 0.
  terminationGracePeriodSeconds: {{ .Values.elastic.leaveGraceSeconds }}
  {{- end }}
  {{- include "dtrain.podCommon" (dict "ctx" . "role" .Values.worker "component" "worker" "training" true) | nindent 2 }}
  {{- if $data.seed }}
  initContainers:
    # Puts the image's Fashion-MNIST on the data volume when the directory is missing
    # or empty. Every worker runs it; the copy goes to a private temp directory that
    # is renamed into place, so concurrent workers cannot leave a half-copied set.
    - name: seed-data
      image: {{ include "dtrain.image" (dict "ctx" . "override" .Values.worker.image) | quote }}
      imagePullPolicy: {{ .Values.image.pullPolicy }}
      command: ["dtrain-seed-data"]
      env:
        - name: DTRAIN_DATA_DIR
          value: {{ include "dtrain.dataDir" . | quote }}
      {{- with .Values.securityContext }}
      securityContext:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      resources:
        requests: {cpu: 100m, memory: 64Mi}
        limits: {memory: 256Mi}
      volumeMounts:
        - name: data
          mountPath: {{ $data.mountPath }}
        - name: tmp
          mountPath: /tmp
  {{- end }}
  containers:
    - name: worker
      image: {{ include "dtrain.image" (dict "ctx" . "override" .Values.worker.image) | quote }}
      imagePullPolicy: {{ .Values.image.pullPolicy }}
      command: ["dtrain", "run"]
      args:
        - --network={{ .Values.network }}
        - --num-epochs={{ $t.numEpochs }}
        - --batch-size={{ $t.batchSize }}
        - --lr={{ $t.lr }}
        - --lr-factor={{ $t.lrFactor }}
        - --lr-step-epochs={{ $t.lrStepEpochs }}
        - --mom={{ $t.mom }}
        - --wd={{ $t.wd }}
        - --optimizer={{ $t.optimizer }}
        - --num-examples={{ $t.numExamples }}
        - --disp-batches={{ $t.dispBatches }}
        - --seed={{ $t.seed }}
        {{- if gt (int $t.loadEpoch) 0 }}
        - --load-epoch={{ $t.loadEpoch }}
        {{- end }}
        {{- if gt (int $t.threads) 0 }}
        - --threads={{ $t.threads }}
        {{- end }}
        - --data-dir={{ include "dtrain.dataDir" . }}
        - --model-prefix={{ include "dtrain.modelPrefix" . }}
        {{- if gt (int .Values.worker.gpus) 0 }}
        # The GPUs the container was given (nvidia.com/gpu below), as CUDA numbers them in it.
        - --gpus={{ include "dtrain.gpuList" . }}
        {{- end }}
        {{- range $t.extraArgs }}
        - {{ . | quote }}
        {{- end }}
      env:
        {{- include "dtrain.clusterEnv" (dict "ctx" . "role" "worker") | nindent 8 }}
        {{- if eq (int $t.threads) 0 }}
        # LibTorch threads = the CPU limit, not the node's core count.
        - name: DTRAIN_THREADS
          valueFrom:
            resourceFieldRef:
              containerName: worker
              resource: limits.cpu
        {{- end }}
        {{- if .Values.tls.enabled }}
        {{- include "dtrain.tlsEnv" . | nindent 8 }}
        {{- end }}
        {{- with include "dtrain.extraList" (dict "ctx" . "role" .Values.worker "key" "extraEnv") }}{{ . | nindent 8 }}{{ end }}
      {{- if .Values.metrics.enabled }}
      ports:
        {{- include "dtrain.metricsPort" . | nindent 8 }}
      {{- end }}
      {{- with .Values.worker.livenessProbe }}
      livenessProbe:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- $res := deepCopy (.Values.worker.resources | default dict) }}
      {{- if gt (int .Values.worker.gpus) 0 }}
      {{- $limits := $res.limits | default dict }}
      {{- $_ := set $limits "nvidia.com/gpu" (int .Values.worker.gpus) }}
      {{- $_ := set $res "limits" $limits }}
      {{- end }}
      {{- with $res }}
      resources:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .Values.securityContext }}
      securityContext:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      volumeMounts:
        - name: data
          mountPath: {{ $data.mountPath }}
          readOnly: true
        - name: checkpoints
          mountPath: {{ $ckpt.mountPath }}
        - name: tmp
          mountPath: /tmp
        {{- if .Values.tls.enabled }}
        {{- include "dtrain.tlsVolumeMount" . | nindent 8 }}
        {{- end }}
        {{- with include "dtrain.extraList" (dict "ctx" . "role" .Values.worker "key" "extraVolumeMounts") }}{{ . | nindent 8 }}{{ end }}
  volumes:
    - name: data
      {{- if eq (include "dtrain.dataOnClaim" .) "true" }}
      persistentVolumeClaim:
        claimName: {{ include "dtrain.claimName" (dict "ctx" . "volume" "data") }}
      {{- else }}
      # The image's data set, copied in by seed-data: every worker has its own, no claim.
      emptyDir:
        sizeLimit: {{ $data.size }}
      {{- end }}
    - name: checkpoints
      persistentVolumeClaim:
        claimName: {{ include "dtrain.claimName" (dict "ctx" . "volume" "checkpoints") }}
    - name: tmp
      emptyDir: {}
    {{- if .Values.tls.enabled }}
    {{- include "dtrain.tlsVolume" (dict "ctx" . "component" "worker") | nindent 4 }}
    {{- end }}
    {{- with include "dtrain.extraList" (dict "ctx" . "role" .Values.worker "key" "extraVolumes") }}{{ . | nindent 4 }}{{ end }}
{{- end }}
