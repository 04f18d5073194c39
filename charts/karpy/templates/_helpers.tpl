{{/* The chart's name. */}}
{{- define "karpy.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The fully qualified app name: the release name when it contains the chart's name. */}}
{{- define "karpy.fullname" -}}
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

{{- define "karpy.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Common labels. */}}
{{- define "karpy.labels" -}}
helm.sh/chart: {{ include "karpy.chart" . }}
{{ include "karpy.selectorLabels" . }}
{{- if .Chart.AppVersion }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.additionalLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Selector labels. */}}
{{- define "karpy.selectorLabels" -}}
app.kubernetes.io/name: {{ include "karpy.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The ServiceAccount's name. */}}
{{- define "karpy.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "karpy.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The controller image. */}}
{{- define "karpy.controller.image" -}}
{{- $tag := default .Chart.AppVersion .Values.controller.image.tag }}
{{- if .Values.controller.image.digest }}
{{- printf "%s:%s@%s" .Values.controller.image.repository $tag .Values.controller.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.controller.image.repository $tag }}
{{- end }}
{{- end }}

{{- define "karpy.controller.containerName" -}}
{{- .Values.controller.containerName | default "controller" }}
{{- end }}

{{/* The cloud provider, checked: one the chart has RBAC for. */}}
{{- define "karpy.cloudProvider" -}}
{{- $p := .Values.cloudProvider | default "" }}
{{- if not (has $p (list "kwok" "aws" "azure")) }}
{{- fail (printf "cloudProvider: %q is not one of kwok, aws, azure" $p) }}
{{- end }}
{{- $p }}
{{- end }}

{{/* FEATURE_GATES: the gates karpy knows, in Karpenter's Name=bool form. */}}
{{- define "karpy.featureGates" -}}
{{- with .Values.settings.featureGates -}}
ReservedCapacity={{ .reservedCapacity }},SpotToSpotConsolidation={{ .spotToSpotConsolidation }},NodeRepair={{ .nodeRepair }},NodeOverlay={{ .nodeOverlay }},StaticCapacity={{ .staticCapacity }},CapacityBuffer={{ .capacityBuffer }}
{{- end }}
{{- end }}

{{/* A copy of .Values.affinity whose pod (anti-)affinity terms without a selector get
the pod's selector labels, as Karpenter's chart does. */}}
{{- define "karpy.affinity" -}}
{{- $affinity := deepCopy .Values.affinity }}
{{- $selector := dict "matchLabels" (fromYaml (include "karpy.selectorLabels" .)) }}
{{- range $kind := list "podAffinity" "podAntiAffinity" }}
{{- with (get $affinity $kind) }}
{{- range $term := (get . "requiredDuringSchedulingIgnoredDuringExecution" | default list) }}
{{- if not (hasKey $term "labelSelector") }}{{- $_ := set $term "labelSelector" $selector }}{{- end }}
{{- end }}
{{- range $weighted := (get . "preferredDuringSchedulingIgnoredDuringExecution" | default list) }}
{{- $term := get $weighted "podAffinityTerm" }}
{{- if and $term (not (hasKey $term "labelSelector")) }}{{- $_ := set $term "labelSelector" $selector }}{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- toYaml $affinity }}
{{- end }}

{{- define "karpy.topologySpreadConstraints" -}}
{{- $out := list }}
{{- $selector := dict "matchLabels" (fromYaml (include "karpy.selectorLabels" .)) }}
{{- range .Values.topologySpreadConstraints }}
{{- $c := deepCopy . }}
{{- if not (hasKey $c "labelSelector") }}{{- $_ := set $c "labelSelector" $selector }}{{- end }}
{{- $out = append $out $c }}
{{- end }}
{{- toYaml $out }}
{{- end }}

{{/* ADDITIONAL_TAGS: settings.tags as k=v,k=v, as Karpenter-Azure's chart passes them. */}}
{{- define "karpy.tags" -}}
{{- $out := list }}
{{- range $k, $v := .Values.settings.tags }}{{- $out = append $out (printf "%s=%s" $k $v) }}{{- end }}
{{- join "," $out }}
{{- end }}

{{/* A variable's value in controller.env (Karpenter's chart has no value of its own for the
     Lease: a user names it through controller.env), or "" when it is not set there. */}}
{{- define "karpy.controllerEnv" -}}
{{- $name := .name -}}
{{- range .root.Values.controller.env -}}
{{- if and (eq .name $name) (hasKey . "value") -}}{{ .value }}{{- end -}}
{{- end -}}
{{- end }}

{{/* The leader-election Lease's name: LEADER_ELECTION_NAME from controller.env, else
     Karpenter's default (sigs.k8s.io/karpenter v1.15.0 pkg/operator/options). */}}
{{- define "karpy.leaderElectionName" -}}
{{- include "karpy.controllerEnv" (dict "root" . "name" "LEADER_ELECTION_NAME") | default "karpenter-leader-election" }}
{{- end }}

{{/* The Lease's namespace: LEADER_ELECTION_NAMESPACE from controller.env, else the
     release's (the pod's SYSTEM_NAMESPACE, where Karpenter's empty default puts it). */}}
{{- define "karpy.leaderElectionNamespace" -}}
{{- include "karpy.controllerEnv" (dict "root" . "name" "LEADER_ELECTION_NAMESPACE") | default .Release.Namespace }}
{{- end }}
