{{/*
Chart name and version, as used by the helm.sh/chart label.
*/}}
{{- define "estuary.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
Labels of every object. Call with (dict "ctx" $ "component" "manager").
*/}}
{{- define "estuary.labels" -}}
helm.sh/chart: {{ include "estuary.chart" .ctx }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/part-of: estuary
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
{{- with .component }}
app.kubernetes.io/name: estuary-{{ . }}
app.kubernetes.io/component: {{ . }}
{{- end }}
{{- end -}}

{{/*
Selector labels of a workload's pods. Call with the component name.
*/}}
{{- define "estuary.selectorLabels" -}}
app.kubernetes.io/name: estuary-{{ . }}
{{- end -}}

{{/*
Image reference. Call with (dict "ctx" $ "image" .Values.manager.image).
*/}}
{{- define "estuary.image" -}}
{{- $tag := .image.tag | default .ctx.Chart.AppVersion -}}
{{- printf "%s:%s" (required "image.repository is required" .image.repository) (toString $tag) -}}
{{- end -}}

{{/*
IP family (4 or 6) of a CIDR.
*/}}
{{- define "estuary.cidrVersion" -}}
{{- if contains ":" . }}6{{ else }}4{{ end -}}
{{- end -}}
