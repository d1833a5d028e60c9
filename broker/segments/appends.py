"""The append path: check, wait out a rollover in call order, submit, await the ledger.

``SegmentAppends`` is the part of a ``LedgerSegment`` that runs one append
through the other parts: numbering, submitting and confirming are the append
pipeline's (``broker.segments.pipeline``), the order of appends around a
rollover the rollover's (``broker.segments.rollover``), the transaction check
the transactions part's. It owns no state: one append costs one call into
each part, whatever its number of events.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from broker.api import AppendResult, Block
from broker.errors import NoSuchSegmentError, WrongHostError
from broker.metrics import observe_append
from broker.segments.chain import LedgerChain
from broker.segments.entry import EntryKind
from broker.segments.life import SegmentLife
from broker.segments.pipeline import AppendPipeline
from broker.segments.rollover import SegmentRollover
from broker.segments.txns import SegmentTxns
from ledger.errors import LedgerDeletedError, LedgerFencedError
from txnbuffer.api import TxnId

__all__ = ["SegmentAppends"]


class SegmentAppends:
    """Appends and writer numbering (a part of ``LedgerSegment``).

    Args:
        name, topic: the segment's name (errors) and its topic's (metrics).
        life: refuses appends to a segment closing, sealed or failed.
        chain: the open ledger is its last span.
        pipeline: numbers, submits and confirms.
        rollover: keeps the appends in order around a rollover.
        txns: whether the segment takes transactions.
    """

    def __init__(self, name: str, topic: str, life: SegmentLife, chain: LedgerChain,
                 pipeline: AppendPipeline, rollover: SegmentRollover, txns: SegmentTxns,
                 ) -> None:
        self._name = name
        self._topic = topic
        self._life = life
        self._chain = chain
        self._pipeline = pipeline
        self._rollover = rollover
        self._txns = txns

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
            self._txns.check()
            kind = EntryKind.TXN_DATA
        started = time.perf_counter()
        result = await self.append_entry(blocks, writer_id, last_event_number, event_count,
                                         kind, txn_id, contiguous)
        if not result.duplicate:
            observe_append(self._topic, event_count, data_bytes, time.perf_counter() - started)
        return result

    async def append_entry(
        self, blocks: Sequence[Block], writer_id: str, last_event_number: int,
        event_count: int, kind: EntryKind, txn_id: TxnId | None, contiguous: bool = False,
    ) -> AppendResult:
        """Submit one entry in call order and await it; its result (or a duplicate's).

        Raises ``WrongHostError`` when the ledger was fenced (another broker
        recovered the segment), ``NoSuchSegmentError`` when it was deleted (the
        segment was deleted through another broker; this copy is stale),
        ``LedgerError`` when the add failed.
        """
        if self._rollover.must_wait():
            submitted = await self._rollover.submit_in_turn(
                blocks, writer_id, last_event_number, event_count, kind, txn_id, contiguous)
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
        except LedgerDeletedError as error:
            raise NoSuchSegmentError(self._name) from error
        except LedgerFencedError as error:
            raise WrongHostError(self._name) from error
        return AppendResult(base, event_count, last_event_number)
