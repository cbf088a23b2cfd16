{{/*
The objects' name: the release name when it already says stszone, else RELEASE-stszone.
At most 52 characters, so that every suffix below still makes a valid name.
*/}}
{{- define "stszone.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" -}}
{{- else if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 52 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/*
The selector: the same two labels as deploy/base, so that `helm install --take-ownership`
adopts a kustomize install (a Deployment's selector cannot change).
Call with (dict "component" "webhook").
*/}}
{{- define "stszone.selectorLabels" -}}
app.kubernetes.io/name: stszone
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/*
Every object's labels: the selector's, and Helm's four for finding a release's objects.
Call with (dict "ctx" $ "component" "webhook").
*/}}
{{- define "stszone.labels" -}}
{{ include "stszone.selectorLabels" . }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .ctx.Chart.Name .ctx.Chart.Version | replace "+" "_" }}
{{- end -}}

{{/*
The image reference: REPOSITORY:TAG, REPOSITORY@DIGEST (a digest alone pins it; the appVersion
tag is not added), or REPOSITORY:TAG@DIGEST when both are given.
*/}}
{{- define "stszone.image" -}}
{{- with .Values.image -}}
{{- if .digest -}}
{{- .repository -}}{{- with .tag -}}:{{ . }}{{- end -}}@{{ .digest }}
{{- else -}}
{{- printf "%s:%s" .repository (.tag | default $.Chart.AppVersion) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
The Secret holding the serving pair: the provided one, else FULLNAME-tls (mounted, or in mode
self-managed written by stszone itself).
*/}}
{{- define "stszone.tlsSecret" -}}
{{- if eq .Values.certificates.mode "provided" -}}
{{- with .Values.certificates.provided -}}
{{- if not (and .secretName .ca) -}}
{{- fail "certificates.mode is provided, so certificates.provided.secretName must name a kubernetes.io/tls Secret in the release namespace and certificates.provided.ca hold the PEM of the CA that signed it: --set certificates.provided.secretName=NAME --set-file certificates.provided.ca=ca.crt" -}}
{{- end -}}
{{- .secretName -}}
{{- end -}}
{{- else -}}
{{- printf "%s-tls" (include "stszone.fullname" .) -}}
{{- end -}}
{{- end -}}

{{/*
Mode self-managed: the Lease electing the one replica that writes the certificates, and the
name of the Role and ClusterRole allowing it (deploy/base: stszone-certs for all three).
*/}}
{{- define "stszone.certsName" -}}
{{- printf "%s-certs" (include "stszone.fullname" .) -}}
{{- end -}}

{{/* The names the API server may dial for the Service, as a JSON list. */}}
{{- define "stszone.dnsNames" -}}
{{- $service := include "stszone.fullname" . -}}
{{- $ns := .Release.Namespace -}}
{{- list $service (printf "%s.%s" $service $ns) (printf "%s.%s.svc" $service $ns) (printf "%s.%s.svc.cluster.local" $service $ns) | toJson -}}
{{- end -}}

{{/*
"true" when the Prometheus Operator objects are rendered: metrics.enabled true, or auto and the
cluster serves monitoring.coreos.com/v1 (helm template: pass --api-versions to say it does).
*/}}
{{- define "stszone.metrics" -}}
{{- $on := .Values.metrics.enabled -}}
{{- if eq (toString $on) "auto" -}}
{{- $on = .Capabilities.APIVersions.Has "monitoring.coreos.com/v1" -}}
{{- end -}}
{{- if $on -}}true{{- end -}}
{{- end -}}

{{/*
"true" when matchConditions are rendered: asked for, and served by the cluster (beta and on by
default from 1.28; 1.27's API server drops the field, so it is left out there).
*/}}
{{- define "stszone.matchConditions" -}}
{{- if and .Values.webhooks.matchConditions (semverCompare ">=1.28.0-0" .Capabilities.KubeVersion.Version) -}}true{{- end -}}
{{- end -}}

{{/*
The namespace of an optional monitoring object: its own namespace value, else the release's.
Call with (dict "ctx" $ "namespace" .namespace).
*/}}
{{- define "stszone.monitoringNamespace" -}}
{{- .namespace | default .ctx.Release.Namespace -}}
{{- end -}}

{{/*
A Prometheus duration (1h30m, 500ms, 0; values.schema.json checks the form) in milliseconds.
*/}}
{{- define "stszone.milliseconds" -}}
{{- $form := `^(?:([0-9]+)y)?(?:([0-9]+)w)?(?:([0-9]+)d)?(?:([0-9]+)h)?(?:([0-9]+)m)?(?:([0-9]+)s)?(?:([0-9]+)ms)?$` -}}
{{- $ms := 0 -}}
{{- range $i, $unit := list 31536000000 604800000 86400000 3600000 60000 1000 1 -}}
{{- $ms = add $ms (mul (atoi (regexReplaceAll $form $ (printf "${%d}" (add1 $i)))) $unit) -}}
{{- end -}}
{{- $ms -}}
{{- end -}}
