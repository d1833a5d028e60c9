"""The read path: whole entries from the one holding an offset, and tail waits.

``SegmentReads`` is the part of a ``LedgerSegment`` that serves reads: it owns
the read hints (where the last reads stopped, so the next one starts there
without a search) and the lock under which the chain's closed ledgers are
opened for reading. The entry search and block slicing are
``broker.segments.reads``; here are the isolation rules, the ledger handles of
the chain and the long polls (``broker.segments.wakeup``).
"""

from __future__ import annotations

import asyncio
from bisect import bisect_right

from broker.api import Isolation, ReadBatch
from broker.errors import OffsetOutOfRangeError
from broker.segments.chain import LedgerChain
from broker.segments.life import SegmentLife
from broker.segments.offset_index import LedgerSpan, ReadHints
from broker.segments.pipeline import AppendPipeline
from broker.segments.reads import find_entry, read_blocks
from broker.segments.txns import SegmentTxns
from broker.segments.wakeup import ReadWakeup
from ledger.api import LedgerService, WriteHandle
from ledger.errors import NoSuchEntryError, NoSuchLedgerError

__all__ = ["SegmentReads"]


class SegmentReads:
    """Reads and waits for data (a part of ``LedgerSegment``).

    Args:
        name: the segment's name, for errors.
        ledgers: opens the chain's closed ledgers for reading.
        life: refuses reads of a segment gone.
        chain: the ledgers and the start offset.
        pipeline: the end offset.
        txns: the committed end and the aborted transactions (``READ_COMMITTED``).
        wakeup: what the long polls wait on.
    """

    def __init__(self, name: str, ledgers: LedgerService, life: SegmentLife,
                 chain: LedgerChain, pipeline: AppendPipeline, txns: SegmentTxns,
                 wakeup: ReadWakeup) -> None:
        self._name = name
        self._ledgers = ledgers
        self._life = life
        self._chain = chain
        self._pipeline = pipeline
        self._txns = txns
        self._wakeup = wakeup
        self._open_lock = asyncio.Lock()
        self._hints = ReadHints()

    def committed_end(self) -> int:
        """The offset a ``read_committed`` reader is served up to (``SegmentTxns``)."""
        return self._txns.committed_end(self._chain.start_offset, self._pipeline.end_offset)

    def forget_hints(self) -> None:
        """The head of the chain was deleted: the hints may name its ledgers."""
        self._hints.clear()

    async def read(self, offset: int, max_bytes: int,
                   isolation: Isolation = Isolation.READ_COMMITTED) -> ReadBatch:
        """See ``SegmentHandle.read``: whole entries from the one holding ``offset``.

        ``READ_COMMITTED`` (the default) serves entries up to the transaction
        buffer's ``max_read_position`` (``committed_end`` in offsets) and
        leaves out aborted transactions' entries; ``READ_UNCOMMITTED`` every
        data entry. Markers are never served. ``next_offset`` says where the
        next read continues (past entries left out).
        """
        self._life.check_readable()
        buffer = self._txns.buffer
        committed = None
        if buffer is not None and isolation is Isolation.READ_COMMITTED:
            if not buffer.ready:
                await self._txns.recovered()
                self._life.check_readable()
            committed = buffer
        chain = self._chain
        start, end = chain.start_offset, self._pipeline.end_offset
        if offset < start or offset > end:
            raise OffsetOutOfRangeError(self._name, offset, start, end)
        limit = end if committed is None else self.committed_end()
        if offset >= limit:
            return ReadBatch([], end, self._life.end_final and offset >= end, offset)
        span = chain.spans[bisect_right(chain.firsts, offset) - 1]
        try:
            handle = await self.reader(span)
            last_entry_id = span.last_entry_id if span.writing else handle.last_add_confirmed
            entry_id = await find_entry(span, handle, offset, last_entry_id, self._hints)
            blocks, next_entry, next_offset = await read_blocks(
                span, handle, entry_id, last_entry_id, offset, max(max_bytes, 1), committed)
        except (NoSuchLedgerError, NoSuchEntryError):
            self._life.check_readable()
            if offset < chain.start_offset:  # truncated while we read
                raise OffsetOutOfRangeError(self._name, offset, chain.start_offset,
                                            self._pipeline.end_offset) from None
            raise
        if next_entry <= last_entry_id:
            self._hints.put(next_offset, span.ledger_id, next_entry)
        end = self._pipeline.end_offset
        return ReadBatch(blocks, end, self._life.end_final and next_offset >= end, next_offset)

    async def reader(self, span: LedgerSpan) -> WriteHandle:
        """``span``'s ledger handle: the writer's, or the ledger opened for reading."""
        if span.handle is not None:
            return span.handle
        async with self._open_lock:
            if span.handle is None:
                # Recovery closes a ledger a crashed rollover left open; for a
                # closed ledger it only reads the metadata.
                span.handle = await self._ledgers.open(span.ledger_id, recovery=True)
            return span.handle

    async def wait_for_data(self, offset: int, timeout_s: float,
                            isolation: Isolation = Isolation.READ_COMMITTED) -> bool:
        """See ``SegmentHandle.wait_for_data``: woken by confirmations and seals.

        ``READ_COMMITTED`` waits for ``committed_end`` to pass ``offset``.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        committed = self._txns.buffer is not None and isolation is Isolation.READ_COMMITTED
        while True:
            self._life.check_readable()
            end = self.committed_end() if committed else self._pipeline.end_offset
            if end > offset or (self._life.end_final and end >= self._pipeline.end_offset):
                return True
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            await self._wakeup.wait(remaining)
