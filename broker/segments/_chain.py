"""The segment's ledger chain and its record: compare-and-set, new ledgers, deletions.

The record (``broker.segments.records``) changes only by compare-and-set on the
version this broker last wrote: a failed CAS means another broker took the
segment (``WrongHostError``), a missing node that it was deleted. A new
ledger is created first and recorded second, so a crash in between leaves an
orphan ledger, never a record naming a ledger that does not exist.
"""

from __future__ import annotations

import contextlib
import logging

from broker.errors import NoSuchSegmentError, WrongHostError
from broker.segments._core import SegmentCore, SegmentLife
from broker.segments.offset_index import LedgerSpan
from broker.segments.records import SegmentRecord
from ledger.errors import BadVersionError, LedgerError, NoNodeError

__all__ = ["SegmentChain"]

log = logging.getLogger(__name__)


class SegmentChain(SegmentCore):
    """Record CAS, starting a ledger, deleting ledgers (a part of ``LedgerSegment``)."""

    def _record_of(self, spans: list[LedgerSpan], *, start: int | None = None,
                   snapshot: bool = False) -> SegmentRecord:
        """The record for ``spans``; ``snapshot``: with a fresh writer snapshot.

        Take a snapshot only when nothing is unconfirmed (the table may hold
        numbers of entries not yet durable otherwise); without one, the
        record keeps the snapshot it has.
        """
        writers_ledger, writers = self._snapshot_ledger, self._snapshot
        if snapshot:
            self._expire_writers(self._now_ms())
            writers_ledger = spans[-1].ledger_id if spans else -1
            writers = self._writers.snapshot()
        return SegmentRecord(
            topic=self._topic, number=self._number,
            ledgers=tuple(span.to_record() for span in spans),
            start_offset=self._start if start is None else start,
            sealed=self._sealed,
            end_offset=self._end if self._sealed else -1,
            writers_ledger=writers_ledger,
            writers=writers,
        )

    async def _write_record(self, record: SegmentRecord) -> None:
        """Compare-and-set the segment record on the version this broker last wrote."""
        try:
            self._record_version = await self._store.set(
                self._path, record.to_bytes(), self._record_version)
            self._snapshot_ledger = record.writers_ledger
            self._snapshot = record.writers
        except BadVersionError:
            log.info("segment %s: record changed by someone else; giving it up", self._name)
            self._failure = WrongHostError(self._name)
            raise WrongHostError(self._name) from None
        except NoNodeError:
            self._life = SegmentLife.DELETED
            self._wake()
            raise NoSuchSegmentError(self._name) from None

    async def _start_ledger(self, replacing: list[LedgerSpan]) -> None:
        handle = await self._ledgers.create(properties={"folio.segment": self._name})
        span = LedgerSpan(handle.ledger_id, self._end, created_ms=self._now_ms(),
                          handle=handle, writing=True, indexed_end=self._end)
        try:
            # Nothing is unconfirmed here (a rollover drained the old ledger):
            # the table matches the data, so it is the new ledger's snapshot.
            await self._write_record(self._record_of([*self._spans, span], snapshot=True))
        except BaseException:
            with contextlib.suppress(LedgerError):
                await self._ledgers.delete(handle.ledger_id)
            raise
        self._set_spans([*self._spans, span])
        await self._delete_ledgers(replacing)

    async def _delete_ledgers(self, spans: list[LedgerSpan]) -> None:
        for span in spans:
            try:
                await self._ledgers.delete(span.ledger_id)
            except LedgerError as error:
                log.warning("segment %s: ledger %d left behind: %s", self._name,
                            span.ledger_id, error)
