{{/*
The operator's name. Cluster-scoped objects (the webhook configuration, the ClusterRoles)
carry fixed names, so one release per cluster; namespaced objects use the same name.
*/}}
{{- define "nodegroup-operator.name" -}}
nodegroup-operator
{{- end -}}

{{/* Selector labels: stable across upgrades, so they never change a Deployment's selector. */}}
{{- define "nodegroup-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "nodegroup-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Labels of every object: the selector labels, the chart's, and values.commonLabels. */}}
{{- define "nodegroup-operator.labels" -}}
{{ include "nodegroup-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "nodegroup-operator.serviceAccountName" -}}
{{ include "nodegroup-operator.name" . }}
{{- end -}}

{{/* The Service in front of the webhook, and the names its certificate is valid for. */}}
{{- define "nodegroup-operator.webhookService" -}}
{{ include "nodegroup-operator.name" . }}-webhook
{{- end -}}

{{- define "nodegroup-operator.webhookDNSNames" -}}
{{- $svc := include "nodegroup-operator.webhookService" . -}}
{{ $svc }}.{{ .Release.Namespace }}.svc,{{ $svc }}.{{ .Release.Namespace }}.svc.{{ .Values.managementDNS.domain }}
{{- range .Values.webhook.extraDNSNames }},{{ . }}{{ end }}
{{- end -}}

{{- define "nodegroup-operator.metricsService" -}}
{{ include "nodegroup-operator.name" . }}-metrics
{{- end -}}

{{/* Where the webhook server reads tls.crt and tls.key (an emptyDir or the cert-manager Secret). */}}
{{- define "nodegroup-operator.webhookCertDir" -}}
/tmp/k8s-webhook-server/serving-certs
{{- end -}}

{{/* The cert-manager Certificate, for the Issuer and the CA injection annotation. */}}
{{- define "nodegroup-operator.certificate" -}}
{{ include "nodegroup-operator.name" . }}-webhook
{{- end -}}

{{/* The ValidatingWebhookConfiguration; the operator's --webhook-configuration names it. */}}
{{- define "nodegroup-operator.webhookConfiguration" -}}
{{ include "nodegroup-operator.name" . }}
{{- end -}}

{{/* The image, by digest when one is given; the tag defaults to the chart's appVersion. */}}
{{- define "nodegroup-operator.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{/* needsMetrics fails the render when what it is called for (its argument, a values
path) is enabled without the metrics endpoint it reads. */}}
{{- define "nodegroup-operator.needsMetrics" -}}
{{- if not .root.Values.metrics.enabled }}
{{- fail (printf "%s needs metrics.enabled: there is no metrics endpoint to scrape" .what) }}
{{- end }}
{{- end }}
