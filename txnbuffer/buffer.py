"""The transaction buffer of one segment: aborted and open transactions, max_read_position.

The segment's owner reports every entry once it is durably appended, in
position order (``on_data_entry``, ``on_txn_entry``, ``on_commit_marker``,
``on_abort_marker``). From those the buffer knows which transactions are open
(and where each began), which aborted (and where their marker is), and so how
far a ``read_committed`` reader may read.

``max_read_position`` is inclusive: a reader may be served the entries at
positions ``<= max_read_position`` and no further. With no transaction open it
is the position of the segment's last entry (``EARLIEST`` when there is none).
With transactions open it is "just before" the first entry ``(L, e)`` of the
earliest of them, written ``(L, e - 1)``; when ``e`` is 0 that is ``(L, -1)``,
which no entry has but which orders after every entry of ledgers before ``L``
and before every entry of ``L``. No entry of an open transaction is ever at or
below it.

Crash windows: the owner reports an entry only after its append is durable, so
nothing the buffer knows (and so nothing a snapshot says) can vanish with a
crash. A snapshot is captured in one synchronous step (aborts and
``max_read_position`` agree) and then written; entries reported while it is
written are after its ``max_read_position`` and recovery replays them. Until
``recover`` returns the buffer is not ready: reads must ``await wait_ready()``
(``visible`` raises ``TxnBufferNotReadyError``), and no snapshot is written, so
a half-recovered buffer can never overwrite a good snapshot. Entries reported
during recovery are kept and applied after the replay, each exactly once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from txnbuffer.aborts import AbortedTxns
from txnbuffer.api import (
    EARLIEST,
    EntryKind,
    LoggedEntry,
    Position,
    SegmentLog,
    SnapshotStore,
    TxnId,
)
from txnbuffer.errors import TxnBufferError, TxnBufferNotReadyError
from txnbuffer.ongoing import OngoingTxns
from txnbuffer.snapshot import chunk_capacity, encode_snapshot, load_snapshot, write_snapshot

__all__ = ["TransactionBuffer"]

log = logging.getLogger(__name__)


class TransactionBuffer:
    """Aborted and open transactions of one segment, and how far committed reads may go.

    Args:
        segment: the segment's name; snapshot keys are ``<segment>-1 … <segment>-end``.
        store: the compacted snapshot topic.
        snapshot_every_changes: ``maybe_snapshot`` writes one after this many
            changes (an abort recorded, ``max_read_position`` moved).
        snapshot_every_ms: ... or when this long has passed since the last one
            and anything changed.
        chunk_bytes: the largest snapshot record; defaults to ``store.max_record_bytes``.
        clock: monotonic seconds (injectable for tests).

    Raises:
        ValueError: a non-positive interval, or ``chunk_bytes`` that cannot hold one
            abort or exceeds ``store.max_record_bytes``.
    """

    def __init__(self, segment: str, store: SnapshotStore, *, snapshot_every_changes: int = 1000,
                 snapshot_every_ms: int = 60_000, chunk_bytes: int | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if snapshot_every_changes < 1 or snapshot_every_ms < 1:
            raise ValueError("snapshot_every_changes and snapshot_every_ms must be positive")
        limit = store.max_record_bytes
        self._chunk_bytes = limit if chunk_bytes is None else chunk_bytes
        if self._chunk_bytes > limit:
            raise ValueError(f"chunk_bytes={self._chunk_bytes} exceeds the store's "
                             f"max_record_bytes={limit}")
        chunk_capacity(self._chunk_bytes)
        self._segment = segment
        self._store = store
        self._every_changes = snapshot_every_changes
        self._every_ms = snapshot_every_ms
        self._clock = clock
        self._aborts = AbortedTxns()
        self._ongoing = OngoingTxns()
        self._last_position = EARLIEST
        self._ready = asyncio.Event()
        self._recovering = False
        self._pending: list[LoggedEntry] = []
        self._pending_deleted_ledger: int | None = None
        self._snapshot_lock = asyncio.Lock()
        self._next_snapshot_id = 1
        self._stale_chunks_through = 0
        self._changes = 0
        self._last_snapshot_at = clock()

    # -- state -------------------------------------------------------------------------

    @property
    def segment(self) -> str:
        """The segment this buffer belongs to."""
        return self._segment

    @property
    def ready(self) -> bool:
        """Whether recovery is done (reads and snapshots are allowed)."""
        return self._ready.is_set()

    async def wait_ready(self) -> None:
        """Return once recovery is done; readers await this before their first read."""
        await self._ready.wait()

    @property
    def last_position(self) -> Position:
        """The position of the last entry reported (``EARLIEST`` when none)."""
        return self._last_position

    @property
    def max_read_position(self) -> Position:
        """The last position a ``read_committed`` reader may be served (inclusive).

        ``(L, e - 1)`` for the first entry ``(L, e)`` of the earliest open
        transaction, possibly ``(L, -1)``; the last entry's position when no
        transaction is open.
        """
        earliest = self._ongoing.earliest()
        if earliest is None:
            return self._last_position
        return Position(earliest.ledger_id, earliest.entry_id - 1)

    @property
    def aborted_count(self) -> int:
        """How many aborted transactions the buffer holds."""
        return len(self._aborts)

    @property
    def ongoing_count(self) -> int:
        """How many transactions are open."""
        return len(self._ongoing)

    @property
    def changes_since_snapshot(self) -> int:
        """Changes (aborts recorded, ``max_read_position`` moves) not yet in a snapshot."""
        return self._changes

    def is_aborted(self, txn_id: TxnId) -> bool:
        """Whether ``txn_id`` aborted (and its marker's ledger is still retained)."""
        return txn_id in self._aborts

    def is_ongoing(self, txn_id: TxnId) -> bool:
        """Whether ``txn_id`` has entries in the segment and no commit or abort marker yet."""
        return txn_id in self._ongoing

    def aborted_txns(self) -> list[tuple[Position, TxnId]]:
        """``(marker position, txn_id)`` of every abort, in position order (for tests, tools)."""
        return list(self._aborts.items())

    # -- reads -------------------------------------------------------------------------

    def visible(self, position: Position, kind: EntryKind, txn_id: TxnId | None = None) -> bool:
        """Whether a ``read_committed`` reader may be served the entry.

        Data entries at or below ``max_read_position`` are; transactional
        entries there are unless their transaction aborted (none at or below
        it is open, so the rest are committed); markers never are. A reader
        must not skip entries above ``max_read_position``: it waits there until
        the position moves (they are not invisible, only not yet decided).

        Raises:
            TxnBufferNotReadyError: before recovery is done.
        """
        if not self._ready.is_set():
            raise TxnBufferNotReadyError("transaction buffer is recovering", segment=self._segment)
        if kind is EntryKind.DATA:
            return position <= self.max_read_position
        if kind is EntryKind.TXN_DATA:
            return (position <= self.max_read_position and txn_id is not None
                    and txn_id not in self._aborts and txn_id not in self._ongoing)
        return False

    # -- entries -----------------------------------------------------------------------

    def on_entry(self, entry: LoggedEntry) -> None:
        """Report one durable entry of any kind (dispatches to the ``on_*`` methods)."""
        if not self._ready.is_set():
            self._pending.append(entry)
            return
        self._apply(entry)

    def on_data_entry(self, position: Position) -> None:
        """Report a durable non-transactional entry: it moves the segment's end."""
        self.on_entry(LoggedEntry(position, EntryKind.DATA, None))

    def on_txn_entry(self, position: Position, txn_id: TxnId) -> None:
        """Report a durable entry of ``txn_id``; its first one makes the transaction open."""
        self.on_entry(LoggedEntry(position, EntryKind.TXN_DATA, txn_id))

    def on_commit_marker(self, position: Position, txn_id: TxnId) -> None:
        """Report the durable commit marker of ``txn_id``: its entries become readable."""
        self.on_entry(LoggedEntry(position, EntryKind.COMMIT_MARKER, txn_id))

    def on_abort_marker(self, position: Position, txn_id: TxnId) -> None:
        """Report the durable abort marker of ``txn_id``: its entries are never served."""
        self.on_entry(LoggedEntry(position, EntryKind.ABORT_MARKER, txn_id))

    def _apply(self, entry: LoggedEntry) -> None:
        position = entry.position
        if position <= self._last_position:
            return  # already known: replay overlapping entries reported during recovery
        before = self.max_read_position
        self._last_position = position
        txn_id = entry.txn_id
        kind = entry.kind
        if kind is EntryKind.TXN_DATA:
            # An abort is final: a late entry of an aborted transaction opens nothing.
            if txn_id is not None and txn_id not in self._aborts:
                self._ongoing.begin(txn_id, position)
        elif kind is EntryKind.COMMIT_MARKER:
            if txn_id is not None:
                self._ongoing.end(txn_id)
        elif kind is EntryKind.ABORT_MARKER and txn_id is not None:
            self._ongoing.end(txn_id)
            if self._aborts.add(txn_id, position):
                self._changes += 1
        if self.max_read_position != before:
            self._changes += 1

    def on_ledger_deleted(self, ledger_id: int) -> int:
        """Retention deleted ``ledger_id`` (and, oldest first, every ledger before it).

        Aborts whose markers lay in those ledgers are dropped in position order;
        the next snapshot no longer carries them. Retention must not delete
        ledgers above ``max_read_position`` (an open transaction's entries).

        Returns:
            How many aborts were dropped (0 while recovering: applied afterwards).
        """
        if not self._ready.is_set():
            pending = self._pending_deleted_ledger
            self._pending_deleted_ledger = ledger_id if pending is None else max(pending, ledger_id)
            return 0
        removed = self._aborts.remove_through_ledger(ledger_id)
        self._changes += removed
        return removed

    # -- recovery ----------------------------------------------------------------------

    async def recover(self, log_: SegmentLog) -> None:
        """Load the latest snapshot, replay the segment after it, then become ready.

        Raises:
            TxnBufferError: if called twice.

        A snapshot record that is corrupt or of an unknown version is logged
        at ERROR and the whole segment is replayed instead (``load_snapshot``).
        """
        if self._recovering or self._ready.is_set():
            raise TxnBufferError("recover called twice", segment=self._segment)
        self._recovering = True
        started = time.perf_counter()
        loaded = await load_snapshot(self._store, self._segment)
        if loaded.full_replay_reason is not None:
            log.warning("segment %s: replaying the whole segment: %s", self._segment,
                        loaded.full_replay_reason)
        self._aborts.update(zip(loaded.txn_ids, loaded.positions, strict=True))
        self._next_snapshot_id = loaded.last_snapshot_id + 1
        self._stale_chunks_through = loaded.last_chunk_index
        start = loaded.max_read_position
        if start is not None:
            self._last_position = start
        replayed = 0
        async for entry in log_.entries_after(start):
            self._apply(entry)
            replayed += 1
        for entry in self._pending:
            self._apply(entry)
        self._pending.clear()
        self._ready.set()
        if self._pending_deleted_ledger is not None:
            self.on_ledger_deleted(self._pending_deleted_ledger)
            self._pending_deleted_ledger = None
        self._changes = replayed
        self._last_snapshot_at = self._clock()
        log.info("segment %s: transaction buffer recovered in %.3f s: %d aborts from the "
                 "snapshot, %d entries replayed, %d open transactions", self._segment,
                 time.perf_counter() - started, len(loaded.txn_ids), replayed,
                 len(self._ongoing))

    # -- snapshots ---------------------------------------------------------------------

    async def maybe_snapshot(self) -> bool:
        """Take a snapshot if enough changes or time have accumulated since the last.

        The owner calls this periodically and after reporting entries.

        Returns:
            True if a snapshot was written.
        """
        if not self._ready.is_set() or self._snapshot_lock.locked() or self._changes == 0:
            return False
        elapsed_ms = (self._clock() - self._last_snapshot_at) * 1000
        if self._changes < self._every_changes and elapsed_ms < self._every_ms:
            return False
        await self.take_snapshot()
        return True

    async def take_snapshot(self) -> None:
        """Write a snapshot now (one at a time; see ``txnbuffer.snapshot`` for the order).

        Raises:
            TxnBufferNotReadyError: before recovery is done.
            Exception: whatever the store raises; the changes stay counted.
        """
        if not self._ready.is_set():
            raise TxnBufferNotReadyError("no snapshot before recovery is done",
                                         segment=self._segment)
        async with self._snapshot_lock:
            positions, txn_ids = self._aborts.sorted_pairs()
            max_read_position = self.max_read_position
            changes = self._changes
            snapshot_id = self._next_snapshot_id
            self._next_snapshot_id += 1
            records = encode_snapshot(snapshot_id, txn_ids, positions, max_read_position,
                                      self._chunk_bytes)
            chunks = len(records) - 1
            # Until the tombstones are written, chunks up to the old limit may exist.
            stale = max(self._stale_chunks_through, chunks)
            self._stale_chunks_through = stale
            await write_snapshot(self._store, self._segment, records, stale)
            self._stale_chunks_through = chunks
            self._changes = max(0, self._changes - changes)
            self._last_snapshot_at = self._clock()
            log.debug("segment %s: snapshot %d written: %d aborts in %d records, "
                      "max_read_position %s", self._segment, snapshot_id, len(txn_ids),
                      len(records), max_read_position)
