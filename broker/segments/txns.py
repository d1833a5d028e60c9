"""A segment's transactions: its transaction buffer, the buffer's recovery, the committed end.

``SegmentTxns`` is the part of a ``LedgerSegment`` that owns the transaction
buffer (user topics only; a system topic's segment takes no transactions), the
offsets of the transactions' first entries (``TxnOffsets``: the offset a
``read_committed`` reader waits at) and the buffer's recovery, run in the
background so appends need not wait for its replay.

While the recovery runs, the entries confirmed meanwhile are kept aside and
noted in the offsets once the replay is done: the replay notes the entries
before them, and the order must hold. The buffer keeps the same entries
itself and applies them after its replay, each once
(``TransactionBuffer.recover``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from broker.errors import BrokerError, BrokerShuttingDownError, InvalidArgumentError
from broker.metrics import observe_txn_buffer_recovery, observe_txn_buffer_snapshot
from broker.segments.chain import LedgerChain
from broker.segments.entry import EntryKind
from broker.segments.life import SegmentLife
from broker.segments.offset_index import LedgerSpan
from broker.segments.pipeline import PendingEntry
from broker.segments.transactions import LedgerSegmentLog, TxnOffsets
from ledger.api import WriteHandle
from ledger.errors import LedgerError
from txnbuffer.api import LoggedEntry, Position, SnapshotPolicy, SnapshotStore, TxnId
from txnbuffer.buffer import TransactionBuffer

__all__ = ["SegmentTxns"]

log = logging.getLogger(__name__)


class SegmentTxns:
    """The transaction buffer and what the segment keeps for it (a part of ``LedgerSegment``).

    Args:
        name: the segment's name, for errors, logs and the buffer.
        store: where the buffer keeps its snapshots; None: no buffer (no transactions).
        policy: when the buffer takes a snapshot (default ``SnapshotPolicy()``).
        life: the segment's life cycle, failed here when the recovery fails.
        wake: wakes the segment's readers (the committed end is known, or never will be).
    """

    def __init__(self, name: str, store: SnapshotStore | None, policy: SnapshotPolicy | None,
                 life: SegmentLife, wake: Callable[[], None]) -> None:
        self._name = name
        self._life = life
        self._wake = wake
        policy = policy or SnapshotPolicy()
        self._buffer = (None if store is None else TransactionBuffer(
            name, store, snapshot_every_changes=policy.every_changes,
            snapshot_every_ms=policy.every_ms, chunk_bytes=policy.chunk_bytes or None))
        self._offsets = TxnOffsets()
        # The recovery, what it failed with, and the entries confirmed while it
        # runs (None: not running, noted at once).
        self._recovery: asyncio.Task[None] | None = None
        self._recovery_error: Exception | None = None
        self._deferred: list[tuple[Position, EntryKind, TxnId | None, int]] | None = None

    @property
    def buffer(self) -> TransactionBuffer | None:
        """The transaction buffer (None for a system topic's segment)."""
        return self._buffer

    def check(self) -> None:
        """Raise ``InvalidArgumentError`` unless the segment takes transactions."""
        if self._buffer is None:
            raise InvalidArgumentError(f"segment {self._name} takes no transactions")

    def committed_end(self, start_offset: int, end_offset: int) -> int:
        """The offset a ``read_committed`` reader is served up to (exclusive).

        The offset of the earliest open transaction's first entry, or the end
        (``end_offset``); ``start_offset`` while the buffer is not recovered.
        """
        buffer = self._buffer
        if buffer is not None and not buffer.ready:
            return start_offset  # unknown until recovered: nothing is claimed committed
        if buffer is None or buffer.ongoing_count == 0:
            return end_offset
        limit = buffer.max_read_position
        offset = self._offsets.offset_at(Position(limit.ledger_id, limit.entry_id + 1))
        return end_offset if offset is None else min(offset, end_offset)

    def note_durable(self, entry: PendingEntry, entry_id: int) -> None:
        """A confirmed entry, told to the buffer (the append pipeline's ``on_durable``)."""
        buffer = self._buffer
        assert buffer is not None  # (only given to the pipeline with a buffer)
        position = Position(entry.span.ledger_id, entry_id)
        if self._deferred is not None:  # noted after the recovery's replay
            self._deferred.append((position, entry.kind, entry.txn_id, entry.base_offset))
        else:
            self._offsets.note(position, entry.kind, entry.txn_id, entry.base_offset)
        buffer.on_entry(LoggedEntry(position, entry.kind, entry.txn_id))

    def start_recovery(self, chain: LedgerChain,
                       reader: Callable[[LedgerSpan], Awaitable[WriteHandle]]) -> None:
        """Recover the buffer in the background from ``chain``'s ledgers (``recovered`` waits).

        Its replay reads every entry since the last snapshot (seconds after a
        busy minute), and appends need none of it.
        """
        self._deferred = []
        self._recovery = asyncio.create_task(self._recover(chain, reader),
                                             name=f"transaction buffer of {self._name}")

    async def _recover(self, chain: LedgerChain,
                       reader: Callable[[LedgerSpan], Awaitable[WriteHandle]]) -> None:
        buffer = self._buffer
        assert buffer is not None  # (only started for a segment with a buffer)
        started = time.perf_counter()
        replay = LedgerSegmentLog(chain.spans, reader, self._offsets)
        try:
            await buffer.recover(replay)
        except Exception as error:  # a bookie or the snapshot store failed
            log.warning("segment %s: transaction buffer not recovered: %s", self._name, error)
            self._recovery_error = error
            self._life.fail(error)  # loaded again on its next use
            self._wake()
            return
        # Nothing was awaited since the replay's last entry: every entry confirmed
        # after it is in the deferred list, and none is confirmed before this ends.
        for position, kind, txn_id, base_offset in self._deferred or ():
            if replay.last_position is None or position > replay.last_position:
                self._offsets.note(position, kind, txn_id, base_offset)
        self._deferred = None
        observe_txn_buffer_recovery(time.perf_counter() - started)
        self._wake()  # read_committed waiters: the committed end is known now

    async def recovered(self) -> None:
        """Wait until the buffer is recovered (at once without one, or without a recovery).

        Raises what the recovery failed with (the segment failed too), or why
        the segment is gone if the recovery was stopped (``stop_recovery``).
        """
        task = self._recovery
        if task is not None and not task.done():
            await asyncio.wait([task])
        if self._recovery_error is not None:
            raise self._recovery_error
        if task is not None and task.cancelled():
            self._life.check_readable()
            raise BrokerShuttingDownError(f"segment {self._name} is closed")

    def stop_recovery(self) -> None:
        """The segment leaves this broker: a recovery under way ends (``recovered`` raises)."""
        if self._recovery is not None and not self._recovery.done():
            self._recovery.cancel()

    def keep_open(self, spans: list[LedgerSpan], count: int) -> int:
        """``count`` capped so no ledger of ``spans`` holding an open transaction's entries goes."""
        buffer = self._buffer
        if buffer is not None and not buffer.ready:
            return 0  # open transactions unknown until the buffer is recovered: keep all
        if buffer is None or buffer.ongoing_count == 0:
            return count
        first_open = buffer.max_read_position.ledger_id
        for index, span in enumerate(spans[:count]):
            if span.ledger_id >= first_open:
                return index
        return count

    def ledgers_deleted(self, last_ledger_id: int) -> None:
        """The ledgers up to ``last_ledger_id`` are deleted (truncation, retention)."""
        if self._buffer is not None:
            self._buffer.on_ledger_deleted(last_ledger_id)

    async def maybe_snapshot(self) -> None:
        """The buffer's periodic snapshot, if due; a failure is logged (the next tick retries)."""
        if self._buffer is None:
            return
        try:
            started = time.perf_counter()
            if await self._buffer.maybe_snapshot():
                observe_txn_buffer_snapshot(time.perf_counter() - started)
        except (BrokerError, LedgerError) as error:
            log.warning("segment %s: transaction buffer snapshot failed: %s", self._name, error)
