"""The operation parts alone: appends, markers, reads, head and life cycle, each called directly.

``parts_kit`` wires the parts as ``LedgerSegment`` does, on the real ledger
stack of ``BrokerEnv``; each test calls one part's own methods and checks the
state the owning parts hold afterwards (the chain, the pipeline, the life, the
record as stored). A fence is real: the ledger opened with recovery, as a new
owner does.
"""

from __future__ import annotations

import asyncio

import pytest

from broker.api import Isolation, TopicConfig
from broker.errors import (
    InvalidArgumentError,
    NoSuchSegmentError,
    OffsetOutOfRangeError,
    SegmentSealedError,
    WrongHostError,
)
from broker.segments.entry import EntryKind
from broker.segments.life import Residence
from ledger.api import LedgerState
from ledger.errors import NoNodeError, NoSuchLedgerError
from tests.unit.broker.conftest import BrokerEnv, block
from tests.unit.broker.segments.parts_kit import PATH, SegmentParts, wired
from txnbuffer.api import TxnId

T1: TxnId = (0, 1)


async def _append(parts: SegmentParts, count: int, writer: str = "w", start: int = 0) -> None:
    for number in range(start, start + count):
        result = await parts.appends.append([block(number)], writer, number)
        assert not result.duplicate


async def test_appends_number_writers_and_refuse_what_the_segment_cannot_take(
        env: BrokerEnv) -> None:
    parts = await wired(env)
    await _append(parts, 3)
    assert await parts.appends.last_event_number("w") == 2
    assert parts.pipeline.end_offset == 3
    duplicate = await parts.appends.append([block(1)], "w", 1)
    assert duplicate.duplicate and duplicate.offset == 1
    with pytest.raises(InvalidArgumentError, match="takes no transactions"):
        await parts.appends.append([block(3)], "w", 3, txn_id=T1)
    await env.ledgers.open(parts.chain.spans[-1].ledger_id, recovery=True)  # a new owner
    with pytest.raises(WrongHostError):
        await parts.appends.append([block(3)], "w", 3)
    assert isinstance(parts.life.failure, WrongHostError)


async def test_markers_go_through_the_appends_then_after_the_seal_into_a_ledger_of_their_own(
        env: BrokerEnv) -> None:
    parts = await wired(env, txns=True)
    with pytest.raises(InvalidArgumentError, match="not a marker"):
        await parts.markers.write_marker(EntryKind.DATA, T1)
    await parts.appends.append([block(0)], "w", 0, txn_id=T1)
    assert parts.reads.committed_end() == 0
    assert await parts.markers.write_marker(EntryKind.COMMIT_MARKER, T1) == 1
    assert parts.reads.committed_end() == 1
    await parts.appends.append([block(1)], "w", 1, txn_id=(0, 2))
    await parts.lifecycle.seal()
    ledgers = len(parts.chain.spans)
    assert await parts.markers.write_marker(EntryKind.ABORT_MARKER, (0, 2)) == 2
    assert len(parts.chain.spans) == ledgers + 1
    assert not parts.chain.spans[-1].writing and parts.pipeline.end_offset == 2
    record = await parts.recorded()
    assert record.sealed and len(record.ledgers) == ledgers + 1
    assert parts.reads.committed_end() == 2


async def test_markers_need_a_transaction_buffer(env: BrokerEnv) -> None:
    parts = await wired(env)
    with pytest.raises(InvalidArgumentError, match="takes no transactions"):
        await parts.markers.write_marker(EntryKind.COMMIT_MARKER, T1)


async def test_reads_serve_whole_entries_and_long_polls_wake_on_appends(
        env: BrokerEnv) -> None:
    parts = await wired(env)
    await _append(parts, 2)
    batch = await parts.reads.read(0, 1 << 20)
    assert [b.data for b in batch.blocks] == [block(0).data, block(1).data]
    assert (batch.end_offset, batch.next_offset, batch.end_of_segment) == (2, 2, False)
    with pytest.raises(OffsetOutOfRangeError):
        await parts.reads.read(3, 1 << 20)
    assert not await parts.reads.wait_for_data(2, 0.01)
    waiting = asyncio.create_task(parts.reads.wait_for_data(2, 60))
    await asyncio.sleep(0)
    await _append(parts, 1, start=2)
    assert await waiting


async def test_read_committed_stops_at_an_open_transaction(env: BrokerEnv) -> None:
    parts = await wired(env, txns=True)
    await parts.appends.append([block(0)], "w", 0)
    await parts.appends.append([block(1)], "w", 1, txn_id=T1)
    await parts.appends.append([block(2)], "w", 2)
    committed = await parts.reads.read(0, 1 << 20)
    assert [b.offset for b in committed.blocks] == [0]
    uncommitted = await parts.reads.read(0, 1 << 20, Isolation.READ_UNCOMMITTED)
    assert [b.offset for b in uncommitted.blocks] == [0, 1, 2]
    assert not await parts.reads.wait_for_data(1, 0.01)  # committed end: 1
    assert await parts.reads.wait_for_data(1, 0.01, Isolation.READ_UNCOMMITTED)


async def test_truncation_deletes_closed_head_ledgers_and_moves_the_start(
        env: BrokerEnv) -> None:
    parts = await wired(env)
    for start in (0, 2):
        await _append(parts, 2, start=start)
        await parts.rollover.roll_over()
    await _append(parts, 2, start=4)
    first, second, third = parts.chain.spans
    await parts.head.truncate(3)  # inside the second ledger: the first goes
    assert parts.chain.spans == [second, third] and parts.chain.start_offset == 2
    assert (await parts.recorded()).start_offset == 2
    with pytest.raises(NoSuchLedgerError):
        await env.ledgers.read_metadata(first.ledger_id)
    with pytest.raises(OffsetOutOfRangeError):
        await parts.reads.read(1, 1 << 20)
    await parts.head.truncate(6)  # the end: rolled over first, then all but the new ledger
    assert len(parts.chain.spans) == 1 and parts.chain.start_offset == 6
    assert parts.chain.spans[0].writing and parts.chain.spans[0].first_offset == 6
    with pytest.raises(OffsetOutOfRangeError):
        await parts.head.truncate(7)


async def test_retention_by_size_keeps_the_written_ledger(env: BrokerEnv) -> None:
    parts = await wired(env)
    for start in (0, 2, 4):
        await _append(parts, 2, start=start)
        await parts.rollover.roll_over()
    assert await parts.head.apply_retention(0, TopicConfig()) == 0  # no limits
    assert await parts.head.apply_retention(0, TopicConfig(retention_bytes=1)) == 3
    assert len(parts.chain.spans) == 1 and parts.chain.spans[0].writing
    assert parts.chain.start_offset == 6


async def test_a_seal_makes_the_end_final_and_is_recorded_once(env: BrokerEnv) -> None:
    parts = await wired(env)
    await _append(parts, 2)
    await parts.lifecycle.seal()
    assert parts.life.end_final and not parts.chain.spans[-1].writing
    record = await parts.recorded()
    assert record.sealed and record.end_offset == 2
    version = parts.chain.record_version
    await parts.lifecycle.seal()  # idempotent: nothing written
    assert parts.chain.record_version == version
    with pytest.raises(SegmentSealedError):
        await parts.appends.append([block(2)], "w", 2)


async def test_a_close_saves_the_writers_and_closes_the_ledger(env: BrokerEnv) -> None:
    parts = await wired(env)
    await _append(parts, 1, writer="late")
    await parts.lifecycle.close()
    assert parts.life.residence is Residence.CLOSED
    assert (await parts.recorded()).writers["late"].last_event_number == 0
    metadata, _ = await env.ledgers.read_metadata(parts.chain.spans[-1].ledger_id)
    assert metadata.state is LedgerState.CLOSED
    await parts.lifecycle.close()  # closed already: nothing to do
    assert parts.life.residence is Residence.CLOSED


async def test_a_hand_over_finishes_the_appends_under_way_then_moves_the_segment(
        env: BrokerEnv) -> None:
    parts = await wired(env)
    under_way = asyncio.create_task(parts.appends.append([block(0)], "w", 0))
    await asyncio.sleep(0)  # handed to the ledger
    await parts.lifecycle.hand_over()
    assert (await under_way).offset == 0
    assert parts.life.residence is Residence.MOVED and parts.pipeline.end_offset == 1
    with pytest.raises(WrongHostError):
        await parts.reads.read(0, 1)
    with pytest.raises(WrongHostError):
        await parts.appends.append([block(1)], "w", 1)


async def test_a_record_written_elsewhere_gives_the_segment_up(env: BrokerEnv) -> None:
    parts = await wired(env)
    parts.lifecycle.record_changed(parts.chain.record_version)  # our own write
    assert parts.life.usable
    parts.lifecycle.record_changed(parts.chain.record_version + 1)
    assert isinstance(parts.life.failure, WrongHostError) and not parts.life.usable


async def test_delete_removes_the_ledgers_then_the_record(env: BrokerEnv) -> None:
    parts = await wired(env)
    await _append(parts, 1)
    ledger_id = parts.chain.spans[-1].ledger_id
    await parts.lifecycle.delete()
    assert parts.life.residence is Residence.DELETED
    with pytest.raises(NoNodeError):
        await env.store.get(PATH)
    with pytest.raises(NoSuchLedgerError):
        await env.ledgers.read_metadata(ledger_id)
    with pytest.raises(NoSuchSegmentError):
        await parts.reads.read(0, 1)
    parts.lifecycle.abandon()  # deleted stays deleted
    assert parts.life.residence is Residence.DELETED
