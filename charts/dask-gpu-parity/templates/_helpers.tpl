{{/* Names, labels and small shared pieces. */}}

{{/* The chart name, or nameOverride. */}}
{{- define "dgp.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The release's full name: also the name of both webhook configurations, so that the
out-of-cluster builder (operator/dask_gpu_parity/webhooks.py) and the chart agree when the
release is called dask-gpu-parity.
*/}}
{{- define "dgp.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "dgp.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels that select this release's Pods (component added where it matters). */}}
{{- define "dgp.selectorLabels" -}}
app.kubernetes.io/name: {{ include "dgp.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Labels on every object. */}}
{{- define "dgp.labels" -}}
helm.sh/chart: {{ include "dgp.chart" . }}
{{ include "dgp.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: dask-gpu-parity
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "dgp.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "dgp.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The Secret holding tls.crt/tls.key (and ca.crt) for the webhook server. */}}
{{- define "dgp.tlsSecretName" -}}
{{- printf "%s-tls" (include "dgp.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The cert-manager Certificate whose CA cainjector copies into the webhook configurations. */}}
{{- define "dgp.certificateName" -}}
{{- printf "%s-serving" (include "dgp.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* DNS names of the webhook Service, as the API server dials it. */}}
{{- define "dgp.serviceDNSNames" -}}
{{- $svc := include "dgp.fullname" . }}
{{- $ns := .Release.Namespace }}
{{- list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.%s" $svc $ns .Values.clusterDomain) | toJson }}
{{- end }}

{{- define "dgp.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag }}
{{- if .Values.image.digest }}
{{- printf "%s:%s@%s" .Values.image.repository $tag .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository $tag }}
{{- end }}
{{- end }}

{{- /* The probe image, by the release's tag (and digest when set): the default policy's. */ -}}
{{- define "dgp.probeImage" -}}
{{- $tag := default .Chart.AppVersion .Values.probeImage.tag }}
{{- if .Values.probeImage.digest }}
{{- printf "%s:%s@%s" .Values.probeImage.repository $tag .Values.probeImage.digest }}
{{- else }}
{{- printf "%s:%s" .Values.probeImage.repository $tag }}
{{- end }}
{{- end }}

{{- define "dgp.policyName" -}}
{{- default (include "dgp.fullname" .) .Values.policy.name }}
{{- end }}

{{- /*
The CEL matchConditions of one webhook, for the resource (plural) it admits: the API server calls
the operator only for Dask resources whose workers request an extended resource (a GPU of the
device plugin or of a DRA DeviceClass, whose names CEL cannot look up) and that are not annotated
gpuparity.dask.org/skip=true; a validating webhook of a cluster or job also not for an object
whose scheduler already has a GPU and the verifier (the mutating webhook answered for it). Built
exactly as admission/configurations.py builds them (a test compares); the user's
webhook.matchConditions follow.
*/ -}}
{{- define "dgp.requestsGPU" -}}
{{- $parts := splitList "." (printf "%s.containers" .) -}}
{{- $has := list -}}
{{- range $i, $_ := $parts }}{{ if gt $i 0 }}{{ $has = append $has (printf "has(%s)" (join "." (slice $parts 0 (add1 $i)))) }}{{ end }}{{ end -}}
{{- $gpu := "k.contains('/')" -}}
{{- printf "%s && type(%s.containers) == list && %s.containers.exists(c, type(c) == map && has(c.resources) && type(c.resources) == map && ['limits', 'requests'].exists(s, s in c.resources && type(c.resources[s]) == map && c.resources[s].exists(k, %s)))" (join " && " $has) . . $gpu -}}
{{- end }}

{{- /*
dask-gateway's DaskCluster (resource daskclusters.gateway.dask.org): the pod of a role asks for a
GPU in <role>_extra_container_config (merged into the main container) or in a container of
<role>_extra_pod_config (appended), under spec.config.
*/ -}}
{{- define "dgp.gatewayRequestsGPU" -}}
{{- $resources := printf "object.spec.config.%s_extra_container_config.resources" . -}}
{{- $parts := splitList "." $resources -}}
{{- $has := list -}}
{{- range $i, $_ := $parts }}{{ if gt $i 0 }}{{ $has = append $has (printf "has(%s)" (join "." (slice $parts 0 (add1 $i)))) }}{{ end }}{{ end -}}
{{- $container := printf "%s && type(%s) == map && ['limits', 'requests'].exists(s, s in %s && type(%s[s]) == map && %s[s].exists(k, k.contains('/')))" (join " && " $has) $resources $resources $resources $resources -}}
{{- printf "(%s) || (%s)" $container (include "dgp.requestsGPU" (printf "object.spec.config.%s_extra_pod_config" .)) -}}
{{- end }}

{{- define "dgp.matchConditions" -}}
{{- $gateway := eq .plural "daskclusters.gateway.dask.org" -}}
{{- $workers := index (dict "daskclusters" "object.spec.worker.spec" "daskjobs" "object.spec.cluster.spec.worker.spec" "daskworkergroups" "object.spec.worker.spec" "daskclusters.gateway.dask.org" "") .plural -}}
{{- $skip := "!(has(object.metadata.annotations) && 'gpuparity.dask.org/skip' in object.metadata.annotations && object.metadata.annotations['gpuparity.dask.org/skip'].lowerAscii() == 'true')" -}}
- name: gpu-workers
  expression: {{ ternary (include "dgp.gatewayRequestsGPU" "worker") (include "dgp.requestsGPU" $workers) $gateway | toJson }}
- name: not-opted-out
  expression: {{ $skip | toJson }}
{{- $scheduler := index (dict "daskclusters" "object.spec.scheduler.spec" "daskjobs" "object.spec.cluster.spec.scheduler.spec") .plural -}}
{{- if and .validating $gateway }}
{{- $init := "object.spec.config.scheduler_extra_pod_config.initContainers" }}
{{- $initParts := splitList "." $init }}
{{- $has := list }}
{{- range $i, $_ := $initParts }}{{ if gt $i 0 }}{{ $has = append $has (printf "has(%s)" (join "." (slice $initParts 0 (add1 $i)))) }}{{ end }}{{ end }}
- name: not-verified
  expression: {{ printf "!((%s) && %s && type(%s) == list && %s.exists(c, type(c) == map && has(c.name) && c.name == 'gpu-parity-check'))" (include "dgp.gatewayRequestsGPU" "scheduler") (join " && " $has) $init $init | toJson }}
{{- else if and .validating $scheduler }}
- name: not-verified
  expression: {{ printf "!(%s && has(%s.initContainers) && type(%s.initContainers) == list && %s.initContainers.exists(c, type(c) == map && has(c.name) && c.name == 'gpu-parity-check'))" (include "dgp.requestsGPU" $scheduler) $scheduler $scheduler $scheduler | toJson }}
{{- end }}
{{- with .extra }}
{{ toYaml . }}
{{- end }}
{{- end }}
