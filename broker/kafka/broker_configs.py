"""A broker's configs as DescribeConfigs reports them (resource type 4, BROKER).

What a Kafka tool asks of a broker, under Kafka's names, with the values this
broker really works with: its node id, its listener, the defaults a new topic
gets (``Topics.default_config``: ``message.max.bytes`` is the default
``max.message.bytes`` that Produce enforces), the consumer groups' session
bounds and the consumer protocol's (KIP-848) settings. All are read-only:
Folio's broker settings are flags and a config file read at start
(docs/configuration.md), not dynamic configs, so AlterConfigs of a broker
answers INVALID_REQUEST.

``num.partitions`` and ``auto.create.topics.enable`` are the listener's
auto-creation settings (``KafkaContext.num_partitions`` and
``auto_create_topics``: ``--kafka-num-partitions``,
``--kafka-auto-create-topics``), and ``default.replication.factor`` the
ledger's write quorum, the largest replication factor CreateTopics accepts.
"""

from __future__ import annotations

from broker.kafka.consumer_groups.assignors import ASSIGNORS
from broker.kafka.consumer_groups.membership import GroupConfig
from broker.kafka.consumer_groups.modern import ModernConfig
from broker.kafka.context import KafkaContext
from broker.kafka.topic_configs import (
    BOOLEAN,
    DEFAULT_CONFIG,
    INT,
    LIST,
    LONG,
    STATIC_BROKER_CONFIG,
    STRING,
    DescribedConfig,
)
from broker.kafka.txns.producers import MAX_KAFKA_TXN_TIMEOUT_MS

__all__ = ["broker_configs", "security_protocol"]


def security_protocol(context: KafkaContext) -> str:
    """The listener's protocol under Kafka's name (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)."""
    security = context.security
    tls = security is not None and security.tls is not None
    sasl = security is not None and security.authenticator is not None
    if sasl:
        return "SASL_SSL" if tls else "SASL_PLAINTEXT"
    return "SSL" if tls else "PLAINTEXT"


def broker_configs(context: KafkaContext, node_id: int) -> list[DescribedConfig]:
    """Every config of this broker (node ``node_id``), by name."""
    defaults = context.topics.default_config()
    groups = (context.coordinators.groups.config if context.coordinators is not None
              else GroupConfig())
    consumers = None if context.coordinators is None else context.coordinators.consumers
    modern = consumers.config if consumers is not None else ModernConfig()
    protocol = security_protocol(context)
    port = context.advertised_port or context.port
    static = [
        ("broker.id", str(node_id), INT),
        ("advertised.listeners", f"{protocol}://{context.host}:{port}", LIST),
        ("listeners", f"{protocol}://{context.host}:{context.port}", LIST),
        ("message.max.bytes", str(defaults.max_event_bytes), INT),
        ("log.retention.ms", str(defaults.retention_ms), LONG),
        ("log.retention.bytes", str(defaults.retention_bytes), LONG),
        ("log.segment.bytes", str(defaults.ledger_rollover_bytes), INT),
        ("log.roll.ms", str(defaults.ledger_rollover_ms), LONG),
        ("group.min.session.timeout.ms", str(groups.min_session_timeout_ms), INT),
        ("group.max.session.timeout.ms", str(groups.max_session_timeout_ms), INT),
    ]
    num_partitions, auto_create = context.num_partitions, context.auto_create_topics
    fixed = [
        ("num.partitions", str(num_partitions), INT),
        ("default.replication.factor", str(context.write_quorum), INT),
        ("auto.create.topics.enable", str(auto_create).lower(), BOOLEAN),
        ("log.cleanup.policy", "delete", LIST),
        ("transaction.max.timeout.ms", str(MAX_KAFKA_TXN_TIMEOUT_MS), INT),
        ("security.inter.broker.protocol", protocol, STRING),
        # KIP-848 (``broker.kafka.consumer_groups.modern``): Kafka's defaults.
        ("group.coordinator.rebalance.protocols", "classic,consumer", LIST),
        ("group.consumer.session.timeout.ms", str(modern.session_timeout_ms), INT),
        ("group.consumer.heartbeat.interval.ms", str(modern.heartbeat_interval_ms), INT),
        ("group.consumer.assignors", ",".join(ASSIGNORS), LIST),
    ]
    described = [DescribedConfig(name, value, STATIC_BROKER_CONFIG, kind, read_only=True)
                 for name, value, kind in static]
    described += [DescribedConfig(name, value, DEFAULT_CONFIG, kind, read_only=True)
                  for name, value, kind in fixed]
    return sorted(described, key=lambda entry: entry.name)
