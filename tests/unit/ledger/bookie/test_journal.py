"""The bookie's journal on a real disk and a real RocksDB: records, torn tails, replay, checkpoints.

A crash is imitated by copying the journal and RocksDB directories as they are
while the storage is open (what a SIGKILL leaves), or by writing journal files
directly; real process kills are in ``tests/faults/test_journal_crash.py``.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from ledger.bookie.checkpoint import read_checkpoint
from ledger.bookie.journal import (
    FENCE,
    PREALLOC_BYTES,
    JournalWriter,
    Position,
    encode_add,
    encode_ledger_op,
    file_name,
    frame,
    journal_files,
    zero_fill,
)
from ledger.bookie.replay import read_records
from ledger.bookie.storage import RocksDBLedgerStorage
from ledger.config import BookieConfig, Durability, Journal
from tests.unit.ledger.bookie.conftest import (
    DEADLINE_S,
    GatedDB,
    OpenStorage,
    add,
    lengths_of,
    read_all,
    submit_delete,
    submit_fence,
)


def _add_record(ledger_id: int, first: int, datas: list[bytes]) -> bytes:
    entry_ids = range(first, first + len(datas))
    return b"".join(frame(encode_add(ledger_id, first - 1, entry_ids, lengths_of(datas),
                                     datas)))


def _write_journal(directory: Path, records: list[bytes]) -> list[int]:
    """Journal ``records`` one append each; the end offset of each."""
    directory.mkdir(parents=True, exist_ok=True)
    writer = JournalWriter(str(directory), 1, 1 << 20, sync=True)
    ends = [writer.append([record]).offset for record in records]
    writer.close()
    return ends


def _records(count: int) -> tuple[list[bytes], list[bytes]]:
    datas = [bytes([index]) * (index % 7) for index in range(count)]
    return [_add_record(5, index, [data]) for index, data in enumerate(datas)], datas


def test_a_torn_last_record_is_dropped_at_every_byte_offset(tmp_path: Path) -> None:
    records, _ = _records(4)
    records[-1] = _add_record(5, 3, [b"last", b"one"])
    ends = _write_journal(tmp_path / "journal", records)
    path = tmp_path / "journal" / file_name(1)
    original = path.read_bytes()
    start, end = ends[-2], ends[-1]
    for cut in range(start, end):
        # What a crash leaves: the record's first ``cut - start`` bytes, then the
        # preallocated zeros (or, on another file system, garbage or a short file).
        for tail in (b"\x00", b"\xa5", b""):
            torn = original[:cut] + tail * (end - cut) + original[end:] if tail \
                else original[:cut]
            path.write_bytes(torn)
            read = [payload for _, payload in read_records(str(path))]
            assert [b"".join(frame([payload])) for payload in read] == records[:-1], (cut, tail)
    path.write_bytes(original)
    assert [b"".join(frame([payload])) for _, payload in read_records(str(path))] == records


def test_replay_after_a_torn_tail_keeps_exactly_the_complete_records(tmp_path: Path) -> None:
    records, datas = _records(3)
    records.append(_add_record(5, 3, [b"torn"]))
    ends = _write_journal(tmp_path / "journal", records)
    original = (tmp_path / "journal" / file_name(1)).read_bytes()
    for cut in range(ends[-2], ends[-1]):
        root = tmp_path / f"cut-{cut}"
        (root / "bookie" / "journal").mkdir(parents=True)
        torn = original[:cut] + bytes(len(original) - cut)
        (root / "bookie" / "journal" / file_name(1)).write_bytes(torn)
        storage = RocksDBLedgerStorage(BookieConfig(data_dir=str(root / "bookie")))
        try:
            assert read_all(storage, 5) == ([0, 1, 2], datas), cut
            assert storage.tail(5).last_entry_id == 2
        finally:
            storage.close()
        shutil.rmtree(root)


def test_adds_fences_and_deletes_survive_a_crash_through_the_journal(
        tmp_path: Path, open_storage: OpenStorage) -> None:
    storage = open_storage(Durability.SYNC, journal=Journal.ON)
    assert add(storage, 1, range(3), [b"a", b"b", b"c"], 1) is None
    assert add(storage, 2, [0], [b"x"]) is None
    submit_fence(storage, 1).wait()
    assert submit_delete(storage, 2).wait() is None
    assert add(storage, 3, [0, 1], [b"p", b"q"], 0, recovery=True) is None
    # Readable at once, from the write cache or RocksDB.
    assert read_all(storage, 1) == ([0, 1, 2], [b"a", b"b", b"c"])
    # A crash: copy the directories as they are now (RocksDB has no WAL of its own).
    crashed = tmp_path / "crashed"
    shutil.copytree(tmp_path / "bookie", crashed,
                    ignore=shutil.ignore_patterns("LOCK"))

    restarted = RocksDBLedgerStorage(BookieConfig(data_dir=str(crashed)))
    try:
        assert read_all(restarted, 1) == ([0, 1, 2], [b"a", b"b", b"c"])
        assert restarted.tail(1).fenced
        assert restarted.tail(1).last_add_confirmed == 1
        assert 2 not in restarted.ledger_ids()
        assert read_all(restarted, 3) == ([0, 1], [b"p", b"q"])
    finally:
        restarted.close()


def test_checkpoints_delete_old_journal_files_and_nothing_is_lost(
        tmp_path: Path, open_storage: OpenStorage) -> None:
    storage = open_storage(Durability.SYNC, journal=Journal.ON, journal_file_bytes=4096)
    datas = [os.urandom(1000) for _ in range(60)]
    for index, data in enumerate(datas):
        assert add(storage, 9, [index], [data], index - 1) is None
    journal = str(tmp_path / "bookie" / "journal")
    storage.close()
    # Closed cleanly: a checkpoint at the end; files before it are gone.
    checkpoint = read_checkpoint(journal)
    assert journal_files(journal) == [checkpoint.seq]
    assert checkpoint.seq > 10  # ~60 KiB through 4 KiB files: many rotations

    reopened = open_storage(Durability.SYNC, journal=Journal.ON, journal_file_bytes=4096)
    assert read_all(reopened, 9) == (list(range(60)), datas)


def test_a_fence_is_replayed_in_order_with_the_adds(tmp_path: Path) -> None:
    journal = tmp_path / "bookie" / "journal"
    _write_journal(journal, [_add_record(4, 0, [b"a"]),
                             b"".join(frame(encode_ledger_op(FENCE, 4)))])
    storage = RocksDBLedgerStorage(BookieConfig(data_dir=str(tmp_path / "bookie")))
    try:
        assert storage.tail(4).fenced
        assert read_all(storage, 4) == ([0], [b"a"])
        # Replayed, flushed and checkpointed: the replayed file is gone.
        assert read_checkpoint(str(journal)) == Position(journal_files(str(journal))[0], 0)
        assert journal_files(str(journal)) == [2]
    finally:
        storage.close()


def test_acknowledged_entries_are_read_from_the_write_cache_before_rocksdb_has_them(
        open_storage: OpenStorage) -> None:
    storage = open_storage(Durability.SYNC, journal=Journal.ON)
    assert add(storage, 6, [0, 1], [b"in", b"rocksdb"]) is None
    journal = storage._journal
    assert journal is not None
    journal.drain()
    flusher = journal._flusher
    held = GatedDB(flusher._db, held=True)
    flusher._db = held  # type: ignore[assignment]  # hold the background RocksDB write
    try:
        assert add(storage, 6, [2, 3], [b"only", b"cached"], 1) is None
        assert held.entered.wait(DEADLINE_S)
        # Acknowledged, not in RocksDB yet: served from the cache, merged in order.
        assert read_all(storage, 6) == ([0, 1, 2, 3], [b"in", b"rocksdb", b"only", b"cached"])
        assert storage.read(6, 3, 3, 0).datas == [b"cached"]
        # A byte budget that RocksDB's part fills: the cached entries come next time.
        assert storage.read(6, 0, 3, 1).entry_ids == [0]
    finally:
        held.release.set()
    journal.drain()
    assert read_all(storage, 6) == ([0, 1, 2, 3], [b"in", b"rocksdb", b"only", b"cached"])


def test_a_file_is_preallocated_in_steps_up_to_its_limit_then_rotated(tmp_path: Path) -> None:
    # Preallocating the whole file at once (64 MiB by default) made every
    # bookie take it on disk however little it wrote: a test run's bookies
    # filled the disk. The file grows in PREALLOC_BYTES steps, as
    # BookKeeper's journalPreAllocSizeMB, and rotates at journal_file_bytes.
    limit = 3 * PREALLOC_BYTES
    writer = JournalWriter(str(tmp_path), 1, limit, sync=True)
    first = tmp_path / file_name(1)
    assert first.stat().st_size == PREALLOC_BYTES
    record = b"".join(frame(encode_ledger_op(FENCE, 7)))
    per_block = PREALLOC_BYTES // 2 // len(record)
    block = record * per_block
    for _ in range(3):  # 1.5 steps written: one more step allocated
        writer.append([block])
    assert first.stat().st_size == 2 * PREALLOC_BYTES
    blocks = 3
    while writer.position.seq == 1:
        writer.append([block])
        blocks += 1
    writer.close()
    assert first.stat().st_size == limit  # full: the next file took over
    assert (tmp_path / file_name(2)).stat().st_size == PREALLOC_BYTES
    # Every record of the full file replays (it ends at the file's end or a zero length).
    in_first = (blocks - 1) * per_block
    assert len(list(read_records(str(first)))) == in_first
    assert len(list(read_records(str(tmp_path / file_name(2))))) == per_block


def test_a_preallocation_writes_zeros_over_its_range_only(tmp_path: Path) -> None:
    # Written zeros, not posix_fallocate's unwritten extents (whose first write
    # makes each group commit's fdatasync commit the file system's journal):
    # the range reads back as zeros, beyond the 1 MiB a single write covers,
    # and what lies outside it is untouched.
    path = tmp_path / "prealloc"
    path.write_bytes(b"\xff" * (3 * 1024 * 1024))
    start, end = 100, 100 + 2 * 1024 * 1024 + 12345
    fd = os.open(path, os.O_WRONLY)
    try:
        zero_fill(fd, start, end)
    finally:
        os.close(fd)
    data = path.read_bytes()
    assert len(data) == 3 * 1024 * 1024
    assert data[start:end] == bytes(end - start)
    assert data[:start] == b"\xff" * start
    assert data[end:] == b"\xff" * (len(data) - end)
