"""The read path: whole entries from the one holding an offset, and tail waits.

The entry search and block slicing are ``broker.segments.reads``; here are the
isolation rules, the ledger handles of the chain and the long-poll wake-ups.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from bisect import bisect_right

from broker.api import Isolation, ReadBatch
from broker.errors import OffsetOutOfRangeError
from broker.metrics import observe_read_wake
from broker.segments._core import SegmentCore
from broker.segments.offset_index import LedgerSpan
from broker.segments.reads import find_entry, read_blocks
from ledger.api import WriteHandle
from ledger.errors import NoSuchEntryError, NoSuchLedgerError

__all__ = ["SegmentReads"]


class SegmentReads(SegmentCore):
    """Reads and waits for data (a part of ``LedgerSegment``)."""

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
        buffer = self._buffer
        committed = None
        if buffer is not None and isolation is Isolation.READ_COMMITTED:
            if not buffer.ready:
                await self.recovered()
                self._life.check_readable()
            committed = buffer
        start, end = self._start, self.end_offset
        if offset < start or offset > end:
            raise OffsetOutOfRangeError(self._name, offset, start, end)
        limit = end if committed is None else self.committed_end
        if offset >= limit:
            return ReadBatch([], end, self._life.end_final and offset >= end, offset)
        span = self._chain.spans[bisect_right(self._chain.firsts, offset) - 1]
        try:
            handle = await self._reader(span)
            last_entry_id = span.last_entry_id if span.writing else handle.last_add_confirmed
            entry_id = await find_entry(span, handle, offset, last_entry_id, self._hints)
            blocks, next_entry, next_offset = await read_blocks(
                span, handle, entry_id, last_entry_id, offset, max(max_bytes, 1), committed)
        except (NoSuchLedgerError, NoSuchEntryError):
            self._life.check_readable()
            if offset < self._start:  # truncated while we read
                raise OffsetOutOfRangeError(self._name, offset, self._start,
                                            self.end_offset) from None
            raise
        if next_entry <= last_entry_id:
            self._hints.put(next_offset, span.ledger_id, next_entry)
        end = self.end_offset
        return ReadBatch(blocks, end, self._life.end_final and next_offset >= end, next_offset)

    async def _reader(self, span: LedgerSpan) -> WriteHandle:
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
        committed = self._buffer is not None and isolation is Isolation.READ_COMMITTED
        while True:
            self._life.check_readable()
            end = self.committed_end if committed else self.end_offset
            if end > offset or (self._life.end_final and end >= self.end_offset):
                return True
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            event = self._data_event
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(remaining):
                    await event.wait()
                    observe_read_wake(time.perf_counter() - self._woken_at)
