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
Image reference. Call with (dict "ctx" $ "image" .Values.manager.image "name"
"estuary-manager"): image.repository, else <imageRegistry>/<name> (without a
name, image.repository is required); @image.digest when set, else :image.tag,
else :<the chart's appVersion>.
*/}}
{{- define "estuary.image" -}}
{{- $tag := .image.tag | default .ctx.Chart.AppVersion -}}
{{- $repo := .image.repository -}}
{{- if and (not $repo) .name -}}
{{- $repo = printf "%s/%s" (required "imageRegistry is required when an image.repository is empty" .ctx.Values.imageRegistry | trimSuffix "/") .name -}}
{{- end -}}
{{- if .image.digest -}}
{{- printf "%s@%s" (required "image.repository is required" $repo) .image.digest -}}
{{- else -}}
{{- printf "%s:%s" (required "image.repository is required" $repo) (toString $tag) -}}
{{- end -}}
{{- end -}}

{{/*
IP family (4 or 6) of a CIDR.
*/}}
{{- define "estuary.cidrVersion" -}}
{{- if contains ":" . }}6{{ else }}4{{ end -}}
{{- end -}}

{{/*
Names the manager's webhook flags carry: the Service, the Secret the
certificate rotator fills, and both webhook configurations. They must match
what internal/webhook registers (test/chart compares).
*/}}
{{- define "estuary.webhookService" -}}estuary-webhook{{- end -}}
{{- define "estuary.webhookSecret" -}}estuary-webhook-cert{{- end -}}
{{- define "estuary.webhookConfiguration" -}}estuary-webhook{{- end -}}

{{/*
The ClusterRole, granting nothing, that owns the objects the manager
bootstraps, so that uninstalling the release deletes them.
*/}}
{{- define "estuary.bootstrapOwner" -}}estuary-bootstrap{{- end -}}

{{/*
Labels of the objects the manager bootstraps: not Helm's, the manager
creates them.
*/}}
{{- define "estuary.bootstrapLabels" -}}
app.kubernetes.io/managed-by: estuary-manager
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/part-of: estuary
{{- end -}}

{{/*
The default overlay Network and its Subnets, as YAML documents.
*/}}
{{- define "estuary.defaultNetwork" -}}
{{- $n := .Values.defaultNetwork -}}
apiVersion: networking.estuary.io/v1
kind: Network
metadata:
  name: {{ $n.name }}
  labels:
    {{- include "estuary.bootstrapLabels" . | nindent 4 }}
spec:
  type: Overlay
  mode: VXLAN
  netID: {{ int64 $n.netID }}
{{- range $n.subnets }}
---
apiVersion: networking.estuary.io/v1
kind: Subnet
metadata:
  name: {{ required "defaultNetwork.subnets[].name is required" .name }}
  labels:
    {{- include "estuary.bootstrapLabels" $ | nindent 4 }}
spec:
  network: {{ $n.name }}
  range:
    version: {{ include "estuary.cidrVersion" (required "defaultNetwork.subnets[].cidr is required" .cidr) }}
    cidr: {{ .cidr | quote }}
    {{- with .start }}
    start: {{ . | quote }}
    {{- end }}
    {{- with .end }}
    end: {{ . | quote }}
    {{- end }}
    {{- with .gateway }}
    gateway: {{ . | quote }}
    {{- end }}
    {{- with .reservedIPs }}
    reservedIPs:
      {{- toYaml . | nindent 6 }}
    {{- end }}
    {{- with .excludeIPs }}
    excludeIPs:
      {{- toYaml . | nindent 6 }}
    {{- end }}
  natOutgoing: {{ ne .natOutgoing false }}
{{- end }}
{{- end -}}

{{/*
A webhook's clientConfig. Call with (dict "ctx" $ "path" "/...").
*/}}
{{- define "estuary.webhookClient" -}}
clientConfig:
  service:
    namespace: {{ .ctx.Release.Namespace }}
    name: {{ include "estuary.webhookService" .ctx }}
    path: {{ .path }}
    port: 443
{{- end -}}

{{/*
A Network or Subnet validating webhook: create, update and delete, failing
closed. Call with (dict "ctx" $ "name" ... "path" ... "group" ... "resource" ...).
*/}}
{{- define "estuary.validatingHook" -}}
- name: {{ .name }}
  {{- include "estuary.webhookClient" . | nindent 2 }}
  rules:
    - operations: [CREATE, UPDATE, DELETE]
      apiGroups: [{{ .group | quote }}]
      apiVersions: [v1]
      resources: [{{ .resource }}]
      scope: "*"
  failurePolicy: Fail
  sideEffects: None
  admissionReviewVersions: [v1]
  timeoutSeconds: {{ .ctx.Values.webhook.timeoutSeconds }}
{{- end -}}

{{/*
What the pod webhooks share: pod creates outside kube-system and the release
namespace, webhook.pods.failurePolicy, a short timeout.
*/}}
{{- define "estuary.podHook" -}}
{{- $p := .Values.webhook.pods -}}
rules:
  - operations: [CREATE]
    apiGroups: [""]
    apiVersions: [v1]
    resources: [pods]
    scope: "*"
namespaceSelector:
  matchExpressions:
    - key: kubernetes.io/metadata.name
      operator: NotIn
      values: {{ list "kube-system" .Release.Namespace | uniq | toJson }}
{{- $sel := .Values.manager.podSelector | default dict }}
objectSelector:
  {{- with $sel.matchLabels }}
  matchLabels: {{ toJson . }}
  {{- end }}
  matchExpressions:
    - key: networking.estuary.io/webhook
      operator: NotIn
      values: ["disabled"]
    - key: webhook.hybridnet.io/ignore
      operator: NotIn
      values: ["true", "TRUE"]
    {{- range $sel.matchExpressions }}
    - {{ toJson . }}
    {{- end }}
failurePolicy: {{ if has $p.failurePolicy (list "Ignore" "Fail") }}{{ $p.failurePolicy }}{{ else }}{{ fail (printf "webhook.pods.failurePolicy is %q: want Ignore or Fail" $p.failurePolicy) }}{{ end }}
sideEffects: None
admissionReviewVersions: [v1]
timeoutSeconds: {{ $p.timeoutSeconds }}
{{- end -}}

{{/*
Whether /metrics is served over HTTPS to authorized scrapers only
(metrics.secure, on unless set to false): "true" or "false".
*/}}
{{- define "estuary.metricsSecure" -}}
{{- ne (toString ((.Values.metrics).secure)) "false" -}}
{{- end -}}

{{/*
host:port of a listen address, an IPv6 host in brackets. Call with (dict
"host" ... "port" ...); an empty host means every address.
*/}}
{{- define "estuary.hostPort" -}}
{{- $h := toString (.host | default "") -}}
{{- if contains ":" $h }}[{{ $h }}]:{{ .port }}{{ else }}{{ $h }}:{{ .port }}{{ end -}}
{{- end -}}

{{/*
The label that marks the Services of the components' /metrics.
*/}}
{{- define "estuary.metricsServiceLabel" -}}networking.estuary.io/metrics: "true"{{- end -}}

{{/*
manager.podSelector (a label selector: matchLabels, matchExpressions) in
the syntax of the manager's --pod-label-selector (labels.Parse): "k=v",
"k in (a,b)", "k notin (a,b)", "k", "!k", joined by commas. Empty when it
selects every pod.
*/}}
{{- define "estuary.podLabelSelector" -}}
{{- $sel := .Values.manager.podSelector | default dict -}}
{{- $terms := list -}}
{{- range $k, $v := ($sel.matchLabels | default dict) -}}
{{- $terms = append $terms (printf "%s=%s" $k $v) -}}
{{- end -}}
{{- range ($sel.matchExpressions | default list) -}}
{{- if eq .operator "In" -}}
{{- $terms = append $terms (printf "%s in (%s)" .key (join "," .values)) -}}
{{- else if eq .operator "NotIn" -}}
{{- $terms = append $terms (printf "%s notin (%s)" .key (join "," .values)) -}}
{{- else if eq .operator "Exists" -}}
{{- $terms = append $terms .key -}}
{{- else if eq .operator "DoesNotExist" -}}
{{- $terms = append $terms (printf "!%s" .key) -}}
{{- else -}}
{{- fail (printf "manager.podSelector.matchExpressions: operator %q: want In, NotIn, Exists or DoesNotExist" .operator) -}}
{{- end -}}
{{- end -}}
{{- join "," $terms -}}
{{- end -}}

{{/*
A component's extra environment (a list of EnvVars) as YAML list items,
failing on a name the chart sets itself or a name given twice. Call with
(dict "value" "daemon.extraEnv" "env" .Values.daemon.extraEnv "own" (list
"NODE_NAME")).
*/}}
{{- define "estuary.extraEnv" -}}
{{- $seen := list -}}
{{- range $i, $e := .env -}}
{{- $name := required (printf "%s[%d].name is required" $.value $i) $e.name -}}
{{- if has $name $.own -}}
{{- fail (printf "%s[%d]: %s is set by the chart itself" $.value $i $name) -}}
{{- end -}}
{{- if has $name $seen -}}
{{- fail (printf "%s[%d]: %s is given twice" $.value $i $name) -}}
{{- end -}}
{{- $seen = append $seen $name -}}
{{- end -}}
{{- with .env }}{{ toYaml . }}{{ end -}}
{{- end -}}

{{/*
A component's podAnnotations as YAML, failing on a key the chart sets
itself. Call with (dict "value" "manager.podAnnotations" "annotations"
.Values.manager.podAnnotations "own" (list "checksum/bootstrap")).
*/}}
{{- define "estuary.podAnnotations" -}}
{{- range $k, $_ := .annotations -}}
{{- if has $k $.own -}}
{{- fail (printf "%s: %s is set by the chart itself" $.value $k) -}}
{{- end -}}
{{- end -}}
{{- with .annotations }}{{ toYaml . }}{{ end -}}
{{- end -}}
