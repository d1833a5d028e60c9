"""Kafka transactions with real clients, on Folio's transaction coordinator and buffer.

A transactional producer commits some transactions and aborts others: a
``read_committed`` consumer sees only the committed records (aborted ones
are gaps, skipped exactly as Folio's readers skip them), a
``read_uncommitted`` one sees both. Consume-transform-produce commits its
input offsets with its output (``send_offsets_to_transaction``): after an
abort neither the output nor the offsets are there. A second producer with
the same transactional id fences the first.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaPythonPartition
from kafka.structs import OffsetAndMetadata

import folio
from tests.integration.kafka.test_kafka_clients import DEADLINE_S, create_topic, produce


def read_all(bootstrap: str, topic: str, partitions: int, count: int,
             isolation: str) -> list[tuple[int | None, int | None, bytes | None]]:
    """(partition, offset, value) of the first ``count`` records, read with ``isolation``."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                         "enable.auto.commit": False, "isolation.level": isolation})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: list[tuple[int | None, int | None, bytes | None]] = []
    deadline = time.monotonic() + DEADLINE_S
    try:
        while len(got) < count:
            assert time.monotonic() < deadline, f"got {len(got)} of {count}: {got}"
            message = consumer.poll(0.2)
            if message is not None:
                assert message.error() is None, message.error()
                got.append((message.partition(), message.offset(), message.value()))
    finally:
        consumer.close()
    return got


def transactional_producer(bootstrap: str, transactional_id: str) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                         "linger.ms": 5})
    producer.init_transactions(DEADLINE_S)
    return producer


def test_librdkafka_read_committed_skips_aborted_transactions(bootstrap: str) -> None:
    topic = "txn-rd"
    create_topic(bootstrap, topic, 2)
    producer = transactional_producer(bootstrap, "txn-rd-producer")
    producer.begin_transaction()
    for i in range(10):
        producer.produce(topic, value=b"committed-%d" % i, partition=i % 2)
    producer.commit_transaction(DEADLINE_S)
    producer.begin_transaction()
    for i in range(6):
        producer.produce(topic, value=b"aborted-%d" % i, partition=i % 2)
    producer.flush(DEADLINE_S)  # written to the segments, then aborted
    producer.abort_transaction(DEADLINE_S)
    producer.begin_transaction()
    for i in range(4):
        producer.produce(topic, value=b"last-%d" % i, partition=i % 2)
    producer.commit_transaction(DEADLINE_S)

    committed = read_all(bootstrap, topic, 2, 14, "read_committed")
    expected = {b"committed-%d" % i for i in range(10)} | {b"last-%d" % i for i in range(4)}
    # The "last" records lie after the aborted ones: had those been served, they came first.
    assert {value for _, _, value in committed} == expected
    assert len(committed) == 14
    uncommitted = read_all(bootstrap, topic, 2, 20, "read_uncommitted")
    assert {value for _, _, value in uncommitted} == expected | {
        b"aborted-%d" % i for i in range(6)}
    # Aborted records keep their offsets: read_committed sees a gap there.
    offsets = {(p, value): offset for p, offset, value in uncommitted}
    assert [offsets[(0, b"last-0")], offsets[(0, b"last-2")]] == [8, 9]


def test_kafka_python_transactions_and_read_committed(bootstrap: str,
                                                      client: folio.Client) -> None:
    topic = "txn-kp"
    create_topic(bootstrap, topic, 1)
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="txn-kp-producer")
    try:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic, value=b"kept", partition=0)
        producer.commit_transaction()
        producer.begin_transaction()
        producer.send(topic, value=b"dropped", partition=0).get(DEADLINE_S)
        producer.abort_transaction()
        producer.begin_transaction()
        producer.send(topic, value=b"kept-too", partition=0)
        producer.commit_transaction()
    finally:
        producer.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed",
                             auto_offset_reset="earliest", enable_auto_commit=False)
    consumer.assign([KafkaPythonPartition(topic, 0)])
    values: list[bytes] = []
    deadline = time.monotonic() + DEADLINE_S
    try:
        while len(values) < 2:
            assert time.monotonic() < deadline, f"got {values}"
            for batch in consumer.poll(timeout_ms=200).values():
                values.extend(record.value for record in batch)
    finally:
        consumer.close()
    assert values == [b"kept", b"kept-too"]
    # The Folio SDK's committed reads agree with the Kafka consumer.
    events = [event.payload for event in client.batch_client().read_segment(f"{topic}/0", 0)]
    assert events == [b"kept", b"kept-too"]


def test_consume_transform_produce_commits_offsets_with_the_output(bootstrap: str) -> None:
    source, sink, group = "ctp-in", "ctp-out", "ctp-group"
    create_topic(bootstrap, source, 1)
    create_topic(bootstrap, sink, 1)
    produce(bootstrap, source, [(0, b"%d" % i, None, []) for i in range(10)])
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "isolation.level": "read_committed"})
    consumer.subscribe([source])
    producer = transactional_producer(bootstrap, "ctp-producer")
    try:
        for round_number, commit in ((0, True), (1, False)):
            inputs: list[Any] = []
            deadline = time.monotonic() + DEADLINE_S
            while len(inputs) < 5:
                assert time.monotonic() < deadline, f"round {round_number}: {len(inputs)} in"
                message = consumer.poll(0.2)
                if message is not None and message.error() is None:
                    inputs.append(message)
            producer.begin_transaction()
            for message in inputs:
                producer.produce(sink, value=b"x" + message.value(), partition=0)
            producer.send_offsets_to_transaction(
                consumer.position(consumer.assignment()), consumer.consumer_group_metadata(),
                DEADLINE_S)
            if commit:
                producer.commit_transaction(DEADLINE_S)
            else:
                producer.flush(DEADLINE_S)
                producer.abort_transaction(DEADLINE_S)
        committed = consumer.committed([TopicPartition(source, 0)], timeout=DEADLINE_S)
    finally:
        consumer.close()
    # The committed round's offsets hold; the aborted round's were dropped with its output.
    assert committed[0].offset == 5
    output = read_all(bootstrap, sink, 1, 5, "read_committed")
    assert [value for _, _, value in output] == [b"x%d" % i for i in range(5)]
    assert len(read_all(bootstrap, sink, 1, 10, "read_uncommitted")) == 10


def test_a_new_producer_with_the_same_transactional_id_fences_the_old_one(
        bootstrap: str) -> None:
    topic = "txn-fence"
    create_topic(bootstrap, topic, 1)
    old = transactional_producer(bootstrap, "txn-fence-producer")
    old.begin_transaction()
    old.produce(topic, value=b"old", partition=0)
    old.flush(DEADLINE_S)
    new = transactional_producer(bootstrap, "txn-fence-producer")  # aborts what old left open
    new.begin_transaction()
    new.produce(topic, value=b"new", partition=0)
    new.commit_transaction(DEADLINE_S)
    with pytest.raises(KafkaException) as raised:
        old.commit_transaction(DEADLINE_S)
    assert raised.value.args[0].fatal()
    committed = read_all(bootstrap, topic, 1, 1, "read_committed")
    assert [value for _, _, value in committed] == [b"new"]
    assert {value for _, _, value in read_all(bootstrap, topic, 1, 2, "read_uncommitted")} == {
        b"old", b"new"}


def test_kafka_python_sends_offsets_with_its_transaction(bootstrap: str) -> None:
    source, sink, group = "kp-ctp-in", "kp-ctp-out", "kp-ctp-group"
    create_topic(bootstrap, source, 1)
    create_topic(bootstrap, sink, 1)
    produce(bootstrap, source, [(0, b"%d" % i, None, []) for i in range(6)])
    consumer = KafkaConsumer(source, bootstrap_servers=bootstrap, group_id=group,
                             enable_auto_commit=False, auto_offset_reset="earliest",
                             isolation_level="read_committed")
    assert consumer.partitions_for_topic(source) == {0}
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="kp-ctp")
    try:
        producer.init_transactions()
        inputs: list[Any] = []
        deadline = time.monotonic() + DEADLINE_S
        while len(inputs) < 6:
            assert time.monotonic() < deadline, f"{len(inputs)} records in"
            for batch in consumer.poll(timeout_ms=200).values():
                inputs.extend(batch)
        producer.begin_transaction()
        for record in inputs:
            producer.send(sink, value=b"x" + record.value, partition=0)
        producer.send_offsets_to_transaction(
            {KafkaPythonPartition(source, 0): OffsetAndMetadata(6, "", -1)},
            consumer.group_metadata())
        producer.commit_transaction()
        assert consumer.committed(KafkaPythonPartition(source, 0)) == 6
    finally:
        producer.close()
        consumer.close()
    output = read_all(bootstrap, sink, 1, 6, "read_committed")
    assert [value for _, _, value in output] == [b"x%d" % i for i in range(6)]
