"""Produce v13 (KIP-516): topics named by id, in the request and in the answer.

The request is encoded as a client sends it (kio, request header v2), decoded
as the listener decodes it, answered by the Produce handler on a real
``TopicManager``, and the answer encoded at v13 and decoded back as a client
reads it (docs/kafka.md, "Fetch sessions and topic ids").
"""

from __future__ import annotations

import datetime
import io
import sys
import uuid
from typing import Any

from kafka.record.default_records import DefaultRecordBatchBuilder
from kio.schema.errors import ErrorCode
from kio.static.primitive import Records

from broker.api import TopicConfig
from broker.kafka.context import KafkaContext
from broker.kafka.dispatch import Call, Deferred
from broker.kafka.handlers.produce import PRODUCE_KEY, handle_produce
from broker.kafka.messages import decode_entity, encode_entity, request_class, response_class
from broker.kafka.producer_ids import ProducerIds
from broker.topics.manager import TopicManager
from tests.support.kafka import raw_request
from tests.unit.broker.conftest import BrokerEnv

VERSION = 13


def _batch(values: list[bytes]) -> bytes:
    builder: Any = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=False, producer_id=-1,
        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for index, value in enumerate(values):
        builder.append(index, 1_700_000_000_000, None, value, [])
    return bytes(builder.build())


def _request(topic_ids: list[uuid.UUID], records: bytes) -> Call:
    """A v13 Produce naming ``topic_ids``, through the wire and back as the listener reads it."""
    cls: Any = request_class(PRODUCE_KEY, VERSION)
    module = sys.modules[cls.__module__]
    request = cls(transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=10),
                  topic_data=tuple(module.TopicProduceData(topic_id=topic_id, partition_data=(
                      module.PartitionProduceData(index=0, records=Records(records)),))
                      for topic_id in topic_ids))
    frame = raw_request(PRODUCE_KEY, VERSION, 5, request)[4:]
    header, used = decode_entity(cls.__header_schema__, frame, 0)
    assert (header.request_api_key, header.request_api_version) == (PRODUCE_KEY, VERSION)
    decoded, size = decode_entity(cls, frame, used)
    assert used + size == len(frame)
    return Call(PRODUCE_KEY, VERSION, header.correlation_id, header.client_id, decoded)


async def _answer(context: KafkaContext, call: Call) -> Any:
    """The handler's answer, encoded at v13 and decoded back as a client reads it."""
    deferred = await handle_produce(context, call)
    assert isinstance(deferred, Deferred)
    response = await deferred.result
    cls: Any = response_class(PRODUCE_KEY, VERSION)
    out = io.BytesIO()
    encode_entity(cls, response, out)
    decoded, size = decode_entity(cls, out.getvalue(), 0)
    assert size == len(out.getvalue())
    return decoded


async def test_produce_v13_names_topics_by_id(env: BrokerEnv, topics: TopicManager) -> None:
    info = await topics.create_topic("by-id", 1, TopicConfig())
    topic_id = uuid.UUID(info.topic_id)
    context = KafkaContext(topics, "127.0.0.1", ProducerIds(env.store))
    unknown = uuid.UUID(int=7)

    answer = await _answer(context, _request([topic_id, unknown], _batch([b"a", b"b"])))
    by_topic = {topic.topic_id: topic.partition_responses for topic in answer.responses}
    assert set(by_topic) == {topic_id, unknown}
    [written] = by_topic[topic_id]
    assert (written.index, written.error_code, written.base_offset) == (0, ErrorCode.none, 0)
    [refused] = by_topic[unknown]
    assert (refused.index, refused.error_code, refused.base_offset) == (
        0, ErrorCode.unknown_topic_id, -1)
    assert refused.error_message == f"no topic has id {unknown}"

    # Stored in the topic the id names, once.
    segment = await topics.segment("by-id/0")
    assert segment.info().segment.end_offset == 2
    again = await _answer(context, _request([topic_id], _batch([b"c"])))
    assert [(p.error_code, p.base_offset) for p in again.responses[0].partition_responses] \
        == [(ErrorCode.none, 2)]
