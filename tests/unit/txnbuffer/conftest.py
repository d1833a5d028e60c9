"""In-memory snapshot store and segment log with fault injection, for transaction-buffer tests.

The real compacted topic and segment live in the broker; these fakes exist
because the tests need to crash a snapshot write after exactly the k-th record
and to compact the topic in the middle of a write.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping

import pytest

from txnbuffer import EntryKind, LoggedEntry, Position, TransactionBuffer, TxnId


class StoreCrashedError(Exception):
    """The injected crash: this write and every later one fail (until ``heal``)."""


class MemorySnapshotStore:
    """A compacted topic in memory: an append-only record list; readers see the latest per key.

    ``fail_after(n)`` lets ``n`` more writes through, then fails every write, as
    a broker that died would. ``pause_after(n)`` blocks the write after ``n``
    more until ``resume()``, so a test can read or compact in the middle.
    """

    def __init__(self, max_record_bytes: int = 5 * 1024 * 1024) -> None:
        self._max_record_bytes = max_record_bytes
        self.records: list[tuple[str, bytes | None]] = []
        self.writes = 0
        self._writes_left: int | None = None
        self._pause_in: int | None = None
        self.paused = asyncio.Event()
        self._resume = asyncio.Event()

    @property
    def max_record_bytes(self) -> int:
        return self._max_record_bytes

    def fail_after(self, writes: int) -> None:
        self._writes_left = writes

    def heal(self) -> None:
        self._writes_left = None

    def pause_after(self, writes: int) -> None:
        self._pause_in = writes
        self.paused.clear()
        self._resume.clear()

    def resume(self) -> None:
        self._resume.set()

    async def write(self, key: str, value: bytes | None) -> None:
        if self._pause_in is not None:
            if self._pause_in == 0:
                self._pause_in = None
                self.paused.set()
                await self._resume.wait()
            else:
                self._pause_in -= 1
        if self._writes_left is not None:
            if self._writes_left == 0:
                raise StoreCrashedError(f"injected crash before writing {key}")
            self._writes_left -= 1
        if value is not None and len(value) > self._max_record_bytes:
            raise ValueError(f"record {key} of {len(value)} bytes exceeds "
                             f"{self._max_record_bytes}")
        self.records.append((key, value))
        self.writes += 1

    def latest(self) -> dict[str, bytes]:
        latest: dict[str, bytes | None] = {}
        for key, value in self.records:
            latest[key] = value
        return {key: value for key, value in latest.items() if value is not None}

    async def read_prefix(self, prefix: str) -> Mapping[str, bytes]:
        return {key: value for key, value in self.latest().items() if key.startswith(prefix)}

    def compact(self) -> None:
        """Rewrite the topic without covered records and tombstones, as compaction does."""
        self.records = list(self.latest().items())

    def keys(self) -> list[str]:
        return sorted(self.latest())


class MemorySegmentLog:
    """A segment's entries in ledgers; retention deletes the oldest ledgers."""

    def __init__(self) -> None:
        self.entries: list[LoggedEntry] = []
        self.ledger_id = 0
        self._next_entry_id = 0
        self.deleted_through = -1

    def _next(self) -> Position:
        position = Position(self.ledger_id, self._next_entry_id)
        self._next_entry_id += 1
        return position

    def roll(self) -> None:
        self.ledger_id += 1
        self._next_entry_id = 0

    def append(self, kind: EntryKind, txn_id: TxnId | None = None) -> LoggedEntry:
        entry = LoggedEntry(self._next(), kind, txn_id)
        self.entries.append(entry)
        return entry

    def delete_through(self, ledger_id: int) -> None:
        self.deleted_through = max(self.deleted_through, ledger_id)
        self.entries = [e for e in self.entries if e.position.ledger_id > ledger_id]

    async def entries_after(self, position: Position | None) -> AsyncIterator[LoggedEntry]:
        for entry in list(self.entries):
            if position is None or entry.position > position:
                yield entry


class Segment:
    """A segment log and the buffer that follows it, with helpers to write and restart."""

    def __init__(self, store: MemorySnapshotStore, name: str = "seg", **options: int) -> None:
        self.store = store
        self.name = name
        self.options = options
        self.log = MemorySegmentLog()
        self.buffer = TransactionBuffer(name, store, **options)  # type: ignore[arg-type]

    async def start(self) -> TransactionBuffer:
        await self.buffer.recover(self.log)
        return self.buffer

    async def restart(self) -> TransactionBuffer:
        self.buffer = TransactionBuffer(self.name, self.store, **self.options)  # type: ignore[arg-type]
        await self.buffer.recover(self.log)
        return self.buffer

    def _report(self, entry: LoggedEntry) -> Position:
        self.buffer.on_entry(entry)
        return entry.position

    def data(self) -> Position:
        return self._report(self.log.append(EntryKind.DATA))

    def txn(self, txn_id: TxnId) -> Position:
        return self._report(self.log.append(EntryKind.TXN_DATA, txn_id))

    def commit(self, txn_id: TxnId) -> Position:
        return self._report(self.log.append(EntryKind.COMMIT_MARKER, txn_id))

    def abort(self, txn_id: TxnId) -> Position:
        return self._report(self.log.append(EntryKind.ABORT_MARKER, txn_id))

    def delete_ledgers_through(self, ledger_id: int) -> None:
        self.log.delete_through(ledger_id)
        self.buffer.on_ledger_deleted(ledger_id)

    def visible_positions(self) -> list[Position]:
        return [e.position for e in self.log.entries
                if self.buffer.visible(e.position, e.kind, e.txn_id)]


@pytest.fixture
def store() -> MemorySnapshotStore:
    return MemorySnapshotStore()


@pytest.fixture
def make_segment(store: MemorySnapshotStore) -> Callable[..., Segment]:
    def make(name: str = "seg", **options: int) -> Segment:
        return Segment(store, name, **options)
    return make
