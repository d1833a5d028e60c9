"""The Kafka listener on a 3-broker cluster, with real Kafka clients.

Real processes (ZooKeeper, 3 bookies E=3/Qw=2/Qa=2, 3 brokers each with
``--kafka-port 0``). The topic is named so that its partitions' segments are
owned by all three brokers: Metadata must name every broker and each
partition's owner as leader, librdkafka's idempotent producer and a consumer
group must work across them, with committed offsets; after a SIGKILL of a
broker the producer and the group go on against the new owners, and every
acknowledged record is in the topic once (docs/kafka.md, "Clusters").
"""

from __future__ import annotations

import contextlib
import re
import socket
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource
from kafka import KafkaAdminClient, KafkaConsumer
from kafka import TopicPartition as KafkaPythonPartition
from kio.schema.errors import ErrorCode

from bench._cluster_client import list_brokers, lookup_owner
from broker.cluster.containers import container_of
from broker.kafka.locator import GROUP_KEY
from broker.kafka.locator import container_of as kafka_container_of
from tests.integration.kafka.test_kafka_bad_input import _batch, _produce, _request_class
from tests.integration.kafka.test_kafka_clients import create_topic
from tests.support.bookies import BookieProcess, BookieProcesses
from tests.support.cluster import LocalCluster
from tests.support.cluster_load import COUNT
from tests.support.cluster_load import wait_spread as _spread
from tests.support.kafka import kafka_address, raw_request, read_response
from tests.support.wait import wait_for

PARTITIONS = 4


#: Brokers 1 and 2 with named listeners: PLAINTEXT, and EXTRA advertised as localhost.
_TWO_LISTENERS = ("--kafka-listeners", "PLAINTEXT://127.0.0.1:0,EXTRA://127.0.0.1:0",
                  "--kafka-advertised-listeners", "EXTRA://localhost:0",
                  "--kafka-listener-security-protocol-map", "EXTRA:PLAINTEXT")
_EXTRA = re.compile(r"kafka on (?P<host>[^\s:]+):(?P<port>\d+) \(EXTRA\)")


def _kafka_cluster(processes: BookieProcesses, url: str, base: Path, *,
                   listeners: bool = False) -> tuple[list[BookieProcess], dict[str, str]]:
    """3 brokers serving Kafka; (brokers, gRPC address -> Kafka ``host:port``).

    ``listeners``: brokers 1 and 2 serve two named listeners (``_TWO_LISTENERS``),
    broker 0 one (``--kafka-port``, named PLAINTEXT): the first listener's address
    is in the map.
    """
    cluster = LocalCluster(processes, url, base)
    cluster.init(container_count=COUNT, ensemble_size=3, write_quorum=2, ack_quorum=2)
    for _ in range(3):
        cluster.start_bookie()
    brokers = [cluster.start_broker(*(_TWO_LISTENERS if listeners and i else
                                      ("--kafka-port", "0"))) for i in range(3)]
    _spread(brokers[0].address, [COUNT // 3] * 3)
    kafka = {b.address: "{}:{}".format(*kafka_address(b)) for b in brokers}
    return brokers, kafka


def _spread_topic(address: str) -> str:
    """A topic name whose partitions' segments are owned by all three brokers."""
    owners = {container: b.address for b in list_brokers(address).brokers
              for container in b.containers}
    for i in range(10_000):
        name = f"k{i}"
        held = [owners.get(container_of(f"{name}/{n}", COUNT)) for n in range(PARTITIONS)]
        if len(set(held)) == 3 and None not in held:
            return name
    raise AssertionError("no topic name spreads over the three brokers")


def _group_on(owner: str, address: str) -> str:
    """A group id whose container (its coordinator) is owned by ``owner``."""
    held = next(b.containers for b in list_brokers(address).brokers if b.address == owner)
    return next(f"g{i}" for i in range(10_000)
                if kafka_container_of(GROUP_KEY, f"g{i}", COUNT) in held)


def _leaders(bootstrap: str, topic: str) -> tuple[int, dict[int, str]]:
    """(number of brokers, partition -> ``host:port`` of its leader) from Metadata."""
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=30)
    nodes = {node_id: f"{b.host}:{b.port}" for node_id, b in metadata.brokers.items()}
    partitions = metadata.topics[topic].partitions
    return len(nodes), {p: nodes.get(partitions[p].leader, "") for p in partitions}


class _Producing:
    """librdkafka's idempotent producer writing ``p-i`` to partition ``p`` in a thread."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self._producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                                   "linger.ms": 5, "message.timeout.ms": 120_000})
        self._topic = topic
        self.acked: set[bytes] = set()
        self.errors: list[KafkaError] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _delivered(self, error: KafkaError | None, message: Any) -> None:
        if error is not None:
            self.errors.append(error)
        else:
            self.acked.add(message.value())

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            for p in range(PARTITIONS):
                self._producer.produce(self._topic, value=b"%d-%d" % (p, i), partition=p,
                                       on_delivery=self._delivered)
            i += 1
            self._producer.poll(0.02)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        assert self._producer.flush(120) == 0, "records left undelivered"


def _group_consumer(bootstrap: str, group: str, topic: str) -> Consumer:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "session.timeout.ms": 10_000, "heartbeat.interval.ms": 500})
    consumer.subscribe([topic])
    return consumer


def _consume(consumer: Consumer, want: set[bytes], seen: list[bytes], what: str,
             timeout_s: float = 60.0) -> None:
    """Poll (committing what was got) until every record of ``want`` is in ``seen``."""
    def done() -> bool:
        for message in consumer.consume(500, 0.2):
            if message.error() is None:
                seen.append(message.value() or b"")
        # (Nothing to commit yet, or the coordinator moves: the next round commits.)
        with contextlib.suppress(KafkaException):
            consumer.commit(asynchronous=False)
        return want <= set(seen)

    wait_for(done, what, timeout_s=timeout_s)


def _topic_contents(bootstrap: str, topic: str) -> list[bytes]:
    """Every record of the topic, read from offset 0 of each partition."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader",
                         "enable.auto.commit": False})
    ends = {}
    for p in range(PARTITIONS):
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
        ends[p] = high
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got: list[bytes] = []
    positions = dict.fromkeys(range(PARTITIONS), 0)

    def read_all() -> bool:
        for message in consumer.consume(1000, 0.2):
            partition, offset, value = message.partition(), message.offset(), message.value()
            if message.error() is None and partition is not None and offset is not None:
                got.append(value or b"")
                positions[partition] = offset + 1
        return all(positions[p] >= ends[p] for p in range(PARTITIONS))

    wait_for(read_all, "the whole topic read back", timeout_s=60)
    consumer.close()
    return got


@pytest.mark.timeout(240)
def test_partitions_led_by_their_owners_and_a_group_across_brokers(
        zk_url: str, bookie_processes: BookieProcesses, tmp_path: Path) -> None:
    brokers, kafka = _kafka_cluster(bookie_processes, zk_url, tmp_path, listeners=True)
    bootstrap = ",".join(kafka.values())
    topic = _spread_topic(brokers[0].address)
    create_topic(kafka[brokers[0].address], topic, PARTITIONS)
    addresses = list(kafka)
    owners = {p: kafka[lookup_owner(addresses, f"{topic}/{p}")] for p in range(PARTITIONS)}
    assert len(set(owners.values())) == 3

    def leaders_are_owners() -> bool:
        count, leaders = _leaders(bootstrap, topic)
        return count == 3 and leaders == owners
    wait_for(leaders_are_owners, "Metadata names 3 brokers and each partition's owner")
    _listener_named_addresses(brokers, kafka, topic, owners)

    producing = _Producing(bootstrap, topic)
    wait_for(lambda: len(producing.acked) >= 200, "200 records acknowledged")
    producing.stop()
    assert producing.errors == []
    first = set(producing.acked)

    consumer = _group_consumer(bootstrap, "g1", topic)
    seen: list[bytes] = []
    _consume(consumer, first, seen, "the group consumed every record")
    consumer.close()
    assert sorted(seen) == sorted(first)  # once each: one member, no rebalance

    # kafka-python too: a group of its own across the three brokers, offsets committed.
    python_consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap.split(","),
                                    group_id="kp", auto_offset_reset="earliest",
                                    enable_auto_commit=False, session_timeout_ms=10_000,
                                    heartbeat_interval_ms=500)
    assert python_consumer.partitions_for_topic(topic) == set(range(PARTITIONS))
    by_python: list[bytes] = []

    def python_got_all() -> bool:
        for records in python_consumer.poll(500).values():
            by_python.extend(record.value for record in records)
        return first <= set(by_python)
    wait_for(python_got_all, "kafka-python's group consumed every record", timeout_s=60)
    python_consumer.commit()
    assert python_consumer.committed(KafkaPythonPartition(topic, 0)) is not None
    python_consumer.close()
    assert sorted(by_python) == sorted(first)

    producing = _Producing(bootstrap, topic)
    wait_for(lambda: len(producing.acked) >= 40, "40 more records acknowledged")
    producing.stop()
    assert producing.errors == []
    second = producing.acked
    # A new member starts from the committed offsets: only the new records.
    consumer = _group_consumer(bootstrap, "g1", topic)
    again: list[bytes] = []
    _consume(consumer, second, again, "the group consumed the new records")
    consumer.close()
    assert set(again) == second

    # A broker that does not own partition 0 names its owner and refuses its data.
    stranger = next(k for k in kafka.values() if k != owners[0])
    assert _leaders(stranger, topic)[1][0] == owners[0]
    host, port = stranger.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        written = _produce(sock, topic, bytes(_batch([b"stray"])), 1)
        assert written.error_code == ErrorCode.not_leader_or_follower
        assert _list_offsets_error(sock, topic) == ErrorCode.not_leader_or_follower
    assert b"stray" not in _topic_contents(bootstrap, topic)

    _admin_apis_across_brokers(bootstrap, topic, owners)


def _listener_named_addresses(brokers: list[BookieProcess], kafka: dict[str, str], topic: str,
                              owners: dict[int, str]) -> None:
    """A client on broker 2's EXTRA listener is told every broker's EXTRA address (broker 1's
    too), broker 0 (no EXTRA) left out and its partitions without a leader
    (LISTENER_NOT_FOUND), as Kafka answers."""
    extra = {}
    for broker in brokers[1:]:
        match = _EXTRA.search(broker.ready_line)
        assert match is not None, broker.ready_line
        extra[kafka[broker.address]] = f"localhost:{match['port']}"
    bootstrap = f"127.0.0.1:{extra[kafka[brokers[2].address]].rpartition(':')[2]}"
    want = {p: extra.get(owner, "") for p, owner in owners.items()}

    def told_extra() -> bool:
        count, leaders = _leaders(bootstrap, topic)
        return count == 2 and leaders == want
    wait_for(told_extra, "EXTRA's Metadata names brokers 1 and 2 by their EXTRA addresses")
    assert "" in want.values()  # a partition of broker 0: leaderless on EXTRA
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        # Broker 0 is alive but has no EXTRA: LISTENER_NOT_FOUND from v6 on, as Kafka
        # answers (LEADER_NOT_AVAILABLE before); its partitions' leader is -1 either way.
        for version, missing in ((12, ErrorCode.listener_not_found),
                                 (5, ErrorCode.leader_not_available)):
            cls = _request_class(3, version)
            topic_cls = sys.modules[cls.__module__].MetadataRequestTopic
            newer: dict[str, Any] = {"include_topic_authorized_operations": False}
            sock.sendall(raw_request(3, version, 2, cls(
                topics=(topic_cls(name=topic, **({"topic_id": None} if version > 9 else {})),),
                allow_auto_topic_creation=False, **(newer if version > 9 else {}))))
            _, answer = read_response(sock, 3, version)
            codes = {p.partition_index: (p.error_code, p.leader_id >= 0)
                     for p in answer.topics[0].partitions}
            assert codes == {p: (ErrorCode.none, True) if told else (missing, False)
                             for p, told in want.items()}
        # FindCoordinator on EXTRA: broker 1's EXTRA address; none for broker 0's groups.
        for owner, told in ((brokers[1], extra[kafka[brokers[1].address]]), (brokers[0], "")):
            cls = _request_class(10, 3)
            sock.sendall(raw_request(10, 3, 1, cls(
                key=_group_on(owner.address, owner.address), key_type=GROUP_KEY)))
            _, answer = read_response(sock, 10, 3)
            if told:
                assert (answer.error_code, f"{answer.host}:{answer.port}") == (
                    ErrorCode.none, told)
            else:
                assert answer.error_code == ErrorCode.coordinator_not_available


def _admin_apis_across_brokers(bootstrap: str, topic: str, owners: dict[int, str]) -> None:
    """The admin APIs of a cluster (docs/kafka.md, "Admin APIs"), through every broker."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    described = admin.describe_cluster().result(30)
    nodes = {f"{node.host}:{node.port}": node.id for node in described.nodes}
    assert set(nodes) == set(owners.values()) and len(nodes) == 3
    assert described.controller is not None and described.controller.id in nodes.values()
    # Each broker's own configs, asked of it by its node id.
    for address, node_id in nodes.items():
        resource = ConfigResource(ConfigResource.Type.BROKER, str(node_id))
        configs = admin.describe_configs([resource])[resource].result(30)
        # (Brokers 1 and 2 list their EXTRA listener after it.)
        assert configs["advertised.listeners"].value.split(",")[0] == f"PLAINTEXT://{address}"
        assert configs["broker.id"].value == str(node_id)
    python_admin = KafkaAdminClient(bootstrap_servers=bootstrap.split(","))
    try:
        # Each broker's log dir holds the partitions it owns, and only those.
        listed: dict[int, set[int]] = {}
        for answer in python_admin.describe_log_dirs(topic_partitions=[topic]):
            (log_dir,) = answer["log_dirs"]
            # The entries are on the bookies' disks, which a broker cannot see: unknown.
            assert (log_dir["total_bytes"], log_dir["usable_bytes"]) == (-1, -1)
            listed[answer["broker"]] = {p["partition_index"] for t in log_dir["topics"]
                                        if t["name"] == topic for p in t["partitions"]}
        assert listed == {node_id: {p for p, owner in owners.items() if owner == address}
                          for address, node_id in nodes.items()}
        # Elections are never needed: each partition's owner is its one leader.
        result = python_admin.elect_leaders(0, {topic: list(owners)}, raise_errors=False)
        codes = {p.error_code for r in result.replica_election_results
                 for p in r.partition_result}
        assert codes == {ErrorCode.election_not_needed.value}
        # DeleteRecords goes to each partition's owner (the others refuse it).
        deleted = python_admin.delete_records({KafkaPythonPartition(topic, 0): -1})
        (low,) = [value["low_watermark"] for value in deleted.values()]
        end = KafkaConsumer(bootstrap_servers=bootstrap.split(","))
        try:
            partition = KafkaPythonPartition(topic, 0)
            assert end.beginning_offsets([partition])[partition] == low
            assert end.end_offsets([partition])[partition] == low
        finally:
            end.close()
    finally:
        python_admin.close()


def _list_offsets_error(sock: socket.socket, topic: str) -> ErrorCode:
    cls = _request_class(2, 5)
    module = sys.modules[cls.__module__]
    request = cls(replica_id=-1, isolation_level=0, topics=(module.ListOffsetsTopic(
        name=topic, partitions=(module.ListOffsetsPartition(
            partition_index=0, current_leader_epoch=-1, timestamp=-1),)),))
    sock.sendall(raw_request(2, 5, 7, request))
    _, response = read_response(sock, 2, 5)
    return ErrorCode(response.topics[0].partitions[0].error_code)


@pytest.mark.timeout(300)
def test_sigkill_of_a_broker_producer_and_group_go_on_nothing_lost_or_doubled(
        zk_url: str, bookie_processes: BookieProcesses, tmp_path: Path) -> None:
    brokers, kafka = _kafka_cluster(bookie_processes, zk_url, tmp_path)
    bootstrap = ",".join(kafka.values())
    topic = _spread_topic(brokers[0].address)
    create_topic(kafka[brokers[0].address], topic, PARTITIONS)
    addresses = list(kafka)
    victim_address = lookup_owner(addresses, f"{topic}/0")
    # The group's coordinator is the victim too: the group must move with its container.
    group = _group_on(victim_address, brokers[0].address)
    producing = _Producing(bootstrap, topic)
    consumer = _group_consumer(bootstrap, group, topic)
    seen: list[bytes] = []
    wait_for(lambda: len(producing.acked) >= 100, "100 records acknowledged")
    _consume(consumer, set(list(producing.acked)[:50]), seen, "the group consumes")

    victim = next(b for b in brokers if b.address == victim_address)
    victim.kill()
    survivors = [a for a in addresses if a != victim_address]
    def on_victim() -> int:  # records acknowledged in partition 0 (the victim's)
        return sum(1 for value in list(producing.acked) if value.startswith(b"0-"))

    before = on_victim()
    wait_for(lambda: on_victim() >= before + 50,
             "50 more records of partition 0 acknowledged after the SIGKILL", timeout_s=60)
    assert lookup_owner(survivors, f"{topic}/0") in survivors
    producing.stop()
    assert producing.errors == []
    acked = producing.acked
    # The group goes on against the new coordinator and leaders: it gets everything
    # (a record consumed but not committed before the kill may come twice to it).
    _consume(consumer, acked, seen, "the group consumed every acknowledged record",
             timeout_s=90)
    consumer.close()
    contents = _topic_contents(",".join(kafka[a] for a in survivors), topic)
    assert set(contents) >= acked
    assert len(contents) == len(set(contents)), "a record is in the topic twice"


@pytest.mark.timeout(240)
def test_a_joining_broker_takes_groups_over_gracefully(
        zk_url: str, bookie_processes: BookieProcesses, tmp_path: Path) -> None:
    cluster = LocalCluster(bookie_processes, zk_url, tmp_path)
    cluster.init(container_count=COUNT, ensemble_size=3, write_quorum=2, ack_quorum=2)
    for _ in range(3):
        cluster.start_bookie()
    brokers = [cluster.start_broker("--kafka-port", "0") for _ in range(2)]
    _spread(brokers[0].address, [COUNT // 2] * 2)
    kafka = {b.address: "{}:{}".format(*kafka_address(b)) for b in brokers}
    bootstrap = ",".join(kafka.values())
    topic = "moving"
    create_topic(bootstrap, topic, PARTITIONS)
    # A broker keeps its lowest containers when a newcomer joins: the highest one moves.
    held = next(b.containers for b in list_brokers(brokers[0].address).brokers
                if b.address == brokers[0].address)
    moving = max(held)
    group = next(f"g{i}" for i in range(10_000)
                 if kafka_container_of(GROUP_KEY, f"g{i}", COUNT) == moving)
    producing = _Producing(bootstrap, topic)
    consumer = _group_consumer(bootstrap, group, topic)
    seen: list[bytes] = []
    wait_for(lambda: len(producing.acked) >= 100, "100 records acknowledged")
    _consume(consumer, set(list(producing.acked)[:50]), seen, "the group consumes")

    newcomer = cluster.start_broker("--kafka-port", "0")
    _spread(brokers[0].address, [COUNT // 3] * 3)
    owner = next(b.address for b in list_brokers(brokers[0].address).brokers
                 if moving in b.containers)
    assert owner == newcomer.address
    before = len(producing.acked)
    wait_for(lambda: len(producing.acked) >= before + 100, "100 more records acknowledged")
    producing.stop()
    assert producing.errors == []
    # The group went on at the new coordinator, committing there.
    _consume(consumer, producing.acked, seen, "the group consumed every record")
    consumer.close()
    # A new member starts from what was committed at the new coordinator.
    producing = _Producing(bootstrap, topic)
    wait_for(lambda: len(producing.acked) >= 20, "20 more records acknowledged")
    producing.stop()
    later = _group_consumer(bootstrap, group, topic)
    after: list[bytes] = []
    _consume(later, producing.acked, after, "the new member consumed the new records")
    later.close()
    assert set(after) == producing.acked
