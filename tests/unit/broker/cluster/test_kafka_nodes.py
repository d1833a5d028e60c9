"""The Kafka listener's view of a cluster: node ids, Kafka addresses in ownership records,
placement of ``_kafka_offsets``, leaders and group coordinators from the owner cache."""

from __future__ import annotations

import asyncio
import json

from broker.app.kafka_cluster import ClusterKafka, kafka_address
from broker.cluster.containers import OwnerRecord, container_of
from broker.cluster.session_gate import OwnershipPhase
from broker.kafka.locator import GROUP_KEY, TRANSACTION_KEY, Node
from broker.kafka.locator import container_of as key_container_of
from broker.kafka.nodes import node_id_of, parse_node

COUNT = 8


def test_node_ids_are_stable_non_negative_and_distinct() -> None:
    ids = {node_id_of(f"127.0.0.1:{port}") for port in range(7000, 7100)}
    assert len(ids) == 100
    assert all(0 <= i < 2**31 for i in ids)
    # The same in every process: test_placement_across_processes.py.


def test_parse_node() -> None:
    assert parse_node("b1", "h:9092") == Node(node_id_of("b1"), "h", 9092)
    assert parse_node("b1", "[::1]:9092") == Node(node_id_of("b1"), "::1", 9092)
    assert parse_node("b1", "") is None
    assert parse_node("b1", "nohost") is None
    assert parse_node("b1", "h:port") is None
    assert kafka_address("::1", 9092) == "[::1]:9092"
    assert kafka_address("h", 9092) == "h:9092"


def test_owner_record_carries_the_kafka_address_and_reads_older_records() -> None:
    record = OwnerRecord("b1:7070", "b1:7070", "inc", "b1:9092")
    assert OwnerRecord.from_bytes(record.to_bytes()) == record
    old = json.dumps({"version": 1, "id": "b2", "address": "b2:7070",
                      "incarnation": "x"}).encode()
    assert OwnerRecord.from_bytes(old).kafka == ""
    assert "kafka" not in json.loads(OwnerRecord("b3", "b3:1").to_bytes())


def test_kafka_offsets_segment_n_is_in_container_n() -> None:
    for n in range(COUNT):
        assert container_of(f"_kafka_offsets/{n}", COUNT) == n
        assert container_of(f"_txnbuffer_snapshots/{n}", COUNT) == n


class _Owners:
    """The owner cache as ``ClusterKafka`` asks it."""

    def __init__(self) -> None:
        self.container_count = COUNT
        self.phase = OwnershipPhase.SERVING
        self.served: set[int] = set()
        self.by_container: dict[int, OwnerRecord] = {}
        self.members: list[OwnerRecord] = []

    def member_records(self) -> list[OwnerRecord]:
        return self.members

    def container_owner(self, container: int) -> OwnerRecord | None:
        return self.by_container.get(container)

    def owner_record(self, segment: str) -> OwnerRecord | None:
        return self.by_container.get(container_of(segment, COUNT))

    def served_containers(self) -> frozenset[int]:
        return frozenset(self.served)

    def owns(self, segment: str) -> bool:
        return container_of(segment, COUNT) in self.served


class _Groups:
    def __init__(self) -> None:
        self.loaded: list[int] = []
        self.dropped: list[int] = []

    async def load_container(self, container: int) -> None:
        self.loaded.append(container)

    def drop_container(self, container: int) -> None:
        self.dropped.append(container)


def test_nodes_leaders_and_group_coordinators() -> None:
    async def run() -> None:
        owners = _Owners()
        me = OwnerRecord("a:1", "a:1", "i", "a:9092")
        other = OwnerRecord("b:1", "b:1", "j", "b:9092")
        quiet = OwnerRecord("c:1", "c:1", "k")  # serves no Kafka
        owners.members = [me, other, quiet]
        cluster = ClusterKafka(owners, lambda: Node(node_id_of("a:1"), "a", 9092))  # type: ignore[arg-type]
        groups = _Groups()
        cluster.attach(groups)  # type: ignore[arg-type]
        assert [n.port for n in cluster.nodes()] == [9092, 9092]
        segment = "orders/0"
        assert cluster.leader_of(segment) is None  # no owner known: LEADER_NOT_AVAILABLE
        owners.by_container[container_of(segment, COUNT)] = other
        assert cluster.leader_of(segment) == Node(node_id_of("b:1"), "b", 9092)

        group = "g"
        container = key_container_of(GROUP_KEY, group, COUNT)
        owners.by_container[container] = me
        assert cluster.coordinator_of(GROUP_KEY, group) == cluster.this_node()
        assert not cluster.is_local(GROUP_KEY, group)  # claimed, not loaded yet
        owners.served.add(container)
        await cluster.claimed(container)
        for _ in range(10):
            await asyncio.sleep(0)
        assert groups.loaded == [container]
        assert cluster.is_local(GROUP_KEY, group)
        owners.phase = OwnershipPhase.PAUSED
        assert not cluster.is_local(GROUP_KEY, group)
        assert not cluster.writable(f"_kafka_offsets/{container}")
        owners.phase = OwnershipPhase.SERVING
        assert cluster.writable(f"_kafka_offsets/{container}")
        owners.served.discard(container)
        cluster.released(frozenset({container}))
        assert groups.dropped == [container]
        assert not cluster.is_local(GROUP_KEY, group)
        # Transactional ids: coordinated by the owner of the container of _txnlog/0
        # (the transaction coordinator's broker); not here without its Kafka part.
        owners.by_container[container_of("_txnlog/0", COUNT)] = other
        assert cluster.coordinator_of(TRANSACTION_KEY, "t") == Node(node_id_of("b:1"), "b", 9092)
        assert not cluster.is_local(TRANSACTION_KEY, "t")
        cluster.close()

    asyncio.run(run())


class _StuckGroups(_Groups):
    """Loads that never finish until cancelled (a store that does not answer)."""

    def __init__(self) -> None:
        super().__init__()
        self.cancelled: list[int] = []
        self.both_loading = asyncio.Event()

    async def load_container(self, container: int) -> None:
        self.loaded.append(container)
        if len(self.loaded) == 2:
            self.both_loading.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled.append(container)
            raise


def test_the_cluster_view_stops_with_its_loads_ended() -> None:
    async def run() -> None:
        owners = _Owners()
        cluster = ClusterKafka(owners, lambda: Node(node_id_of("a:1"), "a", 9092))  # type: ignore[arg-type]
        groups = _StuckGroups()
        cluster.attach(groups)  # type: ignore[arg-type]
        owners.served.update({1, 2})
        await cluster.claimed(1)
        await cluster.claimed(2)
        await asyncio.wait_for(groups.both_loading.wait(), 30)
        owners.served.discard(1)
        cluster.released(frozenset({1}))  # cancelled, maybe not ended yet
        await asyncio.wait_for(cluster.stop(), 30)
        assert sorted(groups.cancelled) == [1, 2]  # both loads ended before stop returned

    asyncio.run(run())


def test_each_listener_sees_its_own_addresses_and_leaves_out_brokers_without_it() -> None:
    """Kafka's rule: the addresses of the listener the client connected on, on every broker."""
    record = OwnerRecord("a:1", "a:1", "i", "a:9092",
                         kafka_listeners=(("INSIDE", "a:9092"), ("OUTSIDE", "pub-a:19092")))
    assert OwnerRecord.from_bytes(record.to_bytes()) == record
    assert record.kafka_on("OUTSIDE") == "pub-a:19092"
    assert record.kafka_on("ELSE") == ""
    old = OwnerRecord("c:1", "c:1", "k", "c:9092")  # an earlier build: one listener
    assert old.kafka_on("OUTSIDE") == "c:9092"
    inside_only = OwnerRecord("b:1", "b:1", "j", "b:9092", kafka_listeners=(("INSIDE", "b:9092"),))
    owners = _Owners()
    owners.members = [record, inside_only, old]
    cluster = ClusterKafka(owners, lambda: Node(node_id_of("a:1"), "a", 9092))  # type: ignore[arg-type]
    outside = cluster.listener("OUTSIDE", lambda: Node(node_id_of("a:1"), "pub-a", 19092))
    inside = cluster.listener("INSIDE", lambda: Node(node_id_of("a:1"), "a", 9092))
    assert [(n.host, n.port) for n in outside.nodes()] == [("pub-a", 19092), ("c", 9092)]
    assert [n.host for n in inside.nodes()] == ["a", "b", "c"]
    led_by_b, led_by_a = "orders/0", "orders/1"
    assert container_of(led_by_b, COUNT) != container_of(led_by_a, COUNT)
    owners.by_container[container_of(led_by_b, COUNT)] = inside_only
    owners.by_container[container_of(led_by_a, COUNT)] = record
    assert outside.leader_of(led_by_b) is None  # b has no OUTSIDE: no leader there
    assert inside.leader_of(led_by_b) == Node(node_id_of("b:1"), "b", 9092)
    assert outside.leader_of(led_by_a) == outside.this_node()
    # Why: b is alive without OUTSIDE (LISTENER_NOT_FOUND), not leaderless.
    assert outside.leader_lacks_listener(led_by_b)
    assert not inside.leader_lacks_listener(led_by_b)
    assert not outside.leader_lacks_listener(led_by_a)
    unowned = next(f"orders/{n}" for n in range(2, 100)
                   if container_of(f"orders/{n}", COUNT) not in owners.by_container)
    assert not outside.leader_lacks_listener(unowned)  # no owner: LEADER_NOT_AVAILABLE
    publishing = OwnerRecord("b:1", "b:1", "j", "b:9092", leader_epoch=-1,
                             kafka_listeners=(("INSIDE", "b:9092"),))
    owners.by_container[container_of(led_by_b, COUNT)] = publishing
    assert not outside.leader_lacks_listener(led_by_b)  # epoch not yet published: no leader
    no_kafka = OwnerRecord("c:1", "c:1", "k")  # a broker serving no Kafka at all
    owners.by_container[container_of(led_by_b, COUNT)] = no_kafka
    assert outside.leader_lacks_listener(led_by_b) and cluster.leader_lacks_listener(led_by_b)
    group = "g"
    owners.by_container[key_container_of(GROUP_KEY, group, COUNT)] = inside_only
    assert outside.coordinator_of(GROUP_KEY, group) is None  # COORDINATOR_NOT_AVAILABLE
    assert inside.coordinator_of(GROUP_KEY, group) == Node(node_id_of("b:1"), "b", 9092)
