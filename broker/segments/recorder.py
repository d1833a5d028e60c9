"""The segment record as the parts see it now, and new ledgers recorded with a writer snapshot.

``SegmentRecorder`` is the part of a ``LedgerSegment`` that puts the record
together from the parts that know its fields: the ledgers and the start
offset from the chain (``LedgerChain``, which writes it), the end offset and
the writer table from the append pipeline, the seal from the life cycle. It
owns no state of its own: the fields stay with their owners, so the record
can never disagree with them.

A writer snapshot is taken only when nothing is unconfirmed (the table may
hold numbers of entries not yet durable otherwise): a new ledger is started
after the old one drained, a seal after its drain.
"""

from __future__ import annotations

from collections.abc import Callable

from broker.segments.chain import LedgerChain
from broker.segments.life import SegmentLife
from broker.segments.offset_index import LedgerSpan
from broker.segments.pipeline import AppendPipeline
from broker.segments.records import SegmentRecord

__all__ = ["SegmentRecorder"]


class SegmentRecorder:
    """The segment record from the parts' fields (a part of ``LedgerSegment``).

    Args:
        chain: the ledgers, the start offset; writes the record.
        pipeline: the end offset and the writer table.
        life: whether the segment is sealed.
        now_ms: the segment's clock in milliseconds (writers' expiry).
    """

    def __init__(self, chain: LedgerChain, pipeline: AppendPipeline, life: SegmentLife,
                 now_ms: Callable[[], int]) -> None:
        self._chain = chain
        self._pipeline = pipeline
        self._life = life
        self._now_ms = now_ms

    def record_of(self, spans: list[LedgerSpan], *, start: int | None = None,
                  snapshot: bool = False) -> SegmentRecord:
        """The record for ``spans`` (from ``start``, default the chain's); ``snapshot``: with a
        fresh writer snapshot.

        Take a snapshot only when nothing is unconfirmed; without one, the
        record keeps the snapshot it has.
        """
        writers = None
        if snapshot:
            self.expire_writers()
            writers = self._pipeline.writers.snapshot()
        return self._chain.record_of(
            spans, start_offset=self._chain.start_offset if start is None else start,
            end_offset=self._pipeline.end_offset, sealed=self._life.sealed, writers=writers)

    def expire_writers(self) -> None:
        """Forget writers idle too long (before a snapshot: they are left out of it)."""
        self._pipeline.expire_writers(self._now_ms())

    async def write(self, *, snapshot: bool = False) -> None:
        """Write the record of the chain as it is (``LedgerChain.write_record`` raises)."""
        await self._chain.write_record(self.record_of(self._chain.spans, snapshot=snapshot))

    async def start_ledger(self, replacing: list[LedgerSpan]) -> None:
        """A new ledger from the end, recorded with a writer snapshot (``LedgerChain``)."""
        await self._chain.start_ledger(replacing, self._pipeline.end_offset,
                                       lambda spans: self.record_of(spans, snapshot=True))
