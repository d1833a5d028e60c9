"""Writer attributes: durable across rollovers, restarts and crashes; expiry; numbering rules."""

from __future__ import annotations

import json

import pytest

from broker.api import TopicConfig
from broker.errors import InvalidEventNumberError
from broker.segments.names import segment_path
from broker.segments.records import SegmentRecord, WriterState
from broker.segments.writers import WriterTable
from broker.topics.manager import TopicManager
from tests.unit.broker.conftest import BrokerEnv, block, read_all

ROLL = TopicConfig(ledger_rollover_bytes=1024)
DAY_MS = 24 * 3600 * 1000


async def _record(env: BrokerEnv) -> SegmentRecord:
    return SegmentRecord.from_bytes((await env.store.get(segment_path("t", 0))).data)


async def _old_writer_then_rollovers(env: BrokerEnv, manager: TopicManager) -> int:
    """Writer A appends once; writer B then fills many ledgers. Returns the end offset."""
    await manager.create_topic("t", 1, ROLL)
    segment = await manager.segment("t/0")
    assert (await segment.append([block(0, 3)], "A", 2)).offset == 0
    for i in range(40):
        await segment.append([block(i, size=200)], "B", i)
    assert len(segment.info().ledgers) > 5  # A's entry is far behind the last ledger
    return segment.end_offset


async def _check_a_remembered(manager: TopicManager, end: int) -> None:
    segment = await manager.segment("t/0")
    assert segment.end_offset == end
    assert await segment.last_event_number("A") == 2
    assert await segment.last_event_number("B") == 39
    resend = await segment.append([block(0, 3)], "A", 2)  # A's last block again
    # Answered with its first offset: A's recent appends are in the snapshot.
    assert (resend.duplicate, resend.offset, segment.end_offset) == (True, 0, end)
    assert (await segment.append([block(1, 2)], "A", 4)).offset == end


async def test_old_writer_survives_clean_restart(env: BrokerEnv) -> None:
    end = await _old_writer_then_rollovers(env, env.manager())
    await env.restart()
    await _check_a_remembered(env.manager(), end)


async def test_old_writer_survives_crash(env: BrokerEnv) -> None:
    first = env.manager()
    end = await _old_writer_then_rollovers(env, first)
    env.abandon(first)  # no close, no snapshot on close
    await env.restart()
    await _check_a_remembered(env.manager(), end)


async def test_old_writer_survives_crashes_with_empty_tail_ledgers(env: BrokerEnv) -> None:
    first = env.manager()
    end = await _old_writer_then_rollovers(env, first)
    env.abandon(first)
    for _ in range(3):  # each start adds an empty ledger, the next replaces it
        await env.restart()
        crashed = env.manager()
        assert await (await crashed.segment("t/0")).last_event_number("A") == 2
        env.abandon(crashed)
    await env.restart()
    await _check_a_remembered(env.manager(), end)


async def test_snapshot_at_rollover_and_on_close(env: BrokerEnv) -> None:
    manager = env.manager()
    await _old_writer_then_rollovers(env, manager)
    record = await _record(env)
    assert record.writers_ledger == record.ledgers[-1].ledger_id
    assert record.writers["A"].last_event_number == 2
    # Taken once the old ledger drained: B's number is that of its last entry
    # there (B's block i is at offset 3 + i), nothing from the current ledger.
    assert record.writers["B"].last_event_number == record.ledgers[-1].first_offset - 4
    await manager.close()
    closed = await _record(env)
    assert closed.writers_ledger == closed.ledgers[-1].ledger_id
    assert {w: s.last_event_number for w, s in closed.writers.items()} == {"A": 2, "B": 39}
    stored = json.loads((await env.store.get(segment_path("t", 0))).data)
    assert stored["format_version"] == 2


async def test_format_1_record_is_read(env: BrokerEnv) -> None:
    manager = env.manager()
    await manager.create_topic("t", 1, ROLL)
    segment = await manager.segment("t/0")
    await segment.append([block(0, 2)], "A", 1)
    env.abandon(manager)
    node = await env.store.get(segment_path("t", 0))
    old = json.loads(node.data)
    old["format_version"] = 1
    del old["writers"], old["writers_ledger"]
    await env.store.set(segment_path("t", 0), json.dumps(old).encode(), node.version)
    segment = await env.manager().segment("t/0")
    # No snapshot: the headers of the newest ledger with entries, as format 1 did.
    assert await segment.last_event_number("A") == 1
    assert [b.offset for b in await read_all(segment, 0)] == [0]
    assert (await _record(env)).writers == {
        "A": WriterState(1, int(env.clock.now * 1000), ((0, 1, 0),))}


async def test_idle_writers_expire_on_the_maintenance_tick(env: BrokerEnv) -> None:
    manager = env.manager(writer_expiry_ms=DAY_MS)
    await manager.create_topic("t", 1, TopicConfig())
    segment = await manager.segment("t/0")
    await segment.append([block(0)], "idle", 0)
    env.clock.advance_ms(DAY_MS // 2)
    await segment.append([block(1)], "busy", 0)
    await manager.run_maintenance()
    assert segment.writer_count == 2
    env.clock.advance_ms(DAY_MS // 2 + 1)
    await manager.run_maintenance()
    assert await segment.last_event_number("idle") == -1
    assert await segment.last_event_number("busy") == 0
    # Forgotten: its numbers start again (as a Kafka producer id that expired).
    assert not (await segment.append([block(2)], "idle", 0)).duplicate


async def test_idle_writers_expire_at_rollover_and_stay_forgotten(env: BrokerEnv) -> None:
    manager = env.manager(writer_expiry_ms=DAY_MS)
    await manager.create_topic("t", 1, ROLL)
    segment = await manager.segment("t/0")
    await segment.append([block(0)], "idle", 0)
    env.clock.advance_ms(DAY_MS + 1)
    for i in range(12):
        await segment.append([block(i, size=200)], "busy", i)
    assert "idle" not in (await _record(env)).writers
    assert await segment.last_event_number("idle") == -1
    env.abandon(manager)
    await env.restart()
    again = await env.manager(writer_expiry_ms=DAY_MS).segment("t/0")
    assert await again.last_event_number("idle") == -1
    assert await again.last_event_number("busy") == 11


async def test_event_numbers_going_backwards(topics: TopicManager) -> None:
    await topics.create_topic("t", 1, TopicConfig())
    segment = await topics.segment("t/0")
    await segment.append([block(0, 5)], "w", 4)  # numbers 0..4
    for last, count in ((6, 3), (5, 2), (20, 17)):  # first <= 4 < last: overlaps
        with pytest.raises(InvalidEventNumberError) as raised:
            await segment.append([block(1, count)], "w", last)
        assert raised.value.expected_above == 4
        assert "overlap" in str(raised.value)
    with pytest.raises(InvalidEventNumberError, match="start at 0") as raised:
        await segment.append([block(1, 3)], "fresh", 1)  # numbers -1..1
    assert raised.value.expected_above == -1
    # Held blocks + end as one append: the numbers of all its events count.
    with pytest.raises(InvalidEventNumberError):
        await segment.append([block(2, 2), block(3, 2)], "w", 7)  # 4..7
    assert (await segment.append([block(2, 2), block(3, 2)], "w", 8)).offset == 5  # 5..8
    assert (await segment.append([block(4, 2)], "w", 8)).duplicate
    assert (await segment.append([block(5)], "w", 20)).offset == 9  # gaps are fine
    assert segment.end_offset == 10
    # Not numbered: never de-duplicated, never refused.
    assert (await segment.append([block(6, 3)], "", -1)).offset == 10
    assert (await segment.append([block(6, 3)], "", -1)).offset == 13


def test_writer_table_rules() -> None:
    table = WriterTable({}, expiry_ms=100)
    assert not table.is_duplicate("w", 2, 3)
    table.note("w", 2, time_ms=1000)
    assert table.is_duplicate("w", 2, 3) and table.is_duplicate("w", 0, 1)
    assert not table.is_duplicate("w", 3, 1)
    with pytest.raises(InvalidEventNumberError):
        table.is_duplicate("w", 3, 2)
    table.note("", -1, time_ms=1000)
    assert len(table) == 1
    assert table.expire(1100) == 0 and table.expire(1101) == 1
    assert table.last_event_number("w") == -1
    with pytest.raises(ValueError, match="writer_expiry_ms"):
        WriterTable({}, expiry_ms=0)
