"""The Kafka listener of a cluster broker: nodes, leaders and group coordinators from ownership.

``ClusterKafka`` is what a cluster broker (``folio broker --metadata-url``)
gives its Kafka listener (docs/kafka.md, "Clusters"):

- **Nodes** (``broker.kafka.nodes.ClusterNodes``): every broker publishes its
  Kafka address in its balance and ownership records (``OwnerRecord.kafka``);
  each live broker is a node (id: ``node_id_of(broker id)``) and a partition's
  leader is the node of its segment's owner, read from the owner cache, with
  the leader epoch of that ownership (``OwnerRecord.leader_epoch``; no leader
  while the owner is still publishing it).
- **Listeners** (docs/kafka.md, "Listeners"): a broker with several Kafka
  listeners publishes each one's address by name (``OwnerRecord.kafka_listeners``);
  each listener sees the cluster through a ``ListenerNodes`` of its name, so
  Metadata, FindCoordinator, DescribeCluster and leader hints answer a client
  with the addresses of the listener it connected on, and leave out a broker
  without a listener of that name (a partition it leads has no leader there:
  ``leader_lacks_listener``, LISTENER_NOT_FOUND in Metadata v6+).
- **Group coordinators** (``broker.kafka.locator.CoordinatorLocator``): group
  ``g`` is coordinated by the owner of container ``container_of(0, g, count)``,
  whose segment ``_kafka_offsets/<container>`` holds the group's offsets. When
  this broker claims a container it loads that container's groups (in the
  background, retried while it still serves the container); until they are
  loaded, and once it gives the container up or pauses (metadata session
  SUSPENDED), requests for them answer NOT_COORDINATOR, so clients look the
  coordinator up again.
- **Transactional ids** are coordinated beside Folio's transaction
  coordinator, by the owner of the container of ``_txnlog/0``: FindCoordinator
  names it, and it serves them once their records are loaded
  (``broker.kafka.txns.cluster``); NOT_COORDINATOR elsewhere.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from broker.cluster.containers import COORDINATOR_SEGMENT, OwnerRecord
from broker.cluster.containers import container_of as segment_container
from broker.cluster.session_gate import OwnershipPhase
from broker.cluster.zookeeper_owners import ZooKeeperOwners
from broker.errors import WrongHostError
from broker.kafka.consumer_groups.offsets import OFFSETS_TOPIC
from broker.kafka.coordinators import KafkaCoordinators
from broker.kafka.locator import GROUP_KEY, Node, container_of
from broker.kafka.nodes import parse_node
from broker.kafka.txns.cluster import ClusterTxns

__all__ = ["ClusterKafka", "ListenerNodes", "kafka_address"]

log = logging.getLogger(__name__)

#: Backoff between attempts to load a claimed container's groups.
_LOAD_RETRY_S = 1.0


def kafka_address(host: str, port: int) -> str:
    """``host:port``, an IPv6 host in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _node(record: OwnerRecord | None) -> Node | None:
    if record is None or not record.kafka:
        return None
    return parse_node(record.broker_id, record.kafka)


def _node_on(record: OwnerRecord | None, listener: str) -> Node | None:
    """``record``'s broker as clients of listener ``listener`` reach it (None: no such one)."""
    if record is None:
        return None
    address = record.kafka_on(listener)
    return parse_node(record.broker_id, address) if address else None


def _leader(record: OwnerRecord | None) -> Node | None:
    """A partition leader's node: none while its owner has not published its epoch."""
    if record is None or record.leader_epoch < 0:
        return None
    return _node(record)


class ClusterKafka:
    """Nodes, leaders and the group locator of one cluster broker (see the module docstring).

    Args:
        owners: the broker's container ownership (its owner cache).
        this_node: this broker's node as clients reach it (asked each time:
            its id is known once the broker is bound).
    """

    name = "Kafka cluster view"

    def __init__(self, owners: ZooKeeperOwners, this_node: Callable[[], Node]) -> None:
        self._owners = owners
        self._this = this_node
        self._count = owners.container_count
        self._groups: KafkaCoordinators | None = None
        #: The Kafka transactions across brokers (``attach_txns``).
        self._txns: ClusterTxns | None = None
        self._txn_container = segment_container(COORDINATOR_SEGMENT, self._count)
        #: Containers whose groups are loaded and coordinated here.
        self._loaded: set[int] = set()
        self._tasks: dict[int, asyncio.Task[None]] = {}
        #: Loads cancelled and maybe still ending (``stop`` waits for them).
        self._cancelled: set[asyncio.Task[None]] = set()

    def attach(self, groups: KafkaCoordinators) -> None:
        """The group coordinators (classic and consumer protocol) whose groups follow the
        containers."""
        self._groups = groups

    def attach_txns(self, txns: ClusterTxns) -> None:
        """The Kafka transactions, coordinated here while ``txns.here()``; closed with this view."""
        self._txns = txns

    # -- ClusterNodes -------------------------------------------------------------

    def this_node(self) -> Node:
        return self._this()

    def nodes(self) -> list[Node]:
        found = (_node(record) for record in self._owners.member_records())
        return [node for node in found if node is not None]

    def leader_of(self, segment: str) -> Node | None:
        return _leader(self._owners.owner_record(segment))

    def leader_epoch_of(self, segment: str) -> int:
        record = self._owners.owner_record(segment)
        return -1 if record is None else record.leader_epoch

    def leader_lacks_listener(self, segment: str) -> bool:
        record = self._owners.owner_record(segment)
        return record is not None and record.leader_epoch >= 0 and _node(record) is None

    # -- CoordinatorLocator -------------------------------------------------------

    def coordinator_of(self, key_type: int, key: str) -> Node | None:
        return _node(self.coordinator_record(key_type, key))

    def coordinator_record(self, key_type: int, key: str) -> OwnerRecord | None:
        """The record of the broker coordinating ``key`` (None: not known now)."""
        if key_type != GROUP_KEY:  # transactional ids: beside the transaction coordinator
            return self._owners.container_owner(self._txn_container)
        return self._owners.container_owner(container_of(key_type, key, self._count))

    def listener(self, name: str, this_node: Callable[[], Node]) -> ListenerNodes:
        """The cluster as clients of listener ``name`` see it; ``this_node``: this broker there."""
        return ListenerNodes(self, self._owners, name, this_node)

    def writable(self, segment: str) -> bool:
        """Whether this broker may write ``segment`` now (owned, session not paused)."""
        return self._owners.owns(segment) and self._owners.phase is OwnershipPhase.SERVING

    def is_local(self, key_type: int, key: str) -> bool:
        if key_type != GROUP_KEY:
            return (self._txns is not None and self._txns.here()
                    and self._owners.phase is OwnershipPhase.SERVING)
        container = container_of(key_type, key, self._count)
        return (container in self._loaded
                and container in self._owners.served_containers()
                and self._owners.phase is OwnershipPhase.SERVING)

    def where_group(self, group: str) -> WrongHostError | None:
        """None if this broker coordinates ``group``, else the WrongHost ``folio group`` gets.

        It names the offsets segment of the group's container and its owner
        ("" while unknown, or while this broker still loads the container).
        """
        if self.is_local(GROUP_KEY, group):
            return None
        segment = f"{OFFSETS_TOPIC}/{container_of(GROUP_KEY, group, self._count)}"
        owner = self._owners.owner_of(segment)
        return WrongHostError(segment, "" if owner == self._owners.address else owner)

    # -- container listener (``ClusterOwnership.add_container_listener``) ----------

    async def claimed(self, container: int) -> None:
        """Load the container's groups in the background (never raises)."""
        running = self._tasks.pop(container, None)
        if running is not None:
            self._cancel(running)
        self._tasks[container] = asyncio.get_running_loop().create_task(self._load(container))

    def released(self, containers: frozenset[int]) -> None:
        """Stop coordinating the containers' groups at once."""
        for container in containers:
            task = self._tasks.pop(container, None)
            if task is not None:
                self._cancel(task)
            self._loaded.discard(container)
            if self._groups is not None:
                self._groups.drop_container(container)

    def _cancel(self, task: asyncio.Task[None]) -> None:
        task.cancel()
        if not task.done():
            self._cancelled.add(task)
            task.add_done_callback(self._cancelled.discard)

    async def _load(self, container: int) -> None:
        while container in self._owners.served_containers() and self._groups is not None:
            try:
                await self._groups.load_container(container)
            except Exception as error:  # retried: the container is ours, its groups must load
                log.warning("kafka groups of container %d not loaded (%s: %s); retrying",
                            container, type(error).__name__, error)
                await asyncio.sleep(_LOAD_RETRY_S)
                continue
            if container in self._owners.served_containers():
                self._loaded.add(container)
            else:  # given up meanwhile: what was loaded is not ours to keep
                self._groups.drop_container(container)
            return

    def close(self) -> None:
        """Cancel the loads under way (the listener stops)."""
        for task in self._tasks.values():
            task.cancel()
        self._tasks.clear()

    # -- component of the broker's stack (``broker.app.broker_stack``) -------------

    async def start(self) -> None:
        """Nothing to start: loads begin as containers are claimed."""

    async def stop(self) -> None:
        """Cancel the loads under way and wait for them (they own nothing else)."""
        if self._txns is not None:
            await self._txns.close()
        tasks = list(self._tasks.values())
        self.close()
        for task in self._cancelled:  # cancelled by ``released`` or a new claim
            if not task.done():
                tasks.append(task)
        if tasks:
            # Waited for, not awaited: their cancellations are theirs, not raised here.
            await asyncio.wait(tasks)


class ListenerNodes:
    """The cluster as the clients of one listener see it (``ClusterNodes`` and locator).

    Every address is that of the listener of the same name on each broker; a
    broker without one is left out of ``nodes``, and a partition it leads or
    a key it coordinates has none (None), as Kafka answers.
    """

    def __init__(self, cluster: ClusterKafka, owners: ZooKeeperOwners, name: str,
                 this_node: Callable[[], Node]) -> None:
        self._cluster = cluster
        self._owners = owners
        self._name = name
        self._this = this_node

    def this_node(self) -> Node:
        return self._this()

    def nodes(self) -> list[Node]:
        found = (_node_on(record, self._name) for record in self._owners.member_records())
        return [node for node in found if node is not None]

    def leader_of(self, segment: str) -> Node | None:
        record = self._owners.owner_record(segment)
        if record is None or record.leader_epoch < 0:
            return None
        return _node_on(record, self._name)

    def leader_epoch_of(self, segment: str) -> int:
        return self._cluster.leader_epoch_of(segment)

    def leader_lacks_listener(self, segment: str) -> bool:
        # The owner record is an ephemeral node of a live broker (its session's):
        # known, its epoch published, but no address under this name.
        record = self._owners.owner_record(segment)
        return (record is not None and record.leader_epoch >= 0
                and _node_on(record, self._name) is None)

    def coordinator_of(self, key_type: int, key: str) -> Node | None:
        return _node_on(self._cluster.coordinator_record(key_type, key), self._name)

    def is_local(self, key_type: int, key: str) -> bool:
        return self._cluster.is_local(key_type, key)
