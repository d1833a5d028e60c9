"""Recovery from chunked snapshots: the seed's three scenarios, compaction races, leftovers."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import pytest

from tests.unit.txnbuffer.conftest import (
    MemorySnapshotStore,
    Segment,
    StoreCrashedError,
)
from txnbuffer import Position, TransactionBuffer
from txnbuffer.snapshot import HEADER, ITEM_BYTES

#: Two aborts per record: 7 aborts make chunks seg-1..seg-3 and seg-end.
TWO_PER_CHUNK = HEADER.size + 2 * ITEM_BYTES
FULL_REPLAY = "replaying the whole segment"


@pytest.fixture
def small_store() -> MemorySnapshotStore:
    return MemorySnapshotStore(max_record_bytes=TWO_PER_CHUNK)


def aborted(seg: Segment, txn: int) -> None:
    seg.txn((0, txn))
    seg.abort((0, txn))


def state(buffer: TransactionBuffer) -> tuple[set[tuple[int, int]], Position, int]:
    return ({txn for _, txn in buffer.aborted_txns()}, buffer.max_read_position,
            buffer.ongoing_count)


async def test_normal_flow(small_store: MemorySnapshotStore) -> None:
    seg = Segment(small_store)
    await seg.start()
    for txn in range(1, 8):
        aborted(seg, txn)
    seg.txn((0, 100))  # open across the snapshot
    seg.data()
    await seg.buffer.take_snapshot()
    assert small_store.keys() == ["seg-1", "seg-2", "seg-3", "seg-end"]
    aborted(seg, 8)
    seg.commit((0, 100))
    seg.txn((0, 101))
    before = state(seg.buffer)
    visible = seg.visible_positions()
    buffer = await seg.restart()
    assert state(buffer) == before
    assert buffer.is_ongoing((0, 101))
    assert not buffer.is_ongoing((0, 100))
    assert seg.visible_positions() == visible


async def test_written_incompletely(small_store: MemorySnapshotStore,
                                    caplog: pytest.LogCaptureFixture) -> None:
    seg = Segment(small_store)
    await seg.start()
    for txn in range(1, 8):
        aborted(seg, txn)
    await seg.buffer.take_snapshot()  # seg-1..3 + end
    for txn in range(8, 10):
        aborted(seg, txn)
    seg.txn((0, 100))
    small_store.fail_after(2)  # new seg-1 and seg-2 written, then the broker dies
    with pytest.raises(StoreCrashedError):
        await seg.buffer.take_snapshot()
    small_store.heal()
    before = state(seg.buffer)
    with caplog.at_level(logging.WARNING):
        buffer = await seg.restart()
    assert FULL_REPLAY not in caplog.text
    assert state(buffer) == before
    assert {txn for _, txn in buffer.aborted_txns()} == {(0, t) for t in range(1, 10)}


async def test_written_incompletely_after_retention(small_store: MemorySnapshotStore,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    seg = Segment(small_store)
    await seg.start()
    aborted(seg, 1)
    aborted(seg, 2)
    seg.log.roll()
    for txn in range(3, 8):
        aborted(seg, txn)
    await seg.buffer.take_snapshot()  # seg-1 (1,2) seg-2 (3,4) seg-3 (5,6) end (7)
    seg.delete_ledgers_through(0)
    assert not seg.buffer.is_aborted((0, 1))
    for txn in range(8, 10):
        aborted(seg, txn)
    small_store.fail_after(2)  # seg-1 (3,4) seg-2 (5,6) written; old seg-3, old end remain
    with pytest.raises(StoreCrashedError):
        await seg.buffer.take_snapshot()
    small_store.heal()
    before = state(seg.buffer)
    visible = seg.visible_positions()
    with caplog.at_level(logging.WARNING):
        buffer = await seg.restart()
    assert FULL_REPLAY not in caplog.text
    assert state(buffer) == before
    assert {txn for _, txn in buffer.aborted_txns()} == {(0, t) for t in range(3, 10)}
    assert seg.visible_positions() == visible


async def test_leftover_chunks_of_a_longer_snapshot_are_ignored_then_deleted(
        small_store: MemorySnapshotStore) -> None:
    seg = Segment(small_store)
    await seg.start()
    for txn in range(1, 8):
        aborted(seg, txn)
        if txn == 5:
            seg.log.roll()
    await seg.buffer.take_snapshot()  # 3 chunks + end
    seg.delete_ledgers_through(0)  # aborts 1..5 gone: the next snapshot is seg-end alone
    small_store.fail_after(1)  # seg-end written, the tombstones of seg-1..3 not
    with pytest.raises(StoreCrashedError):
        await seg.buffer.take_snapshot()
    small_store.heal()
    assert small_store.keys() == ["seg-1", "seg-2", "seg-3", "seg-end"]
    buffer = await seg.restart()
    assert {txn for _, txn in buffer.aborted_txns()} == {(0, 6), (0, 7)}
    await buffer.take_snapshot()
    assert small_store.keys() == ["seg-end"]
    small_store.compact()
    assert small_store.keys() == ["seg-end"]
    buffer = await seg.restart()
    assert {txn for _, txn in buffer.aborted_txns()} == {(0, 6), (0, 7)}


async def test_compaction_racing_a_snapshot_write(small_store: MemorySnapshotStore) -> None:
    seg = Segment(small_store)
    await seg.start()
    for txn in range(1, 8):
        aborted(seg, txn)
    await seg.buffer.take_snapshot()
    for txn in range(8, 12):
        aborted(seg, txn)
    seg.txn((0, 100))
    expected = state(seg.buffer)
    for pause in range(6):  # every point of the 5-record write (seg-1..4, end)
        small_store.pause_after(pause)
        writing = asyncio.create_task(seg.buffer.take_snapshot())
        await small_store.paused.wait()
        small_store.compact()  # older and newer chunk versions now mixed, history gone
        other = TransactionBuffer("seg", small_store)
        await other.recover(seg.log)
        assert state(other) == expected, f"paused after {pause} writes"
        small_store.resume()
        await writing
        small_store.compact()
        other = TransactionBuffer("seg", small_store)
        await other.recover(seg.log)
        assert state(other) == expected


async def test_chunk_size_change_leaving_a_gap_replays_everything(
        caplog: pytest.LogCaptureFixture) -> None:
    store = MemorySnapshotStore(max_record_bytes=HEADER.size + 4 * ITEM_BYTES)
    seg = Segment(store)
    await seg.start()
    for txn in range(1, 8):
        aborted(seg, txn)
    await seg.buffer.take_snapshot()  # seg-1 (1..4), end (5..7)
    seg.options = {"chunk_bytes": HEADER.size + ITEM_BYTES}
    buffer = await seg.restart()
    store.fail_after(1)  # only the new seg-1 (abort 1): aborts 2..4 are in no record
    with pytest.raises(StoreCrashedError):
        await buffer.take_snapshot()
    store.heal()
    before = state(buffer)
    with caplog.at_level(logging.WARNING):
        buffer = await seg.restart()
    assert FULL_REPLAY in caplog.text
    assert state(buffer) == before


async def test_large_snapshot_round_trips_in_many_chunks(
        make_segment: Callable[..., Segment], store: MemorySnapshotStore) -> None:
    seg = make_segment(chunk_bytes=HEADER.size + 3 * ITEM_BYTES)
    await seg.start()
    for txn in range(1000):
        aborted(seg, txn)
    seg.txn((1, 1))
    await seg.buffer.take_snapshot()
    assert len(store.keys()) == 334
    # Drop what the snapshot covers from the log: the snapshot alone must carry the aborts.
    limit = seg.buffer.max_read_position
    seg.log.entries = [entry for entry in seg.log.entries if entry.position > limit]
    buffer = await seg.restart()
    assert buffer.aborted_count == 1000
    assert buffer.is_ongoing((1, 1))
    assert buffer.max_read_position == limit


@pytest.mark.parametrize(("key", "value"), [
    ("seg-end", b"FTBS truncated"),                      # shorter than a header
    ("seg-2", b"\x08\x01" + b"x" * (HEADER.size + 30)),  # bad magic (an event block)
    ("seg-1", None),                                    # a valid chunk under the wrong key
])
async def test_an_unreadable_record_means_a_full_replay(
        small_store: MemorySnapshotStore, caplog: pytest.LogCaptureFixture,
        key: str, value: bytes | None) -> None:
    seg = Segment(small_store)
    await seg.start()
    for txn in range(1, 8):
        aborted(seg, txn)
    seg.txn((0, 100))  # open across the snapshot
    seg.data()
    await seg.buffer.take_snapshot()  # seg-1..3 + end
    aborted(seg, 8)
    before = state(seg.buffer)
    visible = seg.visible_positions()
    if value is None:  # chunk 3's bytes under key seg-1: decodable, not matching its key
        value = dict(small_store.records)["seg-3"]
    assert value is not None
    await small_store.write(key, value)
    with caplog.at_level(logging.WARNING):
        buffer = await seg.restart()
    assert f"transaction buffer snapshot record {key!r} is unreadable" in caplog.text
    assert any(record.levelno == logging.ERROR for record in caplog.records)
    assert FULL_REPLAY in caplog.text
    # Rebuilt from the markers: the same aborts, open transaction, visibility.
    assert state(buffer) == before
    assert seg.visible_positions() == visible
    # The next snapshot overwrites the bad record: the one after reads it whole.
    await buffer.take_snapshot()
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        buffer = await seg.restart()
    assert FULL_REPLAY not in caplog.text
    assert state(buffer) == before
