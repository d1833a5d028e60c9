"""Produce v13 (topic ids, KIP-516) from real clients, against one standalone.

librdkafka (confluent-kafka 2.16) picks the highest Produce version both
sides serve; its protocol debug log shows it is v10 (by name: librdkafka
does not send v13), answered at v10. v13 by topic id (the Java client 4.x
sends it) is sent raw: written in the topic the id names, and an id no topic
has is answered UNKNOWN_TOPIC_ID, nothing written (docs/kafka.md, "Fetch
sessions and topic ids").
"""

from __future__ import annotations

import datetime
import logging
import re
import sys
import uuid
from typing import Any

from confluent_kafka import Producer
from kafka.record.default_records import DefaultRecordBatchBuilder
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode
from kio.static.primitive import Records

import folio
from tests.integration.kafka.test_kafka_clients import DEADLINE_S, create_topic
from tests.integration.kafka.test_kafka_fetch_sessions import Raw
from tests.integration.kafka.test_kafka_scaling import sdk_read_back
from tests.support.bookies import BookieProcess
from tests.support.kafka import kafka_address

PRODUCE = 0


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def _keyed_batch(key: bytes, values: list[bytes]) -> bytes:
    builder: Any = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=False, producer_id=-1,
        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for index, value in enumerate(values):
        builder.append(index, 1_700_000_000_000, key, value, [])
    return bytes(builder.build())


def test_librdkafka_produces_at_its_highest_version(bootstrap: str,
                                                    client: folio.Client) -> None:
    topic = f"v13-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, 1)
    lines = _Lines()
    logger = logging.getLogger("tests.rdkafka.protocol")
    logger.setLevel(logging.DEBUG)
    logger.addHandler(lines)
    logger.propagate = False
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "debug": "protocol", "logger": logger})
    failed: list[Any] = []
    for number in range(20):
        producer.produce(topic, key=b"k", value=f"k:{number}".encode(),
                         on_delivery=lambda error, _message: failed.append(error)
                         if error is not None else None)
    assert producer.flush(DEADLINE_S) == 0
    producer.poll(0)
    assert failed == []
    versions = {int(v) for line in lines.lines
                for v in re.findall(r"Sent ProduceRequest \(v(\d+)", line)}
    # librdkafka 2.16 knows Produce up to v10: the broker's v13 does not change that.
    assert versions == {10}, [line for line in lines.lines if "Produce" in line][:10]
    assert sdk_read_back(client, topic, 20) == [("k", number) for number in range(20)]


def test_produce_v13_with_an_unknown_topic_id_is_refused(server: BookieProcess,
                                                         client: folio.Client) -> None:
    topic = f"v13-{uuid.uuid4().hex[:8]}"
    client.create_topic(topic, segments=1)
    raw = Raw(kafka_address(server))
    topic_id = raw.topic_id(topic)  # (Metadata v12 names it)
    cls: Any = load_request_schema(PRODUCE, 13)
    module = sys.modules[cls.__module__]

    def request(ids: list[uuid.UUID], base_sequence: int) -> Any:
        return cls(transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=10),
                   topic_data=tuple(module.TopicProduceData(topic_id=topic_id, partition_data=(
                       module.PartitionProduceData(index=0, records=Records(
                           _keyed_batch(b"k", [b"k:%d" % base_sequence]))),))
                       for topic_id in ids))

    unknown = uuid.uuid4()
    with raw.sock:
        response = raw.ask(PRODUCE, 13, request([unknown, topic_id], 0))
    answers = {topic.topic_id: [(p.index, p.error_code, p.base_offset)
                                for p in topic.partition_responses]
               for topic in response.responses}
    assert answers == {unknown: [(0, ErrorCode.unknown_topic_id, -1)],
                       topic_id: [(0, ErrorCode.none, 0)]}
    assert sdk_read_back(client, topic, 1) == [("k", 0)]
