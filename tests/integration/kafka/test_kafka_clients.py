"""Real Kafka clients (librdkafka through confluent-kafka, and kafka-python) against Folio.

Each test creates its own topics through the Kafka admin API of the module's
``folio standalone --kafka-port 0`` and checks exactly what comes back:
records with their keys, headers and values, in order, at offsets 0, 1, 2 ...
per partition, with every compression Kafka defines.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaPythonPartition
from kafka.admin import NewTopic as KafkaPythonNewTopic
from kafka.errors import TopicAlreadyExistsError

import folio
from broker.segments.names import is_system_topic

DEADLINE_S = 60.0
COMPRESSIONS = ["none", "gzip", "snappy", "lz4", "zstd"]


def create_topic(bootstrap: str, name: str, partitions: int,
                 config: dict[str, str] | None = None) -> None:
    """Create ``name`` through the Kafka admin API (librdkafka)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, num_partitions=partitions,
                                            replication_factor=1, config=config or {})])
    futures[name].result(DEADLINE_S)


def produce(bootstrap: str, topic: str, records: list[tuple[int, bytes, bytes | None,
                                                             list[tuple[str, bytes]]]],
            **settings: Any) -> list[tuple[int, int | None]]:
    """Produce (partition, value, key, headers) records; their (partition, offset) in order.

    The offset is None where librdkafka reports none (a write to a sealed partition).
    """
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **settings})
    placed: dict[int, tuple[int, int | None]] = {}
    errors: list[KafkaError] = []

    def delivered(index: int) -> Any:
        def report(error: KafkaError | None, message: Any) -> None:
            if error is not None:
                errors.append(error)
            else:
                placed[index] = (message.partition(), message.offset())
        return report

    for index, (partition, value, key, headers) in enumerate(records):
        producer.produce(topic, value=value, key=key, headers=list(headers), partition=partition,
                         on_delivery=delivered(index))
        producer.poll(0)
    assert producer.flush(DEADLINE_S) == 0, "messages left undelivered"
    assert errors == []
    return [placed[index] for index in range(len(records))]


def consume(bootstrap: str, partitions: list[TopicPartition], count: int,
            **settings: Any) -> list[Any]:
    """``count`` messages from ``partitions`` (assigned, no group), failing after the deadline."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                         "enable.auto.commit": False, **settings})
    consumer.assign(partitions)
    messages: list[Any] = []
    deadline = time.monotonic() + DEADLINE_S
    try:
        while len(messages) < count:
            assert time.monotonic() < deadline, f"got {len(messages)} of {count} messages"
            message = consumer.poll(0.5)
            if message is None:
                continue
            assert message.error() is None, message.error()
            messages.append(message)
    finally:
        consumer.close()
    return messages


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_librdkafka_round_trip_with_keys_headers_and_compression(
        bootstrap: str, compression: str) -> None:
    topic = f"rd-{compression}"
    create_topic(bootstrap, topic, 2)
    records = [(index % 2, b"value-%d" % index, None if index % 5 == 0 else b"key-%d" % index,
                [("n", b"%d" % index), ("kind", b"test")]) for index in range(60)]
    placed = produce(bootstrap, topic, records, **{"compression.type": compression})
    # Offsets per partition are 0, 1, 2 ... in produce order.
    for partition in (0, 1):
        assert [offset for p, offset in placed if p == partition] == list(range(30))
    messages = consume(bootstrap, [TopicPartition(topic, 0, 0), TopicPartition(topic, 1, 0)],
                       60)
    by_partition = {p: [m for m in messages if m.partition() == p] for p in (0, 1)}
    for partition in (0, 1):
        expected = [r for r in records if r[0] == partition]
        got = by_partition[partition]
        assert [m.offset() for m in got] == list(range(30))
        assert [(m.value(), m.key(), m.headers()) for m in got] == [
            (value, key, headers) for _, value, key, headers in expected]


@pytest.mark.parametrize("compression", ["gzip", "snappy", "lz4", "zstd"])
def test_kafka_python_round_trip(bootstrap: str, compression: str) -> None:
    topic = f"kp-{compression}"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([KafkaPythonNewTopic(topic, 3, 1)])
        with pytest.raises(TopicAlreadyExistsError):
            admin.create_topics([KafkaPythonNewTopic(topic, 3, 1)])
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap, compression_type=compression)
    futures = [producer.send(topic, value=b"v%d" % i, key=b"k%d" % i, partition=i % 3,
                             headers=[("h", b"%d" % i)]) for i in range(45)]
    producer.flush(DEADLINE_S)
    offsets = [future.get(DEADLINE_S).offset for future in futures]
    producer.close()
    assert offsets == [i // 3 for i in range(45)]
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             enable_auto_commit=False, consumer_timeout_ms=20_000)
    consumer.assign([KafkaPythonPartition(topic, p) for p in range(3)])
    got: list[Any] = []
    for record in consumer:
        got.append(record)
        if len(got) == 45:
            break
    consumer.close()
    assert sorted((r.partition, r.offset, r.key, r.value, r.headers) for r in got) == sorted(
        (i % 3, i // 3, b"k%d" % i, b"v%d" % i, [("h", b"%d" % i)]) for i in range(45))


def test_list_offsets_earliest_latest_and_by_time(bootstrap: str) -> None:
    topic = "times"
    create_topic(bootstrap, topic, 1)
    base_ms = 1_700_000_000_000
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for index in range(10):
        producer.produce(topic, value=b"%d" % index, partition=0,
                         timestamp=base_ms + index * 1000)
        producer.flush(DEADLINE_S)  # one batch per record: the search crosses batches
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused"})
    try:
        assert consumer.get_watermark_offsets(TopicPartition(topic, 0), DEADLINE_S) == (0, 10)
        for target_ms, expected in ((base_ms - 5, 0), (base_ms + 3000, 3),
                                    (base_ms + 3500, 4), (base_ms + 9000, 9),
                                    (base_ms + 99_000, -1)):
            found = consumer.offsets_for_times([TopicPartition(topic, 0, target_ms)],
                                               DEADLINE_S)
            assert found[0].offset == expected, target_ms
    finally:
        consumer.close()


def test_fetch_long_poll_sees_a_later_record(bootstrap: str) -> None:
    topic = "long-poll"
    create_topic(bootstrap, topic, 1)
    # No auto-commit: committing needs the group coordinator (not served), and
    # close() would wait for it.
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 5000})
    consumer.assign([TopicPartition(topic, 0, 0)])
    try:
        assert consumer.poll(1.0) is None  # a fetch now waits at the tail
        produce(bootstrap, topic, [(0, b"late", None, [])])
        deadline = time.monotonic() + DEADLINE_S
        message = None
        while message is None:
            assert time.monotonic() < deadline
            message = consumer.poll(0.5)
        assert (message.error(), message.offset(), message.value()) == (None, 0, b"late")
    finally:
        consumer.close()


def test_offset_out_of_range_resets_by_policy(bootstrap: str) -> None:
    topic = "out-of-range"
    create_topic(bootstrap, topic, 1)
    produce(bootstrap, topic, [(0, b"a", None, []), (0, b"b", None, [])])
    messages = consume(bootstrap, [TopicPartition(topic, 0, 99)], 2,
                       **{"auto.offset.reset": "earliest"})
    assert [(m.offset(), m.value()) for m in messages] == [(0, b"a"), (1, b"b")]


def test_admin_configs_and_delete(bootstrap: str) -> None:
    topic = "configured"
    create_topic(bootstrap, topic, 2, {"retention.ms": "86400000",
                                       "max.message.bytes": "2097152"})
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    configs = admin.describe_configs([resource])[resource].result(DEADLINE_S)
    assert configs["retention.ms"].value == "86400000"
    assert configs["max.message.bytes"].value == "2097152"
    assert configs["cleanup.policy"].value == "delete"
    with pytest.raises(KafkaException) as refused:
        create_topic(bootstrap, "bad-config", 1, {"min.compaction.lag.ms": "5"})
    assert refused.value.args[0].code() == KafkaError.INVALID_CONFIG
    with pytest.raises(KafkaException) as exists:
        create_topic(bootstrap, topic, 1)
    assert exists.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS
    metadata = admin.list_topics(timeout=DEADLINE_S)
    assert sorted(metadata.topics[topic].partitions) == [0, 1]
    admin.delete_topics([topic])[topic].result(DEADLINE_S)
    assert topic not in admin.list_topics(timeout=DEADLINE_S).topics
    # A lookup that does not allow auto-creation (librdkafka's admin client allows it).
    lookup = AdminClient({"bootstrap.servers": bootstrap, "allow.auto.create.topics": False})
    missing = lookup.list_topics(topic="never-made", timeout=DEADLINE_S).topics["never-made"]
    assert missing.error is not None
    assert missing.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    # The broker's own system topics are not served to Kafka clients.
    internal = admin.list_topics(topic="_txnlog", timeout=DEADLINE_S).topics["_txnlog"]
    assert internal.error is not None
    assert internal.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert not any(is_system_topic(name) for name in admin.list_topics(
        timeout=DEADLINE_S).topics)


def test_scaled_topic_keeps_sealed_partitions_readable_and_writable(
        bootstrap: str, client: folio.Client) -> None:
    topic = "scaled"
    create_topic(bootstrap, topic, 2)
    produce(bootstrap, topic, [(0, b"before-0", None, []), (1, b"before-1", None, [])])
    # Segment 0 ([0, 0.5)) splits into segments 2 and 3.
    client.scale_topic(topic, [f"{topic}/0"], [(0.0, 0.25), (0.25, 0.5)])
    admin = AdminClient({"bootstrap.servers": bootstrap})
    partitions = admin.list_topics(topic=topic, timeout=DEADLINE_S).topics[topic].partitions
    assert sorted(partitions) == [0, 1, 2, 3]  # sealed 0 stays; successors are 2 and 3
    messages = consume(bootstrap, [TopicPartition(topic, 0, 0)], 1)
    assert [(m.offset(), m.value()) for m in messages] == [(0, b"before-0")]
    assert produce(bootstrap, topic, [(2, b"after", None, [])]) == [(2, 0)]
    # A write to sealed partition 0 goes to its heir, segment 2, after what
    # that holds; its offset is another partition's, so none is reported.
    assert produce(bootstrap, topic, [(0, b"to-sealed", None, []),
                                      (0, b"to-sealed-2", None, [])],
                   **{"linger.ms": 50}) == [(0, None), (0, None)]
    messages = consume(bootstrap, [TopicPartition(topic, 2, 0)], 3)
    assert [(m.offset(), m.value()) for m in messages] == [
        (0, b"after"), (1, b"to-sealed"), (2, b"to-sealed-2")]
