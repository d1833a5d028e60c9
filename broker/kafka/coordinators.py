"""The coordinators behind the Kafka listener: consumer groups, transactional ids, the locator.

``start_coordinators`` loads them (offsets, group records, transactional
ids: once, at the listener's start). Handlers reach them through
``KafkaContext.coordinators``; without them (a context built for a test of
other APIs) group and transaction requests answer COORDINATOR_NOT_AVAILABLE.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field

from broker.kafka.consumer_groups.coordinator import GroupCoordinator
from broker.kafka.consumer_groups.expiry import OffsetExpiry
from broker.kafka.consumer_groups.members import Group
from broker.kafka.consumer_groups.membership import GroupConfig
from broker.kafka.consumer_groups.modern import ModernGroups, topic_partitions
from broker.kafka.consumer_groups.modern_requests import ModernConfig, topic_names
from broker.kafka.consumer_groups.offsets import OffsetStore
from broker.kafka.consumer_groups.states import ConsumerGroupState
from broker.kafka.locator import (
    GROUP_KEY,
    CoordinatorLocator,
    LocalLocator,
    Node,
    container_of,
)
from broker.kafka.producer_ids import ProducerIds
from broker.kafka.share_groups.admin import LocalShareStates, ShareStates
from broker.kafka.share_groups.config import ShareConfig
from broker.kafka.share_groups.coordinator import ShareCoordinator
from broker.kafka.share_groups.group_configs import GroupConfigs
from broker.kafka.share_groups.store import ShareStore
from broker.kafka.txns.cluster import ClusterTxns
from broker.kafka.txns.expiry import TxnIdExpiry, TxnIdExpirySettings
from broker.kafka.txns.producers import TxnProducers
from broker.topics.manager import TopicManager
from broker.txn.coordinator import TxnCoordinator

__all__ = ["ClassicView", "ClusterGroups", "KafkaCoordinators", "start_coordinators"]


@dataclass(frozen=True)
class ClusterGroups:
    """How a cluster broker's groups follow its containers (``broker.app.kafka_cluster``).

    Attributes:
        container_count: the cluster's containers: one ``_kafka_offsets`` segment each.
        owns: whether this broker serves a segment now.
        locator: which broker coordinates a key.
        share_configs: the share groups' configs every broker reads (the metadata
            store's, ``WatchedGroupConfigs``; None: no share groups served).
    """

    container_count: int
    owns: Callable[[str], bool]
    locator: CoordinatorLocator
    share_configs: GroupConfigs | None = None


class ClassicView:
    """The classic coordinator as the consumer protocol's side sees it (``ClassicGroups``,
    and ``mixed.ClassicSide`` for the groups that change kind)."""

    def __init__(self, groups: GroupCoordinator) -> None:
        self._groups = groups

    def in_use(self, group_id: str) -> bool:
        group = self._groups.group(group_id)
        return group is not None and (bool(group.members) or bool(group.pending)
                                      or group.state not in (ConsumerGroupState.EMPTY,
                                                             ConsumerGroupState.DEAD))

    def forget_empty(self, group_id: str) -> None:
        group = self._groups.group(group_id)
        if group is not None and not group.members and not group.pending \
                and group.state is ConsumerGroupState.EMPTY:
            del self._groups.groups()[group_id]

    def group(self, group_id: str) -> Group | None:
        return self._groups.group(group_id)

    def hand_over(self, group_id: str) -> None:
        self._groups.hand_over(group_id)

    def adopt(self, group: Group) -> None:
        self._groups.adopt(group)

    def session_timeout_ok(self, session_timeout_ms: int) -> bool:
        config = self._groups.config
        return (config.min_session_timeout_ms <= session_timeout_ms
                <= config.max_session_timeout_ms)


@dataclass
class KafkaCoordinators:
    """What the group and transaction handlers work on.

    Attributes:
        groups: the classic consumer groups and every group's committed offsets.
        txns: the transactional ids (None: no Folio transaction coordinator,
            transactional producers are refused).
        locator: which broker coordinates a key (the cluster hook).
        consumers: the consumer protocol's groups (KIP-848) beside the classic
            ones, on the same offsets (None: ConsumerGroupHeartbeat answers
            COORDINATOR_NOT_AVAILABLE).
        cluster_txns: a cluster broker's Kafka transactions across brokers
            (None: one broker, everything is here).
    """

    groups: GroupCoordinator
    txns: TxnProducers | None
    locator: CoordinatorLocator
    cluster_txns: ClusterTxns | None = None
    closer: asyncio.Task[None] | None = field(default=None, repr=False)
    consumers: ModernGroups | None = None
    #: Expires committed offsets (``offsets.retention.minutes``), removes deleted topics'.
    expiry: OffsetExpiry | None = None
    #: Forgets expired transactional ids (None: no transactions served).
    txn_expiry: TxnIdExpiry | None = None
    #: The background sweeps (offsets, transactional ids), cancelled by ``close``.
    sweeps: list[asyncio.Task[None]] = field(default_factory=list, repr=False)
    #: Share groups (KIP-932) and their share partitions (None: not served).
    shares: ShareCoordinator | None = None
    #: The share partitions' states wherever they are kept, for the group's
    #: coordinator (a cluster broker's is set by ``broker.app.kafka_listener``).
    share_states: ShareStates | None = None

    def close(self) -> None:
        """Cancel the groups' timers and the transactions' drives (the listener stops)."""
        for task in self.sweeps:
            task.cancel()
        self.groups.close()
        if self.txns is not None:  # no drive outlives the listener (the next start resumes it)
            self.txns.stand_down()
        if self.consumers is not None:
            self.consumers.close()
        if self.shares is not None:
            self.shares.close()

    async def load_container(self, container: int) -> None:
        """A cluster broker claimed ``container``: load its groups, classic ones first
        (share groups have nothing to load: their members join; their share partitions
        load at their first fetch)."""
        if self.shares is not None:
            self.shares.load_container(container)
        await self.groups.load_container(container)
        if self.consumers is not None:
            self.consumers.load_container(container)

    def drop_container(self, container: int) -> None:
        """Stop coordinating ``container``'s groups, every kind, and leading its share
        partitions."""
        if self.shares is not None:
            self.shares.drop_container(container)
        if self.consumers is not None:
            self.consumers.drop_container(container)
        self.groups.drop_container(container)

    async def close_on(self, stopping: asyncio.Event) -> None:
        """Wait for ``stopping``, then ``close``."""
        with contextlib.suppress(asyncio.CancelledError):
            await stopping.wait()
        self.close()


async def start_coordinators(topics: TopicManager, txn_coordinator: TxnCoordinator | None,
                             producer_ids: ProducerIds, node: Callable[[], Node],
                             stopping: asyncio.Event,
                             config: GroupConfig | None = None, *,
                             cluster: ClusterGroups | None = None,
                             modern: ModernConfig | None = None,
                             txn_expiry: TxnIdExpirySettings | None = None,
                             share: ShareConfig | None = None,
                             ) -> KafkaCoordinators:
    """Load the groups' offsets and the transactional ids; raises what the topics raise.

    Their timers are cancelled once ``stopping`` (the listener's) is set, as
    are the sweeps of expired offsets (``config``'s retention) and
    transactional ids (``txn_expiry``; None: Kafka's defaults).
    With ``cluster`` (a cluster broker) nothing is loaded here: the groups of
    each container load when this broker claims it, ``cluster`` is the
    locator, and the transactional ids load when the transaction coordinator
    is seated here (``broker.kafka.txns.cluster``: the caller wires it).
    ``modern``: the consumer protocol's settings (None: Kafka's defaults).
    ``share``: the share groups' (None: Kafka's defaults; in a cluster served only
    with ``cluster.share_configs``).
    """
    if cluster is not None:
        count = cluster.container_count
        groups = GroupCoordinator(topics, OffsetStore(
            topics, count, cluster.owns, lambda group: container_of(GROUP_KEY, group, count)),
            config)
        txns = None if txn_coordinator is None else TxnProducers(
            topics, txn_coordinator, producer_ids, groups)
        modern_groups = ModernGroups(
            topic_partitions(topics), groups.store, ClassicView(groups), modern,
            names=topic_names(topics), states=groups.store, side=ClassicView(groups))
        cluster_shares = None
        if cluster.share_configs is not None:
            classic_view = ClassicView(groups)
            cluster_shares = ShareCoordinator(
                topics, ShareStore(topics, count, cluster.owns),
                lambda group_id: (classic_view.in_use(group_id)
                                  or modern_groups.group(group_id) is not None),
                share, cluster.share_configs,
                lambda group_id: container_of(GROUP_KEY, group_id, count))
        return _closing(KafkaCoordinators(groups, txns, cluster.locator,
                                          consumers=modern_groups, shares=cluster_shares),
                        stopping, topics, txn_expiry)
    groups = GroupCoordinator(topics, OffsetStore(topics), config)
    await groups.start()
    consumers = ModernGroups(topic_partitions(topics), groups.store, ClassicView(groups),
                             modern, names=topic_names(topics), states=groups.store,
                             side=ClassicView(groups))
    consumers.start()
    txns = None
    if txn_coordinator is not None:
        txns = TxnProducers(topics, txn_coordinator, producer_ids, groups)
        await txns.start()
    classic = ClassicView(groups)
    shares = ShareCoordinator(
        topics, ShareStore(topics),
        lambda group_id: classic.in_use(group_id) or consumers.group(group_id) is not None,
        share)
    return _closing(KafkaCoordinators(groups, txns, LocalLocator(node), consumers=consumers,
                                      shares=shares,
                                      share_states=ShareStates(LocalShareStates(topics, shares))),
                    stopping, topics, txn_expiry)


def _closing(coordinators: KafkaCoordinators, stopping: asyncio.Event,
             topics: TopicManager, txn_expiry: TxnIdExpirySettings | None) -> KafkaCoordinators:
    """Start the sweeps and the closer (at ``stopping``)."""
    loop = asyncio.get_running_loop()
    expiry = coordinators.expiry = OffsetExpiry(coordinators.groups, coordinators.consumers,
                                                topics)
    topics.add_deletion_hook(expiry.remove_topic)
    if coordinators.shares is not None:
        topics.add_deletion_hook(coordinators.shares.remove_topic)
    coordinators.sweeps.append(loop.create_task(expiry.run(), name="kafka offsets expiry"))
    if coordinators.txns is not None:
        ids = coordinators.txn_expiry = TxnIdExpiry(coordinators.txns,
                                                    txn_expiry or TxnIdExpirySettings())
        coordinators.sweeps.append(loop.create_task(ids.run(), name="kafka txn id expiry"))
    coordinators.closer = loop.create_task(coordinators.close_on(stopping))
    return coordinators
