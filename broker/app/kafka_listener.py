"""Starting the Kafka listeners (``--kafka-port``, or ``--kafka-listeners``) when asked for.

Every listener shares the broker's Kafka state (coordinators, fetch
sessions, quotas, producer ids): each serves a ``KafkaContext`` of its own
made with ``dataclasses.replace`` of the first one's once that state is in
place, differing only in its name, address, security and view of the
cluster (docs/kafka.md, "Listeners").

The Kafka front-end (``broker.kafka``) and its wire library (kio) are
imported only then, so a broker without the ``kafka`` extra installed runs
as before and says what to install when asked to serve Kafka.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from broker.api import Topics
from broker.app.cluster_ownership import ClusterOwnership
from broker.app.no_hypothesis import hide_hypothesis
from broker.auth.access import Access
from broker.broker_config import BrokerConfig
from broker.groups.kafka_view import KafkaGroups
from broker.kafka_listener_specs import KafkaSecurityProtocol
from broker.services.kafka_internal import KafkaForwardSlot
from broker.topics.manager import TopicManager
from broker.txn.coordinator import TxnCoordinator
from ledger.api import MetadataStore

if TYPE_CHECKING:
    from broker._proto.v1.kafka_internal_pb2 import (
        AppendKafkaBatchRequest,
        AppendKafkaBatchResponse,
        OffsetForTimeRequest,
        OffsetForTimeResponse,
        ShareStateRequest,
        ShareStateResponse,
    )
    from broker.app.kafka_cluster import ClusterKafka
    from broker.kafka.context import KafkaContext
    from broker.kafka.coordinators import KafkaCoordinators
    from broker.kafka.sasl.credentials import ScramCredentialStore
    from broker.kafka.sasl.delegation import DelegationTokens
    from broker.kafka.sasl.kerberos import KerberosAcceptor
    from broker.kafka.sasl.security import KafkaSecurity
    from broker.kafka.server import KafkaServer
    from broker.kafka.share_groups.group_configs import GroupConfigs
    from ledger.security.bearer import BearerTokens

__all__ = ["KafkaAuth", "KafkaUnavailableError", "StartedKafka", "start_kafka"]


class KafkaUnavailableError(Exception):
    """The settings ask for a Kafka listener but its libraries are not installed."""


@dataclass(frozen=True)
class KafkaAuth:
    """Who may connect to the Kafka port and what they may do.

    ``access``: the grants' check every Kafka call is authorised by
    (``broker.kafka.access``); None (no token authentication): none is.
    ``tokens``: the process's token check (``AclsPart.tokens``, the very
    object the gRPC port's interceptor holds), which OAUTHBEARER and PLAIN
    verify with; None: no token key and no JWKS.
    """

    access: Access | None
    tokens: BearerTokens | None


@dataclass(frozen=True)
class StartedKafka:
    """The Kafka listeners, and a cluster broker's view of nodes and group coordinators.

    ``server``: the first listener (``servers[0]``); ``servers`` every one,
    in the order of ``--kafka-listeners``; ``listeners``: (name, bound host,
    bound port) of each, for the ready line. The view's loads of claimed
    containers' groups are its own background tasks: stop it after the
    servers (``ClusterKafka.stop``). ``groups``: its consumer groups as
    ``folio group`` shows them.
    """

    server: KafkaServer
    cluster: ClusterKafka | None
    groups: KafkaGroups | None = None
    servers: tuple[KafkaServer, ...] = ()
    listeners: tuple[tuple[str, str, int], ...] = ()

    async def stop(self) -> None:
        """Stop every listener, then the cluster view."""
        for server in self.servers or (self.server,):
            await server.stop()
        if self.cluster is not None:
            await self.cluster.stop()


async def start_kafka(config: BrokerConfig, topics: TopicManager,
                      store: MetadataStore,
                      txn_coordinator: TxnCoordinator | None = None, *,
                      ownership: ClusterOwnership | None = None,
                      served: Topics | None = None,
                      auth: KafkaAuth | None = None,
                      write_quorum: int = 1,
                      forwards: KafkaForwardSlot | None = None,
                      ledger_dir: str | None = None) -> StartedKafka | None:
    """The started Kafka listeners (and cluster view), or None when none is asked for.

    ``write_quorum``: copies of each entry of new ledgers (Qw), the largest
    replication factor CreateTopics accepts.

    Consumer groups are served with it; transactional producers too when
    ``txn_coordinator`` is given (their transactions are Folio's; in a
    cluster coordinated where it runs: ``broker.kafka.txns.cluster``). A
    cluster broker (``ownership``, after its ``attach``) serves partitions
    through ``served`` (its ``OwnedTopics``: NOT_LEADER_OR_FOLLOWER for
    segments it does not own, writes paused with its session), names every
    broker and each partition's owner in Metadata, and coordinates the groups
    of its containers (``broker.app.kafka_cluster``); its Kafka address is set
    on ``ownership`` for its records. It forwards a Produce batch whose heir
    another broker owns to that broker, and serves the batches the others
    forward through ``forwards`` (``broker.kafka.forwarding``).

    ``auth``: the grants' check and the process's token check (``KafkaAuth``);
    None: neither.

    ``ledger_dir``: the in-process bookie's data directory, whose disk
    DescribeLogDirs reports (None: no bookie in this process).

    Raises ``OSError`` if the port is taken, ``KafkaUnavailableError`` without
    the ``kafka`` extra, ``ValueError`` (``TlsConfigError`` among them) when a
    TLS or token key file does not load.
    """
    specs = config.kafka_listener_specs()
    if not specs:
        return None
    hidden = hide_hypothesis()
    try:
        # Imported here: only a broker that serves Kafka needs kio.
        from broker.app.kafka_cluster import ClusterKafka  # noqa: PLC0415
        from broker.app.kafka_endpoints import serve_listeners  # noqa: PLC0415
        from broker.kafka.consumer_groups.members import GroupConfig  # noqa: PLC0415
        from broker.kafka.consumer_groups.migration import MigrationPolicy  # noqa: PLC0415
        from broker.kafka.consumer_groups.modern_requests import ModernConfig  # noqa: PLC0415
        from broker.kafka.consumer_groups.report import GroupReport  # noqa: PLC0415
        from broker.kafka.context import NODE_ID, KafkaContext  # noqa: PLC0415
        from broker.kafka.coordinators import ClusterGroups, start_coordinators  # noqa: PLC0415
        from broker.kafka.forwarding import HeirForwarder  # noqa: PLC0415
        from broker.kafka.handlers.transactions import install  # noqa: PLC0415
        from broker.kafka.locator import Node  # noqa: PLC0415
        from broker.kafka.nodes import node_id_of  # noqa: PLC0415
        from broker.kafka.offset_times import OffsetTimes  # noqa: PLC0415
        from broker.kafka.producer_ids import ProducerIds  # noqa: PLC0415
        from broker.kafka.share_groups.report import ShareReport  # noqa: PLC0415
        from broker.kafka.txns.expiry import TxnIdExpirySettings  # noqa: PLC0415
    except ImportError as error:
        raise KafkaUnavailableError(
            f"--kafka-port needs the kafka extra (pip install 'folio[kafka]'): {error}"
        ) from None
    finally:
        hidden.restore()
    credentials, tokens = _shared_security(config, store)
    kerberos = kerberos_acceptor(config)
    verifier = auth.tokens if auth else None
    primary = specs[0]
    context = KafkaContext(served or topics, primary.advertised_host,
                           ProducerIds(store), advertised_port=primary.advertised_port,
                           authorizer=auth.access if auth else None, security=kafka_security(
                               config, primary.protocol, credentials, tokens, verifier,
                               kerberos),
                           auto_create_topics=config.kafka_auto_create_topics,
                           num_partitions=config.kafka_num_partitions,
                           write_quorum=write_quorum, ledger_dir=ledger_dir,
                           listener=primary.name)
    await _start_quotas(context, store, config)
    cluster = None
    if ownership is not None:
        owners = ownership.owners
        # The broker id (its address) is bound once its API is: asked when needed.
        cluster = ClusterKafka(owners, lambda: Node(
            node_id_of(owners.broker_id), context.host, context.advertised_port or context.port))
        context.nodes = cluster
        ownership.add_container_listener(cluster.claimed, cluster.released)
        context.forwarder = HeirForwarder(ownership.peers.append_kafka_batch, owners.owner_of)
        if forwards is not None:
            _serve_peers(context, forwards)
    # Offsets, group records and transactional ids are loaded before serving.
    context.coordinators = await start_coordinators(
        topics, txn_coordinator, context.producer_ids,
        lambda: Node(NODE_ID, context.host, context.advertised_port or context.port),
        context.stopping, GroupConfig(
            offsets_retention_ms=config.kafka_offsets_retention_ms,
            offsets_retention_check_interval_ms=config.kafka_offsets_retention_check_interval_ms),
        txn_expiry=TxnIdExpirySettings(
            config.kafka_transactional_id_expiration_ms,
            config.kafka_transaction_remove_expired_transaction_cleanup_interval_ms),
        cluster=None if ownership is None or cluster is None
        else ClusterGroups(ownership.container_count, cluster.writable, cluster,
                           await _share_configs(store)),
        modern=ModernConfig(migration_policy=MigrationPolicy.parse(
            config.kafka_group_migration_policy)))
    if cluster is not None:
        cluster.attach(context.coordinators)
    if ownership is not None and cluster is not None:
        _serve_share_states(context, ownership, cluster, forwards)
    if ownership is not None and cluster is not None and context.coordinators.txns is not None:
        await _serve_cluster_txns(context.coordinators, ownership, cluster, topics)
    # ``folio group`` and ``folio_group_lag`` (set on the maintenance round).
    # A reset by time reads each partition where it is served (asked of its owner).
    times = (OffsetTimes(topics) if ownership is None else
             OffsetTimes(topics, ownership.owners.owns, ownership.owners.lookup,
                         ownership.peers.offset_for_time))
    shares = context.coordinators.shares
    report = GroupReport(context.coordinators.groups, topics,
                         None if cluster is None else cluster.where_group,
                         context.coordinators.consumers, times.offset_at,
                         None if shares is None else ShareReport(
                             shares, context.coordinators.share_states))
    topics.add_maintenance_hook(report.update_lag)
    # A first round now: the lag series at once, and share groups written before a
    # restart listed before any member comes back (``folio group`` finds them by it).
    await report.update_lag()
    if tokens is not None:
        topics.add_maintenance_hook(tokens.maybe_sweep)  # expired tokens
    if context.coordinators.txns is not None:
        install(context)
    servers = await serve_listeners(specs, context, lambda spec: kafka_security(
        config, spec.protocol, credentials, tokens, verifier, kerberos), cluster, ownership)
    return StartedKafka(servers[0], cluster, report, tuple(servers), tuple(
        (spec.name, spec.host, server.port) for spec, server in zip(specs, servers, strict=True)))


def _serve_peers(context: KafkaContext, forwards: KafkaForwardSlot) -> None:
    """Serve the other brokers' ``KafkaInternal`` calls: forwarded batches, offsets by time."""
    from broker.kafka.forwarding import serve  # noqa: PLC0415
    from broker.kafka.handlers.produce import forwarded_append  # noqa: PLC0415
    from broker.kafka.offset_times import serve as serve_offset_for_time  # noqa: PLC0415

    append, forwarder = forwarded_append(context), context.forwarder

    async def forwarded(request: AppendKafkaBatchRequest) -> AppendKafkaBatchResponse:
        return await serve(context.topics, append, forwarder, request)
    forwards.handler = forwarded

    async def offset_for_time(request: OffsetForTimeRequest) -> OffsetForTimeResponse:
        return await serve_offset_for_time(context.topics, request)
    forwards.offset_for_time = offset_for_time


def _serve_share_states(context: KafkaContext, ownership: ClusterOwnership,
                        cluster: ClusterKafka, forwards: KafkaForwardSlot | None) -> None:
    """Share partitions' states for a group's coordinator, at their leaders
    (``broker.kafka.share_groups.admin``): asked of the others, served to them."""
    from broker.cluster.containers import KAFKA_SHARE_STATE_TOPIC  # noqa: PLC0415
    from broker.kafka.share_groups.admin import (  # noqa: PLC0415
        LocalShareStates,
        ShareStates,
        serve,
    )

    coordinators = context.coordinators
    if coordinators is None or coordinators.shares is None:
        return
    owners = ownership.owners
    local = LocalShareStates(context.topics, coordinators.shares)
    coordinators.share_states = ShareStates(
        local, cluster.writable, owners.lookup,
        (owners.container_owner, ownership.container_count), ownership.peers.share_state,
        serves_container=lambda container: cluster.writable(
            f"{KAFKA_SHARE_STATE_TOPIC}/{container}"))
    if forwards is not None:
        async def share_state(request: ShareStateRequest) -> ShareStateResponse:
            return await serve(local, request)
        forwards.share_state = share_state


async def _share_configs(store: MetadataStore) -> GroupConfigs:
    """A cluster's share group configs, read (and watched) before serving (every broker
    reads them: ``broker.kafka.share_groups.group_configs``)."""
    from broker.kafka.share_groups.group_configs import WatchedGroupConfigs  # noqa: PLC0415

    configs = WatchedGroupConfigs(store)
    await configs.start()
    return configs


async def _start_quotas(context: KafkaContext, store: MetadataStore,
                        config: BrokerConfig) -> None:
    """The cluster's client quotas and dynamic broker configs, read (and watched) before serving.

    Every request and connection is counted against them from the first.
    """
    from broker.kafka.context import NODE_ID  # noqa: PLC0415
    from broker.kafka.dynamic_configs import (  # noqa: PLC0415
        DynamicBrokerConfigs,
        StaticConnectionSettings,
    )
    from broker.kafka.quotas.connections import ConnectionQuotas  # noqa: PLC0415
    from broker.kafka.quotas.enforcer import ClientQuotas  # noqa: PLC0415
    from broker.kafka.quotas.store import QuotaStore  # noqa: PLC0415

    quota_store = context.quota_store = QuotaStore(store)
    await quota_store.start()
    context.quotas = ClientQuotas(lambda: quota_store.table)
    # The flags' connection limits, under the dynamic broker configs (AlterConfigs).
    dynamic = context.dynamic_configs = DynamicBrokerConfigs(store, StaticConnectionSettings(
        config.kafka_max_connections, config.kafka_max_connections_per_ip,
        config.kafka_max_connections_per_ip_overrides),
        lambda: context.nodes.this_node().node_id if context.nodes is not None else NODE_ID)
    await dynamic.start()
    context.connection_quotas = ConnectionQuotas(lambda: quota_store.table,
                                                 limits=dynamic.limits)


async def _serve_cluster_txns(coordinators: KafkaCoordinators, ownership: ClusterOwnership,
                              cluster: ClusterKafka, topics: TopicManager) -> None:
    """Kafka transactions across the cluster's brokers (``broker.kafka.txns.cluster``).

    The transactional ids follow the transaction coordinator: loaded when it
    is seated here, dropped when it stands down.
    """
    from broker.cluster.containers import COORDINATOR_SEGMENT  # noqa: PLC0415
    from broker.kafka.locator import GROUP_KEY  # noqa: PLC0415
    from broker.kafka.txns.cluster import ClusterTxns  # noqa: PLC0415

    assert coordinators.txns is not None
    owners = ownership.owners
    txns = ClusterTxns(
        coordinators.txns, coordinators.groups, topics, ownership.routes, owners,
        ownership.peers, lambda: ownership.seated and owners.owns(COORDINATOR_SEGMENT),
        lambda group: cluster.is_local(GROUP_KEY, group), ownership.container_count)
    coordinators.txns.route_offsets(txns.write_offsets)
    coordinators.cluster_txns = txns
    cluster.attach_txns(txns)
    ownership.routes.kafka = txns
    ownership.add_coordinator_listener(txns.seated, txns.stood_down)
    if ownership.seated:  # (the balance starts after the listener: not expected)
        await txns.seated()


def _shared_security(config: BrokerConfig, store: MetadataStore) -> tuple[
        ScramCredentialStore, DelegationTokens | None]:
    """What every listener's security shares beside the process's token check (``KafkaAuth``):
    the SCRAM credentials and the delegation tokens."""
    from broker.kafka.sasl.credentials import ScramCredentialStore  # noqa: PLC0415

    return ScramCredentialStore(store), _delegation_tokens(config, store)


def kerberos_acceptor(config: BrokerConfig) -> KerberosAcceptor | None:
    """The broker's Kerberos keys and rules when GSSAPI is served (None otherwise).

    Raises ``KafkaUnavailableError`` without the Python package ``gssapi``
    (the ``gssapi`` extra), ``ValueError`` for malformed rules or a keytab
    without the principal's key.
    """
    if "GSSAPI" not in config.sasl_mechanisms():
        return None
    from broker.kafka.sasl.kerberos_names import KerberosRules  # noqa: PLC0415

    rules = KerberosRules(config.kafka_sasl_kerberos_principal_to_local_rules)
    try:
        from broker.kafka.sasl.kerberos import KerberosAcceptor  # noqa: PLC0415
    except ImportError as error:
        raise KafkaUnavailableError(
            "--kafka-sasl-mechanisms GSSAPI needs the gssapi extra (pip install "
            "'folio[gssapi]'), which builds the Python package gssapi against MIT Kerberos "
            f"(apt-get install libkrb5-dev): {error}") from None
    return KerberosAcceptor(config.kafka_sasl_kerberos_keytab,
                            config.kafka_sasl_kerberos_principal,
                            config.kafka_sasl_kerberos_service_name.strip(), rules)


def kafka_security(config: BrokerConfig, protocol: KafkaSecurityProtocol,
                   credentials: ScramCredentialStore, tokens: DelegationTokens | None,
                   verifier: BearerTokens | None,
                   kerberos: KerberosAcceptor | None = None) -> KafkaSecurity:
    """One listener's TLS and SASL mechanisms, for ``protocol``, on the shared parts.

    ``BrokerConfig`` has already refused the unsafe combinations (a token
    broker's listener without authentication, a plain listener beside a TLS
    API without ``kafka_allow_plaintext``). Raises ``ValueError`` for
    unreadable files.
    """
    from broker.kafka.sasl.mechanisms import Authenticator  # noqa: PLC0415
    from broker.kafka.sasl.security import KafkaSecurity, KerberosSettings  # noqa: PLC0415
    from broker.kafka.sasl.tls import ListenerTls  # noqa: PLC0415

    tls = ListenerTls(config.server_tls()) if protocol.tls else None
    authenticator = None
    if protocol.sasl:
        authenticator = Authenticator(config.sasl_mechanisms(), verifier, credentials, tokens,
                                      kerberos)
    return KafkaSecurity(credentials, tls, authenticator,
                         certificate_roles=protocol.tls and not protocol.sasl
                         and bool(config.tls_ca),
                         super_users=config.super_user_roles(),
                         oauth=config.kafka_oauth() if protocol.sasl else None, tokens=tokens,
                         kerberos=None if authenticator is None or kerberos is None else
                         KerberosSettings(kerberos.service_name, kerberos.rules.text))


def _delegation_tokens(config: BrokerConfig, store: MetadataStore) -> DelegationTokens | None:
    """The cluster's delegation tokens, None without ``kafka_delegation_token_secret_file``.

    Off unless asked for, as in Kafka (``delegation.token.secret.key``): a
    token outlives the credential that made it (a JWT of an hour can make a
    token of a week), so a broker upgraded in place does not start handing
    them out. Raises ``ValueError`` for an unreadable or empty file.
    """
    from broker.kafka.sasl.delegation import (  # noqa: PLC0415
        DelegationTokens,
        DelegationTokenStore,
    )

    if not config.kafka_delegation_token_secret_file:
        return None
    secret = _read_secret(config.kafka_delegation_token_secret_file,
                          "--kafka-delegation-token-secret-file")
    return DelegationTokens(
        DelegationTokenStore(store), secret,
        max_lifetime_ms=config.kafka_delegation_token_max_lifetime_ms,
        expiry_time_ms=config.kafka_delegation_token_expiry_time_ms,
        sweep_interval_ms=config.kafka_delegation_token_expiry_check_interval_ms)


def _read_secret(path: str, flag: str) -> bytes:
    """The secret in ``path`` (surrounding whitespace left out, as a trailing newline)."""
    try:
        with open(path, "rb") as file:
            secret = file.read().strip()
    except OSError as error:
        raise ValueError(f"{flag}: cannot read {path}: {error.strerror}") from None
    if not secret:
        raise ValueError(f"{flag}: {path} is empty")
    return secret
