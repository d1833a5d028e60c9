"""The end of a segment's life on this broker: seal, clean close, hand-over, delete.

``SegmentLifecycle`` is the part of a ``LedgerSegment`` that carries these
out: it drains the pipeline, closes the open ledger and writes the record,
moving the segment's ``SegmentLife`` (its state tables: residence, seal,
failure) as it goes. It owns no state; the life does.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable

from broker.segments.chain import LedgerChain
from broker.segments.life import ResidenceEvent, SealStage, SegmentLife
from broker.segments.pipeline import AppendPipeline
from broker.segments.recorder import SegmentRecorder
from broker.segments.txns import SegmentTxns
from ledger.errors import LedgerError

__all__ = ["SegmentLifecycle"]

log = logging.getLogger(__name__)


class SegmentLifecycle:
    """Sealing, closing and deleting (a part of ``LedgerSegment``).

    Args:
        name: the segment's name, for logs.
        life: the state tables this part moves.
        chain: the ledgers and the record.
        pipeline: drained before the open ledger is closed.
        recorder: the record with the seal and the writer snapshot.
        txns: its recovery stops when the segment leaves this broker.
        wake: wakes the segment's readers (the end is final, or the segment gone).
    """

    def __init__(self, name: str, life: SegmentLife, chain: LedgerChain,
                 pipeline: AppendPipeline, recorder: SegmentRecorder, txns: SegmentTxns,
                 wake: Callable[[], None]) -> None:
        self._name = name
        self._life = life
        self._chain = chain
        self._pipeline = pipeline
        self._recorder = recorder
        self._txns = txns
        self._wake = wake

    async def seal(self) -> None:
        """Refuse further appends, close the ledger and record the seal. Idempotent."""
        self._life.check_readable()
        async with self._chain.lock:
            if self._life.sealed:
                return
            self._life.advance_seal(SealStage.SEALING)  # appends from now on fail at once
            await self._pipeline.drain()
            last = self._chain.spans[-1]
            if last.writing and last.handle is not None:
                await last.handle.close()
                last.writing = False
                last.length_bytes = last.handle.length
            try:
                await self._recorder.write(snapshot=True)
            except Exception as error:
                # Sealed in memory, not (known) in the record: this copy must not
                # answer a later seal "sealed already". Failed, it is loaded again
                # from the record, and sealed then.
                self._life.fail(error)
                raise
            # Only now may readers be told the end: appends accepted before
            # the seal were still landing during the drain.
            self._life.advance_seal(SealStage.SEALED)
            self._wake()
            log.info("segment %s sealed at offset %d", self._name, self._pipeline.end_offset)

    async def close(self) -> None:
        """Finish the appends under way and close the open ledger (graceful shutdown)."""
        await self._close_gracefully("")

    async def hand_over(self) -> None:
        """Another broker takes the segment: finish appends under way, close, refuse the rest.

        From the call on, new appends and reads fail ``WrongHostError``; the
        appends already handed to the ledger finish and are acknowledged, then
        the writer table is saved and the ledger closed, so the next owner's
        recovery finds it closed.
        """
        await self._close_gracefully(" on hand-over", moved=True)

    async def _close_gracefully(self, why: str, *, moved: bool = False) -> None:
        if not self._life.is_open:
            return
        self._life.move(ResidenceEvent.HAND_OVER if moved else ResidenceEvent.CLOSE)
        self._txns.stop_recovery()
        self._wake()
        async with self._chain.lock:
            with contextlib.suppress(Exception):
                await self._pipeline.drain()
            await self._save_snapshot()
            last = self._chain.spans[-1] if self._chain.spans else None
            if last is not None and last.writing and last.handle is not None:
                try:
                    await last.handle.close()
                except LedgerError as error:
                    log.info("segment %s: ledger %d not closed%s: %s", self._name,
                             last.ledger_id, why, error)
            self._life.move(ResidenceEvent.CLOSED)

    def abandon(self) -> None:
        """This broker lost the segment (session lost): refuse everything now, touch nothing.

        Appends not yet handed to the ledger fail ``WrongHostError``, and so do
        reads; the ledger stays open for the next owner to fence. An append
        already sent to the bookies may still complete: it is then durable, and
        the next owner's recovery keeps it.
        """
        self._life.move(ResidenceEvent.ABANDON)
        self._txns.stop_recovery()
        self._wake()

    def deleted_elsewhere(self) -> None:
        """Another broker deleted the segment (its record is gone): refuse everything now."""
        self._life.move(ResidenceEvent.DELETE)
        self._txns.stop_recovery()
        self._wake()

    def record_changed(self, version: int) -> None:
        """The segment record is at ``version`` now: if another broker wrote it, give up.

        This broker's own writes leave the record at the version it keeps;
        another's (a takeover, a seal by a scale elsewhere) fail the segment
        WrongHost, to be loaded again by the owner.
        """
        if version != self._chain.record_version and self._life.failure is None:
            log.info("segment %s: record changed by another broker; giving it up", self._name)
            self._life.taken()
            self._wake()

    async def _save_snapshot(self) -> None:
        """On a clean close, once drained: record the writer table if it changed."""
        if (self._life.failure is not None or not self._pipeline.idle
                or not self._chain.spans):
            return
        self._recorder.expire_writers()
        if (self._pipeline.writers.matches(self._chain.snapshot)
                and self._chain.snapshot_ledger == self._chain.spans[-1].ledger_id):
            return
        try:
            await self._recorder.write(snapshot=True)
        except Exception as error:  # the next owner recovers from the headers
            log.info("segment %s: writer snapshot not saved on close: %s", self._name, error)

    async def delete(self) -> None:
        """Delete every ledger of the segment, then its record. Later calls: NoSuchSegment."""
        self._life.move(ResidenceEvent.DELETE)
        self._txns.stop_recovery()
        self._wake()
        async with self._chain.lock:
            with contextlib.suppress(Exception):
                await self._pipeline.drain()
            last = self._chain.spans[-1] if self._chain.spans else None
            if last is not None and last.writing and last.handle is not None:
                with contextlib.suppress(LedgerError):
                    await last.handle.close()
            await self._chain.delete_ledgers(self._chain.spans)
            await self._chain.delete_record()
