"""Kafka consumers and Folio transactions: ``read_committed`` skips aborted and open data.

Transactions are written with the SDK's ``TransactionalWriter`` (Folio's
coordinator, commit and abort markers, the transaction buffer); a librdkafka
consumer with ``isolation.level=read_committed`` sees exactly the committed
events, at their Folio offsets, and stops before an open transaction (the
last stable offset), while ``read_uncommitted`` sees every event written.
"""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import Consumer, TopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaPythonPartition

import folio
from tests.integration.kafka.test_kafka_clients import DEADLINE_S


def end_offset(bootstrap: str, topic: str, isolation: str) -> int:
    """The partition's end as ListOffsets answers at ``isolation``: the last stable
    offset for read_committed, the high watermark for read_uncommitted."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation,
                             request_timeout_ms=int(DEADLINE_S * 1000) + 1000)
    try:
        partition = KafkaPythonPartition(topic, 0)
        return int(consumer.end_offsets([partition])[partition])
    finally:
        consumer.close()


def read_all(bootstrap: str, topic: str, isolation: str) -> list[Any]:
    """Every message a consumer at ``isolation`` gets, up to the end ListOffsets names.

    The consumer's position reaching that end is the proof that nothing more
    comes (never a quiet period, which a slow broker passes by itself).
    """
    end = end_offset(bootstrap, topic, isolation)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                         "enable.auto.commit": False, "isolation.level": isolation,
                         "fetch.wait.max.ms": 100})
    partition = TopicPartition(topic, 0, 0)
    consumer.assign([partition])
    messages: list[Any] = []
    deadline = time.monotonic() + DEADLINE_S
    try:
        while consumer.position([partition])[0].offset < end:
            assert time.monotonic() < deadline, (end, [m.value() for m in messages])
            message = consumer.poll(0.1)
            if message is None:
                continue
            assert message.error() is None, message.error()
            messages.append(message)
    finally:
        consumer.close()
    return messages


def test_read_committed_skips_aborted_and_stops_before_open_transactions(
        bootstrap: str, client: folio.Client) -> None:
    topic = "isolation"
    client.create_topic(topic, 1)
    with client.transactional_writer(topic) as writer:
        committed = writer.begin()
        committed.write_event(b"c1", routing_key="k")
        committed.write_event(b"c2", routing_key="k")
        committed.commit()
        aborted = writer.begin()
        aborted.write_event(b"a1", routing_key="k")
        aborted.flush()
        aborted.abort()
        later = writer.begin()
        later.write_event(b"c3", routing_key="k")
        later.commit()
        open_txn = writer.begin()
        open_txn.write_event(b"o1", routing_key="k")
        open_txn.flush()
        with client.writer(topic) as plain:
            plain.write_event(b"p1", routing_key="k").result(DEADLINE_S)

        values = [m.value() for m in read_all(bootstrap, topic, "read_committed")]
        assert values == [b"c1", b"c2", b"c3"]  # not a1 (aborted), stops before o1
        everything = read_all(bootstrap, topic, "read_uncommitted")
        assert [m.value() for m in everything] == [b"c1", b"c2", b"a1", b"c3", b"o1", b"p1"]
        offsets = {m.value(): m.offset() for m in everything}

        open_txn.commit()
        after = read_all(bootstrap, topic, "read_committed")
        assert [m.value() for m in after] == [b"c1", b"c2", b"c3", b"o1", b"p1"]
        # The same offsets through both isolation levels: aborted data is a gap.
        assert all(m.offset() == offsets[m.value()] for m in after)


def test_a_consumer_moves_on_past_an_aborted_tail(bootstrap: str, client: folio.Client) -> None:
    topic = "aborted-tail"
    client.create_topic(topic, 1)
    with client.transactional_writer(topic) as writer:
        aborted = writer.begin()
        aborted.write_event(b"gone", routing_key="k")
        aborted.flush()
        aborted.abort()
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                         "enable.auto.commit": False, "isolation.level": "read_committed",
                         "fetch.wait.max.ms": 200})
    consumer.assign([TopicPartition(topic, 0, 0)])
    try:
        # Only aborted data so far: the first message delivered must be "next".
        with client.writer(topic) as plain:
            placed = plain.write_event(b"next", routing_key="k").result(DEADLINE_S)
        deadline = time.monotonic() + DEADLINE_S
        message = None
        while message is None:
            assert time.monotonic() < deadline
            message = consumer.poll(0.2)
        assert (message.error(), message.value(), message.offset()) == (
            None, b"next", placed.offset)
    finally:
        consumer.close()
