"""Kafka's topic names, auto-creation and replication factor on a real ``folio standalone``.

- A name Kafka accepts (``_schemas``) works end to end: created by a
  librdkafka producer's Metadata (auto-creation), consumed in a group, written
  and read through the SDK.
- Auto-creation as Kafka does it: a producer to a missing topic is delivered
  (librdkafka and kafka-python); with ``--no-kafka-auto-create-topics`` it
  fails with the unknown-topic error once the client's propagation wait
  passes, and Metadata answers UNKNOWN_TOPIC_OR_PARTITION at once;
  ``--kafka-num-partitions`` sizes auto-created topics and CreateTopics with -1.
- CreateTopics' replication factor is checked against the copies Folio keeps
  (the write quorum, 1 on a standalone): 3 is INVALID_REPLICATION_FACTOR.
- Upgrade: a standalone started again on the data of a run that wrote every
  system topic (under the names earlier builds gave them, which this build
  keeps) finds them: committed offsets, transactional state.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaProducer

import folio
from broker.segments.names import LEGACY_SYSTEM_TOPICS, SYSTEM_TOPIC_PREFIX
from tests.integration.kafka.test_kafka_clients import DEADLINE_S, consume
from tests.support.bookies import BookieProcess, BookieProcesses
from tests.support.kafka import kafka_address
from tests.support.standalone import start_standalone


def _bootstrap(server: BookieProcess) -> str:
    host, port = kafka_address(server)
    return f"{host}:{port}"


def _produce(bootstrap: str, topic: str, values: list[bytes],
             **settings: object) -> list[KafkaError | None]:
    """Produce ``values`` (keyed by themselves); each one's delivery error (None: delivered)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **settings})
    outcomes: dict[int, KafkaError | None] = {}

    def report(index: int) -> Callable[[KafkaError | None, Any], None]:
        def delivered(error: KafkaError | None, _message: Any) -> None:
            outcomes[index] = error
        return delivered

    transactional = "transactional.id" in settings
    if transactional:
        producer.init_transactions(DEADLINE_S)
        producer.begin_transaction()
    for index, value in enumerate(values):
        producer.produce(topic, value=value, key=value, on_delivery=report(index))
    if transactional:
        producer.commit_transaction(DEADLINE_S)
    assert producer.flush(DEADLINE_S) == 0, "messages left without an outcome"
    return [outcomes[index] for index in range(len(values))]


@pytest.fixture(scope="module")
def refusing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BookieProcess]:
    """A standalone with auto-creation off and 3 partitions by default."""
    processes = BookieProcesses()
    started = start_standalone(
        processes, tmp_path_factory.mktemp("refusing") / "data", "--kafka-port", "0",
        "--no-kafka-auto-create-topics", "--kafka-num-partitions", "3")
    yield started
    try:
        started.terminate()
    finally:
        processes.kill_all()


def test_schemas_works_end_to_end(bootstrap: str, client: folio.Client) -> None:
    # Created by the producer's Metadata request: no CreateTopics.
    assert _produce(bootstrap, "_schemas", [b"k0", b"k1", b"k2"]) == [None] * 3
    assert [segment.name for segment in client.get_topic("_schemas").segments] == [
        "_schemas/0"]
    with client.writer("_schemas") as writer:
        written = writer.write_event(b"from-sdk", routing_key="k3").result(DEADLINE_S)
    assert (written.segment, written.offset) == ("_schemas/0", 3)
    events = list(client.batch_client().read_segment("_schemas/0", 0, 4))
    assert [event.payload for event in events] == [b"k0", b"k1", b"k2", b"from-sdk"]
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "schema-registry",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe(["_schemas"])
    values: list[bytes] = []
    deadline = time.monotonic() + DEADLINE_S
    try:
        while len(values) < 4:
            assert time.monotonic() < deadline, f"consumed {values}"
            message = consumer.poll(0.5)
            if message is None:
                continue
            assert message.error() is None, message.error()
            value = message.value()
            assert value is not None
            values.append(value)
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    assert values == [b"k0", b"k1", b"k2", b"from-sdk"]
    assert "_schemas" in {topic.name for topic in client.list_topics()}


def test_kafka_python_producer_to_a_missing_topic_is_delivered(
        bootstrap: str, client: folio.Client) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    try:
        sent = producer.send("_made-by-kafka-python", b"v").get(timeout=DEADLINE_S)
    finally:
        producer.close()
    assert (sent.partition, sent.offset) == (0, 0)
    assert len(client.get_topic("_made-by-kafka-python").segments) == 1


def test_replication_factor_is_checked_against_the_copies_kept(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic("rf-three", num_partitions=1,
                                            replication_factor=3),
                                   NewTopic("rf-default", num_partitions=2),
                                   NewTopic("rf-one", num_partitions=1, replication_factor=1)])
    with pytest.raises(KafkaException) as refused:
        futures["rf-three"].result(DEADLINE_S)
    error = refused.value.args[0]
    assert error.code() == KafkaError.INVALID_REPLICATION_FACTOR
    assert "replication factor 3 is more than the 1 copies" in error.str()
    futures["rf-default"].result(DEADLINE_S)
    futures["rf-one"].result(DEADLINE_S)
    topics = admin.list_topics(timeout=DEADLINE_S).topics
    assert "rf-three" not in topics
    assert sorted(topics["rf-default"].partitions) == [0, 1]


def test_with_auto_creation_off_a_missing_topic_fails_fast(refusing: BookieProcess) -> None:
    bootstrap = _bootstrap(refusing)
    lookup = AdminClient({"bootstrap.servers": bootstrap})
    missing = lookup.list_topics(topic="never", timeout=DEADLINE_S).topics["never"]
    assert missing.error is not None
    assert missing.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    # librdkafka waits topic.metadata.propagation.max.ms (30 s by default, as
    # for a Kafka broker with auto.create.topics.enable=false) before it fails
    # the messages: the broker's answer was at once.
    [outcome] = _produce(bootstrap, "never", [b"v"], **{
        "topic.metadata.propagation.max.ms": 1000, "message.timeout.ms": 120000})
    assert outcome is not None
    assert outcome.code() in (KafkaError._UNKNOWN_TOPIC, KafkaError.UNKNOWN_TOPIC_OR_PART)
    with folio.Client(refusing.address, timeout_s=30) as client:
        assert [topic.name for topic in client.list_topics()] == []
        # CreateTopics without a partition count takes --kafka-num-partitions.
        lookup.create_topics([NewTopic("sized")])["sized"].result(DEADLINE_S)
        assert len(client.get_topic("sized").segments) == 3


def test_the_system_topics_of_earlier_builds_are_found_after_a_restart(
        tmp_path: Path) -> None:
    processes = BookieProcesses()
    data = tmp_path / "data"
    try:
        first = start_standalone(processes, data, "--kafka-port", "0")
        bootstrap = _bootstrap(first)
        assert _produce(bootstrap, "_upgrade", [b"a", b"b"], **{
            "transactional.id": "upgrader"}) == [None, None]
        consumed = consume(bootstrap, [TopicPartition("_upgrade", 0, 0)], 2,
                           **{"group.id": "upgrade-group"})
        committer = Consumer({"bootstrap.servers": bootstrap, "group.id": "upgrade-group"})
        try:
            committer.commit(offsets=[TopicPartition("_upgrade", 0, 2)], asynchronous=False)
        finally:
            committer.close()
        assert [message.value() for message in consumed] == [b"a", b"b"]
        with folio.Client(first.address, timeout_s=30) as client:
            before = {topic.name for topic in client.list_topics(include_internal=True)}
        first.terminate()

        again = start_standalone(processes, data, "--kafka-port", "0")
        with folio.Client(again.address, timeout_s=30) as client:
            after = {topic.name for topic in client.list_topics(include_internal=True)}
        assert after == before
        assert {"_txnlog", "_kafka_offsets", "_kafka_txn_state"} <= after
        assert after - {"_upgrade"} <= LEGACY_SYSTEM_TOPICS
        assert not any(name.startswith(SYSTEM_TOPIC_PREFIX) for name in after)
        bootstrap = _bootstrap(again)
        reader = Consumer({"bootstrap.servers": bootstrap, "group.id": "upgrade-group"})
        try:
            [committed] = reader.committed([TopicPartition("_upgrade", 0)], timeout=DEADLINE_S)
        finally:
            reader.close()
        assert committed.offset == 2
        # The transactional id's producer state was found: the next epoch goes on.
        assert _produce(bootstrap, "_upgrade", [b"c"], **{
            "transactional.id": "upgrader"}) == [None]
        again.terminate()
    finally:
        processes.kill_all()
