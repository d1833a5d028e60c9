"""Kafka transactions through a heir another broker owns; ``require_stable`` across brokers.

Real processes (ZooKeeper, 3 bookies E=3/Qw=2/Qa=2, 3 brokers with
``--kafka-port 0``, librdkafka). The topic is named so that partition 0's
heir after a split (segment 2) is owned by another broker than partition 0:
a transactional producer writing to sealed partition 0 has its batches
forwarded to the heir's owner, where they join its open transaction
(``broker.kafka.forwarding``, docs/kafka.md "Partitions and scaling"). A
committed transaction is read back whole with ``read_committed``, an aborted
one not at all, nothing twice. The offsets the last transaction sends go to a
group coordinated by another broker than the transaction coordinator: an
OffsetFetch with ``require_stable`` there answers UNSTABLE_OFFSET_COMMIT while
the transaction is open, and the committed offset once it committed
(``broker.kafka.txns.cluster``, docs/kafka.md "Clusters").

The hop's lost answers (a fault wrapper at the broker-to-broker seam) are
``tests/unit/broker/kafka/test_forwarding.py``'s.
"""

from __future__ import annotations

import socket
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

import folio
from bench._cluster_client import lookup_owner
from broker.cluster.containers import COORDINATOR_SEGMENT
from tests.cluster.test_kafka_cluster import _kafka_cluster
from tests.cluster.test_kafka_cluster_scaling import _at, _topic_with_remote_heirs
from tests.cluster.test_kafka_cluster_txn import _group_on
from tests.integration.kafka.test_kafka_clients import create_topic
from tests.integration.kafka.test_kafka_scaling import scale_with_cli
from tests.support.bookies import BookieProcesses
from tests.support.kafka import raw_request, read_response
from tests.support.wait import wait_for

DEADLINE_S = 90.0
OFFSET_FETCH = 9
#: Partitions after the split of partition 0: 0 (sealed), 1, 2 and 3.
PARTITIONS = 4


def _values(name: str, partitions: tuple[int, ...] = (0, 1), count: int = 4
            ) -> list[tuple[int, bytes]]:
    return [(p, b"%s-%d-%d" % (name.encode(), p, i)) for p in partitions for i in range(count)]


def _offset_fetch(kafka: str, group: str, topic: str, partition: int) -> tuple[int, int, int]:
    """(group error, partition error, committed offset) of OffsetFetch v7 with require_stable."""
    cls: Any = load_request_schema(OFFSET_FETCH, 7)
    module: Any = __import__(cls.__module__, fromlist=["OffsetFetchRequestTopic"])
    request = cls(group_id=group, require_stable=True, topics=(
        module.OffsetFetchRequestTopic(name=topic, partition_indexes=(partition,)),))
    host, port = kafka.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(raw_request(OFFSET_FETCH, 7, 1, request))
        _, response = read_response(sock, OFFSET_FETCH, 7)
    (answer,) = response.topics[0].partitions
    return int(response.error_code), int(answer.error_code), int(answer.committed_offset)


def _committed_contents(bootstrap: str, topic: str) -> list[bytes]:
    """Every record ``read_committed`` serves, read up to a sentinel in each open partition.

    Partition 0 is sealed (its end is final, its later records are in its heir).
    """
    marks = {p: b"sentinel-%d-%s" % (p, uuid.uuid4().hex.encode()) for p in (1, 2, 3)}
    sentinels = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for p, value in marks.items():
        sentinels.produce(topic, value=value, partition=p)
    assert sentinels.flush(DEADLINE_S) == 0, "sentinels not written"
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got: list[bytes] = []
    found: set[bytes] = set()

    def read() -> bool:
        for message in consumer.consume(1000, 0.2):
            if message.error() is not None:
                continue
            value = message.value() or b""
            if value in marks.values():
                found.add(value)
            else:
                got.append(value)
        return found == set(marks.values())
    try:
        wait_for(read, f"every open partition of {topic} read up to its sentinel",
                 timeout_s=DEADLINE_S)
    finally:
        consumer.close()
    return got


@pytest.mark.timeout(600)
def test_transactions_through_a_remote_heir_and_require_stable_on_another_broker(
        zk_url: str, bookie_processes: BookieProcesses, tmp_path: Path) -> None:
    brokers, kafka = _kafka_cluster(bookie_processes, zk_url, tmp_path)
    bootstrap = ",".join(kafka.values())
    first = brokers[0].address
    topic, owner = _topic_with_remote_heirs(first, "th")
    create_topic(bootstrap, topic, 2)
    scale_with_cli(_at(brokers, owner[0]), topic, "--split", "0")  # heir: segment 2
    assert owner[2] != owner[0]
    coordinator = lookup_owner(list(kafka), COORDINATOR_SEGMENT)
    elsewhere = next(b.address for b in brokers if b.address != coordinator)
    group = _group_on(elsewhere, first, "stable")

    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "heirs",
                         "linger.ms": 5})
    producer.init_transactions(DEADLINE_S)
    expected: list[bytes] = []
    # Committed, aborted: each writes to sealed partition 0 (forwarded to the
    # heir's owner, in the transaction there) and to partition 1.
    for name, commit in (("c1", True), ("a1", False)):
        producer.begin_transaction()
        for p, value in _values(name):
            producer.produce(topic, value=value, partition=p)
        assert producer.flush(DEADLINE_S) == 0  # every batch answered as written
        if commit:
            producer.commit_transaction(DEADLINE_S)
            expected += [value for _, value in _values(name)]
        else:
            producer.abort_transaction(DEADLINE_S)

    # A transaction with offsets for a group another broker than the
    # transaction coordinator coordinates: unstable there until it commits.
    assert _offset_fetch(kafka[elsewhere], group, topic, 1) == (0, 0, -1)
    producer.begin_transaction()
    for p, value in _values("c2"):
        producer.produce(topic, value=value, partition=p)
    metadata = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        producer.send_offsets_to_transaction([TopicPartition(topic, 1, 5)],
                                             metadata.consumer_group_metadata(), DEADLINE_S)
    finally:
        metadata.close()
    assert producer.flush(DEADLINE_S) == 0
    assert _offset_fetch(kafka[elsewhere], group, topic, 1) == (
        0, ErrorCode.unstable_offset_commit.value, -1)
    producer.commit_transaction(DEADLINE_S)
    expected += [value for _, value in _values("c2")]
    wait_for(lambda: _offset_fetch(kafka[elsewhere], group, topic, 1) == (0, 0, 5),
             "the committed offset stable at the group's coordinator", timeout_s=DEADLINE_S)

    with folio.Client(first, timeout_s=30) as client:
        ends = {s.name: s.end_offset for s in client.get_segments(topic, include_sealed=True)}
    # The heir took partition 0's batches (and the markers), partition 0 nothing.
    assert ends[f"{topic}/0"] == 0 and ends[f"{topic}/2"] > 0
    contents = _committed_contents(bootstrap, topic)
    assert sorted(contents) == sorted(expected)  # committed once each, aborted never


@pytest.mark.faults
@pytest.mark.timeout(600)
def test_sigkill_of_the_heirs_owner_while_transactional_batches_are_forwarded(
        zk_url: str, bookie_processes: BookieProcesses, tmp_path: Path) -> None:
    """The hop's answers are lost with the heir's owner (maybe applied) mid-transaction.

    The sealed partition's owner asks the heir's next owner again; it loaded
    the heir (the dead owner's appends recovered), registers it in the open
    transaction again and drops the copies it holds. The transaction commits
    whole, once; the next one, aborted, shows nothing.
    """
    brokers, kafka = _kafka_cluster(bookie_processes, zk_url, tmp_path)
    first = brokers[0].address
    coordinator = lookup_owner(list(kafka), COORDINATOR_SEGMENT)
    # The heir's owner owns neither partition 0 nor 1, nor the coordinator.
    topic, owner = next(
        (name, owner) for name, owner in (
            _topic_with_remote_heirs(first, f"tk{i}-", victim_heir=True) for i in range(50))
        if owner[2] != coordinator)
    bootstrap = ",".join(kafka.values())
    create_topic(bootstrap, topic, 2)
    scale_with_cli(_at(brokers, owner[0]), topic, "--split", "0")
    victim = next(b for b in brokers if b.address == owner[2])
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "heir-kill",
                         "linger.ms": 5})
    producer.init_transactions(DEADLINE_S)
    producer.begin_transaction()
    committed = _values("k1", count=100)
    for p, value in committed[:100]:  # partition 0's: forwarded, answered
        producer.produce(topic, value=value, partition=p)
    assert producer.flush(DEADLINE_S) == 0
    for p, value in committed[100:]:
        producer.produce(topic, value=value, partition=p)
    for i in range(100):  # partition 0's later batches: in flight at the kill
        producer.produce(topic, value=b"k1-late-%d" % i, partition=0)
    producer.poll(0)
    assert victim.kill() != 0
    assert producer.flush(DEADLINE_S) == 0
    producer.commit_transaction(DEADLINE_S)
    expected = [value for _, value in committed] + [b"k1-late-%d" % i for i in range(100)]
    producer.begin_transaction()
    for p, value in _values("a2", count=20):
        producer.produce(topic, value=value, partition=p)
    assert producer.flush(DEADLINE_S) == 0
    producer.abort_transaction(DEADLINE_S)

    survivors = ",".join(kafka[b.address] for b in brokers if b is not victim)
    contents = _committed_contents(survivors, topic)
    assert sorted(contents) == sorted(expected)  # committed once each, aborted never
