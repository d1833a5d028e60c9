"""Kafka transactions on a 3-broker cluster, with real clients (docs/kafka.md, "Clusters").

Real processes (ZooKeeper, 3 bookies E=3/Qw=2/Qa=2, 3 brokers with
``--kafka-port 0``). The Kafka transaction coordinator runs on the owner of
``_txnlog/0``; the topics' partitions are owned by all three brokers, and the
groups offsets are sent to are coordinated by another broker than the
transaction coordinator. librdkafka, kafka-python and kafkajs each commit a
transaction over partitions of every broker and abort one; librdkafka and
kafka-python send offsets with their transaction (consume-transform-produce).
A broker SIGKILLed mid-transaction: ``test_kafka_cluster_txn_kill``.

Every check reads back independently: a plain producer writes a sentinel to
each partition last, and a ``read_committed`` consumer reads from offset 0 up
to every sentinel, so "aborted records are not there" is proven by a record
read after them, never by silence.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaPythonPartition
from kafka.structs import OffsetAndMetadata

from bench._cluster_client import list_brokers, lookup_owner
from broker.cluster.containers import COORDINATOR_SEGMENT, container_of
from broker.kafka.locator import GROUP_KEY
from broker.kafka.locator import container_of as kafka_container_of
from tests.cluster.test_kafka_cluster import PARTITIONS, _kafka_cluster
from tests.integration.kafka.test_kafka_clients import create_topic
from tests.support.bookies import BookieProcesses
from tests.support.cluster_load import COUNT
from tests.support.kafkajs import KAFKAJS, kafkajs_folder
from tests.support.wait import wait_for

DEADLINE_S = 90.0


def _spread_name(address: str, prefix: str) -> str:
    """A topic name (``prefix`` + n) whose partitions are owned by all three brokers."""
    owners = {container: b.address for b in list_brokers(address).brokers
              for container in b.containers}
    for i in range(10_000):
        name = f"{prefix}{i}"
        held = [owners.get(container_of(f"{name}/{n}", COUNT)) for n in range(PARTITIONS)]
        if len(set(held)) == 3 and None not in held:
            return name
    raise AssertionError("no topic name spreads over the three brokers")


def _group_on(owner: str, address: str, prefix: str) -> str:
    """A group id whose coordinator (its container's owner) is ``owner``."""
    held = next(b.containers for b in list_brokers(address).brokers if b.address == owner)
    return next(f"{prefix}{i}" for i in range(10_000)
                if kafka_container_of(GROUP_KEY, f"{prefix}{i}", COUNT) in held)


def _committed_contents(bootstrap: str, topic: str) -> list[bytes]:
    """Every record ``read_committed`` serves, read up to a sentinel written to each partition."""
    marks = {p: b"sentinel-%d-%s" % (p, uuid.uuid4().hex.encode()) for p in range(PARTITIONS)}
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
            elif not value.startswith(b"sentinel-"):
                got.append(value)
        return found == set(marks.values())
    try:
        wait_for(read, f"every partition of {topic} read up to its sentinel",
                 timeout_s=DEADLINE_S)
    finally:
        consumer.close()
    return got


def _values(prefix: str, count: int = 3) -> list[tuple[int, bytes]]:
    """(partition, value) of ``count`` records for every partition."""
    return [(p, b"%s-%d-%d" % (prefix.encode(), p, i))
            for p in range(PARTITIONS) for i in range(count)]


def _committed_offset(bootstrap: str, group: str, topic: str, partition: int) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "enable.auto.commit": False})
    try:
        (committed,) = consumer.committed([TopicPartition(topic, partition)],
                                          timeout=DEADLINE_S)
    finally:
        consumer.close()
    return int(committed.offset)


@pytest.mark.timeout(420)
def test_three_clients_commit_and_abort_across_brokers_with_offsets_on_another_broker(
        zk_url: str, bookie_processes: BookieProcesses, tmp_path: Path) -> None:
    brokers, kafka = _kafka_cluster(bookie_processes, zk_url, tmp_path)
    bootstrap = ",".join(kafka.values())
    first = brokers[0].address
    topic, source = _spread_name(first, "t"), _spread_name(first, "src")
    create_topic(kafka[first], topic, PARTITIONS)
    create_topic(kafka[first], source, PARTITIONS)
    coordinator = lookup_owner(list(kafka), COORDINATOR_SEGMENT)
    elsewhere = next(b.address for b in brokers if b.address != coordinator)
    expected: list[bytes] = []

    # librdkafka: commit, abort, commit, over partitions of the three brokers.
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "rd",
                         "linger.ms": 5})
    producer.init_transactions(DEADLINE_S)
    for name, commit in (("rd-c1", True), ("rd-a", False), ("rd-c2", True)):
        producer.begin_transaction()
        for p, value in _values(name):
            producer.produce(topic, value=value, partition=p)
        if commit:
            producer.commit_transaction(DEADLINE_S)
            expected += [value for _, value in _values(name)]
        else:
            assert producer.flush(DEADLINE_S) == 0  # written to the segments, then aborted
            producer.abort_transaction(DEADLINE_S)

    expected += _consume_transform_produce(producer, bootstrap, topic, source,
                                           _group_on(elsewhere, first, "ctp"))
    expected += _kafka_python_transactions(bootstrap, topic, source,
                                           _group_on(elsewhere, first, "kp"))

    # kafkajs: the same, with its own group on another broker.
    kafkajs_group = _group_on(elsewhere, first, "kjs")
    seen = _run_kafkajs(bootstrap, topic, kafkajs_group)
    assert len(seen["committed"]) == len(seen["aborted"]) == 3 * PARTITIONS
    expected += [value.encode() for value in seen["committed"]]
    assert _committed_offset(bootstrap, kafkajs_group, topic, 0) == 7

    contents = _committed_contents(bootstrap, topic)
    assert sorted(contents) == sorted(expected)  # committed once each, aborted never


def _consume_transform_produce(producer: Producer, bootstrap: str, topic: str, source: str,
                               group: str) -> list[bytes]:
    """A committed round and an aborted one, offsets sent to ``group``; the committed output."""
    inputs = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(20):
        inputs.produce(source, value=b"in-%d" % i, partition=i % PARTITIONS)
    assert inputs.flush(DEADLINE_S) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "isolation.level": "read_committed", "session.timeout.ms": 10_000})
    consumer.subscribe([source])
    taken: list[Any] = []

    def took(count: int) -> bool:
        taken.extend(m for m in consumer.consume(100, 0.2) if m.error() is None)
        return len(taken) >= count
    wait_for(lambda: took(20), "the 20 inputs consumed", timeout_s=DEADLINE_S)
    producer.begin_transaction()
    for message in taken:
        producer.produce(topic, value=b"out-" + message.value(), partition=message.partition())
    positions = consumer.position(consumer.assignment())
    producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(),
                                         DEADLINE_S)
    producer.commit_transaction(DEADLINE_S)
    output = [b"out-" + m.value() for m in taken]
    for i in range(20, 28):
        inputs.produce(source, value=b"in-%d" % i, partition=i % PARTITIONS)
    assert inputs.flush(DEADLINE_S) == 0
    wait_for(lambda: took(28), "8 more inputs consumed", timeout_s=DEADLINE_S)
    producer.begin_transaction()
    for message in taken[20:]:
        producer.produce(topic, value=b"dropped-" + message.value(),
                         partition=message.partition())
    producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                         consumer.consumer_group_metadata(), DEADLINE_S)
    assert producer.flush(DEADLINE_S) == 0
    producer.abort_transaction(DEADLINE_S)
    committed = consumer.committed([TopicPartition(source, p) for p in range(PARTITIONS)],
                                   timeout=DEADLINE_S)
    consumer.close()
    # The committed round's offsets hold; the aborted round's were dropped with its output.
    assert {c.partition: c.offset for c in committed} == {
        c.partition: c.offset for c in positions}
    assert sum(c.offset for c in committed) == 20
    return output


def _kafka_python_transactions(bootstrap: str, topic: str, source: str,
                               python_group: str) -> list[bytes]:
    """kafka-python: a commit (with offsets of ``python_group``) and an abort; the committed."""
    python = KafkaProducer(bootstrap_servers=bootstrap.split(","), transactional_id="kp")
    try:
        python.init_transactions()
        python.begin_transaction()
        for p, value in _values("kp-c"):
            python.send(topic, value=value, partition=p)
        python.send_offsets_to_transaction(
            {KafkaPythonPartition(source, 1): OffsetAndMetadata(5, "", -1)}, python_group)
        python.commit_transaction()
        python.begin_transaction()
        for p, value in _values("kp-a"):
            python.send(topic, value=value, partition=p).get(DEADLINE_S)
        python.abort_transaction()
    finally:
        python.close()
    reader = KafkaConsumer(bootstrap_servers=bootstrap.split(","), group_id=python_group,
                           enable_auto_commit=False)
    try:
        assert reader.committed(KafkaPythonPartition(source, 1)) == 5
    finally:
        reader.close()
    return [value for _, value in _values("kp-c")]


def _run_kafkajs(bootstrap: str, topic: str, group: str) -> Any:
    kafkajs_folder()  # installed once, under a lock
    node = shutil.which("node")
    assert node is not None
    done = subprocess.run([node, str(KAFKAJS / "txn.js"), bootstrap, topic, str(PARTITIONS),
                           group, "kjs"], capture_output=True, timeout=180, check=False)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    return json.loads(done.stdout)
