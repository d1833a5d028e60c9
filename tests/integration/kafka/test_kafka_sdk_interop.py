"""The same events through both APIs: Kafka-written read by the SDK, SDK-written by Kafka.

An event has the same segment (partition) and offset either way, and keeps
its key, headers, timestamp, order and payload.
"""

from __future__ import annotations

from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

import folio
from tests.integration.kafka.test_kafka_clients import DEADLINE_S, consume, create_topic


def test_kafka_written_events_read_through_the_sdk(bootstrap: str,
                                                    client: folio.Client) -> None:
    topic = "kafka-to-sdk"
    create_topic(bootstrap, topic, 2)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20,
                         "compression.type": "lz4", "enable.idempotence": True})
    sent: list[tuple[int, bytes, bytes | None, dict[str, bytes], int]] = []
    for index in range(40):
        partition = index % 2
        key = None if partition == 1 else f"clé-{index % 4}"
        stamp = 1_700_000_000_000 + index
        headers = {"n": b"%d" % index} if index % 3 else {}
        producer.produce(topic, value=b"payload-%d" % index,
                         key=None if key is None else key.encode(), partition=partition,
                         headers=list(headers.items()), timestamp=stamp)
        sent.append((partition, b"payload-%d" % index,
                     None if key is None else key.encode(), headers, stamp))
    assert producer.flush(DEADLINE_S) == 0
    batch = client.batch_client()
    for partition in (0, 1):
        events = list(batch.read_segment(f"{topic}/{partition}", 0, 20))
        expected = [record for record in sent if record[0] == partition]
        assert [event.offset for event in events] == list(range(20))
        assert [(event.payload, event.timestamp) for event in events] == [
            (value, stamp) for _, value, _, _, stamp in expected]
        assert [event.routing_key for event in events] == [
            None if key is None else key.decode() for _, _, key, _, _ in expected]
        assert [dict(event.headers) for event in events] == [
            headers for _, _, _, headers, _ in expected]


def test_non_utf8_keys_survive_the_sdk_read(bootstrap: str, client: folio.Client) -> None:
    topic = "binary-keys"
    create_topic(bootstrap, topic, 1)
    producer = Producer({"bootstrap.servers": bootstrap})
    keys = [b"\xff\x00\xfe", b"ok", b""]
    for key in keys:
        producer.produce(topic, value=b"v", key=key, partition=0)
    assert producer.flush(DEADLINE_S) == 0
    events = list(client.batch_client().read_segment(f"{topic}/0", 0, 3))
    assert [event.routing_key.encode("utf-8", "surrogateescape")  # type: ignore[union-attr]
            for event in events] == keys


def test_sdk_written_events_consumed_through_kafka(bootstrap: str,
                                                   client: folio.Client) -> None:
    topic = "sdk-to-kafka"
    client.create_topic(topic, 2)
    futures = []
    with client.writer(topic) as writer:
        for index in range(30):
            futures.append(writer.write_event(
                b"event-%d" % index, routing_key=f"key-{index % 5}",
                headers={"i": b"%d" % index}))
        writer.flush()
    placed = [future.result(DEADLINE_S) for future in futures]
    expected: dict[int, list[tuple[int, bytes, bytes, list[tuple[str, bytes]]]]] = {0: [], 1: []}
    for index, result in enumerate(placed):
        partition = int(result.segment.rsplit("/", 1)[1])
        expected[partition].append((result.offset, b"event-%d" % index,
                                    f"key-{index % 5}".encode(), [("i", b"%d" % index)]))
    messages = consume(bootstrap, [TopicPartition(topic, 0, 0), TopicPartition(topic, 1, 0)],
                       30)
    for partition in (0, 1):
        got = sorted(((m.offset(), m.value(), m.key(), m.headers()) for m in messages
                      if m.partition() == partition), key=lambda record: record[0])
        assert got == sorted(expected[partition])


def test_interleaved_writes_keep_one_offset_sequence(bootstrap: str,
                                                     client: folio.Client) -> None:
    """Kafka and SDK writes to one segment share its offsets; both APIs read them all."""
    topic = "mixed"
    client.create_topic(topic, 1)
    producer = Producer({"bootstrap.servers": bootstrap})
    values: list[bytes] = []
    for round_number in range(3):
        producer.produce(topic, value=b"kafka-%d" % round_number, partition=0)
        assert producer.flush(DEADLINE_S) == 0
        values.append(b"kafka-%d" % round_number)
        with client.writer(topic) as writer:
            writer.write_event(b"sdk-%d" % round_number).result(DEADLINE_S)
        values.append(b"sdk-%d" % round_number)
    sdk_events = list(client.batch_client().read_segment(f"{topic}/0", 0, 6))
    assert [(e.offset, e.payload) for e in sdk_events] == list(enumerate(values))
    messages = consume(bootstrap, [TopicPartition(topic, 0, 0)], 6)
    assert [(m.offset(), m.value()) for m in messages] == list(enumerate(values))
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused"})
    try:
        found: Any = consumer.get_watermark_offsets(TopicPartition(topic, 0), DEADLINE_S)
        assert found == (0, 6)
    finally:
        consumer.close()
