"""Truncation and retention: whole ledgers deleted from the head."""

from __future__ import annotations

import pytest

from broker.api import TopicConfig
from broker.errors import OffsetOutOfRangeError
from broker.segments.segment import LedgerSegment
from broker.topics.manager import TopicManager
from tests.unit.broker.conftest import BrokerEnv, block, read_all

ROLL = TopicConfig(ledger_rollover_bytes=1024)


async def _filled(topics: TopicManager, appends: int = 30) -> LedgerSegment:
    await topics.create_topic("t", 1, ROLL)
    segment = await topics.segment("t/0")
    for i in range(appends):
        await segment.append([block(i, events=2, size=200)], "w", 2 * i + 1)
    return segment


async def test_truncate(topics: TopicManager, env: BrokerEnv) -> None:
    segment = await _filled(topics)
    ledgers = segment.info().ledgers
    assert len(ledgers) >= 4
    target = ledgers[2].first_offset + 1  # inside the third ledger
    info = await segment.truncate(target)
    assert info.segment.start_offset == ledgers[2].first_offset
    assert info.ledgers == ledgers[2:]
    assert not {ledgers[0].ledger_id, ledgers[1].ledger_id} & set(env.bookie.ledger_ids())
    with pytest.raises(OffsetOutOfRangeError) as raised:
        await segment.read(ledgers[2].first_offset - 1, 100)
    assert raised.value.start_offset == ledgers[2].first_offset
    assert raised.value.end_offset == 60
    blocks = await read_all(segment, ledgers[2].first_offset)
    assert blocks[0].offset == ledgers[2].first_offset
    assert blocks[-1].offset + blocks[-1].event_count == 60
    # At or before the start: nothing changes.
    assert (await segment.truncate(0)).ledgers == info.ledgers
    # The topic shows the new start.
    assert (await topics.get_topic("t")).segments[0].start_offset == ledgers[2].first_offset


async def test_truncate_to_end_rolls_over(topics: TopicManager) -> None:
    segment = await _filled(topics, appends=3)
    assert len(segment.info().ledgers) == 1
    info = await segment.truncate(6)
    assert (info.segment.start_offset, info.segment.end_offset) == (6, 6)
    assert [(ledger.first_offset, ledger.closed) for ledger in info.ledgers] == [(6, False)]
    with pytest.raises(OffsetOutOfRangeError):
        await segment.read(5, 100)
    assert (await segment.read(6, 100)).blocks == []
    assert (await segment.append([block(9)], "w", 9)).offset == 6
    assert [b.offset for b in await read_all(segment, 6)] == [6]


async def test_truncate_beyond_end(topics: TopicManager) -> None:
    segment = await _filled(topics, appends=2)
    with pytest.raises(OffsetOutOfRangeError) as raised:
        await segment.truncate(5)
    assert (raised.value.offset, raised.value.end_offset) == (5, 4)


async def test_retention_by_size(topics: TopicManager, env: BrokerEnv) -> None:
    segment = await _filled(topics)
    before = segment.info()
    lengths = {ledger.ledger_id: (await env.ledgers.read_metadata(ledger.ledger_id))[0].length
               for ledger in before.ledgers if ledger.closed}
    limit = 3000
    await topics.update_topic_config("t", {"retention_bytes": limit})
    await topics.run_maintenance()
    after = segment.info()
    assert after.length_bytes <= limit
    dropped = len(before.ledgers) - len(after.ledgers)
    assert dropped > 0
    # Only as many as needed: keeping one more ledger would exceed the limit.
    assert after.length_bytes + lengths[before.ledgers[dropped - 1].ledger_id] > limit
    assert before.length_bytes - after.length_bytes == sum(
        lengths[ledger.ledger_id] for ledger in before.ledgers[:dropped])
    assert after.ledgers == before.ledgers[dropped:]
    assert after.segment.start_offset == after.ledgers[0].first_offset
    assert after.ledgers[-1].closed is False


async def test_retention_by_time(topics: TopicManager, env: BrokerEnv) -> None:
    await topics.create_topic("t", 1, ROLL)
    segment = await topics.segment("t/0")
    for i in range(10):  # old events
        await segment.append([block(i, size=300)], "w", i)
    env.clock.advance_ms(60_000)
    boundary = segment.end_offset
    await segment.truncate(segment.end_offset)  # roll over: the old events are closed
    old_ledgers = segment.info().ledgers
    for i in range(10, 20):  # new events
        await segment.append([block(i, size=300)], "w", i)
    await topics.update_topic_config("t", {"retention_ms": 30_000})
    # Nothing older than 30 s yet except the first ledgers, which truncate already took.
    assert old_ledgers[0].first_offset == boundary
    env.clock.advance_ms(20_000)
    await topics.run_maintenance()
    assert segment.start_offset == boundary  # new events are 20 s old: kept
    env.clock.advance_ms(20_000)
    await topics.run_maintenance()
    info = segment.info()
    assert len(info.ledgers) == 1 and not info.ledgers[0].closed  # the open one is kept
    assert info.segment.start_offset == info.ledgers[0].first_offset


async def test_background_retention(env: BrokerEnv) -> None:
    manager = env.manager(retention_interval_s=0.01)
    await manager.start()
    await manager.create_topic("t", 1, TopicConfig(ledger_rollover_bytes=1024,
                                                   retention_bytes=1024))
    segment = await manager.segment("t/0")
    for i in range(20):
        await segment.append([block(i, size=300)], "w", i)
    while segment.start_offset == 0:
        assert await segment.wait_for_data(segment.end_offset, 0.01) is False
    assert segment.info().length_bytes < 20 * 300


async def test_sealed_segment_truncated_whole(topics: TopicManager) -> None:
    segment = await _filled(topics, appends=3)
    await segment.seal()
    info = await segment.truncate(6)
    assert (info.segment.start_offset, info.segment.end_offset, info.ledgers) == (6, 6, ())
    assert (await segment.truncate(6)).ledgers == ()
    batch = await segment.read(6, 100)
    assert (batch.blocks, batch.end_of_segment) == ([], True)
