{{/*
The chart's name, the selector label app.kubernetes.io/name of the
operator's pods (config/manager uses the same, so a kustomize install and
a Helm install select the same pods).
*/}}
{{- define "podset-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The base of every object name: the release name when it already names the
chart (so release "podset-operator" gives the names config/ uses), else
<release>-<chart>.
*/}}
{{- define "podset-operator.fullname" -}}
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

{{/*
Labels on every object: config/default's part-of label, Helm's own and
commonLabels.
*/}}
{{- define "podset-operator.labels" -}}
app.kubernetes.io/part-of: podset-operator
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
The operator's selector labels.
*/}}
{{- define "podset-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "podset-operator.name" . }}
{{- end }}

{{- define "podset-operator.serviceAccountName" -}}
{{- default (include "podset-operator.fullname" .) .Values.serviceAccount.name }}
{{- end }}

{{/*
The operator's image: repository:tag, with @digest when image.digest is
set (the packaged chart of a release sets it: the digest decides what
runs, the tag says which release it is). global.imageRegistry replaces the
repository's registry, for mirrors.
*/}}
{{- define "podset-operator.image" -}}
{{- $repo := .Values.image.repository }}
{{- with (.Values.global).imageRegistry }}
{{- $repo = printf "%s/%s" (trimSuffix "/" .) (regexReplaceAll "^(localhost|[^/]*[.:][^/]*)/" $repo "") }}
{{- end }}
{{- $ref := printf "%s:%s" $repo (default .Chart.AppVersion .Values.image.tag) }}
{{- with .Values.image.digest }}
{{- $ref = printf "%s@%s" $ref . }}
{{- end }}
{{- $ref }}
{{- end }}

{{/*
The Secret the metrics endpoint serves (tls.crt, tls.key, ca.crt), or ""
for the operator's self-signed certificate.
*/}}
{{- define "podset-operator.metricsCertSecret" -}}
{{- if .Values.metrics.certificate.existingSecret }}
{{- .Values.metrics.certificate.existingSecret }}
{{- else if .Values.metrics.certificate.certManager.enabled }}
{{- include "podset-operator.fullname" . }}-metrics-cert
{{- end }}
{{- end }}

{{/*
Prints a manifest from a file under files/ (copied from config/ by `make
manifests`), one object per YAML document, with the chart's labels added
and, when keep is true, helm.sh/resource-policy: keep.
Call with (dict "root" $ "file" "files/..." "keep" false).
*/}}
{{- define "podset-operator.fromConfig" -}}
{{- range $doc := splitList "\n---\n" ($.root.Files.Get $.file) }}
{{- $obj := fromYaml $doc }}
{{- if $obj }}
{{- $labels := mergeOverwrite (default dict $obj.metadata.labels) (include "podset-operator.labels" $.root | fromYaml) }}
{{- $_ := set $obj.metadata "labels" $labels }}
{{- if $.keep }}
{{- $_ := set $obj.metadata "annotations" (mergeOverwrite (default dict $obj.metadata.annotations) (dict "helm.sh/resource-policy" "keep")) }}
{{- end }}
---
{{ toYaml $obj }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The image pull secrets: global.imagePullSecrets, then imagePullSecrets.
*/}}
{{- define "podset-operator.imagePullSecrets" -}}
{{- $secrets := concat (default list (.Values.global).imagePullSecrets) .Values.imagePullSecrets | uniq }}
{{- with $secrets }}
imagePullSecrets:
{{- toYaml . | nindent 0 }}
{{- end }}
{{- end }}

{{/*
The token Prometheus scrapes with: metrics.serviceMonitor.authorization's
credentials, or the Secret of the chart's scraper service account.
*/}}
{{- define "podset-operator.scrapeCredentials" -}}
{{- with .Values.metrics.serviceMonitor.authorization.credentials }}
{{- toYaml . }}
{{- else }}
name: {{ include "podset-operator.fullname" . }}-metrics-token
key: token
{{- end }}
{{- end }}
