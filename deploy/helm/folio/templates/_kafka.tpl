{{/* The Kafka listener helpers of the broker StatefulSet (broker.kafka, docs/kafka.md "On Kubernetes"). */}}

{{/*
A listener's security protocol checked as the broker would check it; call with
(dict "root" $ "protocol" "SSL" "field" "broker.kafka.securityProtocol").
Refused: SSL/SASL_SSL without security.tls; a listener without SASL while
security.authToken guards the gRPC port; PLAINTEXT beside a TLS gRPC port
without kafka.allowPlaintext.
*/}}
{{- define "folio.kafkaCheckProtocol" -}}
{{- $security := .root.Values.security -}}
{{- if and (ne .protocol "PLAINTEXT") (not $security.tls.enabled) }}
{{- fail (printf "%s %s needs security.tls.enabled (the listener uses its certificates)" .field .protocol) }}
{{- end }}
{{- if and $security.authToken.enabled (ne .protocol "SASL_SSL") }}
{{- fail (printf "%s %s: with security.authToken.enabled the Kafka listener must be SASL_SSL (brokers refuse a Kafka listener without SASL when tokens guard the gRPC port)" .field .protocol) }}
{{- end }}
{{- if and (eq .protocol "PLAINTEXT") $security.tls.enabled (not .root.Values.broker.kafka.allowPlaintext) }}
{{- fail (printf "%s PLAINTEXT beside a TLS gRPC port: set broker.kafka.allowPlaintext (--kafka-allow-plaintext) or use SSL / SASL_SSL" .field) }}
{{- end }}
{{- end -}}

{{/* Whether the external listener is one of its own (EXTERNAL beside INTERNAL): "true" or "". */}}
{{- define "folio.kafkaOwnExternal" -}}
{{- $kafka := .Values.broker.kafka -}}
{{- if and $kafka.enabled $kafka.external.enabled (eq $kafka.external.listener "own") }}true{{ end }}
{{- end -}}

{{/* The external listener's protocol: its own, or kafka.securityProtocol's. */}}
{{- define "folio.kafkaExternalProtocol" -}}
{{- default .Values.broker.kafka.securityProtocol .Values.broker.kafka.external.securityProtocol -}}
{{- end -}}

{{/* The pod's DNS name through the headless Service (kubelet-expanded). */}}
{{- define "folio.kafkaPodHost" -}}
$(POD_NAME).{{ include "folio.brokerName" . }}-headless.$(POD_NAMESPACE).svc.{{ .Values.clusterDomain }}
{{- end -}}

{{/*
Kafka listener flags of a broker (broker.kafka). One listener (the default, and
external.listener "shared"): it binds --host (0.0.0.0) on kafka.port and
advertises the pod's DNS name through the headless Service, or with
kafka.external its external address. external.listener "own": two named
listeners (--kafka-listeners), INTERNAL on kafka.port and EXTERNAL on
external.containerPort, each with its protocol; what they advertise is added by
the container's command (folio.brokerCommand), as it differs per pod.
*/}}
{{- define "folio.brokerKafkaArgs" -}}
{{- $kafka := .Values.broker.kafka -}}
{{- if $kafka.enabled }}
{{- $protocol := $kafka.securityProtocol -}}
{{- include "folio.kafkaCheckProtocol" (dict "root" $ "protocol" $protocol "field" "broker.kafka.securityProtocol") }}
{{- $external := $kafka.external }}
{{- $protocols := list $protocol }}
{{- if and $external.enabled (gt (len $external.advertised) 0) (lt (len $external.advertised) (int .Values.broker.replicas)) }}
{{- fail (printf "broker.kafka.external.advertised has %d entries for %d brokers (broker.replicas): give one {host, port} per broker, by ordinal" (len $external.advertised) (int .Values.broker.replicas)) }}
{{- end }}
{{- if include "folio.kafkaOwnExternal" . }}
{{- $externalProtocol := include "folio.kafkaExternalProtocol" . }}
{{- include "folio.kafkaCheckProtocol" (dict "root" $ "protocol" $externalProtocol "field" "broker.kafka.external.securityProtocol") }}
{{- if eq (int $external.containerPort) (int $kafka.port) }}
{{- fail (printf "broker.kafka.external.containerPort %d is broker.kafka.port's: give the EXTERNAL listener a port of its own" (int $external.containerPort)) }}
{{- end }}
{{- if and (eq $external.type "LoadBalancer") (not $external.domain) (not $external.advertised) }}
{{- fail "broker.kafka.external.type LoadBalancer: set broker.kafka.external.domain (each broker is advertised as <pod name>.<domain>) or broker.kafka.external.advertised" }}
{{- end }}
{{- $protocols = append $protocols $externalProtocol }}
- --kafka-listeners=INTERNAL://:{{ $kafka.port }},EXTERNAL://:{{ $external.containerPort }}
- --kafka-listener-security-protocol-map=INTERNAL:{{ $protocol }},EXTERNAL:{{ $externalProtocol }}
{{- /* --kafka-advertised-listeners: added by the container's command (folio.brokerCommand). */}}
{{- else }}
{{- if and $external.enabled $external.securityProtocol (ne $external.securityProtocol $protocol) }}
{{- fail "broker.kafka.external.securityProtocol needs a listener of its own: set broker.kafka.external.listener=own (shared: the one listener has broker.kafka.securityProtocol)" }}
{{- end }}
- --kafka-port={{ $kafka.port }}
{{- if not $external.enabled }}
- --kafka-advertised-host={{ include "folio.kafkaPodHost" . }}
- --kafka-advertised-port={{ $kafka.port }}
{{- else if $external.advertised }}
{{- /* --kafka-advertised-host/-port: broker i's entry, added by the container's command. */}}
{{- else if eq $external.type "NodePort" }}
- --kafka-advertised-host={{ default "$(HOST_IP)" $external.host }}
{{- /* --kafka-advertised-port: nodePortBase + the pod's ordinal, added by the container's command. */}}
{{- else }}
{{- if not $external.domain }}
{{- fail "broker.kafka.external.type LoadBalancer: set broker.kafka.external.domain (each broker is advertised as <pod name>.<domain>) or broker.kafka.external.advertised" }}
{{- end }}
- --kafka-advertised-host=$(POD_NAME).{{ $external.domain }}
- --kafka-advertised-port={{ $external.port }}
{{- end }}
{{- if ne $protocol "PLAINTEXT" }}
- --kafka-security-protocol={{ $protocol }}
{{- end }}
{{- end }}
{{- if has "SASL_SSL" $protocols }}
- --kafka-sasl-mechanisms={{ join "," $kafka.saslMechanisms }}
{{- end }}
{{- if $kafka.allowPlaintext }}
- --kafka-allow-plaintext
{{- end }}
{{- end }}
{{- end -}}

{{/*
Shell lines setting `host` and `port` to broker <ordinal>'s external address
(the ordinal is the suffix of the pod's name): its entry of external.advertised;
else for a NodePort external.host (or its node's address) and
nodePortBase + ordinal, the NodePort of the broker's own Service; for a
LoadBalancer <pod name>.<domain> and external.port. `$$` is the kubelet's
escape of `$`.
*/}}
{{- define "folio.kafkaExternalAddress" -}}
{{- $external := .Values.broker.kafka.external -}}
{{- if $external.advertised }}
case "$${POD_NAME##*-}" in
{{- range $i, $address := $external.advertised }}
  {{ $i }}) host={{ $address.host | squote }} port={{ int $address.port }} ;;
{{- end }}
  *) echo "folio chart: broker.kafka.external.advertised has no entry for $${POD_NAME}" >&2; exit 64 ;;
esac
{{- else if eq $external.type "NodePort" }}
host={{ default "$(HOST_IP)" $external.host }}
port=$$(({{ int $external.nodePortBase }} + $${POD_NAME##*-}))
{{- else }}
host=$(POD_NAME).{{ $external.domain }}
port={{ int $external.port }}
{{- end }}
{{- end -}}

{{/*
The broker's container command when what it advertises differs per pod (an
external listener of its own, a NodePort, or advertised addresses from values):
the image's `folio` run through /bin/sh, which appends the pod's advertised
address(es) to the args (`"$0" "$@"`). Empty otherwise: the image's entry
point runs the args.
*/}}
{{- define "folio.brokerCommand" -}}
{{- $kafka := .Values.broker.kafka -}}
{{- $external := $kafka.external -}}
{{- if and $kafka.enabled $external.enabled }}
{{- if include "folio.kafkaOwnExternal" . }}
command:
  - /bin/sh
  - -c
  - |-
    {{- include "folio.kafkaExternalAddress" . | trim | nindent 4 }}
    exec "$0" "$@" "--kafka-advertised-listeners=INTERNAL://{{ include "folio.kafkaPodHost" . }}:{{ $kafka.port }},EXTERNAL://$host:$port"
  - folio
{{- else if $external.advertised }}
command:
  - /bin/sh
  - -c
  - |-
    {{- include "folio.kafkaExternalAddress" . | trim | nindent 4 }}
    exec "$0" "$@" "--kafka-advertised-host=$host" "--kafka-advertised-port=$port"
  - folio
{{- else if eq $external.type "NodePort" }}
command:
  - /bin/sh
  - -c
  - exec "$0" "$@" --kafka-advertised-port=$$(({{ int $external.nodePortBase }} + $${POD_NAME##*-}))
  - folio
{{- end }}
{{- end }}
{{- end -}}
