"""The append path: check, wait out a rollover in call order, submit, await the ledger.

Numbering, submitting and confirming are the append pipeline's
(``broker.segments.pipeline``); here are the order of appends around a
rollover and the transaction check.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from broker.api import AppendResult, Block
from broker.errors import BrokerError, InvalidArgumentError, WrongHostError
from broker.metrics import observe_append
from broker.segments.rollover import SegmentRollover
from broker.segments.entry import EntryKind
from ledger.errors import LedgerError, LedgerFencedError
from txnbuffer.api import TxnId

__all__ = ["SegmentAppends"]


class SegmentAppends(SegmentRollover):
    """Appends and writer numbering (a part of ``LedgerSegment``)."""

    async def last_event_number(self, writer_id: str) -> int:
        """The last event number recorded for ``writer_id``, -1 if none.

        Answered once every append submitted so far is durable (see
        ``AppendPipeline.settle``).
        """
        self._life.check_readable()
        await self._pipeline.settle()
        return self._pipeline.writers.last_event_number(writer_id)

    async def append(
        self, blocks: Sequence[Block], writer_id: str, last_event_number: int, *,
        txn_id: TxnId | None = None, contiguous: bool = False,
    ) -> AppendResult:
        """See ``SegmentHandle.append``.

        A ``last_event_number`` of -1 means the blocks carry no event numbers
        (unary Produce): they are written without de-duplication. Otherwise
        the events are numbered consecutively, the first one
        ``last_event_number - (events - 1)``: a call whose last number is not
        above the writer's recorded one is a duplicate; one whose numbers
        begin at or below it and end above it overlaps what was written and
        raises ``InvalidEventNumberError``. A duplicate's result carries the
        offset its first copy got if it is one of the writer's last appends
        (``broker.segments.writers``), else -1.

        ``contiguous``: the writer numbers its events without gaps (a Kafka
        idempotent producer); a call that does not begin right after the
        writer's recorded number (at 0 for a new writer) raises
        ``InvalidEventNumberError`` and writes nothing. The check is made
        when the entry is numbered, against the segment's own (persisted)
        table, so it holds across reloads, restarts and moves.

        A ``txn_id`` writes a ``TXN_DATA`` entry of that
        transaction: ``read_committed`` readers see it only once a commit
        marker for it is written (``write_marker``). The coordinator checks the
        transaction is open; the segment only writes.
        """
        self._life.check_appendable(self._pipeline.end_offset)
        event_count, data_bytes = self._pipeline.check_blocks(blocks, writer_id,
                                                              last_event_number)
        kind = EntryKind.DATA
        if txn_id is not None:
            self._check_txn()
            kind = EntryKind.TXN_DATA
        started = time.perf_counter()
        result = await self._append_entry(blocks, writer_id, last_event_number, event_count,
                                          kind, txn_id, contiguous)
        if not result.duplicate:
            observe_append(self._topic, event_count, data_bytes, time.perf_counter() - started)
        return result

    def _check_txn(self) -> None:
        if self._buffer is None:
            raise InvalidArgumentError(f"segment {self._name} takes no transactions")

    async def _append_entry(
        self, blocks: Sequence[Block], writer_id: str, last_event_number: int,
        event_count: int, kind: EntryKind, txn_id: TxnId | None, contiguous: bool = False,
    ) -> AppendResult:
        if self._rollover.busy or self._should_roll(self._now_ms()):
            # Appends that must wait (for a rollover) wait in call order, and
            # every later call queues behind them: a later block overtaking an
            # earlier one would take its offset, or make it look a duplicate.
            # A rollover that fails fails the appends queued before it.
            async with self._rollover.turn():
                await self._until_writable()
                self._life.check_appendable(self._pipeline.end_offset)  # closing or sealing
                submitted = self._pipeline.submit(
                    self._chain.spans[-1], blocks, writer_id, last_event_number,
                    event_count, kind, txn_id, contiguous)
        else:
            submitted = self._pipeline.submit(self._chain.spans[-1], blocks, writer_id,
                                              last_event_number, event_count, kind, txn_id,
                                              contiguous)
        if isinstance(submitted, AppendResult):
            await self._pipeline.settle()  # the first copy may still be on its way
            return submitted
        base, future = submitted
        try:
            await asyncio.shield(future)
        except LedgerFencedError as error:
            raise WrongHostError(self._name) from error
        return AppendResult(base, event_count, last_event_number)

    async def _until_writable(self) -> None:
        """Wait out (or start) a rollover, until the open ledger takes appends."""
        while True:
            if not await self._rollover.wait_switch():
                if not self._should_roll(self._now_ms()):
                    return
                try:
                    await self._roll_over()
                except (BrokerError, LedgerError) as error:
                    self._rollover.failed(error)
                    raise
            self._life.check_appendable(self._pipeline.end_offset)
