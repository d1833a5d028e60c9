"""The broker as a stack of components, on a metadata store and bookies given below it.

``add_broker`` adds the broker's components to a process's
``ledger.lifecycle.ComponentStack`` on top of a ``LedgerSource`` (the store
and bookies ``folio standalone``, ``folio broker --bookies`` and ``folio
broker --metadata-url`` each open their own way). In start order (they stop
in reverse):

- the domain (``broker.app.broker_parts``): ledger client, topics,
  transaction coordinator, reader groups with their liveness sweeper, commit
  keys, grants;
- a cluster broker's ownership view (``OwnershipView``: the topics the
  services see, WrongHost for segments it does not own);
- the metrics server, the gRPC server, the Kafka listener;
- the storage watch of a bookie in process (health NOT_SERVING while its disk
  refuses writes).

Stopping therefore goes outside in: the Kafka listener, then the gRPC server
(it stops taking calls and lets streams finish what they started within
``stop_grace_s``), the metrics, then the topics close their ledgers cleanly,
and the store and bookies below close last. A cluster broker adds its
registration and its share of the containers on top (``broker.app.cluster_broker``),
so it hands its containers over and unregisters before anything else stops.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from broker.api import Topics
from broker.app.broker_parts import (
    AclsPart,
    CommitKeysPart,
    CoordinatorPart,
    GroupsPart,
    LedgerClientPart,
    LedgerSource,
    TopicsPart,
)
from broker.app.cluster_ownership import ClusterOwnership
from broker.app.kafka_listener import (
    KafkaAuth,
    KafkaUnavailableError,
    StartedKafka,
    start_kafka,
)
from broker.app.storage_watch import StorageWatch
from broker.auth import Access
from broker.broker_config import BrokerConfig
from broker.services.kafka_internal import KafkaForwardSlot
from broker.services.server import SERVICE_NAMES, BrokerServer, start_broker_server
from broker.txn.faults import NO_TXN_FAULTS, TxnFaults
from ledger.components import MetricsServer
from ledger.config import LedgerConfig
from ledger.lifecycle import ComponentStack, StartError
from ledger.security.tls import TlsConfigError, metrics_tls_arguments

if TYPE_CHECKING:
    # Only a broker that serves Kafka imports kio, and then without Hypothesis
    # (``broker.app.no_hypothesis``): a top-level import here loaded both in
    # every broker and left a .hypothesis/ directory in its working directory.
    from broker.kafka.server import KafkaServer

__all__ = ["BrokerStack", "Running", "add_broker"]

log = logging.getLogger(__name__)


@dataclass
class Running:
    """The command being run and where its data lives, for its ready line."""

    command: str
    where: str


class OwnershipView:
    """The topics as the services see them; a cluster broker's ownership wraps them."""

    name = "ownership view"

    def __init__(self, topics: TopicsPart, coordinator: CoordinatorPart,
                 commit_keys: CommitKeysPart, groups: GroupsPart,
                 ownership: Callable[[], ClusterOwnership] | None) -> None:
        self._topics = topics
        self._coordinator = coordinator
        self._commit_keys = commit_keys
        self._groups = groups
        self._ownership = ownership
        self.ownership: ClusterOwnership | None = None
        self.served: Topics | None = None
        #: A cluster broker's Kafka batches forwarded by the others (the Kafka
        #: listener sets its handler; ``broker.services.kafka_internal``).
        self.kafka_forwards = KafkaForwardSlot()

    async def start(self) -> None:
        topics = self._topics.topics
        if self._ownership is None:
            self.served = topics
            return
        self.ownership = self._ownership()
        self.served = await self.ownership.attach(topics, self._coordinator.coordinator,
                                                  self._commit_keys.commit_keys)
        self.ownership.share_liveness(self._groups.liveness)

    async def stop(self) -> None:
        if self.ownership is not None:
            await self.ownership.close()


class GrpcServer:
    """The public gRPC API; its stop lets calls in flight finish within ``stop_grace_s``."""

    name = "gRPC server"

    def __init__(self, config: BrokerConfig, view: OwnershipView, coordinator: CoordinatorPart,
                 commit_keys: CommitKeysPart, groups: GroupsPart, acls: AclsPart) -> None:
        self._config = config
        self._view = view
        self._coordinator = coordinator
        self._commit_keys = commit_keys
        self._groups = groups
        self._acls = acls
        self.server: BrokerServer | None = None

    async def start(self) -> None:
        config, ownership = self._config, self._view.ownership
        assert self._view.served is not None
        try:
            self.server = await start_broker_server(
                self._view.served, config.host, config.port,
                max_held_bytes=config.max_held_bytes, max_held_ms=config.max_held_ms,
                coordinator=self._coordinator.coordinator,
                commit_keys=self._commit_keys.commit_keys, groups=self._groups.groups,
                group_liveness=self._groups.liveness, kafka_groups=self._groups.kafka_groups,
                tls=config.server_tls(),
                acls=self._acls.acls, interceptors=self._acls.interceptors,
                owners=None if ownership is None else ownership.owners,
                transactions_gate=None if ownership is None else ownership.transactions_gate,
                txn_routes=None if ownership is None else ownership.routes,
                kafka_forwards=None if ownership is None else self._view.kafka_forwards)
        except (OSError, TlsConfigError) as error:
            raise StartError(str(error)) from None

    async def stop(self) -> None:
        if self.server is not None:
            log.info("stopping: no new calls, %.0f s for those in flight",
                     self._config.stop_grace_s)
            await self.server.stop(self._config.stop_grace_s)


class KafkaListener:
    """The Kafka wire protocol on ``kafka_port`` or ``kafka_listeners`` (nothing: neither)."""

    name = "Kafka listener"

    def __init__(self, config: BrokerConfig, source: LedgerSource, topics: TopicsPart,
                 coordinator: CoordinatorPart, view: OwnershipView, acls: AclsPart,
                 groups: GroupsPart) -> None:
        self._config = config
        self._source = source
        self._topics = topics
        self._coordinator = coordinator
        self._view = view
        self._acls = acls
        self._groups = groups
        self._started: StartedKafka | None = None

    @property
    def server(self) -> KafkaServer | None:
        """The listener (None: no Kafka port)."""
        return None if self._started is None else self._started.server

    async def start(self) -> None:
        config, bookie = self._config, self._source.bookie
        try:
            self._started = await start_kafka(
                config, self._topics.topics, self._source.store, self._coordinator.coordinator,
                ownership=self._view.ownership, served=self._view.served,
                forwards=self._view.kafka_forwards,
                auth=KafkaAuth(Access(self._acls.acls, config.super_user_roles())
                               if config.kafka_access else None, self._acls.tokens),
                write_quorum=self._source.quorums.get("write_quorum",
                                                      LedgerConfig.write_quorum),
                ledger_dir=None if bookie is None else bookie.config.data_dir)
        except (OSError, ValueError, KafkaUnavailableError) as error:
            raise StartError(str(error)) from None
        if self._started is not None:  # ``folio group`` shows its consumer groups now
            self._groups.kafka_groups.source = self._started.groups

    async def stop(self) -> None:
        self._groups.kafka_groups.source = None
        self._view.kafka_forwards.handler = None
        self._view.kafka_forwards.offset_for_time = None
        self._view.kafka_forwards.share_state = None
        if self._started is not None:
            await self._started.stop()

    def ready_text(self, config: BrokerConfig) -> str:
        """The ready line's Kafka part: ``, kafka on HOST:PORT`` per listener ("": none).

        Named listeners (``--kafka-listeners``) add their name: ``(NAME)``.
        """
        if self._started is None:
            return ""
        if not config.kafka_listeners.strip():
            return f", kafka on {config.host}:{self._started.server.port}"
        return "".join(f", kafka on {f'[{host}]' if ':' in host else host}:{port} ({name})"
                       for name, host, port in self._started.listeners)


class StorageWatchPart:
    """Health NOT_SERVING while the in-process bookie's disk refuses writes."""

    name = "storage watch"

    def __init__(self, source: LedgerSource, server: GrpcServer) -> None:
        self._source = source
        self._server = server
        self._watch: StorageWatch | None = None

    async def start(self) -> None:
        bookie, server = self._source.bookie, self._server.server
        if bookie is None or server is None:
            return
        self._watch = StorageWatch(bookie, server.health, SERVICE_NAMES, self._source.directory)
        self._watch.start()

    async def stop(self) -> None:
        if self._watch is not None:
            await self._watch.close()


@dataclass
class BrokerStack:
    """The broker's components in a stack, for the ready line and a cluster's parts on top."""

    config: BrokerConfig
    running: Running
    view: OwnershipView
    metrics: MetricsServer
    grpc: GrpcServer
    kafka: KafkaListener

    @property
    def port(self) -> int:
        """The gRPC API's bound port."""
        assert self.grpc.server is not None
        return self.grpc.server.port

    def ready_line(self) -> str:
        """``folio standalone listening on HOST:PORT (...)``: scripts read the port from it."""
        config = self.config
        security = ", TLS" if config.tls_cert else ""
        security += ", token authentication" if config.grpc_auth else ""
        scheme = "https" if config.metrics_tls else "http"
        kafka_line = self.kafka.ready_text(config)
        return (f"{self.running.command} listening on {config.host}:{self.port} "
                f"({self.running.where}{security}, metrics on "
                f"{scheme}://{config.host}:{self.metrics.port}/metrics{kafka_line})")


def add_broker(stack: ComponentStack, config: BrokerConfig, source: LedgerSource,
               running: Running, *, txn_faults: TxnFaults = NO_TXN_FAULTS,
               ownership: Callable[[], ClusterOwnership] | None = None,
               bookie_in_process: bool = False) -> BrokerStack:
    """Add the broker's components on ``source`` to ``stack`` (module docstring).

    ``ownership``: a cluster broker's ``ClusterOwnership``, asked for once the
    components below have started (its store is opened by ``source``).

    ``bookie_in_process``: ``source`` has a bookie in this process (its
    storage is watched).
    """
    in_cluster = ownership is not None
    ledgers = stack.add(LedgerClientPart(source))
    topics = stack.add(TopicsPart(config, source, ledgers, ownership), stop_timeout_s=30)
    coordinator = stack.add(CoordinatorPart(topics, txn_faults, in_cluster=in_cluster))
    groups = stack.add(GroupsPart(source, topics))
    commit_keys = stack.add(CommitKeysPart(topics, coordinator, in_cluster=in_cluster))
    acls = stack.add(AclsPart(config, source))
    view = stack.add(OwnershipView(topics, coordinator, commit_keys, groups, ownership))
    metrics = stack.add(MetricsServer(config.host, config.metrics_port, (
        lambda: metrics_tls_arguments(config.server_tls())) if config.metrics_tls else None))
    grpc = stack.add(GrpcServer(config, view, coordinator, commit_keys, groups, acls),
                     stop_timeout_s=config.stop_grace_s + 10)
    kafka = stack.add(KafkaListener(config, source, topics, coordinator, view, acls, groups))
    if bookie_in_process:
        stack.add(StorageWatchPart(source, grpc), stop_timeout_s=5)
    return BrokerStack(config, running, view, metrics, grpc, kafka)
