"""A cluster broker's ownership wiring: containers claimed, segments gated, handed over.

A cluster broker (``folio broker --metadata-url``, ``broker.app.cluster_broker``)
has a ``ClusterOwnership``. It makes the topic manager reload segments fenced
by another broker (``reload_fenced``), wraps the topics the public services
see in ``OwnedTopics`` (WrongHost for segments of containers this broker does
not serve), and answers ``SegmentOwners`` from ``ZooKeeperOwners``. Once the
server is bound and registered (``start``), the broker joins the balance of
containers; asked to stop, it hands every container over (``leave``) before
the server stops taking calls, so clients move to the new owners while this
broker still answers them with WrongHost; ``close`` then ends the routes and
peer clients.

**The transaction coordinator** runs on the owner of the container of
``_txnlog/0`` (which also holds ``_txncommitkeys``): every broker's
coordinator stands down once attached (no timers, nothing in memory); the
broker that claims that container unloads the two log segments, so they are
loaded afresh (recovery fences the previous coordinator's ledgers), and
replays them (``TxnCoordinator.take_over``, ``CommitKeys.take_over``), as at
startup. Transactions calls elsewhere answer WrongHost with segment
``_txnlog/0`` and the coordinator's broker. Appends of a transaction go to
the segments' owners, which register each segment with the coordinator and
take its markers over the internal protocol (``broker.cluster.txn_routes``).

**Transaction-buffer snapshots** go to the snapshot segment of the
container of the segment they describe, written only by its owner
(``broker.cluster.snapshots``); it moves with the container.

**Reader group liveness**: heartbeats are shared through the store, and each
group is swept by the owner of the container of ``_readergroup/<name>``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from broker.api import Topics
from broker.cluster.containers import COORDINATOR_SEGMENT, container_of
from broker.cluster.owned_topics import OwnedTopics, TopicsHandover
from broker.cluster.peers import PeerClients, PeerSecurity
from broker.cluster.snapshots import ContainerSnapshotStore
from broker.cluster.txn_routes import ClusterTxnRoutes
from broker.cluster.warmup import SegmentWarmup
from broker.cluster.zookeeper_owners import ZooKeeperOwners
from broker.errors import WrongHostError
from broker.groups.heartbeats import HeartbeatBoard
from broker.groups.liveness import GroupLiveness
from broker.segments.names import make_segment_name
from broker.topics.manager import TopicManager
from broker.txn.commit_keys import COMMIT_KEYS_TOPIC, CommitKeys
from broker.txn.coordinator import TxnCoordinator
from ledger.api import MetadataStore
from txnbuffer.api import SnapshotStore

__all__ = ["GROUP_KEY_PREFIX", "ClusterOwnership"]

#: A reader group is swept by the owner of the container of this prefix + its name.
GROUP_KEY_PREFIX = "_readergroup/"
_COORDINATOR_SEGMENTS = (COORDINATOR_SEGMENT, make_segment_name(COMMIT_KEYS_TOPIC, 0))


class _Handover(TopicsHandover):
    """``TopicsHandover`` that also stands the coordinator down when its container goes."""

    def __init__(self, ownership: ClusterOwnership, topics: TopicManager,
                 container_count: int, snapshots: ContainerSnapshotStore | None) -> None:
        super().__init__(topics, container_count, snapshots)
        self._ownership = ownership

    async def release(self, containers: frozenset[int]) -> None:
        self._ownership.tell_released(containers)
        await super().release(containers)
        if self._ownership.coordinator_container in containers:
            await self._ownership.stand_down()

    def drop(self, containers: frozenset[int]) -> None:
        self._ownership.tell_released(containers)
        super().drop(containers)
        # (A claim drops stale segments too; the coordinator is not seated then.)
        if self._ownership.coordinator_container in containers and self._ownership.seated:
            self._ownership.stand_down_soon()


class ClusterOwnership:
    """Container ownership of one cluster broker (see the module docstring).

    Args:
        store: the cluster's metadata store.
        container_count: the cluster's number of containers (its layout).
        session_timeout_ms: the metadata session timeout: a broker cut off
            from ZooKeeper pauses its writes at once and gives its containers
            up once it has passed (``broker.cluster.session_gate``).
        peers: TLS and token of the internal calls to the other brokers.
    """

    def __init__(self, store: MetadataStore, container_count: int,
                 session_timeout_ms: int, peers: PeerSecurity | None = None) -> None:
        self._store = store
        self._count = container_count
        self._session_timeout_ms = session_timeout_ms
        self._owners: ZooKeeperOwners | None = None
        self._topics: TopicManager | None = None
        self._coordinator: TxnCoordinator | None = None
        self._commit_keys: CommitKeys | None = None
        self._peer_security = peers or PeerSecurity()
        self._peers: PeerClients | None = None
        self._routes: ClusterTxnRoutes | None = None
        self._seated = False
        self._snapshots: ContainerSnapshotStore | None = None
        self._warmup: SegmentWarmup | None = None
        self._background: set[asyncio.Task[None]] = set()
        self._claim_listeners: list[Callable[[int], Awaitable[None]]] = []
        self._release_listeners: list[Callable[[frozenset[int]], None]] = []
        self._seated_listeners: list[Callable[[], Awaitable[None]]] = []
        self._stood_down_listeners: list[Callable[[], None]] = []
        self.coordinator_container = container_of(COORDINATOR_SEGMENT, container_count)
        #: This broker's Kafka listener as clients reach it, "host:port" ("": none);
        #: set before ``start``, published with the ownership records.
        self.kafka_address = ""
        #: Every Kafka listener's address by name (``OwnerRecord.kafka_listeners``).
        self.kafka_listeners: tuple[tuple[str, str], ...] = ()

    @property
    def container_count(self) -> int:
        return self._count

    def add_container_listener(self, claimed: Callable[[int], Awaitable[None]],
                               released: Callable[[frozenset[int]], None]) -> None:
        """Tell ``claimed`` each container claimed (it is served already), ``released``
        the containers given up or dropped (before their segments are unloaded)."""
        self._claim_listeners.append(claimed)
        self._release_listeners.append(released)

    def add_coordinator_listener(self, seated: Callable[[], Awaitable[None]],
                                 stood_down: Callable[[], None]) -> None:
        """Tell ``seated`` when the transaction coordinator was taken over here (its log
        replayed), ``stood_down`` when it stands down (the Kafka transactional ids follow it)."""
        self._seated_listeners.append(seated)
        self._stood_down_listeners.append(stood_down)

    @property
    def peers(self) -> PeerClients:
        """Clients of the other brokers (after ``attach``)."""
        if self._peers is None:
            raise RuntimeError("ClusterOwnership.attach first")
        return self._peers

    def tell_released(self, containers: frozenset[int]) -> None:
        for released in self._release_listeners:
            released(containers)

    @property
    def owners(self) -> ZooKeeperOwners:
        if self._owners is None:
            raise RuntimeError("ClusterOwnership.attach first")
        return self._owners

    def snapshot_store(self, topics: TopicManager) -> SnapshotStore:
        """The transaction buffers' snapshot store (``TopicManager``'s ``txn_store_factory``).

        One snapshot segment per container, written only while this broker
        serves the container (``broker.cluster.snapshots``).
        """
        def owns(segment: str) -> bool:
            return self._owners is not None and self._owners.owns(segment)

        self._snapshots = ContainerSnapshotStore(topics, self._count, owns)
        return self._snapshots

    def leader_epoch_of(self, segment: str) -> int:
        """The leader epoch of this broker's ownership of ``segment``; -1 if it does not own it.

        ``TopicManager``'s ``leader_epoch_of``: a segment loaded by its owner
        starts that epoch in its leader-epoch history (``LedgerSegment.load``);
        one loaded by another broker (a seal, a marker) adds nothing.
        """
        owners = self._owners
        if owners is None or not owners.owns(segment):
            return -1
        record = owners.owner_record(segment)
        return -1 if record is None else record.leader_epoch

    async def attach(self, topics: TopicManager, coordinator: TxnCoordinator,
                     commit_keys: CommitKeys) -> Topics:
        """The topics as the public services must see them; the coordinator stands down."""
        self._topics, self._coordinator, self._commit_keys = topics, coordinator, commit_keys
        await coordinator.stand_down()
        owners = ZooKeeperOwners(self._store, self._count, "", "",
                                 _Handover(self, topics, self._count, self._snapshots),
                                 suspended_grace_s=self._session_timeout_ms / 1000,
                                 on_claimed=self._claimed)
        self._owners = owners
        # A claimed container's open segments load at once, not at the first call.
        self._warmup = SegmentWarmup(topics, self._count,
                                     lambda c: c in owners.served_containers())
        self.add_container_listener(self._warmup.claimed, self._warmup.released)
        # Transactions across brokers: registrations and markers cross over here.
        self._peers = PeerClients(self._peer_security)
        self._routes = ClusterTxnRoutes(
            owners, self._peers, lambda: self._seated and owners.owns(COORDINATOR_SEGMENT),
            coordinator.register_segment, topics.segment)
        coordinator.route_markers(self._routes.write_marker)
        return OwnedTopics(topics, owners.owns, owners.owner_of, owners.check_writable)

    @property
    def routes(self) -> ClusterTxnRoutes:
        """Where transactional registrations and markers go (after ``attach``)."""
        if self._routes is None:
            raise RuntimeError("ClusterOwnership.attach first")
        return self._routes

    @property
    def seated(self) -> bool:
        """Whether the transaction coordinator runs on this broker now."""
        return self._seated

    def transactions_gate(self) -> None:
        """Raise ``WrongHostError`` unless the coordinator runs on this broker now.

        A WrongHost without owner (``check_writable``) while the
        metadata session is SUSPENDED: the coordinator writes nothing new then.
        """
        owners = self.owners
        if not (self._seated and owners.owns(COORDINATOR_SEGMENT)):
            raise WrongHostError(COORDINATOR_SEGMENT, owners.owner_of(COORDINATOR_SEGMENT))
        owners.check_writable(COORDINATOR_SEGMENT)

    async def _claimed(self, container: int) -> None:
        for claimed in self._claim_listeners:
            await claimed(container)
        if container != self.coordinator_container:
            return
        assert self._topics is not None and self._coordinator is not None
        assert self._commit_keys is not None
        for task in list(self._background):  # a stand-down from a lost session first
            with contextlib.suppress(Exception):
                await task
        # Stale copies (loaded at startup, or in an earlier ownership) go first,
        # so the replay loads the logs afresh, fencing the previous coordinator.
        await self._topics.release_segments(lambda name: name in _COORDINATOR_SEGMENTS)
        try:
            await self._coordinator.take_over()
            await self._commit_keys.take_over()
        except Exception:
            # Half taken over (the commit keys' replay failed: ZooKeeper's
            # connection lost, a bookie down): the replayed coordinator must not
            # run unseated. Its timers would abort and log, and its log writes
            # load ``_txnlog/0`` here, fencing the coordinator that runs where
            # the container went; nor does a later drop stand it down (it
            # stands down only a seated one). The next step takes it over again.
            await self._coordinator.stand_down()
            raise
        self._seated = self.owners.owns(COORDINATOR_SEGMENT)
        if not self._seated:
            # The container went (dropped, released) while the logs replayed:
            # its drop found nothing seated to stand down, so it is done here.
            await self._coordinator.stand_down()
            return
        for seated in self._seated_listeners:
            await seated()

    async def stand_down(self) -> None:
        self._seated = False
        for stood_down in self._stood_down_listeners:
            stood_down()
        if self._coordinator is not None:
            await self._coordinator.stand_down()

    def stand_down_soon(self) -> None:
        """``stand_down`` from a synchronous caller (a session lost)."""
        self._seated = False
        for stood_down in self._stood_down_listeners:
            stood_down()
        task = asyncio.ensure_future(self.stand_down())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def share_liveness(self, liveness: GroupLiveness) -> None:
        """Reader group liveness across brokers: heartbeats in the store, one sweeper per group.

        A group is swept by the owner of the container of ``_readergroup/<name>``
        (``broker.groups.heartbeats``).
        """
        owners = self.owners
        liveness.share(HeartbeatBoard(self._store),
                       lambda group: owners.owns(f"{GROUP_KEY_PREFIX}{group}"))

    async def start(self, address: str) -> None:
        """Join the balance as ``address`` (the broker's id and client address)."""
        self.owners.bind(address, address, self.kafka_address, self.kafka_listeners)
        await self.owners.start()

    async def leave(self) -> None:
        """Hand every container over and leave the balance (the stack bounds how long)."""
        if self._owners is not None:
            await self._owners.stop()
        for task in list(self._background):
            with contextlib.suppress(Exception):
                await task

    async def close(self) -> None:
        """Stop the transactions' routes and close the peer clients.

        Also when the hand-over was cut short: no retry (nor a warm-up load) may
        outlive the broker.
        """
        if self._warmup is not None:
            await self._warmup.close()
        if self._routes is not None:
            self._routes.stop()
        if self._peers is not None:
            await self._peers.close()
