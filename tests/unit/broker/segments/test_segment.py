"""LedgerSegment: appends, reads, rollover, waiting, de-duplication, limits."""

from __future__ import annotations

import asyncio

import pytest

from broker.api import Block, ReadBlock, SegmentState, TopicConfig
from broker.errors import (
    EventTooLargeError,
    InvalidArgumentError,
    InvalidEventNumberError,
    OffsetOutOfRangeError,
    SegmentSealedError,
)
from broker.segments.block_limits import MAX_BLOCK_BYTES
from broker.segments.offset_index import LedgerSpan
from broker.segments.segment import LedgerSegment
from broker.topics.manager import TopicManager
from ledger.errors import NotEnoughBookiesError
from tests.unit.broker.conftest import MAX_ENTRY_BYTES, SMALL, block, read_all


async def _segment(topics: TopicManager, config: TopicConfig = SMALL) -> LedgerSegment:
    await topics.create_topic("t", 1, config)
    return await topics.segment("t/0")


async def test_append_and_read_across_rollovers(topics: TopicManager) -> None:
    segment = await _segment(topics)
    expected: list[ReadBlock] = []
    offset = 0
    for i in range(40):
        blocks = [block(i * 10 + j, events=j + 1, size=100) for j in range(i % 3 + 1)]
        number = offset + sum(b.event_count for b in blocks) - 1
        result = await segment.append(blocks, "w", number)
        assert (result.offset, result.event_number, result.duplicate) == (offset, number, False)
        for b in blocks:
            expected.append(ReadBlock(offset, b.event_count, b.data))
            offset += b.event_count
        assert result.event_count == sum(b.event_count for b in blocks)
    info = segment.info()
    assert (info.segment.start_offset, info.segment.end_offset) == (0, offset)
    assert len(info.ledgers) > 3
    assert [ledger.closed for ledger in info.ledgers] == [True] * (len(info.ledgers) - 1) + [False]
    assert [ledger.first_offset for ledger in info.ledgers] == sorted(
        ledger.first_offset for ledger in info.ledgers)
    assert info.length_bytes > 40 * 100
    for max_bytes in (1, 300, 1 << 20):
        assert await read_all(segment, 0, max_bytes) == expected
    assert await segment.read(offset, 100) == type(await segment.read(offset, 100))([], offset)


async def test_reads_from_mid_block_and_mid_entry(topics: TopicManager) -> None:
    segment = await _segment(topics)
    # One entry of three blocks: offsets [0, 3), [3, 5), [5, 6).
    await segment.append([block(0, 3), block(1, 2), block(2, 1)], "w", 5)
    await segment.append([block(3, 4)], "w", 9)
    blocks = (await segment.read(1, 1 << 20)).blocks
    assert [(b.offset, b.event_count) for b in blocks] == [(0, 3), (3, 2), (5, 1), (6, 4)]
    blocks = (await segment.read(4, 1 << 20)).blocks
    assert [(b.offset, b.event_count) for b in blocks] == [(3, 2), (5, 1), (6, 4)]
    blocks = (await segment.read(5, 1)).blocks
    assert [(b.offset, b.event_count) for b in blocks] == [(5, 1)]
    blocks = (await segment.read(9, 1)).blocks
    assert [(b.offset, b.event_count, b.data) for b in blocks] == [(6, 4, block(3, 4).data)]


async def test_every_offset_readable(topics: TopicManager) -> None:
    segment = await _segment(topics)
    for i in range(30):
        await segment.append([block(i, events=3, size=150)], "w", 3 * i + 2)
    for offset in range(90):
        first = (await segment.read(offset, 1)).blocks[0]
        assert first.offset <= offset < first.offset + first.event_count
        assert first.data == block(offset // 3, 3, 150).data


async def test_read_out_of_range(topics: TopicManager) -> None:
    segment = await _segment(topics)
    await segment.append([block(0, 2)], "w", 1)
    with pytest.raises(OffsetOutOfRangeError) as raised:
        await segment.read(3, 100)
    assert (raised.value.offset, raised.value.start_offset, raised.value.end_offset) == (3, 0, 2)
    with pytest.raises(OffsetOutOfRangeError):
        await segment.read(-1, 100)


async def test_tail_read_while_writing(topics: TopicManager) -> None:
    segment = await _segment(topics, TopicConfig())
    for i in range(5):
        await segment.append([block(i)], "w", i)
        batch = await segment.read(i, 1 << 20)
        assert [(b.offset, b.data) for b in batch.blocks] == [(i, block(i).data)]
        assert batch.end_offset == i + 1
        assert not batch.end_of_segment
    assert len(segment.info().ledgers) == 1


async def test_wait_for_data(topics: TopicManager) -> None:
    segment = await _segment(topics)
    assert not await segment.wait_for_data(0, 0.01)
    waiter = asyncio.create_task(segment.wait_for_data(0, 30))
    await asyncio.sleep(0)
    assert not waiter.done()
    await segment.append([block(0)], "w", 0)
    assert await waiter
    assert await segment.wait_for_data(0, 0)
    waiter = asyncio.create_task(segment.wait_for_data(1, 30))
    await asyncio.sleep(0)
    await segment.seal()
    assert await waiter


async def test_duplicates(topics: TopicManager) -> None:
    segment = await _segment(topics)
    assert await segment.last_event_number("w") == -1
    first = await segment.append([block(0, 3)], "w", 2)
    assert (first.offset, first.event_count) == (0, 3)
    assert await segment.last_event_number("w") == 2
    for number in (2, 1, 0):
        result = await segment.append([block(1)], "w", number)
        assert (result.offset, result.event_count, result.event_number, result.duplicate) == (
            -1, 0, number, True)
    other = await segment.append([block(2)], "other", 0)
    assert (other.offset, other.duplicate) == (3, False)
    # -1: no numbering, never a duplicate.
    assert (await segment.append([block(3)], "", -1)).offset == 4
    assert (await segment.append([block(4)], "", -1)).offset == 5
    assert segment.end_offset == 6


async def test_concurrent_appends_in_order(topics: TopicManager) -> None:
    segment = await _segment(topics, TopicConfig(ledger_rollover_bytes=8192))
    count = 300
    results = await asyncio.gather(
        *(segment.append([block(i, events=i % 4 + 1, size=64)], f"w{i % 5}", i)
          for i in range(count)))
    offsets = [r.offset for r in results]
    expected, offset = [], 0
    for i in range(count):
        expected.append(offset)
        offset += i % 4 + 1
    assert offsets == expected
    assert segment.end_offset == offset
    assert len(segment.info().ledgers) > 2
    blocks = await read_all(segment, 0)
    assert [b.data for b in blocks] == [block(i, size=64).data for i in range(count)]


async def test_one_writer_keeps_its_order_across_rollovers(topics: TopicManager) -> None:
    # Appends arrive over many loop turns while ledgers roll over: those that
    # wait for a rollover must not be overtaken by later ones (a later block
    # would take their offset, and their number would look like a duplicate).
    segment = await _segment(topics, TopicConfig(ledger_rollover_bytes=4096))
    tasks = []
    for number in range(300):
        tasks.append(asyncio.create_task(
            segment.append([block(number, size=64)], "writer", number)))
        for _ in range(number % 4):
            await asyncio.sleep(0)
    results = await asyncio.gather(*tasks)
    assert [r.duplicate for r in results] == [False] * 300
    assert [r.offset for r in results] == list(range(300))
    assert len(segment.info().ledgers) > 3
    blocks = await read_all(segment, 0)
    assert [b.data for b in blocks] == [block(i, size=64).data for i in range(300)]


async def test_appends_queued_behind_a_failed_rollover_fail_with_it(
        topics: TopicManager, monkeypatch: pytest.MonkeyPatch) -> None:
    # A writer's blocks land as a prefix of those sent: when the rollover an
    # append waits for fails (no bookies for the next ledger), the appends
    # queued behind it fail too rather than roll over again and land after it.
    segment = await _segment(topics, TopicConfig(ledger_rollover_bytes=4096))
    number = 0
    while not segment._rollover.should_roll(segment._now_ms()):
        await segment.append([block(number, size=64)], "writer", number)
        number += 1
    start_ledger = segment._recorder.start_ledger
    failures = [NotEnoughBookiesError("a ledger of ensemble size 3 needs 3 bookies, 2 available")]

    async def failing_once(replacing: list[LedgerSpan]) -> None:
        if failures:
            await asyncio.sleep(0)  # the next append queues meanwhile
            raise failures.pop()
        await start_ledger(replacing)

    monkeypatch.setattr(segment._recorder, "start_ledger", failing_once)
    first = asyncio.create_task(segment.append([block(number, size=64)], "writer", number))
    second = asyncio.create_task(
        segment.append([block(number + 1, size=64)], "writer", number + 1))
    results = await asyncio.gather(first, second, return_exceptions=True)
    assert [type(r) for r in results] == [NotEnoughBookiesError] * 2
    # Resent after the failure, in order, they land.
    for resent in (number, number + 1):
        assert not (await segment.append([block(resent, size=64)], "writer", resent)).duplicate
    blocks = await read_all(segment, 0)
    assert [b.data for b in blocks] == [block(i, size=64).data for i in range(number + 2)]


async def test_concurrent_duplicates_detected(topics: TopicManager) -> None:
    segment = await _segment(topics)
    results = await asyncio.gather(*(segment.append([block(0)], "w", 7) for _ in range(5)))
    assert [r.duplicate for r in results] == [False, True, True, True, True]
    assert segment.end_offset == 1


async def test_append_refusals(topics: TopicManager) -> None:
    segment = await _segment(topics, TopicConfig(max_event_bytes=1000))
    with pytest.raises(InvalidEventNumberError):
        await segment.append([], "w", 0)
    with pytest.raises(InvalidEventNumberError):
        await segment.append([Block(b"x", 0)], "w", 0)
    with pytest.raises(InvalidEventNumberError):
        await segment.append([block(0)], "w", -2)
    with pytest.raises(InvalidArgumentError):
        await segment.append([block(0)], "w" * 129, 0)
    # The segment checks a block's size; its events are checked by the Append
    # service (broker.segments.block_limits), where a client's blocks come in.
    with pytest.raises(EventTooLargeError, match="block of") as raised:
        await segment.append([Block(b"x" * (MAX_BLOCK_BYTES + 1), 2)], "w", 0)
    assert (raised.value.size, raised.value.limit) == (MAX_BLOCK_BYTES + 1, MAX_BLOCK_BYTES)
    await segment.append([Block(b"x" * 2129, 2)], "w", 1)  # no average per event any more
    with pytest.raises(EventTooLargeError, match="block of") as raised:  # the entry
        await segment.append([Block(b"x" * MAX_ENTRY_BYTES, 1)], "w", 2)
    assert raised.value.limit == MAX_ENTRY_BYTES
    assert segment.end_offset == 2


async def test_seal(topics: TopicManager) -> None:
    segment = await _segment(topics)
    await segment.append([block(0, 2)], "w", 1)
    info = await segment.seal()
    assert info.sealed and info.segment.state is SegmentState.SEALED
    assert all(ledger.closed for ledger in info.ledgers)
    with pytest.raises(SegmentSealedError) as raised:
        await segment.append([block(1)], "w", 2)
    assert raised.value.end_offset == 2
    batch = await segment.read(0, 1 << 20)
    assert (len(batch.blocks), batch.end_offset, batch.end_of_segment) == (1, 2, True)
    assert (await segment.read(2, 100)).end_of_segment
    assert (await segment.seal()).segment.end_offset == 2


async def test_recorded_numbers_are_answered_only_once_durable(topics: TopicManager) -> None:
    # The number is recorded when the append is submitted; SetupAppend's answer
    # and a duplicate's acknowledgement wait until that append is confirmed.
    segment = await _segment(topics)
    first = asyncio.create_task(segment.append([block(0)], "w", 0))
    await asyncio.sleep(0)  # submitted, not yet confirmed
    assert segment.end_offset == 0
    assert await segment.last_event_number("w") == 0
    assert segment.end_offset == 1
    resend = asyncio.create_task(segment.append([block(1)], "w", 1))
    await asyncio.sleep(0)
    duplicate = await segment.append([block(1)], "w", 1)
    assert duplicate.duplicate
    assert segment.end_offset == 2  # the first copy was durable before the duplicate's answer
    assert (await first).offset == 0
    assert (await resend).offset == 1
