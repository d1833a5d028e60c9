{{/* Names, labels and the shared pieces of the pod specs. */}}

{{- define "folio.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The release's name prefix (at most 40 characters: pod names add suffixes). */}}
{{- define "folio.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "folio.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels of every object; call with (dict "root" $ "component" "broker"). */}}
{{- define "folio.labels" -}}
helm.sh/chart: {{ include "folio.chart" .root }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
{{ include "folio.selectorLabels" . }}
{{- end -}}

{{- define "folio.selectorLabels" -}}
app.kubernetes.io/name: {{ include "folio.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "folio.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "folio.zookeeperName" -}}{{ include "folio.fullname" . }}-zookeeper{{- end -}}
{{- define "folio.bookieName" -}}{{ include "folio.fullname" . }}-bookie{{- end -}}
{{- define "folio.brokerName" -}}{{ include "folio.fullname" . }}-broker{{- end -}}
{{- define "folio.configName" -}}{{ include "folio.fullname" . }}-config{{- end -}}

{{/* host:port of each ZooKeeper server: the chart's pods by their stable DNS names, or external.servers. */}}
{{- define "folio.zookeeperServers" -}}
{{- if .Values.zookeeper.enabled -}}
{{- $name := include "folio.zookeeperName" . -}}
{{- $servers := list -}}
{{- range $i := until (int .Values.zookeeper.replicas) -}}
{{- $servers = append $servers (printf "%s-%d.%s-headless.%s.svc.%s:%d" $name $i $name $.Release.Namespace $.Values.clusterDomain (int $.Values.zookeeper.clientPort)) -}}
{{- end -}}
{{- join "," $servers -}}
{{- else -}}
{{- if not .Values.zookeeper.external.servers -}}
{{- fail "zookeeper.enabled is false: set zookeeper.external.servers (host:port of each server)" -}}
{{- end -}}
{{- join "," .Values.zookeeper.external.servers -}}
{{- end -}}
{{- end -}}

{{- define "folio.metadataChroot" -}}
{{- $chroot := default (printf "/folio/%s" (include "folio.fullname" .)) .Values.metadataChroot -}}
{{- if not (hasPrefix "/" $chroot) -}}
{{- fail (printf "metadataChroot %q must start with /" $chroot) -}}
{{- end -}}
{{- $chroot -}}
{{- end -}}

{{/* --metadata-url of every Folio process. */}}
{{- define "folio.metadataUrl" -}}
zk://{{ include "folio.zookeeperServers" . }}{{ include "folio.metadataChroot" . }}
{{- end -}}

{{/* The environment every Folio container gets: its pod's name and namespace (for --advertised-address). */}}
{{- define "folio.podEnv" -}}
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
{{- end -}}

{{/* The token verification flag (security.authToken.*), bookies and brokers alike. */}}
{{- define "folio.tokenKeyArg" -}}
{{- if .Values.security.authToken.publicKey }}
- --auth-token-public-key-file=/etc/folio/auth/{{ .Values.security.authToken.key }}
{{- else }}
- --auth-token-secret-file=/etc/folio/auth/{{ .Values.security.authToken.key }}
{{- end }}
{{- end -}}

{{/*
Security flags of a bookie: TLS with client certificates required (only holders of
a certificate of the Secret's CA, the brokers, get in) and, with tokens, only the
brokers' role (security.authToken.brokerRole) may call. Its auto-recovery worker
reaches the other bookies as a broker does: with its certificate and the brokers'
token (brokerTokenSecretName, mounted in bookies too).
*/}}
{{- define "folio.bookieSecurityArgs" -}}
{{- if .Values.security.tls.enabled }}
- --tls-cert=/etc/folio/tls/tls.crt
- --tls-key=/etc/folio/tls/tls.key
- --tls-ca=/etc/folio/tls/ca.crt
{{- end }}
{{- if .Values.security.authToken.enabled }}
{{- include "folio.tokenKeyArg" . }}
- --super-users={{ .Values.security.authToken.brokerRole }}
- --auto-recovery-token-file=/etc/folio/broker-token/{{ .Values.security.authToken.brokerTokenKey }}
{{- end }}
{{- end -}}

{{/*
Security flags of a broker: its API over TLS (client certificates only with
security.tls.requireClientCert), the bookies it finds in ZooKeeper reached over
TLS with its certificate and, with tokens, its own token (brokerTokenSecretName);
the other brokers are called the same way (--peer-*: transactions across brokers),
so the brokers' role is one of their super-users.
*/}}
{{- define "folio.brokerSecurityArgs" -}}
{{- if .Values.security.tls.enabled }}
- --tls-cert=/etc/folio/tls/tls.crt
- --tls-key=/etc/folio/tls/tls.key
{{- if .Values.security.tls.requireClientCert }}
- --tls-ca=/etc/folio/tls/ca.crt
{{- end }}
- --bookie-tls-ca=/etc/folio/tls/ca.crt
- --bookie-tls-cert=/etc/folio/tls/tls.crt
- --bookie-tls-key=/etc/folio/tls/tls.key
- --peer-tls-ca=/etc/folio/tls/ca.crt
{{- end }}
{{- if .Values.security.authToken.enabled }}
{{- include "folio.tokenKeyArg" . }}
{{- /* The brokers' role calls the other brokers (transactions across brokers). */}}
- --super-users={{ with .Values.security.authToken.superUsers }}{{ . }},{{ end }}{{ .Values.security.authToken.brokerRole }}
- --bookie-token-file=/etc/folio/broker-token/{{ .Values.security.authToken.brokerTokenKey }}
- --peer-token-file=/etc/folio/broker-token/{{ .Values.security.authToken.brokerTokenKey }}
{{- end }}
{{- end -}}

{{/* Mounts of the security Secrets; call with (dict "root" $ "broker" true|false). */}}
{{- define "folio.securityVolumeMounts" -}}
{{- if .root.Values.security.tls.enabled }}
- name: tls
  mountPath: /etc/folio/tls
  readOnly: true
{{- end }}
{{- if .root.Values.security.authToken.enabled }}
- name: auth-token
  mountPath: /etc/folio/auth
  readOnly: true
- name: broker-token
  mountPath: /etc/folio/broker-token
  readOnly: true
{{- end }}
{{- end -}}

{{/* Volumes of the security Secrets; call with (dict "root" $ "broker" true|false). */}}
{{- define "folio.securityVolumes" -}}
{{- $security := .root.Values.security -}}
{{- if $security.tls.enabled }}
{{- if not $security.tls.secretName }}
{{- fail "security.tls.enabled: set security.tls.secretName (a Secret with tls.crt, tls.key, ca.crt)" }}
{{- end }}
- name: tls
  secret:
    secretName: {{ $security.tls.secretName }}
    defaultMode: 0440
{{- end }}
{{- if $security.authToken.enabled }}
{{- if not $security.authToken.secretName }}
{{- fail "security.authToken.enabled: set security.authToken.secretName" }}
{{- end }}
{{- if not $security.authToken.brokerTokenSecretName }}
{{- fail "security.authToken.enabled: set security.authToken.brokerTokenSecretName (a Secret with the brokers' token for the bookies, role security.authToken.brokerRole)" }}
{{- end }}
- name: auth-token
  secret:
    secretName: {{ $security.authToken.secretName }}
    defaultMode: 0440
    items:
      - key: {{ $security.authToken.key }}
        path: {{ $security.authToken.key }}
- name: broker-token
  secret:
    secretName: {{ $security.authToken.brokerTokenSecretName }}
    defaultMode: 0440
    items:
      - key: {{ $security.authToken.brokerTokenKey }}
        path: {{ $security.authToken.brokerTokenKey }}
{{- end }}
{{- end -}}

{{/*
Probes of a Folio server on its gRPC API port: the standard health service
(grpc.health.v1), which answers NOT_SERVING while the server drains, so
readiness drops before the process stops. Kubernetes' gRPC probes speak no TLS:
with security.tls.enabled they fall back to a TCP connect.
Call with (dict "root" $ "port" 7070).
*/}}
{{- define "folio.probes" -}}
{{- $check := dict "grpc" (dict "port" (int .port)) -}}
{{- if .root.Values.security.tls.enabled -}}
{{- $check = dict "tcpSocket" (dict "port" (int .port)) -}}
{{- end -}}
startupProbe:
  {{- toYaml $check | nindent 2 }}
  periodSeconds: 5
  failureThreshold: 60
readinessProbe:
  {{- toYaml $check | nindent 2 }}
  periodSeconds: 5
  failureThreshold: 2
livenessProbe:
  {{- toYaml $check | nindent 2 }}
  periodSeconds: 10
  timeoutSeconds: 5
  failureThreshold: 6
{{- end -}}

{{/* Pod anti-affinity by component; call with (dict "root" $ "component" "bookie" "mode" "soft"). */}}
{{- define "folio.antiAffinity" -}}
{{- $term := dict "topologyKey" "kubernetes.io/hostname" "labelSelector" (dict "matchLabels" (fromYaml (include "folio.selectorLabels" .))) -}}
{{- if eq .mode "soft" -}}
affinity:
  podAntiAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 100
        podAffinityTerm:
          {{- toYaml $term | nindent 10 }}
{{- else if eq .mode "hard" -}}
affinity:
  podAntiAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      - {{- toYaml $term | nindent 8 }}
{{- else if ne .mode "none" -}}
{{- fail (printf "podAntiAffinity must be soft, hard or none, not %q" .mode) -}}
{{- end -}}
{{- end -}}

{{/*
Scheduling of a component's pods; call with (dict "root" $ "component" "bookie"
"values" .Values.bookie): its affinity (the whole `affinity` value when set, else
the podAntiAffinity preset), topologySpreadConstraints and priorityClassName.
*/}}
{{- define "folio.scheduling" -}}
{{- if .values.affinity }}
affinity:
  {{- toYaml .values.affinity | nindent 2 }}
{{- else }}
{{- include "folio.antiAffinity" (dict "root" .root "component" .component "mode" .values.podAntiAffinity) | nindent 0 }}
{{- end }}
{{- with .values.topologySpreadConstraints }}
topologySpreadConstraints:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- end -}}

{{/* The service account of the Folio pods (bookie, broker, init), and whether its token is mounted. */}}
{{- define "folio.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "folio.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "folio.serviceAccount" -}}
serviceAccountName: {{ include "folio.serviceAccountName" . }}
automountServiceAccountToken: {{ .Values.serviceAccount.automountServiceAccountToken }}
{{- end -}}

{{/* Prometheus scrape annotations; call with (dict "root" $ "port" 7071). */}}
{{- define "folio.scrapeAnnotations" -}}
{{- if .root.Values.metrics.scrapeAnnotations -}}
prometheus.io/scrape: "true"
prometheus.io/port: {{ .port | quote }}
prometheus.io/path: /metrics
{{- end -}}
{{- end -}}

{{/*
One value of the TOML config: strings as TOML basic strings (JSON's escapes
are TOML's), booleans, integers (YAML numbers reach templates as floats: a
whole one is written as an integer, which Folio's float settings accept too)
and other numbers.
*/}}
{{- define "folio.tomlValue" -}}
{{- if kindIs "string" . -}}
{{- toJson . -}}
{{- else if kindIs "bool" . -}}
{{- ternary "true" "false" . -}}
{{- else if or (kindIs "float64" .) (kindIs "int" .) (kindIs "int64" .) -}}
{{- if eq (float64 .) (float64 (int64 .)) -}}{{- int64 . -}}{{- else -}}{{- float64 . -}}{{- end -}}
{{- else -}}
{{- fail (printf "config values must be strings, numbers or booleans, not %v" .) -}}
{{- end -}}
{{- end -}}

{{/* A TOML table; call with (dict "name" "broker" "values" .Values.broker.config). */}}
{{- define "folio.tomlTable" -}}
[{{ .name }}]
{{- range $key, $value := .values }}
{{- if not (regexMatch "^[a-z][a-z0-9_]*$" $key) }}
{{- fail (printf "%s.config: %q is not a setting name (lower case and _)" $.name $key) }}
{{- end }}
{{ $key }} = {{ include "folio.tomlValue" $value }}
{{- end }}
{{- end -}}

{{/* A NetworkPolicy peer: this release's pods of a component; call with (dict "root" $ "component" "broker"). */}}
{{- define "folio.peer" -}}
- podSelector:
    matchLabels:
      {{- include "folio.selectorLabels" . | nindent 6 }}
{{- end -}}
