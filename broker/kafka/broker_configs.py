"""A broker's configs as DescribeConfigs reports them (resource type 4, BROKER).

What a Kafka tool asks of a broker, under Kafka's names, with the values this
broker really works with: its node id, its listener, the defaults a new topic
gets (``Topics.default_config``, under the names ``topic_configs.BROKER_SYNONYMS``
gives them: ``message.max.bytes`` is the default ``max.message.bytes`` that
Produce enforces), the consumer groups' session bounds and the consumer
protocol's (KIP-848) settings. Each has its source: STATIC_BROKER_CONFIG for
the broker's identity and listener and for a setting that differs from Folio's
built-in default, DEFAULT_CONFIG for a built-in default (so tools that show
"modified" configs only, as kafka-python does by default, show what an
operator set). All are read-only (Folio's broker settings are flags and a
config file read at start, docs/configuration.md) but the connection limits
of ``broker.kafka.dynamic_configs``, which AlterConfigs of a broker changes
at runtime, each with its dynamic sources and synonyms.

``num.partitions`` and ``auto.create.topics.enable`` are the listener's
auto-creation settings (``KafkaContext.num_partitions`` and
``auto_create_topics``: ``--kafka-num-partitions``,
``--kafka-auto-create-topics``), and ``default.replication.factor`` the
ledger's write quorum, the largest replication factor CreateTopics accepts.
"""

from __future__ import annotations

from broker.broker_config import BrokerConfig
from broker.kafka.consumer_groups.assignors import ASSIGNORS
from broker.kafka.consumer_groups.membership import GroupConfig
from broker.kafka.consumer_groups.modern import ModernConfig
from broker.kafka.context import KafkaContext
from broker.kafka.topic_configs import (
    BOOLEAN,
    BROKER_SYNONYMS,
    CONFIG_TYPES,
    DEFAULT_CONFIG,
    INT,
    LIST,
    LONG,
    STATIC_BROKER_CONFIG,
    STRING,
    DescribedConfig,
    DescribedSynonym,
    default_source,
    kafka_configs,
)
from broker.kafka.txns.expiry import TxnIdExpirySettings
from broker.kafka.txns.producers import MAX_KAFKA_TXN_TIMEOUT_MS
from ledger.config import LedgerConfig

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
    """Every config of this broker (node ``node_id``), by name, with its source and synonyms.

    The source is STATIC_BROKER_CONFIG where this process's settings made the
    value (its identity and listener; a setting that differs from Folio's
    built-in default), DEFAULT_CONFIG where it is the built-in default. Each
    config's one synonym is itself (Folio has no alternative names such as
    Kafka's ``log.retention.hours``).
    """
    defaults = context.topics.default_config()
    groups = (context.coordinators.groups.config if context.coordinators is not None
              else GroupConfig())
    consumers = None if context.coordinators is None else context.coordinators.consumers
    modern = consumers.config if consumers is not None else ModernConfig()
    txn_ids = (context.coordinators.txn_expiry.settings if context.coordinators is not None
               and context.coordinators.txn_expiry is not None else TxnIdExpirySettings())
    protocol = security_protocol(context)
    port = context.advertised_port or context.port
    # Made by this process's settings, whatever their value.
    listeners, advertised, protocols = context.listener_configs or (
        f"{protocol}://{context.host}:{context.port}", f"{protocol}://{context.host}:{port}",
        f"{protocol}:{protocol}")
    identity = [
        ("broker.id", str(node_id), INT),
        ("advertised.listeners", advertised, LIST),
        ("listeners", listeners, LIST),
        ("listener.security.protocol.map", protocols, LIST),
    ]
    # (name, value, type, Folio's built-in default).
    built_in_groups, built_in_modern, built_in_ids = (GroupConfig(), ModernConfig(),
                                                      TxnIdExpirySettings())
    settings = [
        ("num.partitions", str(context.num_partitions), INT,
         str(BrokerConfig.kafka_num_partitions)),
        ("default.replication.factor", str(context.write_quorum), INT,
         str(LedgerConfig.write_quorum)),
        ("auto.create.topics.enable", str(context.auto_create_topics).lower(), BOOLEAN,
         str(BrokerConfig.kafka_auto_create_topics).lower()),
        ("security.inter.broker.protocol", protocol, STRING, "PLAINTEXT"),
        ("group.min.session.timeout.ms", str(groups.min_session_timeout_ms), INT,
         str(built_in_groups.min_session_timeout_ms)),
        ("group.max.session.timeout.ms", str(groups.max_session_timeout_ms), INT,
         str(built_in_groups.max_session_timeout_ms)),
        # Offset retention (``consumer_groups.expiry``): Kafka's names and defaults.
        ("offsets.retention.minutes", _minutes(groups.offsets_retention_ms), INT,
         _minutes(built_in_groups.offsets_retention_ms)),
        ("offsets.retention.check.interval.ms", str(groups.offsets_retention_check_interval_ms),
         LONG, str(built_in_groups.offsets_retention_check_interval_ms)),
        # Transactional id expiry (``txns.expiry``): Kafka's names and defaults.
        ("transactional.id.expiration.ms", str(txn_ids.expiration_ms), INT,
         str(built_in_ids.expiration_ms)),
        ("transaction.remove.expired.transaction.cleanup.interval.ms",
         str(txn_ids.cleanup_interval_ms), INT, str(built_in_ids.cleanup_interval_ms)),
        # KIP-848 (``broker.kafka.consumer_groups.modern``): Kafka's defaults.
        ("group.consumer.session.timeout.ms", str(modern.session_timeout_ms), INT,
         str(built_in_modern.session_timeout_ms)),
        ("group.consumer.heartbeat.interval.ms", str(modern.heartbeat_interval_ms), INT,
         str(built_in_modern.heartbeat_interval_ms)),
        ("group.consumer.migration.policy", modern.migration_policy.value, STRING,
         built_in_modern.migration_policy.value),
    ]
    settings += _oauth_settings(context)
    settings += _kerberos_settings(context)
    # Fixed in Folio.
    settings += [(name, value, kind, value) for name, value, kind in (
        ("transaction.max.timeout.ms", str(MAX_KAFKA_TXN_TIMEOUT_MS), INT),
        ("group.coordinator.rebalance.protocols", "classic,consumer", LIST),
        ("group.consumer.assignors", ",".join(ASSIGNORS), LIST),
    )]
    described = [_described(name, value, kind, STATIC_BROKER_CONFIG)
                 for name, value, kind in identity]
    described += [_described(name, value, kind,
                             DEFAULT_CONFIG if value == default else STATIC_BROKER_CONFIG)
                  for name, value, kind, default in settings]
    # The defaults of new topics, under the broker's names (``BROKER_SYNONYMS``):
    # the same source as the topics' synonyms of them (``described_configs``).
    described += [_described(BROKER_SYNONYMS[name], value, CONFIG_TYPES[name],
                             default_source(name, value))
                  for name, value in kafka_configs(defaults).items()]
    if context.dynamic_configs is not None:
        described += context.dynamic_configs.described()
    return sorted(described, key=lambda entry: entry.name)


def _minutes(ms: int) -> str:
    """Milliseconds as Kafka's whole minutes (a fraction, set for tests, as a decimal)."""
    minutes = ms / 60_000
    return str(int(minutes)) if minutes.is_integer() else f"{minutes:g}"


def _oauth_settings(context: KafkaContext) -> list[tuple[str, str, int, str]]:
    """KIP-768's broker configs, when OAUTHBEARER takes an identity provider's tokens.

    (name, value, type, Folio's built-in default: an unset audience or
    issuer is a DEFAULT_CONFIG of "", not checked).
    """
    oauth = None if context.security is None else context.security.oauth
    if oauth is None:
        return []
    built_in = BrokerConfig
    return [
        ("sasl.oauthbearer.jwks.endpoint.url", oauth.url, STRING, ""),
        ("sasl.oauthbearer.expected.audience", ",".join(oauth.audience), LIST, ""),
        ("sasl.oauthbearer.expected.issuer", oauth.issuer, STRING, ""),
        ("sasl.oauthbearer.sub.claim.name", oauth.sub_claim, STRING,
         built_in.kafka_oauth_sub_claim),
        ("sasl.oauthbearer.clock.skew.seconds", str(oauth.clock_skew_s), INT,
         str(built_in.kafka_oauth_clock_skew_s)),
        ("sasl.oauthbearer.jwks.endpoint.refresh.ms", str(oauth.refresh_ms), LONG,
         str(built_in.kafka_oauth_jwks_refresh_ms)),
        ("sasl.oauthbearer.scope.claim.name", oauth.scope_claim, STRING,
         built_in.kafka_oauth_scope_claim),
    ]


def _kerberos_settings(context: KafkaContext) -> list[tuple[str, str, int, str]]:
    """GSSAPI's broker configs, when the listener serves it (name, value, type, default)."""
    kerberos = None if context.security is None else context.security.kerberos
    if kerberos is None:
        return []
    return [
        ("sasl.kerberos.service.name", kerberos.service_name, STRING,
         BrokerConfig.kafka_sasl_kerberos_service_name),
        ("sasl.kerberos.principal.to.local.rules", kerberos.rules, LIST,
         BrokerConfig.kafka_sasl_kerberos_principal_to_local_rules),
    ]


def _described(name: str, value: str, kind: int, source: int) -> DescribedConfig:
    return DescribedConfig(name, value, source, kind, read_only=True,
                           synonyms=(DescribedSynonym(name, value, source),))
