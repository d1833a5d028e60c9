"""read_committed visibility, max_read_position, readiness and snapshot triggering."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import pytest

from tests.unit.txnbuffer.conftest import MemorySnapshotStore, Segment
from txnbuffer import (
    EARLIEST,
    EntryKind,
    LoggedEntry,
    Position,
    TransactionBuffer,
    TxnBufferNotReadyError,
)


async def test_open_txn_holds_readers_until_commit(make_segment: Callable[..., Segment]) -> None:
    seg = make_segment()
    buffer = await seg.start()
    assert buffer.max_read_position == EARLIEST
    first = seg.data()
    assert buffer.max_read_position == first
    t1 = seg.txn((0, 1))
    after = seg.data()
    seg.txn((0, 1))
    assert buffer.max_read_position == Position(0, t1.entry_id - 1) == first
    assert seg.visible_positions() == [first]
    assert not buffer.visible(after, EntryKind.DATA)
    commit = seg.commit((0, 1))
    assert buffer.max_read_position == commit
    assert seg.visible_positions() == [first, t1, after, Position(0, 3)]  # never the marker


async def test_aborted_entries_and_markers_are_never_visible(
        make_segment: Callable[..., Segment]) -> None:
    seg = make_segment()
    buffer = await seg.start()
    aborted_entry = seg.txn((0, 1))
    committed_entry = seg.txn((0, 2))
    abort = seg.abort((0, 1))
    commit = seg.commit((0, 2))
    assert buffer.is_aborted((0, 1))
    assert not buffer.visible(aborted_entry, EntryKind.TXN_DATA, (0, 1))
    assert buffer.visible(committed_entry, EntryKind.TXN_DATA, (0, 2))
    assert not buffer.visible(abort, EntryKind.ABORT_MARKER, (0, 1))
    assert not buffer.visible(commit, EntryKind.COMMIT_MARKER, (0, 2))


async def test_max_read_position_before_the_first_entry_of_a_ledger(
        make_segment: Callable[..., Segment]) -> None:
    seg = make_segment()
    buffer = await seg.start()
    data = seg.data()
    seg.log.roll()
    first = seg.txn((0, 1))
    assert first == Position(1, 0)
    assert buffer.max_read_position == Position(1, -1)
    assert buffer.visible(data, EntryKind.DATA)
    assert not buffer.visible(first, EntryKind.TXN_DATA, (0, 1))


class SlowLog:
    """A segment log whose replay waits until released."""

    def __init__(self, entries: list[LoggedEntry]) -> None:
        self.entries = entries
        self.release = asyncio.Event()

    async def entries_after(self, position: Position | None) -> AsyncIterator[LoggedEntry]:
        await self.release.wait()
        for entry in self.entries:
            if position is None or entry.position > position:
                yield entry


async def test_reads_wait_for_recovery(store: MemorySnapshotStore) -> None:
    log = SlowLog([LoggedEntry(Position(0, 0), EntryKind.TXN_DATA, (0, 1)),
                   LoggedEntry(Position(0, 1), EntryKind.DATA, None)])
    buffer = TransactionBuffer("seg", store)
    recovering = asyncio.create_task(buffer.recover(log))
    waiting = asyncio.create_task(buffer.wait_ready())
    await asyncio.sleep(0)
    assert not buffer.ready
    with pytest.raises(TxnBufferNotReadyError) as raised:
        buffer.visible(Position(0, 1), EntryKind.DATA)
    assert raised.value.retriable
    with pytest.raises(TxnBufferNotReadyError):
        await buffer.take_snapshot()
    # Appends during recovery: one the replay also returns, one after it.
    buffer.on_data_entry(Position(0, 1))
    buffer.on_commit_marker(Position(0, 2), (0, 1))
    assert not waiting.done()
    log.release.set()
    await recovering
    await waiting
    assert buffer.max_read_position == Position(0, 2)
    assert buffer.visible(Position(0, 0), EntryKind.TXN_DATA, (0, 1))


async def test_snapshot_after_n_changes_or_t_ms(store: MemorySnapshotStore) -> None:
    now = [0.0]
    seg = Segment(store, snapshot_every_changes=3, snapshot_every_ms=1000)
    seg.buffer = TransactionBuffer("seg", store, snapshot_every_changes=3,
                                   snapshot_every_ms=1000, clock=lambda: now[0])
    buffer = await seg.start()
    assert not await buffer.maybe_snapshot()  # nothing changed
    seg.data()  # max_read_position moved: 1 change
    seg.txn((0, 1))  # max_read_position stays just before it: no change
    assert buffer.changes_since_snapshot == 1
    assert not await buffer.maybe_snapshot()
    seg.abort((0, 1))  # an abort recorded and max_read_position moved: 2 changes
    assert buffer.changes_since_snapshot == 3
    assert await buffer.maybe_snapshot()
    assert buffer.changes_since_snapshot == 0
    seg.data()
    assert not await buffer.maybe_snapshot()
    now[0] += 1.0
    assert await buffer.maybe_snapshot()
    assert store.keys() == ["seg-end"]
