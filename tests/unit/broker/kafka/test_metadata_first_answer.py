"""A consumer whose first Metadata answer comes while the topic cannot be read: no error.

Issue 22, nemesis seed 16: one librdkafka consumer reported "Subscribed topic
not available: chaos-kafka: Broker: Unknown topic or partition" although the
topic existed all along. Its first Metadata request reached a broker whose
ZooKeeper link was blackholed; the broker answered the topic
LEADER_NOT_AVAILABLE with no partitions. librdkafka ignores such an answer
(it keeps no cache entry for it), then checks its subscription against its
cache, finds no entry for the topic and reports it unknown: an
application-visible error for a transient condition. The broker now reads
the topic again while the store cannot be read (up to ``READ_WAIT_S``), and
closes the connection past that rather than answer a topic with no partitions.

A real librdkafka consumer against the broker's Kafka listener in this
process; the metadata store is wrapped at its seam (``FaultyMetadataStore``)
so that the first reads of the topic's record fail as a lost connection.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer

from broker.api import TopicConfig
from broker.kafka.context import NODE_ID, KafkaContext
from broker.kafka.coordinators import start_coordinators
from broker.kafka.locator import Node
from broker.kafka.producer_ids import ProducerIds
from broker.kafka.server import KafkaServer
from broker.segments.names import topic_path
from broker.system.snapshot_store import snapshot_store
from broker.topics.manager import TopicManager
from tests.support.faulty_metadata import FaultyMetadataStore
from tests.unit.broker.conftest import BrokerEnv

pytestmark = pytest.mark.faults

TOPIC = "orders"
RECORDS = 5
DEADLINE_S = 60.0


@dataclass
class _Listener:
    store: FaultyMetadataStore
    bootstrap: str


@pytest.fixture
async def listener(tmp_path: Path) -> AsyncIterator[_Listener]:
    env = BrokerEnv(tmp_path)
    store = FaultyMetadataStore(env.store)
    topics = TopicManager(env.ledgers, store, txn_store_factory=snapshot_store)
    context = KafkaContext(topics, "127.0.0.1", ProducerIds(store))
    context.coordinators = await start_coordinators(
        topics, None, context.producer_ids,
        lambda: Node(NODE_ID, context.host, context.port), context.stopping)
    server = KafkaServer(context, "127.0.0.1", 0)
    await server.start()
    await topics.create_topic(TOPIC, 2, TopicConfig())
    try:
        yield _Listener(store, f"127.0.0.1:{server.port}")
    finally:
        await server.stop()
        if context.coordinators.closer is not None:
            await context.coordinators.closer
        await topics.close()
        await env.stop()


def _produce(bootstrap: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "log_level": 2})
    for number in range(RECORDS):
        producer.produce(TOPIC, value=b"%d" % number, partition=number % 2)
    assert producer.flush(DEADLINE_S) == 0


def _consume(bootstrap: str) -> tuple[list[bytes], list[str]]:
    """(the records read, the errors ``poll`` gave) once all ``RECORDS`` are read."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "first-answer",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "session.timeout.ms": 6_000, "log_level": 2})
    consumer.subscribe([TOPIC])
    values: list[bytes] = []
    errors: list[str] = []
    deadline = threading.Event()
    timer = threading.Timer(DEADLINE_S, deadline.set)
    timer.start()
    try:
        # Errors are queued before the records: the subscription is checked
        # against the first Metadata answer before any partition is assigned.
        while len(values) < RECORDS and not deadline.is_set():
            message: Any = consumer.poll(0.2)
            if message is None:
                continue
            if message.error() is not None:
                errors.append(str(message.error()))
                continue
            values.append(message.value())
    finally:
        timer.cancel()
        consumer.close()
    return values, errors


async def test_a_consumer_first_asking_while_the_topic_cannot_be_read_sees_no_error(
        listener: _Listener) -> None:
    await asyncio.to_thread(_produce, listener.bootstrap)
    # The consumer's first Metadata answer: ZooKeeper away for its first reads
    # of the topic's record (a blackholed link, a restart, a reset).
    listener.store.fail_reads(3, lambda path: path == topic_path(TOPIC))
    values, errors = await asyncio.to_thread(_consume, listener.bootstrap)
    assert listener.store.failed_reads == [topic_path(TOPIC)] * 3  # the fault fired
    assert errors == []  # the old code: "Subscribed topic not available: orders: ..."
    assert sorted(values) == [b"%d" % n for n in range(RECORDS)]
