"""Truncation and retention: whole closed ledgers deleted from the head of the chain.

The record is changed first, then the ledgers deleted, so a crash in between
leaves an orphan ledger, never a record naming a deleted one. A ledger that
holds an open transaction's entries is kept (the buffer still needs them).
"""

from __future__ import annotations

import logging

from broker.api import SegmentInfo, TopicConfig
from broker.errors import OffsetOutOfRangeError
from broker.segments.rollover import SegmentRollover
from broker.segments.retention import ledgers_before, ledgers_past_retention

__all__ = ["SegmentHead"]

log = logging.getLogger(__name__)


class SegmentHead(SegmentRollover):
    """Truncating and applying retention (a part of ``LedgerSegment``)."""

    async def truncate(self, offset: int) -> SegmentInfo:
        """See ``SegmentHandle.truncate``; rolls over first when ``offset`` is the end."""
        self._life.check_readable()
        async with self._chain.lock:
            if offset > self.end_offset:
                raise OffsetOutOfRangeError(self._name, offset, self._start, self.end_offset)
            if offset <= self._start:
                return self.info()
            last = self._chain.spans[-1] if self._chain.spans else None
            if (last is not None and last.writing and last.first_offset < offset
                    and offset >= self.end_offset):
                self._life.check_appendable(self.end_offset)
                await self._roll_over_locked()
            await self._drop_head_locked(
                self._keep_open_txns(ledgers_before(self._chain.spans, self.end_offset, offset)))
            return self.info()

    async def apply_retention(self, now_ms: int, config: TopicConfig | None = None) -> int:
        """Delete the oldest closed ledgers beyond the retention limits; returns how many.

        By time: ledgers whose newest entry is more than ``retention_ms`` old.
        By size: the oldest ledgers while the segment holds more than
        ``retention_bytes``. The ledger being written is never deleted.
        """
        config = config or self._config
        if config.retention_ms < 0 and config.retention_bytes < 0:
            return 0
        self._life.check_readable()
        async with self._chain.lock:
            count = self._keep_open_txns(ledgers_past_retention(self._chain.spans, now_ms, config))
            await self._drop_head_locked(count)
            return count

    def _keep_open_txns(self, count: int) -> int:
        """``count`` capped so no ledger holding an open transaction's entries is dropped."""
        buffer = self._buffer
        if buffer is not None and not buffer.ready:
            return 0  # open transactions unknown until the buffer is recovered: keep all
        if buffer is None or buffer.ongoing_count == 0:
            return count
        first_open = buffer.max_read_position.ledger_id
        for index, span in enumerate(self._chain.spans[:count]):
            if span.ledger_id >= first_open:
                return index
        return count

    async def _drop_head_locked(self, count: int) -> None:
        if count == 0:
            return
        dropped, kept = self._chain.spans[:count], self._chain.spans[count:]
        start = kept[0].first_offset if kept else self.end_offset
        await self._chain.write_record(self._record_of(kept, start=start))
        self._chain.set_spans(kept)
        self._start = start
        self._hints.clear()
        log.info("segment %s: deleted %d ledgers, start offset now %d", self._name, count, start)
        if self._buffer is not None:
            self._buffer.on_ledger_deleted(dropped[-1].ledger_id)
        await self._chain.delete_ledgers(dropped)
