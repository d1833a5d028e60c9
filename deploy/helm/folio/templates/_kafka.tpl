{{/* The Kafka listener helpers of the broker StatefulSet (broker.kafka, docs/kafka.md "On Kubernetes"). */}}

{{/*
Kafka listener flags of a broker (broker.kafka). The listener binds --host
(0.0.0.0) on kafka.port and advertises the pod's DNS name through the headless
Service, or with kafka.external its external address. Refused here, as the
broker would refuse them: SSL/SASL_SSL without security.tls; a listener without
SASL while security.authToken guards the gRPC port; PLAINTEXT beside a TLS gRPC
port without kafka.allowPlaintext.
*/}}
{{- define "folio.brokerKafkaArgs" -}}
{{- $kafka := .Values.broker.kafka -}}
{{- $security := .Values.security -}}
{{- if $kafka.enabled }}
{{- $protocol := $kafka.securityProtocol -}}
{{- if and (ne $protocol "PLAINTEXT") (not $security.tls.enabled) }}
{{- fail (printf "broker.kafka.securityProtocol %s needs security.tls.enabled (the listener uses its certificates)" $protocol) }}
{{- end }}
{{- if and $security.authToken.enabled (ne $protocol "SASL_SSL") }}
{{- fail (printf "broker.kafka.securityProtocol %s: with security.authToken.enabled the Kafka listener must be SASL_SSL (brokers refuse a Kafka listener without SASL when tokens guard the gRPC port)" $protocol) }}
{{- end }}
{{- if and (eq $protocol "PLAINTEXT") $security.tls.enabled (not $kafka.allowPlaintext) }}
{{- fail "broker.kafka.securityProtocol PLAINTEXT beside a TLS gRPC port: set broker.kafka.allowPlaintext (--kafka-allow-plaintext) or use SSL / SASL_SSL" }}
{{- end }}
- --kafka-port={{ $kafka.port }}
{{- $external := $kafka.external }}
{{- if not $external.enabled }}
- --kafka-advertised-host=$(POD_NAME).{{ include "folio.brokerName" . }}-headless.$(POD_NAMESPACE).svc.{{ .Values.clusterDomain }}
- --kafka-advertised-port={{ $kafka.port }}
{{- else if eq $external.type "NodePort" }}
- --kafka-advertised-host={{ default "$(HOST_IP)" $external.host }}
{{- /* --kafka-advertised-port: nodePortBase + the pod's ordinal, added by the container's command. */}}
{{- else }}
{{- if not $external.domain }}
{{- fail "broker.kafka.external.type LoadBalancer: set broker.kafka.external.domain (each broker is advertised as <pod name>.<domain>)" }}
{{- end }}
- --kafka-advertised-host=$(POD_NAME).{{ $external.domain }}
- --kafka-advertised-port={{ $external.port }}
{{- end }}
{{- if ne $protocol "PLAINTEXT" }}
- --kafka-security-protocol={{ $protocol }}
{{- end }}
{{- if eq $protocol "SASL_SSL" }}
- --kafka-sasl-mechanisms={{ join "," $kafka.saslMechanisms }}
{{- end }}
{{- if $kafka.allowPlaintext }}
- --kafka-allow-plaintext
{{- end }}
{{- end }}
{{- end -}}

{{/*
The broker's container command when its external Kafka listener is a NodePort:
the image's `folio` run through /bin/sh, which appends
--kafka-advertised-port=<nodePortBase + the pod's ordinal> (the ordinal is the
suffix of the pod's name), the NodePort of the broker's own Service. Empty
otherwise: the image's entry point runs the args.
*/}}
{{- define "folio.brokerCommand" -}}
{{- $kafka := .Values.broker.kafka -}}
{{- if and $kafka.enabled $kafka.external.enabled (eq $kafka.external.type "NodePort") }}
command:
  - /bin/sh
  - -c
  - exec "$0" "$@" --kafka-advertised-port=$$(({{ int $kafka.external.nodePortBase }} + $${POD_NAME##*-}))
  - folio
{{- end }}
{{- end -}}
