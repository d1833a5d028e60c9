"""Contiguous writers (Kafka sequences) and their recent appends: kept with the segment.

A writer appending with ``contiguous=True`` must begin at 0 and go on without
gaps; a duplicate of one of its last five appends is answered with the
offset its first copy got. Both come from the segment's own persisted state
(entry headers and the record's writer snapshot), so they hold after a crash,
a clean restart, many rollovers, and for a broker that loads the segment again.
"""

from __future__ import annotations

import json

import pytest

from broker.api import TopicConfig
from broker.errors import InvalidEventNumberError
from broker.segments.names import segment_path
from broker.segments.records import (
    RECENT_APPENDS,
    RECENT_APPENDS_KEPT_MS,
    SegmentRecord,
    WriterState,
)
from broker.segments.writers import WriterTable
from broker.topics.manager import TopicManager
from tests.unit.broker.conftest import BrokerEnv, block, read_all

ROLL = TopicConfig(ledger_rollover_bytes=1024)


async def test_a_contiguous_writer_may_not_skip_numbers(topics: TopicManager) -> None:
    await topics.create_topic("t", 1, TopicConfig())
    segment = await topics.segment("t/0")
    with pytest.raises(InvalidEventNumberError, match="skip past 0") as raised:
        await segment.append([block(0, 2)], "k", 3, contiguous=True)  # 2..3, 0..1 never came
    assert raised.value.expected_above == -1
    assert (await segment.append([block(0, 2)], "k", 1, contiguous=True)).offset == 0
    with pytest.raises(InvalidEventNumberError, match="skip past 2"):
        await segment.append([block(1, 2)], "k", 5, contiguous=True)  # 4..5
    assert segment.end_offset == 2  # nothing written
    assert (await segment.append([block(1, 2)], "k", 3, contiguous=True)).offset == 2
    with pytest.raises(InvalidEventNumberError, match="overlap"):
        await segment.append([block(2, 2)], "k", 4, contiguous=True)  # 3..4
    # Other writers may skip numbers (SDK writers after a partial failure do).
    assert (await segment.append([block(3)], "sdk", 7)).offset == 4
    assert (await segment.append([block(4)], "sdk", 9)).offset == 5


async def test_duplicates_answered_with_the_first_offset_of_the_last_five(
        topics: TopicManager) -> None:
    await topics.create_topic("t", 1, TopicConfig())
    segment = await topics.segment("t/0")
    offsets = []
    for i in range(RECENT_APPENDS + 1):  # appends of 2 events: numbers 2i, 2i + 1
        await segment.append([block(100 + i)], "other", i)  # offsets interleave
        offsets.append((await segment.append([block(i, 2)], "k", 2 * i + 1,
                                             contiguous=True)).offset)
    end = segment.end_offset
    for i in range(1, RECENT_APPENDS + 1):
        again = await segment.append([block(i, 2)], "k", 2 * i + 1, contiguous=True)
        assert (again.duplicate, again.offset) == (True, offsets[i])
    oldest = await segment.append([block(0, 2)], "k", 1, contiguous=True)
    assert (oldest.duplicate, oldest.offset) == (True, -1)  # no longer remembered
    assert segment.end_offset == end


async def _kafka_like_appends(manager: TopicManager, appends: int) -> list[int]:
    await manager.create_topic("t", 1, ROLL)
    segment = await manager.segment("t/0")
    return [(await segment.append([block(i, 2, size=100)], "k", 2 * i + 1,
                                  contiguous=True)).offset for i in range(appends)]


async def _check_remembered(manager: TopicManager, offsets: list[int]) -> None:
    segment = await manager.segment("t/0")
    end = segment.end_offset
    last = len(offsets) - 1
    for i in range(max(0, last - RECENT_APPENDS + 1), last + 1):
        again = await segment.append([block(i, 2, size=100)], "k", 2 * i + 1,
                                     contiguous=True)
        assert (again.duplicate, again.offset) == (True, offsets[i])
    with pytest.raises(InvalidEventNumberError, match="skip past"):
        await segment.append([block(0, 2)], "k", 2 * last + 5, contiguous=True)
    assert segment.end_offset == end
    assert (await segment.append([block(0, 2)], "k", 2 * last + 3,
                                 contiguous=True)).offset == end


async def test_remembered_after_a_crash(env: BrokerEnv) -> None:
    first = env.manager()
    offsets = await _kafka_like_appends(first, 3)  # all in the last ledger: its headers
    env.abandon(first)
    await env.restart()
    await _check_remembered(env.manager(), offsets)


async def test_remembered_from_the_snapshot_after_rollovers_and_crashes(env: BrokerEnv) -> None:
    first = env.manager()
    offsets = await _kafka_like_appends(first, 30)
    assert len((await first.segment("t/0")).info().ledgers) > 3
    env.abandon(first)
    for _ in range(3):  # each start snapshots and adds an empty ledger; then only the snapshot
        await env.restart()
        crashed = env.manager()
        await crashed.segment("t/0")
        env.abandon(crashed)
    await env.restart()
    await _check_remembered(env.manager(), offsets)


async def test_remembered_after_a_clean_restart(env: BrokerEnv) -> None:
    offsets = await _kafka_like_appends(env.manager(), 8)
    await env.restart()
    await _check_remembered(env.manager(), offsets)
    record = SegmentRecord.from_bytes((await env.store.get(segment_path("t", 0))).data)
    assert len(record.writers["k"].recent) == RECENT_APPENDS


async def test_a_record_without_writer_appends_is_read(env: BrokerEnv) -> None:
    """A record a broker without recent appends wrote: duplicates just lose their offset."""
    manager = env.manager()
    await manager.create_topic("t", 1, ROLL)
    segment = await manager.segment("t/0")
    await segment.append([block(0, 2)], "k", 1, contiguous=True)
    for i in range(12):  # rollovers: k's entry is not in the last ledger
        await segment.append([block(i, size=200)], "other", i)
    await manager.close()
    node = await env.store.get(segment_path("t", 0))
    stored = json.loads(node.data)
    assert stored["writer_appends"]["k"] == [[0, 1, 0]]
    assert stored["format_version"] == 2  # a key of its own: older brokers still read it
    del stored["writer_appends"]
    await env.store.set(segment_path("t", 0), json.dumps(stored).encode(), node.version)
    await env.restart()
    again = await env.manager().segment("t/0")
    resend = await again.append([block(0, 2)], "k", 1, contiguous=True)
    assert (resend.duplicate, resend.offset) == (True, -1)
    assert (await again.append([block(1)], "k", 2, contiguous=True)).offset == 14
    assert [b.offset for b in await read_all(again, 0, max_bytes=1 << 20)][-2:] == [13, 14]


async def test_the_record_keeps_last_appends_of_recently_active_writers_only(
        env: BrokerEnv) -> None:
    manager = env.manager()
    await manager.create_topic("t", 1, ROLL)
    segment = await manager.segment("t/0")
    await segment.append([block(0, 2)], "idle", 1, contiguous=True)
    env.clock.advance_ms(RECENT_APPENDS_KEPT_MS + 1)
    await segment.append([block(1, 2)], "busy", 1, contiguous=True)
    for i in range(12):  # rollovers: neither entry is in the last ledger
        await segment.append([block(i, size=200)], "other", i)
    await manager.close()
    stored = json.loads((await env.store.get(segment_path("t", 0))).data)
    assert set(stored["writer_appends"]) == {"busy", "other"}
    assert set(stored["writers"]) == {"idle", "busy", "other"}
    await env.restart()
    again = await env.manager().segment("t/0")
    # Long past any delivery timeout: written before, offset unknown; the numbers stay.
    assert (await again.append([block(0, 2)], "idle", 1, contiguous=True)).offset == -1
    assert (await again.append([block(1, 2)], "busy", 1, contiguous=True)).offset == 2
    with pytest.raises(InvalidEventNumberError, match="skip past 2"):
        await again.append([block(2)], "idle", 5, contiguous=True)


def test_writer_table_keeps_the_last_appends() -> None:
    table = WriterTable({}, expiry_ms=100)
    for i in range(RECENT_APPENDS + 2):
        assert table.duplicate_of("w", 3 * i + 2, 3, contiguous=True) is None
        table.note("w", 3 * i + 2, time_ms=1, base_offset=10 * i, event_count=3)
    assert table.duplicate_of("w", 3 * RECENT_APPENDS + 5, 3) == 10 * (RECENT_APPENDS + 1)
    assert table.duplicate_of("w", 2, 3) == -1
    assert table.duplicate_of("w", 3, 2) == -1  # not a batch as sent: written, offset unknown
    assert table.snapshot()["w"] == WriterState(
        3 * RECENT_APPENDS + 5, 1,
        tuple((3 * i, 3 * i + 2, 10 * i) for i in range(2, RECENT_APPENDS + 2)))
