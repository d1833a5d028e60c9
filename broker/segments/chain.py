"""The segment's ledger chain and its record: compare-and-set, new ledgers, deletions.

The record (``broker.segments.records``) changes only by compare-and-set on the
version this broker last wrote: a failed CAS means another broker took the
segment (``WrongHostError``), a missing node that it was deleted. A new
ledger is created first and recorded second, so a crash in between leaves an
orphan ledger, never a record naming a ledger that does not exist.

A write whose answer is lost (``MetadataUnavailableError``: the connection
dropped after ZooKeeper may have applied it; a cancelled call) has an unknown
outcome, and nothing that is only safe if it failed may follow it. The record
is read back on the same session: ZooKeeper answers one session's requests in
order and the store sends them in order, so the read sees the write if it was
ever applied. The read decides (``_reconcile``): our bytes, the write was
applied (its version is adopted); the version we wrote on, it was not; another
version, someone else wrote (WrongHost). When the read fails too, the outcome
stays unknown: the segment fails (a plain failure, so the next use loads it
again from the record) and whatever the write would have replaced is left
alone. A ledger is deleted only after a read that shows no record names it
(``_forget_new_ledger``); otherwise it stays, an orphan at worst, which is safe.
"""

from __future__ import annotations

import asyncio
import logging

from broker.errors import NoSuchSegmentError, WrongHostError
from broker.segments._core import SegmentCore
from broker.segments.life import ResidenceEvent
from broker.segments.offset_index import LedgerSpan
from broker.segments.records import SegmentRecord
from ledger.errors import BadVersionError, LedgerError, MetadataUnavailableError, NoNodeError

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
            sealed=self._life.sealed,
            end_offset=self._end if self._life.sealed else -1,
            writers_ledger=writers_ledger,
            writers=writers,
        )

    async def _write_record(self, record: SegmentRecord) -> None:
        """Compare-and-set the segment record on the version this broker last wrote.

        Returns once the record is written. Raises ``WrongHostError`` (someone
        else wrote it), ``NoSuchSegmentError`` (it is gone), or
        ``MetadataUnavailableError`` when it was not written or its outcome
        stays unknown (then the segment has failed: see the module docstring).
        """
        data = record.to_bytes()
        expected = self._record_version
        try:
            version = await self._store.set(self._path, data, expected)
        except BadVersionError:
            raise self._taken() from None
        except NoNodeError:
            raise self._gone() from None
        except MetadataUnavailableError as error:
            version = await self._reconcile(data, expected, error)
        except asyncio.CancelledError:
            # The call may still be applied: nothing this broker holds about the
            # record can be trusted any more. Loaded again, it is read afresh.
            self._life.fail(MetadataUnavailableError(
                f"segment {self._name}: record write cancelled; its outcome is unknown"))
            raise
        self._record_version = version
        self._snapshot_ledger = record.writers_ledger
        self._snapshot = record.writers

    async def _reconcile(self, data: bytes, expected: int,
                         error: MetadataUnavailableError) -> int:
        """After a lost answer: the version our write made, or raise why it did not land."""
        try:
            current = await self._store.get(self._path)
        except NoNodeError:
            raise self._gone() from None
        except LedgerError as read_error:
            log.warning("segment %s: record write outcome unknown (%s) and not readable "
                        "(%s); the segment loads again", self._name, error, read_error)
            self._life.fail(error)
            raise error from None
        if current.data == data and current.version > expected:
            log.info("segment %s: record write answer lost, but it was applied", self._name)
            return current.version
        if current.version == expected:
            log.info("segment %s: record write answer lost; it was not applied", self._name)
            raise error
        raise self._taken()

    def _taken(self) -> WrongHostError:
        log.info("segment %s: record changed by someone else; giving it up", self._name)
        return self._life.taken()

    def _gone(self) -> NoSuchSegmentError:
        self._life.move(ResidenceEvent.DELETE)
        self._wake()
        return NoSuchSegmentError(self._name)

    async def _start_ledger(self, replacing: list[LedgerSpan]) -> None:
        handle = await self._ledgers.create(properties={"folio.segment": self._name})
        span = LedgerSpan(handle.ledger_id, self._end, created_ms=self._now_ms(),
                          handle=handle, writing=True, indexed_end=self._end)
        expected = self._record_version
        try:
            # Nothing is unconfirmed here (a rollover drained the old ledger):
            # the table matches the data, so it is the new ledger's snapshot.
            await self._write_record(self._record_of([*self._spans, span], snapshot=True))
        except BaseException:
            await self._forget_new_ledger(handle.ledger_id, expected)
            raise
        self._set_spans([*self._spans, span])
        await self._delete_ledgers(replacing)

    async def _forget_new_ledger(self, ledger_id: int, expected: int) -> None:
        """The record write of a new ledger failed: delete the ledger only if no record names it.

        Only a read decides, never the error: a failed write may have been
        applied (module docstring). The ledger is deleted when the record is
        gone, or still at the version the write was made on (nobody applied
        ours) and does not name it. Otherwise (unreadable, named, or changed
        by someone else, who may have built on our write) it stays: an orphan
        ledger costs space, a record naming a deleted ledger loses events.
        """
        try:
            current = await asyncio.shield(self._store.get(self._path))
        except NoNodeError:
            current = None
        except LedgerError as error:
            log.warning("segment %s: new ledger %d left in place (record not readable: %s)",
                        self._name, ledger_id, error)
            return
        except asyncio.CancelledError:
            # Cancelled mid-check: leave the ledger (an orphan is safe) and stop.
            log.warning("segment %s: new ledger %d left in place (cancelled)",
                        self._name, ledger_id)
            raise
        if current is not None:
            try:
                named = ledger_id in {entry.ledger_id for entry
                                      in SegmentRecord.from_bytes(current.data).ledgers}
            except (ValueError, KeyError, TypeError):  # unreadable: it may name it
                named = True
            if named or current.version != expected:
                log.warning("segment %s: new ledger %d left in place (record version %d, "
                            "named: %s)", self._name, ledger_id, current.version, named)
                return
        try:
            await asyncio.shield(self._ledgers.delete(ledger_id))
        except LedgerError as error:
            log.warning("segment %s: unrecorded ledger %d left behind: %s", self._name,
                        ledger_id, error)
        except asyncio.CancelledError:
            log.warning("segment %s: unrecorded ledger %d left behind (cancelled)",
                        self._name, ledger_id)
            raise

    async def _delete_ledgers(self, spans: list[LedgerSpan]) -> None:
        for span in spans:
            try:
                await self._ledgers.delete(span.ledger_id)
            except LedgerError as error:
                log.warning("segment %s: ledger %d left behind: %s", self._name,
                            span.ledger_id, error)
