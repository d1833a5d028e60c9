"""Truncation and retention: whole closed ledgers deleted from the head of the chain.

``SegmentHead`` is the part of a ``LedgerSegment`` that deletes them. It owns
no state: the chain holds the ledgers and the start offset, and moves both at
once. The record is changed first, then the ledgers deleted, so a crash in
between leaves an orphan ledger, never a record naming a deleted one. A
ledger that holds an open transaction's entries is kept (the buffer still
needs them).
"""

from __future__ import annotations

import logging

from broker.api import TopicConfig
from broker.errors import OffsetOutOfRangeError
from broker.segments.chain import LedgerChain
from broker.segments.life import SegmentLife
from broker.segments.pipeline import AppendPipeline
from broker.segments.reading import SegmentReads
from broker.segments.recorder import SegmentRecorder
from broker.segments.retention import ledgers_before, ledgers_past_retention
from broker.segments.rollover import SegmentRollover
from broker.segments.txns import SegmentTxns

__all__ = ["SegmentHead"]

log = logging.getLogger(__name__)


class SegmentHead:
    """Truncating and applying retention (a part of ``LedgerSegment``).

    Args:
        name: the segment's name, for errors and logs.
        life: refuses a segment gone.
        chain: the ledgers and the start offset; deletes ledgers.
        pipeline: the end offset.
        rollover: closes the open ledger when truncating at the end.
        recorder: the record without the deleted ledgers.
        txns: keeps the ledgers of open transactions, told of deletions.
        reads: forgets its hints into deleted ledgers.
    """

    def __init__(self, name: str, life: SegmentLife, chain: LedgerChain,
                 pipeline: AppendPipeline, rollover: SegmentRollover,
                 recorder: SegmentRecorder, txns: SegmentTxns, reads: SegmentReads) -> None:
        self._name = name
        self._life = life
        self._chain = chain
        self._pipeline = pipeline
        self._rollover = rollover
        self._recorder = recorder
        self._txns = txns
        self._reads = reads

    async def truncate(self, offset: int) -> None:
        """See ``SegmentHandle.truncate``; rolls over first when ``offset`` is the end."""
        self._life.check_readable()
        chain = self._chain
        async with chain.lock:
            end = self._pipeline.end_offset
            if offset > end:
                raise OffsetOutOfRangeError(self._name, offset, chain.start_offset, end)
            if offset <= chain.start_offset:
                return
            last = chain.spans[-1] if chain.spans else None
            if last is not None and last.writing and last.first_offset < offset and offset >= end:
                self._life.check_appendable(end)
                await self._rollover.roll_over_locked()
            end = self._pipeline.end_offset
            count = self._txns.keep_open(chain.spans, ledgers_before(chain.spans, end, offset))
            await self._drop_head_locked(count)

    async def apply_retention(self, now_ms: int, config: TopicConfig) -> int:
        """Delete the oldest closed ledgers beyond the retention limits; returns how many.

        By time: ledgers whose newest entry is more than ``retention_ms`` old.
        By size: the oldest ledgers while the segment holds more than
        ``retention_bytes``. The ledger being written is never deleted.
        """
        if config.retention_ms < 0 and config.retention_bytes < 0:
            return 0
        self._life.check_readable()
        async with self._chain.lock:
            spans = self._chain.spans
            count = self._txns.keep_open(spans, ledgers_past_retention(spans, now_ms, config))
            await self._drop_head_locked(count)
            return count

    async def _drop_head_locked(self, count: int) -> None:
        if count == 0:
            return
        chain = self._chain
        dropped, kept = chain.spans[:count], chain.spans[count:]
        start = kept[0].first_offset if kept else self._pipeline.end_offset
        await chain.write_record(self._recorder.record_of(kept, start=start))
        chain.set_spans(kept, start)
        self._reads.forget_hints()
        log.info("segment %s: deleted %d ledgers, start offset now %d", self._name, count, start)
        self._txns.ledgers_deleted(dropped[-1].ledger_id)
        await chain.delete_ledgers(dropped)
