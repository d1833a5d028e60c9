"""DescribeTopicPartitions (key 75, ``broker.kafka.handlers.topic_partitions``).

On a real ledger stack (``BrokerEnv``): the handler's answers through kio's
codec (encoded and decoded back as a client reads them), the paging with a
cursor as Kafka's broker pages (a page ends inside a topic or before the
next one), the per-topic errors, and a bad cursor.
"""

from __future__ import annotations

import io
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.api import TopicConfig
from broker.kafka.context import KafkaContext
from broker.kafka.dispatch import Call
from broker.kafka.handlers.topic_partitions import (
    DESCRIBE_TOPIC_PARTITIONS_KEY,
    handle_describe_topic_partitions,
)
from broker.kafka.messages import (
    build,
    decode_entity,
    encode_entity,
    nested,
    request_class,
    response_class,
)
from broker.kafka.producer_ids import ProducerIds
from broker.system.snapshot_store import snapshot_store
from broker.topics.manager import TopicManager
from tests.unit.broker.conftest import BrokerEnv

KEY = DESCRIBE_TOPIC_PARTITIONS_KEY
_Page = tuple[list[tuple[str, ErrorCode, list[int]]], tuple[str, int] | None]


@pytest.fixture
async def context(env: BrokerEnv) -> AsyncIterator[KafkaContext]:
    topics = TopicManager(env.ledgers, env.store, txn_store_factory=snapshot_store,
                          clock=env.clock)
    await topics.create_topic("alpha", 3, TopicConfig())
    await topics.create_topic("beta", 2, TopicConfig())
    await topics.create_topic("gamma", 1, TopicConfig())
    yield KafkaContext(topics, "127.0.0.1", ProducerIds(env.store))
    await topics.close()


def _round_trip(cls: Any, value: Any) -> Any:
    out = io.BytesIO()
    encode_entity(cls, value, out)
    decoded, size = decode_entity(cls, out.getvalue(), 0)
    assert size == len(out.getvalue())
    return decoded


async def _page(context: KafkaContext, names: list[str], limit: int,
                cursor: tuple[str, int] | None = None) -> _Page:
    cls = request_class(KEY, 0)
    request = build(cls, topics=tuple(build(nested(cls, "TopicRequest"), name=name)
                                      for name in names),
                    response_partition_limit=limit,
                    cursor=None if cursor is None else build(
                        nested(cls, "Cursor"), topic_name=cursor[0], partition_index=cursor[1]))
    request = _round_trip(cls, request)
    answer = await handle_describe_topic_partitions(context, Call(KEY, 0, 1, "t", request))
    answer = _round_trip(response_class(KEY, 0), answer)
    for topic in answer.topics:
        for partition in topic.partitions:
            assert (partition.leader_id, partition.replica_nodes) == (0, (0,))
    following = answer.next_cursor
    return ([(t.name, t.error_code, [p.partition_index for p in t.partitions])
             for t in answer.topics],
            None if following is None else (following.topic_name, following.partition_index))


async def test_all_topics_in_pages_of_two_partitions(context: KafkaContext) -> None:
    pages = []
    cursor = None
    while True:
        topics, cursor = await _page(context, [], 2, cursor)
        pages.append(topics)
        if cursor is None:
            break
    ok = ErrorCode.none
    assert pages == [[("alpha", ok, [0, 1])], [("alpha", ok, [2]), ("beta", ok, [0])],
                     [("beta", ok, [1]), ("gamma", ok, [0])]]


async def test_all_topics_from_a_cursor_whose_topic_is_gone(context: KafkaContext) -> None:
    assert await _page(context, [], 10, ("ant", 4)) == (
        [("beta", ErrorCode.none, [0, 1]), ("gamma", ErrorCode.none, [0])], None)


async def test_a_page_that_ends_with_a_topic_points_at_the_next(context: KafkaContext) -> None:
    assert await _page(context, ["beta", "alpha"], 3) == (
        [("alpha", ErrorCode.none, [0, 1, 2])], ("beta", 0))
    assert await _page(context, ["beta", "alpha"], 3, ("beta", 0)) == (
        [("beta", ErrorCode.none, [0, 1])], None)


async def test_missing_and_invalid_names_have_their_errors(context: KafkaContext) -> None:
    assert await _page(context, ["nope", "gamma", "a/../b"], 2000) == ([
        ("a/../b", ErrorCode.invalid_topic_exception, []),
        ("gamma", ErrorCode.none, [0]),
        ("nope", ErrorCode.unknown_topic_or_partition, [])], None)


@pytest.mark.parametrize("cursor", [("delta", 0), ("alpha", -1)])
async def test_a_cursor_outside_the_topics_asked_is_an_invalid_request(
        context: KafkaContext, cursor: tuple[str, int]) -> None:
    assert await _page(context, ["alpha", "beta"], 10, cursor) == ([
        ("alpha", ErrorCode.invalid_request, []), ("beta", ErrorCode.invalid_request, [])], None)
