"""Offsets by time across a cluster (``broker.kafka.offset_times``): read here or at the owner.

On a real ledger stack (``BrokerEnv``) with Kafka record batches of chosen
timestamps: a segment this broker serves is read here; another is asked of
its owner (a fake ``PeerClients.offset_for_time``), following a WrongHost to
the owner it names and asking again after no answer (a read: harmless);
a refusal is raised; a partition nobody serves fails after the lookup's
deadline with a clear, retriable error. The owner's side (``serve``) answers
only for segments it serves.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from broker._proto.v1 import kafka_internal_pb2
from broker.api import Block, TopicConfig
from broker.cluster.owned_topics import OwnedTopics
from broker.errors import (
    BrokerShuttingDownError,
    InvalidArgumentError,
    NoSuchSegmentError,
    WrongHostError,
)
from broker.kafka.blocks import block_of_batch
from broker.kafka.offset_times import OffsetTimes, serve
from broker.topics.manager import TopicManager
from tests.unit.broker.conftest import BrokerEnv

TOPIC = "times"
T0 = 1_700_000_000_000


def _batch(first_ms: int, count: int) -> bytes:
    """A Kafka record batch of ``count`` records a second apart from ``first_ms``."""
    builder: Any = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=False, producer_id=-1,
        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for index in range(count):
        builder.append(index, first_ms + 1000 * index, None, b"v%d" % index, [])
    return bytes(builder.build())


async def _topics(env: BrokerEnv) -> TopicManager:
    """Partition 0: 3 batches of 2 records, at T0, T0 + 10 s, T0 + 20 s (offsets 0-5)."""
    topics = env.manager()
    await topics.create_topic(TOPIC, 2, TopicConfig())
    segment = await topics.segment(f"{TOPIC}/0")
    for index in range(3):
        await segment.append([Block(block_of_batch(_batch(T0 + 10_000 * index, 2)), 2)],
                             "", -1)
    return topics


class _Owners:
    """Partition 1's owner as the cluster sees it, and the calls made on it."""

    def __init__(self, answers: dict[str, list[Any]], owner: str = "b:1") -> None:
        self.owner = owner
        self.answers = answers
        self.asked: list[str] = []

    async def lookup(self, _segment: str) -> str:
        return self.owner

    async def ask(self, address: str, request: kafka_internal_pb2.OffsetForTimeRequest
                  ) -> kafka_internal_pb2.OffsetForTimeResponse:
        assert (request.segment, request.read_committed) == (f"{TOPIC}/1", False)
        self.asked.append(address)
        answer = self.answers[address].pop(0)
        if isinstance(answer, Exception):
            raise answer
        assert isinstance(answer, kafka_internal_pb2.OffsetForTimeResponse)
        return answer


def _times(topics: TopicManager, owners: _Owners, timeout_s: float = 5.0) -> OffsetTimes:
    return OffsetTimes(topics, lambda segment: segment == f"{TOPIC}/0", owners.lookup,
                       owners.ask, timeout_s=timeout_s)


async def test_a_served_segment_is_read_here(env: BrokerEnv) -> None:
    topics = await _topics(env)
    times = _times(topics, _Owners({}))
    assert await times.offset_at(f"{TOPIC}/0", T0 + 10_500) == (3, 6)  # the 2nd batch's 2nd
    assert await times.offset_at(f"{TOPIC}/0", 0) == (0, 6)
    assert await times.offset_at(f"{TOPIC}/0", T0 + 60_000) == (-1, 6)  # none: the end
    # A standalone (nothing known of owners) reads everything here.
    assert await OffsetTimes(topics).offset_at(f"{TOPIC}/0", T0 + 20_000) == (4, 6)


async def test_another_is_asked_of_its_owner_following_wrong_host_and_no_answer(
        env: BrokerEnv) -> None:
    topics = await _topics(env)
    answer = kafka_internal_pb2.OffsetForTimeResponse(offset=7, timestamp_ms=T0, end_offset=9)
    # The owner known (b:1) names b:2, which does not answer; asked again, b:1 answers.
    owners = _Owners({"b:1": [WrongHostError(f"{TOPIC}/1", "b:2"), answer],
                      "b:2": [BrokerShuttingDownError("b:2 did not answer")]})
    assert await _times(topics, owners).offset_at(f"{TOPIC}/1", T0) == (7, 9)
    assert owners.asked == ["b:1", "b:2", "b:1"]


async def test_a_refusal_is_raised(env: BrokerEnv) -> None:
    topics = await _topics(env)
    owners = _Owners({"b:1": [NoSuchSegmentError(f"{TOPIC}/1")]})
    with pytest.raises(NoSuchSegmentError):
        await _times(topics, owners).offset_at(f"{TOPIC}/1", T0)


async def test_a_partition_nobody_serves_is_a_clear_retriable_error(env: BrokerEnv) -> None:
    topics = await _topics(env)
    owners = _Owners({}, owner="")
    with pytest.raises(BrokerShuttingDownError,
                       match=f"{TOPIC} partition 1 is not served after 0.3 s "
                             r"\(no broker serves it now") as raised:
        await _times(topics, owners, timeout_s=0.3).offset_at(f"{TOPIC}/1", T0)
    assert raised.value.retriable and owners.asked == []


async def test_the_owner_serves_only_its_segments(env: BrokerEnv) -> None:
    topics = await _topics(env)
    served = OwnedTopics(topics, lambda name: name == f"{TOPIC}/0", lambda _name: "b:2")
    answer = await serve(served, kafka_internal_pb2.OffsetForTimeRequest(
        segment=f"{TOPIC}/0", timestamp_ms=T0 + 19_000))
    assert (answer.offset, answer.timestamp_ms, answer.end_offset) == (4, T0 + 20_000, 6)
    with pytest.raises(WrongHostError) as moved:
        await serve(served, kafka_internal_pb2.OffsetForTimeRequest(segment=f"{TOPIC}/1"))
    assert moved.value.owner == "b:2"
    for bad in (kafka_internal_pb2.OffsetForTimeRequest(),
                kafka_internal_pb2.OffsetForTimeRequest(segment=f"{TOPIC}/0", timestamp_ms=-1)):
        with pytest.raises(InvalidArgumentError, match="OffsetForTime needs"):
            await serve(served, bad)


async def test_an_owner_that_never_answers_is_bounded_by_the_lookup_deadline(
        env: BrokerEnv) -> None:
    topics = await _topics(env)

    async def hangs(_address: str, _request: kafka_internal_pb2.OffsetForTimeRequest
                    ) -> kafka_internal_pb2.OffsetForTimeResponse:
        await asyncio.Event().wait()
        raise AssertionError("never answered")

    owners = _Owners({})
    times = OffsetTimes(topics, lambda _segment: False, owners.lookup, hangs, timeout_s=0.3)
    with pytest.raises(BrokerShuttingDownError, match="b:1 did not answer in time"):
        await times.offset_at(f"{TOPIC}/1", T0)
