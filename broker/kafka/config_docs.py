"""What each config DescribeConfigs reports means on Folio (its ``documentation``, v3+).

Answered when a client asks ``include_documentation`` (``kafka-configs
--describe --all`` does not; AdminClient users may). One sentence per name,
saying what the value does here, not what Kafka's broker would do with it
(``broker.kafka.topic_configs`` and ``broker.kafka.broker_configs`` give the
values). A name missing here is answered with null documentation, as Kafka
answers a config without any; ``test_config_docs`` checks that every reported
name has one.
"""

from __future__ import annotations

__all__ = ["CONFIG_DOCS", "config_doc"]

_RETENTION_MS = ("Whole ledgers of a segment older than this many ms are deleted from its head "
                 "(-1: kept forever).")
_RETENTION_BYTES = ("Whole ledgers are deleted from a segment's head while it holds more than "
                    "this many bytes (-1: no limit).")
_MAX_EVENT = ("The largest record batch (as sent, after compression) a Produce may carry; "
              "a larger one is refused with MESSAGE_TOO_LARGE.")
_SEGMENT_BYTES = ("A segment rolls over to a new ledger once its open ledger holds this many "
                  "bytes.")
_SEGMENT_MS = "A segment rolls over to a new ledger once its open ledger is this many ms old."
_CLEANUP = "Only delete: retention deletes whole ledgers; Folio does not compact topics."

CONFIG_DOCS = {
    # Topic configs (``broker.kafka.topic_configs``).
    "retention.ms": _RETENTION_MS,
    "retention.bytes": _RETENTION_BYTES,
    "max.message.bytes": _MAX_EVENT,
    "segment.bytes": _SEGMENT_BYTES,
    "segment.ms": _SEGMENT_MS,
    "cleanup.policy": _CLEANUP,
    # The broker's defaults of those (``topic_configs.BROKER_SYNONYMS``).
    "log.retention.ms": "The retention.ms of new topics. " + _RETENTION_MS,
    "log.retention.bytes": "The retention.bytes of new topics. " + _RETENTION_BYTES,
    "message.max.bytes": "The max.message.bytes of new topics. " + _MAX_EVENT,
    "log.segment.bytes": "The segment.bytes of new topics. " + _SEGMENT_BYTES,
    "log.roll.ms": "The segment.ms of new topics. " + _SEGMENT_MS,
    "log.cleanup.policy": "The cleanup.policy of new topics. " + _CLEANUP,
    # The broker's own (``broker.kafka.broker_configs``).
    "broker.id": ("This broker's node id in Metadata: 0 on a standalone, derived from the "
                  "broker's id in a cluster."),
    "advertised.listeners": ("The address Metadata gives clients for this broker, per "
                             "listener (--kafka-advertised-listeners)."),
    "listeners": "The addresses this broker's Kafka listeners are bound to (--kafka-listeners).",
    "listener.security.protocol.map": ("Each listener's security protocol "
                                       "(--kafka-listener-security-protocol-map)."),
    "num.partitions": ("Partitions (segments) of an auto-created topic, and of CreateTopics "
                       "with num_partitions -1 (--kafka-num-partitions)."),
    "default.replication.factor": ("Copies of each ledger entry (the write quorum): the "
                                   "largest replication factor CreateTopics accepts."),
    "auto.create.topics.enable": ("Whether Metadata and Produce create a missing topic "
                                  "(--kafka-auto-create-topics)."),
    "security.inter.broker.protocol": ("The Kafka listener's security protocol (brokers speak "
                                       "gRPC to each other)."),
    "group.min.session.timeout.ms": "The shortest session timeout JoinGroup accepts.",
    "group.max.session.timeout.ms": "The longest session timeout JoinGroup accepts.",
    "group.coordinator.rebalance.protocols": ("The group protocols served: classic and "
                                              "consumer (KIP-848)."),
    "group.consumer.session.timeout.ms": ("A KIP-848 member that sends no heartbeat for this "
                                          "long leaves its group."),
    "group.consumer.heartbeat.interval.ms": "How often a KIP-848 member is asked to heartbeat.",
    "group.consumer.assignors": "The KIP-848 server-side assignors, the first the default.",
    "group.consumer.migration.policy": ("Whether a group with members changes protocol: a "
                                        "classic group upgraded when a KIP-848 member joins, "
                                        "a consumer group downgraded when its last KIP-848 "
                                        "member leaves (--kafka-group-migration-policy)."),
    "transaction.max.timeout.ms": "The longest transaction timeout InitProducerId accepts.",
    "offsets.retention.minutes": ("An empty group's committed offsets are removed this long "
                                  "after it became empty; a group with members keeps those "
                                  "of the topics it subscribes to "
                                  "(--kafka-offsets-retention-minutes)."),
    "offsets.retention.check.interval.ms": ("How often the group coordinator removes expired "
                                            "offsets (--kafka-offsets-retention-check-"
                                            "interval-ms)."),
    "transactional.id.expiration.ms": ("A transactional id with no transaction activity for "
                                       "this long is forgotten; its next InitProducerId gets "
                                       "a new producer id "
                                       "(--kafka-transactional-id-expiration-ms)."),
    "transaction.remove.expired.transaction.cleanup.interval.ms": (
        "How often the transaction coordinator forgets expired transactional ids."),
    # KIP-768, with --kafka-oauth-jwks-url (``ledger.security.jwks``).
    "sasl.oauthbearer.jwks.endpoint.url": ("The identity provider's key set: OAUTHBEARER "
                                           "accepts its JWTs (--kafka-oauth-jwks-url)."),
    "sasl.oauthbearer.expected.audience": ("A provider token's aud must hold one of these "
                                           "(empty: not checked)."),
    "sasl.oauthbearer.expected.issuer": "A provider token's iss must be this (empty: not "
                                        "checked).",
    "sasl.oauthbearer.sub.claim.name": "The provider token's claim that names the role.",
    "sasl.oauthbearer.clock.skew.seconds": "Seconds of leeway on a provider token's exp, nbf "
                                           "and iat.",
    "sasl.oauthbearer.jwks.endpoint.refresh.ms": ("The key set is fetched again this often "
                                                  "(an unknown kid refetches it at once)."),
    "sasl.oauthbearer.scope.claim.name": ("The provider token's claim that holds its scopes "
                                          "(--kafka-oauth-required-scopes checks them)."),
    # GSSAPI (broker.kafka.sasl.kerberos), when served.
    "sasl.kerberos.service.name": ("The first component of the principal GSSAPI clients get "
                                   "tickets for (--kafka-sasl-kerberos-service-name)."),
    "sasl.kerberos.principal.to.local.rules": ("How a GSSAPI client's principal becomes its "
                                               "role: DEFAULT, RULE:[n:format](match)s/.../"
                                               "(--kafka-sasl-kerberos-principal-to-local-"
                                               "rules)."),
    # The dynamic broker configs (broker.kafka.dynamic_configs): AlterConfigs changes them.
    "max.connections": ("Open Kafka connections of this broker; at it a new one waits "
                        "unread until one closes. Dynamic."),
    "max.connections.per.ip": ("Open Kafka connections from one address; one more is closed "
                               "at once. Dynamic."),
    "max.connections.per.ip.overrides": ("address:count pairs: max.connections.per.ip for "
                                         "those addresses. Dynamic."),
    "max.connection.creation.rate": ("New Kafka connections a second, broker-wide; one over "
                                     "it is held for the throttle time. Dynamic."),
    "listener.name.<name>.max.connections": ("Open Kafka connections on that listener; at it "
                                             "a new one waits. Dynamic."),
    "listener.name.<name>.max.connection.creation.rate": ("New Kafka connections a second on "
                                                          "that listener. Dynamic."),
}


def config_doc(name: str) -> str | None:
    """What config ``name`` means on Folio (a listener's key by its ``<name>`` form)."""
    if name.startswith("listener.name."):
        _listener, _, key = name.removeprefix("listener.name.").partition(".")
        return CONFIG_DOCS.get(f"listener.name.<name>.{key}")
    return CONFIG_DOCS.get(name)
