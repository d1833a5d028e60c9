"""Batches for a sealed partition go to its heir, exactly once, in the producer's order.

A real ``TopicManager`` on a real bookie: the topic is split and merged with
``scale_topic`` and the batches go through ``Succession`` as the Produce
handler sends them (docs/kafka.md, "Partitions and scaling").
"""

from __future__ import annotations

import asyncio

from kio.schema.errors import ErrorCode

from broker.api import Block, SegmentHandle, TopicConfig
from broker.kafka.succession import UNKNOWN_BASE_OFFSET, Outcome, Succession
from broker.segments.segment import LedgerSegment
from broker.topics.manager import TopicManager
from tests.unit.broker.conftest import read_all

WRITER = "kafka:7:0"
#: Batches started, at least, while the split is under way and after.
SENT_AFTER_SCALE = 10


async def _append(segment: SegmentHandle, name: str, writer: str, last: int) -> Outcome:
    """What the Produce handler's append does, short of its failure handling."""
    count = 2 if writer else 1
    result = await segment.append([Block(f"{name}-{last}".encode(), count)], writer, last,
                                  contiguous=bool(writer))
    if result.duplicate and result.offset < 0:
        return ErrorCode.duplicate_sequence_number, -1, None
    return ErrorCode.none, result.offset, None


async def _send(succession: Succession, topics: TopicManager, name: str,
                last: int, writer: str = WRITER) -> Outcome:
    """One two-record batch (sequences ``last - 1`` and ``last``) for partition ``name``."""
    segment = await topics.segment(name)
    return await succession.start(topics, segment, name, writer, last, 2, _append)


async def test_batches_for_a_sealed_partition_go_to_its_heir_once(
        topics: TopicManager) -> None:
    await topics.create_topic("t", 1, TopicConfig())
    succession = Succession()
    assert await _send(succession, topics, "t/0", 1) == (ErrorCode.none, 0, None)
    assert await _send(succession, topics, "t/0", 3) == (ErrorCode.none, 2, None)
    await topics.scale_topic("t", ["t/0"], [(0.0, 0.5), (0.5, 1.0)])  # t/1, t/2

    # Sequences 4-5 go on in t/1 (the low half) as the stream from partition 0,
    # numbered from 0 at t/0's last sequence + 1; the offset is another
    # partition's, so it is not given.
    assert await _send(succession, topics, "t/0", 5) == (ErrorCode.none, UNKNOWN_BASE_OFFSET, None)
    heir = await topics.segment("t/1")
    assert await heir.last_event_number(f"{WRITER}@0") == 1
    assert await heir.last_event_number(WRITER) == -1  # the producer's own stream to t/1
    assert heir.info().segment.end_offset == 2
    # A resend of it is not written again; one of a batch t/0 holds is a duplicate.
    assert await _send(succession, topics, "t/0", 5) == (ErrorCode.none, UNKNOWN_BASE_OFFSET, None)
    assert await _send(succession, topics, "t/0", 3) == (
        ErrorCode.duplicate_sequence_number, -1,
        "the batch ending at sequence 3 was written to t/0 before it was sealed")
    assert heir.info().segment.end_offset == 2
    # A gap is refused in the heir as in any partition.
    code, _, _ = await _send(succession, topics, "t/0", 9)
    assert code is ErrorCode.out_of_order_sequence_number
    # The producer's own partition 1 is a stream of its own, from 0.
    assert await _send(succession, topics, "t/1", 1) == (ErrorCode.none, 2, None)

    # Merged: t/1 and t/2 into t/3. Partition 0's stream goes on there (its
    # base now t/0's 4 records and t/1's 2), so does partition 1's.
    await topics.scale_topic("t", ["t/1", "t/2"], [(0.0, 1.0)])
    assert await _send(succession, topics, "t/0", 7) == (ErrorCode.none, UNKNOWN_BASE_OFFSET, None)
    assert await _send(succession, topics, "t/1", 3) == (ErrorCode.none, UNKNOWN_BASE_OFFSET, None)
    merged = await topics.segment("t/3")
    assert await merged.last_event_number(f"{WRITER}@0") == 1
    assert await merged.last_event_number(f"{WRITER}@1") == 1
    assert await _send(succession, topics, "t/0", 5) == (
        ErrorCode.duplicate_sequence_number, -1,
        "the batch ending at sequence 5 was written to t/1 before it was sealed")
    assert merged.info().segment.end_offset == 4


async def test_a_stream_sealed_under_its_batches_keeps_their_order(
        topics: TopicManager) -> None:
    await topics.create_topic("t", 1, TopicConfig())
    succession = Succession()
    segment = await topics.segment("t/0")
    # Batches started back to back, one per turn of the loop, while the
    # partition is split: each is written once, in order, in t/0 or its heir.
    started = [succession.start(topics, segment, "t/0", WRITER, 1, 2, _append)]
    scaled = asyncio.ensure_future(
        topics.scale_topic("t", ["t/0"], [(0.0, 0.5), (0.5, 1.0)]))
    while not scaled.done() or len(started) < 2 * SENT_AFTER_SCALE:
        started.append(succession.start(topics, segment, "t/0", WRITER,
                                        2 * len(started) + 1, 2, _append))
        await asyncio.sleep(0)
    outcomes = await asyncio.gather(*started)
    await scaled
    assert all(code is ErrorCode.none for code, _, _ in outcomes), outcomes
    sealed = await topics.segment("t/0")
    heir = await topics.segment("t/1")
    assert isinstance(sealed, LedgerSegment) and isinstance(heir, LedgerSegment)
    in_sealed = await sealed.last_event_number(WRITER)
    in_heir = await heir.last_event_number(f"{WRITER}@0")
    assert in_sealed >= 1 and in_heir >= 1  # both took some
    assert (in_sealed + 1) + (in_heir + 1) == 2 * len(started)
    assert sealed.info().segment.end_offset + heir.info().segment.end_offset == 2 * len(
        started)
    # In order: the producer's sequences in t/0, then the stream's numbers in t/1.
    assert [read.data for read in await read_all(sealed, 0)] == [
        b"t/0-%d" % number for number in range(1, in_sealed + 1, 2)]
    assert [read.data for read in await read_all(heir, 0)] == [
        b"t/1-%d" % number for number in range(1, in_heir + 1, 2)]
