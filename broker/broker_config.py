"""The settings of ``folio broker``: ``BrokerConfig`` and the bookies it writes to.

``BrokerConfig`` is the broker's own (``StandaloneConfig`` adds its bookie's
durability); ``BookieSecurity`` (from ``ledger.bookie.client_security``) the
TLS and token the broker uses towards bookies, whether named or found in a
cluster. ``broker.remote_settings`` has how it reaches ``folio bookie``
processes (``RemoteBookies``) and the other brokers (``PeerSettings``).
``ledger.settings`` layers them from defaults, a TOML file, the environment
and flags.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from enum import StrEnum

from broker.appends.held import DEFAULT_MAX_HELD_BYTES, DEFAULT_MAX_HELD_MS
from broker.kafka_listener_specs import (
    KafkaListenerSpec,
    KafkaSecurityProtocol,
    check_listener_security,
    parse_listeners,
)
from broker.segments.writers import DEFAULT_WRITER_EXPIRY_MS
from ledger.bookie.client_security import BookieSecurity
from ledger.config import check_port, split_roles
from ledger.security.jwks import JwksSettings
from ledger.security.tls import ServerTls
from txnbuffer.api import SnapshotPolicy
from txnbuffer.snapshot import chunk_capacity

__all__ = ["KAFKA_SASL_MECHANISMS", "BookieSecurity", "BrokerConfig", "KafkaSecurityProtocol",
           "parse_overrides"]

#: The SASL mechanisms the Kafka listener serves by default (docs/kafka.md, "Security").
KAFKA_SASL_MECHANISMS = ("OAUTHBEARER", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
#: Every mechanism it can serve: GSSAPI (Kerberos) when named, with a keytab.
_ALL_SASL_MECHANISMS = (*KAFKA_SASL_MECHANISMS, "GSSAPI")
#: Mechanisms that carry a Folio JWT: they need a token key to verify it.
_TOKEN_MECHANISMS = frozenset({"OAUTHBEARER", "PLAIN"})


class KafkaGroupMigrationPolicy(StrEnum):
    """Kafka's ``group.consumer.migration.policy``: which way a consumer group with members
    may change protocol (``broker.kafka.consumer_groups.migration``)."""

    DISABLED = "disabled"
    UPGRADE = "upgrade"
    DOWNGRADE = "downgrade"
    BIDIRECTIONAL = "bidirectional"


_DEFAULT_SNAPSHOTS = SnapshotPolicy()
#: A topic's segment count at creation is at most this (``broker.topics`` ``MAX_SEGMENT_COUNT``).
MAX_KAFKA_NUM_PARTITIONS = 1024


def parse_overrides(text: str, what: str) -> dict[str, int]:
    """``address:count`` pairs, comma-separated (Kafka's ``max.connections.per.ip.overrides``).

    Addresses are IP addresses (normalised), counts >= 0. Raises ``ValueError``
    naming ``what`` and the pair that is not one. (The start-up setting's and
    the dynamic config's parser: ``broker.kafka.quotas.limits``.)
    """
    overrides: dict[str, int] = {}
    for pair in text.split(","):
        if not pair.strip():
            continue
        address, _, count = pair.strip().rpartition(":")
        try:
            normal = str(ipaddress.ip_address(address.strip("[]")))
            limit = int(count)
        except ValueError:
            raise ValueError(f"{what}: {pair.strip()!r} is not address:count (an IP address, "
                             "a count >= 0)") from None
        if limit < 0:
            raise ValueError(f"{what}: {pair.strip()!r} is not address:count (an IP address, "
                             "a count >= 0)")
        overrides[normal] = limit
    return overrides


@dataclass(frozen=True)
class BrokerConfig:
    """Everything the broker runs with (``folio broker``; ``folio standalone`` adds a bookie's).

    Attributes:
        data_dir: directory of the broker's data (the metadata store), created if missing.
        host: address the gRPC API and metrics listen on.
        port: port of the gRPC API, 0 for any free one.
        metrics_port: port of the Prometheus metrics endpoint, 0 for any free one.
        stop_grace_s: seconds in-flight calls get to finish on shutdown.
        retention_interval_s: how often retention, rollover by age and writer
            expiry run.
        writer_expiry_ms: segments forget writers idle longer than this.
        max_held_bytes: bytes of uncommitted transaction blocks (``end = false``)
            the broker holds over all streams.
        max_held_ms: how long a flow may hold transaction blocks.
        txn_snapshot_every_changes: a segment's transaction buffer writes a
            snapshot after this many changes ...
        txn_snapshot_every_ms: ... or this long after the last one.
        txn_snapshot_chunk_bytes: the largest snapshot chunk; 0 = as large as
            a record of ``_txnbuffer_snapshots`` may be.
        tls_cert: PEM certificate of the gRPC API; with ``tls_key`` it serves
            TLS, reloading the files when they change.
        tls_key: its PEM private key.
        tls_ca: PEM CA; when set, clients must present a certificate it
            signed (mutual TLS).
        metrics_tls: serve the metrics over HTTPS with the same files.
        auth_token_secret_file: HS256 secret; when set (or the next), every
            call but health and reflection needs a JWT, and permissions apply.
        auth_token_public_key_file: RSA or EC public key (RS256, ES256).
        super_users: roles allowed everything, comma-separated.
        kafka_port: port of the Kafka protocol listener (docs/kafka.md); -1
            (the default) serves no Kafka protocol, 0 any free port.
        kafka_advertised_host: the host Kafka clients are told to connect to
            (Metadata's broker address); empty: ``host``.
        kafka_advertised_port: the port they are told; 0: the bound Kafka port
            (another one when clients reach the broker through a proxy or NAT).
        kafka_security_protocol: PLAINTEXT, SSL (the API's ``tls_*`` files;
            with ``tls_ca`` clients present certificates, whose CN is the
            role), SASL_PLAINTEXT or SASL_SSL.
        kafka_sasl_mechanisms: the SASL mechanisms served, comma-separated
            (OAUTHBEARER and PLAIN carry a JWT and need a token key; GSSAPI
            needs ``kafka_sasl_kerberos_keytab``).
        kafka_sasl_kerberos_keytab: the keytab holding the broker's Kerberos
            key (Kafka's JAAS ``keyTab``), for GSSAPI.
        kafka_sasl_kerberos_principal: the broker's principal in it (JAAS
            ``principal``, ``kafka/host@REALM``); empty: any of its principals
            of the service name.
        kafka_sasl_kerberos_service_name: Kafka's ``sasl.kerberos.service.name``:
            the first component of the principal clients get tickets for.
        kafka_sasl_kerberos_principal_to_local_rules: Kafka's
            ``sasl.kerberos.principal.to.local.rules``: a client's principal ->
            its role (``broker.kafka.sasl.kerberos_names``).
        kafka_delegation_token_secret_file: Kafka's ``delegation.token.secret.key``,
            in a file: the key of delegation tokens' HMACs, the same on every
            broker; empty: delegation tokens are off (docs/kafka.md,
            "Delegation tokens").
        kafka_delegation_token_max_lifetime_ms: Kafka's
            ``delegation.token.max.lifetime.ms``: no token lives longer.
        kafka_delegation_token_expiry_time_ms: Kafka's
            ``delegation.token.expiry.time.ms``: a token expires this long after
            its creation or renewal unless renewed.
        kafka_delegation_token_expiry_check_interval_ms: Kafka's
            ``delegation.token.expiry.check.interval.ms``: how often expired
            tokens are deleted from the metadata store (they authenticate no
            more from their expiry on regardless).
        kafka_allow_plaintext: allow a Kafka listener without TLS while the
            API serves TLS (refused otherwise: no silent bypass).
        kafka_listeners: several named Kafka listeners instead of
            ``kafka_port`` (Kafka's ``listeners``: ``NAME://HOST:PORT,...``;
            ``broker.kafka_listener_specs``, docs/kafka.md, "Listeners").
        kafka_advertised_listeners: Kafka's ``advertised.listeners``: what
            clients of each listener are told (default: its own address).
        kafka_listener_security_protocol_map: Kafka's
            ``listener.security.protocol.map``: ``NAME:PROTOCOL,...``.
        kafka_unauthenticated_listeners: listeners allowed to authenticate
            no one while the grants apply (comma-separated names; refused
            at start otherwise); their clients have no role.
        kafka_auto_create_topics: Kafka's ``auto.create.topics.enable``: a
            Metadata request that allows it creates the missing topics it
            names (docs/kafka.md, "Auto-creation"); off, they are
            UNKNOWN_TOPIC_OR_PARTITION at once.
        kafka_num_partitions: Kafka's ``num.partitions``: the segment count of
            auto-created topics, and of CreateTopics with ``num_partitions`` -1.
        kafka_max_connections: Kafka's ``max.connections``: at this many open
            Kafka connections, a new one waits unread until one closes.
        kafka_max_connections_per_ip: Kafka's ``max.connections.per.ip``: one
            more connection from an address is closed at once.
        kafka_max_connections_per_ip_overrides: Kafka's
            ``max.connections.per.ip.overrides``: ``address:count`` pairs,
            comma-separated (IP addresses, not host names).
        kafka_group_migration_policy: Kafka's ``group.consumer.migration.policy``:
            whether a classic group with members becomes a KIP-848 consumer group
            when a member of that protocol joins (upgrade), and back when its last
            one leaves (downgrade); Kafka's default, both.
        kafka_offsets_retention_minutes: Kafka's ``offsets.retention.minutes``:
            an empty group's committed offsets expire this long after it became
            empty (docs/kafka.md, "Offset retention"); a fraction is allowed
            (tests use seconds).
        kafka_offsets_retention_check_interval_ms: ``offsets.retention.check.interval.ms``:
            how often the group coordinator looks for expired offsets.
        kafka_transactional_id_expiration_ms: ``transactional.id.expiration.ms``:
            a transactional id with no transaction activity this long is forgotten.
        kafka_transaction_remove_expired_transaction_cleanup_interval_ms: how
            often the transaction coordinator looks for such ids (Kafka's
            ``transaction.remove.expired.transaction.cleanup.interval.ms``).
        kafka_oauth_jwks_url: an identity provider's JWKS (KIP-768's
            ``sasl.oauthbearer.jwks.endpoint.url``): OAUTHBEARER and the gRPC
            port accept its JWTs (``ledger.security.bearer``; the gRPC port
            then needs a token on every call); empty: only Folio's.
        kafka_oauth_expected_audience: accepted ``aud`` values, comma-separated.
        kafka_oauth_expected_issuer: the required ``iss``.
        kafka_oauth_sub_claim: the claim naming the principal (the role).
        kafka_oauth_clock_skew_s: leeway on ``exp``, ``nbf``, ``iat``.
        kafka_oauth_jwks_refresh_ms: the key set is fetched again this often.
        kafka_oauth_scope_claim: the claim holding a token's scopes (Kafka's
            ``sasl.oauthbearer.scope.claim.name``).
        kafka_oauth_required_scopes: scopes a provider token must all have,
            comma-separated (on both ports); empty: none checked.
        kafka_oauth_jwks_ca_file: PEM CA bundle the https JWKS endpoint's
            certificate must chain to; empty: the system's CAs.
    """

    data_dir: str = "./folio-data"
    host: str = "127.0.0.1"
    port: int = 7070
    metrics_port: int = 7071
    stop_grace_s: float = 10.0
    retention_interval_s: float = 30.0
    writer_expiry_ms: int = DEFAULT_WRITER_EXPIRY_MS
    max_held_bytes: int = DEFAULT_MAX_HELD_BYTES
    max_held_ms: int = DEFAULT_MAX_HELD_MS
    txn_snapshot_every_changes: int = _DEFAULT_SNAPSHOTS.every_changes
    txn_snapshot_every_ms: int = _DEFAULT_SNAPSHOTS.every_ms
    txn_snapshot_chunk_bytes: int = _DEFAULT_SNAPSHOTS.chunk_bytes
    tls_cert: str = ""
    tls_key: str = ""
    tls_ca: str = ""
    metrics_tls: bool = False
    auth_token_secret_file: str = ""
    auth_token_public_key_file: str = ""
    super_users: str = ""
    kafka_port: int = -1
    kafka_advertised_host: str = ""
    kafka_advertised_port: int = 0
    kafka_security_protocol: KafkaSecurityProtocol = KafkaSecurityProtocol.PLAINTEXT
    kafka_sasl_mechanisms: str = ",".join(KAFKA_SASL_MECHANISMS)
    kafka_sasl_kerberos_keytab: str = ""
    kafka_sasl_kerberos_principal: str = ""
    kafka_sasl_kerberos_service_name: str = "kafka"
    kafka_sasl_kerberos_principal_to_local_rules: str = "DEFAULT"
    kafka_delegation_token_secret_file: str = ""
    kafka_delegation_token_max_lifetime_ms: int = 7 * 24 * 3600 * 1000
    kafka_delegation_token_expiry_time_ms: int = 24 * 3600 * 1000
    kafka_delegation_token_expiry_check_interval_ms: int = 3600 * 1000
    kafka_allow_plaintext: bool = False
    kafka_listeners: str = ""
    kafka_advertised_listeners: str = ""
    kafka_listener_security_protocol_map: str = ""
    kafka_unauthenticated_listeners: str = ""
    kafka_auto_create_topics: bool = True
    kafka_num_partitions: int = 1
    kafka_max_connections: int = 2**31 - 1
    kafka_max_connections_per_ip: int = 2**31 - 1
    kafka_max_connections_per_ip_overrides: str = ""
    kafka_group_migration_policy: KafkaGroupMigrationPolicy = (
        KafkaGroupMigrationPolicy.BIDIRECTIONAL)
    kafka_offsets_retention_minutes: float = 10_080.0
    kafka_offsets_retention_check_interval_ms: int = 600_000
    kafka_transactional_id_expiration_ms: int = 604_800_000
    kafka_transaction_remove_expired_transaction_cleanup_interval_ms: int = 3_600_000
    kafka_oauth_jwks_url: str = ""
    kafka_oauth_expected_audience: str = ""
    kafka_oauth_expected_issuer: str = ""
    kafka_oauth_sub_claim: str = "sub"
    kafka_oauth_clock_skew_s: int = 30
    kafka_oauth_jwks_refresh_ms: int = 3_600_000
    kafka_oauth_scope_claim: str = "scope"
    kafka_oauth_required_scopes: str = ""
    kafka_oauth_jwks_ca_file: str = ""

    def __post_init__(self) -> None:
        check_port("port", self.port)
        check_port("metrics_port", self.metrics_port)
        self.server_tls()  # checks the TLS settings go together
        if self.metrics_tls and not self.tls_cert:
            raise ValueError("metrics_tls needs tls_cert and tls_key")
        if self.auth_token_secret_file and self.auth_token_public_key_file:
            raise ValueError("give one of auth_token_secret_file and "
                             "auth_token_public_key_file, not both")
        if self.kafka_port != -1:
            check_port("kafka_port (-1: no Kafka listener)", self.kafka_port)
        for name in ("kafka_delegation_token_max_lifetime_ms",
                     "kafka_delegation_token_expiry_time_ms",
                     "kafka_delegation_token_expiry_check_interval_ms"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        check_port("kafka_advertised_port", self.kafka_advertised_port)
        self._check_kafka_listeners()
        if self.serves_kafka:
            self._check_kafka_security()
        try:
            self.kafka_oauth()
        except ValueError as error:
            raise ValueError(f"kafka_oauth_*: {error}") from None
        if not 1 <= self.kafka_num_partitions <= MAX_KAFKA_NUM_PARTITIONS:
            raise ValueError(f"kafka_num_partitions must be in [1, {MAX_KAFKA_NUM_PARTITIONS}], "
                             f"got {self.kafka_num_partitions}")
        self.kafka_connection_overrides()  # checks the connection caps
        if self.stop_grace_s < 0 or self.retention_interval_s <= 0:
            raise ValueError("stop_grace_s must be >= 0 and retention_interval_s > 0")
        for name in ("writer_expiry_ms", "max_held_bytes", "max_held_ms",
                     "kafka_offsets_retention_minutes", "kafka_offsets_retention_check_interval_ms",
                     "kafka_transactional_id_expiration_ms",
                     "kafka_transaction_remove_expired_transaction_cleanup_interval_ms"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        try:
            self.txn_snapshots()
            if self.txn_snapshot_chunk_bytes:
                chunk_capacity(self.txn_snapshot_chunk_bytes)  # one abort per chunk at least
        except ValueError as error:
            raise ValueError(f"txn_snapshot_*: {error}") from None

    def kafka_connection_overrides(self) -> dict[str, int]:
        """``kafka_max_connections_per_ip_overrides`` parsed: address -> count.

        Raises ``ValueError`` naming the pair that is not ``address:count``,
        or when ``kafka_max_connections`` or ``kafka_max_connections_per_ip``
        is out of range.
        """
        if self.kafka_max_connections < 1:
            raise ValueError(f"kafka_max_connections must be positive, got "
                             f"{self.kafka_max_connections}")
        if self.kafka_max_connections_per_ip < 0:
            raise ValueError(f"kafka_max_connections_per_ip must be >= 0, got "
                             f"{self.kafka_max_connections_per_ip}")
        return parse_overrides(self.kafka_max_connections_per_ip_overrides,
                               "kafka_max_connections_per_ip_overrides")

    def server_tls(self) -> ServerTls:
        """The API port's TLS files (``ValueError`` if they do not go together)."""
        return ServerTls(self.tls_cert, self.tls_key, self.tls_ca)

    def sasl_mechanisms(self) -> tuple[str, ...]:
        """The SASL mechanisms the Kafka listener serves (none without SASL).

        OAUTHBEARER and PLAIN carry a JWT: without a token key they are left
        out (SCRAM users remain), but for OAUTHBEARER with a JWKS URL.
        """
        if not any(protocol.sasl for protocol in self._kafka_protocols()):
            return ()
        named = [part.strip().upper() for part in self.kafka_sasl_mechanisms.split(",")
                 if part.strip()]
        return tuple(name for name in named
                     if self.token_auth or name not in _TOKEN_MECHANISMS
                     or (self.kafka_oauth_jwks_url and name == "OAUTHBEARER"))

    @property
    def serves_kafka(self) -> bool:
        """Whether the broker serves the Kafka protocol (``kafka_port`` or ``kafka_listeners``)."""
        return self.kafka_port != -1 or bool(self.kafka_listeners.strip())

    def kafka_listener_specs(self) -> tuple[KafkaListenerSpec, ...]:
        """The Kafka listeners to serve, in order (none: no Kafka protocol).

        ``kafka_port`` alone is one listener named after its protocol, as
        Kafka names ``listeners=PLAINTEXT://:9092``.
        """
        if self.kafka_listeners.strip():
            return parse_listeners(self.kafka_listeners, self.kafka_advertised_listeners,
                                   self.kafka_listener_security_protocol_map, self.host)
        if self.kafka_port == -1:
            return ()
        protocol = self.kafka_security_protocol
        return (KafkaListenerSpec(protocol.value, protocol, self.host, self.kafka_port,
                                  self.kafka_advertised_host or self.host,
                                  self.kafka_advertised_port),)

    def _kafka_protocols(self) -> tuple[KafkaSecurityProtocol, ...]:
        if self.kafka_listeners.strip():
            return tuple(spec.protocol for spec in self.kafka_listener_specs())
        return (self.kafka_security_protocol,)

    def _check_kafka_listeners(self) -> None:
        """Refuse the single-port flags beside ``kafka_listeners``, and its flags without it."""
        if not self.kafka_listeners.strip():
            for name in ("kafka_advertised_listeners", "kafka_listener_security_protocol_map",
                         "kafka_unauthenticated_listeners"):
                if getattr(self, name).strip():
                    raise ValueError(f"--{name.replace('_', '-')} needs --kafka-listeners")
            return
        given = [flag for flag, value, default in (
            ("--kafka-port", self.kafka_port, -1),
            ("--kafka-advertised-host", self.kafka_advertised_host, ""),
            ("--kafka-advertised-port", self.kafka_advertised_port, 0),
            ("--kafka-security-protocol", self.kafka_security_protocol,
             KafkaSecurityProtocol.PLAINTEXT)) if value != default]
        if given:
            raise ValueError(f"--kafka-listeners replaces {', '.join(given)}: give each "
                             "listener's address in --kafka-listeners, what clients are told "
                             "in --kafka-advertised-listeners and its protocol in "
                             "--kafka-listener-security-protocol-map")
        names = {spec.name for spec in self.kafka_listener_specs()}
        unknown = sorted({part.strip().upper() for part in
                          self.kafka_unauthenticated_listeners.split(",") if part.strip()}
                         - names)
        if unknown:
            raise ValueError(f"--kafka-unauthenticated-listeners names {', '.join(unknown)}, "
                             "not in --kafka-listeners")

    def _check_kafka_security(self) -> None:
        """Refuse a Kafka listener less safe than the API port (docs/security.md, "Kafka")."""
        named = [part.strip().upper() for part in self.kafka_sasl_mechanisms.split(",")
                 if part.strip()]
        unknown = sorted(set(named) - set(_ALL_SASL_MECHANISMS))
        if unknown or not named:
            raise ValueError(f"kafka_sasl_mechanisms: {', '.join(unknown) or 'none'} not "
                             f"served; name some of {', '.join(_ALL_SASL_MECHANISMS)}")
        if "GSSAPI" in self.sasl_mechanisms() and not self.kafka_sasl_kerberos_keytab:
            raise ValueError("--kafka-sasl-mechanisms GSSAPI needs --kafka-sasl-kerberos-keytab "
                             "(the keytab with the broker's Kerberos key, e.g. of "
                             "kafka/HOST@REALM)")
        if not self.kafka_sasl_kerberos_service_name.strip():
            raise ValueError("kafka_sasl_kerberos_service_name must not be empty (Kafka's "
                             "sasl.kerberos.service.name, e.g. kafka)")
        if self.kafka_oauth_jwks_url and "OAUTHBEARER" not in self.sasl_mechanisms():
            raise ValueError("--kafka-oauth-jwks-url needs OAUTHBEARER on the Kafka port: "
                             "--kafka-security-protocol SASL_SSL (or SASL_PLAINTEXT) with "
                             "OAUTHBEARER among --kafka-sasl-mechanisms")
        anonymous = {part.strip().upper() for part in
                     self.kafka_unauthenticated_listeners.split(",") if part.strip()}
        for spec in self.kafka_listener_specs():
            check_listener_security(
                spec, named=bool(self.kafka_listeners.strip()), tls_cert=self.tls_cert,
                tls_ca=self.tls_ca, mechanisms=self.sasl_mechanisms(),
                token_auth=self.kafka_access, anonymous=spec.name in anonymous,
                allow_plaintext=self.kafka_allow_plaintext)

    def kafka_oauth(self) -> JwksSettings | None:
        """The identity provider's key set and claims' rules (None: no JWKS URL)."""
        if not self.kafka_oauth_jwks_url:
            return None
        audience = tuple(part.strip() for part in self.kafka_oauth_expected_audience.split(",")
                         if part.strip())
        scopes = tuple(part.strip() for part in self.kafka_oauth_required_scopes.split(",")
                       if part.strip())
        return JwksSettings(self.kafka_oauth_jwks_url, audience,
                            self.kafka_oauth_expected_issuer, self.kafka_oauth_sub_claim,
                            self.kafka_oauth_clock_skew_s, self.kafka_oauth_jwks_refresh_ms,
                            self.kafka_oauth_scope_claim, scopes, self.kafka_oauth_jwks_ca_file)

    @property
    def kafka_access(self) -> bool:
        """Whether the grants apply on the Kafka port (token authentication or a JWKS URL)."""
        return self.token_auth or bool(self.kafka_oauth_jwks_url and self.serves_kafka)

    @property
    def token_auth(self) -> bool:
        """Whether Folio's token key is set (its tokens are checked on both ports)."""
        return bool(self.auth_token_secret_file or self.auth_token_public_key_file)

    @property
    def grpc_auth(self) -> bool:
        """Whether gRPC calls must carry a token (and permissions apply): Folio's key, or an
        identity provider's JWKS (its tokens are accepted there too)."""
        return self.token_auth or bool(self.kafka_oauth_jwks_url)

    def super_user_roles(self) -> frozenset[str]:
        """The roles of ``super_users``."""
        return split_roles(self.super_users)

    @property
    def kafka_offsets_retention_ms(self) -> int:
        """``kafka_offsets_retention_minutes`` in milliseconds (at least 1)."""
        return max(1, round(self.kafka_offsets_retention_minutes * 60_000))

    def txn_snapshots(self) -> SnapshotPolicy:
        """The transaction buffers' snapshot policy these settings make."""
        return SnapshotPolicy(self.txn_snapshot_every_changes, self.txn_snapshot_every_ms,
                              self.txn_snapshot_chunk_bytes)
