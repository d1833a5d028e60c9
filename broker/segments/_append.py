"""The append path: check, number, submit to the ledger in call order, confirm in order.

Constant Python work per block: blocks are checked by size and count only,
and the entry is encoded around them (``broker.segments.entry``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence

from broker.api import AppendResult, Block
from broker.errors import (
    BrokerError,
    EventTooLargeError,
    InvalidArgumentError,
    InvalidEventNumberError,
    WrongHostError,
)
from broker.metrics import observe_append
from broker.segments._core import PendingEntry
from broker.segments._rollover import SegmentRollover
from broker.segments.block_limits import check_block_size
from broker.segments.entry import MAX_WRITER_ID_BYTES, EntryKind, encode_entry
from ledger.errors import LedgerError, LedgerFencedError
from txnbuffer.api import LoggedEntry, Position, TxnId

__all__ = ["SegmentAppends"]


class SegmentAppends(SegmentRollover):
    """Appends and writer numbering (a part of ``LedgerSegment``)."""

    async def last_event_number(self, writer_id: str) -> int:
        """The last event number recorded for ``writer_id``, -1 if none.

        Answered once every append submitted so far is durable (see ``_settle``).
        """
        self._life.check_readable()
        await self._settle()
        return self._writers.last_event_number(writer_id)

    async def _settle(self) -> None:
        """Wait until every append submitted so far is confirmed; raise if the segment failed.

        A writer's number is recorded when its append is submitted, before it
        is durable, so that a concurrent resend is seen as a duplicate. An
        answer that tells a writer its events are written (``AppendSetup``'s
        number, a duplicate's acknowledgement) must not count an append that
        could still fail: it waits for the pipeline first. If that append does
        fail, the segment fails with it, and the answer is that failure.
        """
        if self._unconfirmed:
            with contextlib.suppress(Exception):
                await asyncio.shield(self._unconfirmed[-1].future)
            # An add that failed just now may not have been seen yet (awaiting a
            # done future does not yield to its callbacks): see it before answering.
            if self._unconfirmed:
                self._on_confirmed(self._unconfirmed[0].future)
        if self._life.failure is not None:
            raise self._life.failure_error()

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
        self._life.check_appendable(self._end)
        event_count, data_bytes = self._check_blocks(blocks, writer_id, last_event_number)
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
        if self._queued or self._switching is not None or self._should_roll(self._now_ms()):
            # Appends that must wait (for a rollover) wait in call order, and
            # every later call queues behind them: a later block overtaking an
            # earlier one would take its offset, or make it look a duplicate.
            self._queued += 1
            failures = self._roll_failures
            try:
                async with self._gate:
                    if self._roll_failures != failures and self._roll_error is not None:
                        # A rollover failed while this append waited, failing the
                        # appends queued before it: landing this one would put a
                        # writer's later block after an earlier one that did not
                        # land (a flow's blocks land as a prefix of those sent).
                        raise self._roll_error
                    await self._until_writable()
                    self._life.check_appendable(self._end)  # closing or sealing: no more entries
                    submitted = self._submit(blocks, writer_id, last_event_number,
                                             event_count, kind, txn_id, contiguous)
            finally:
                self._queued -= 1
        else:
            submitted = self._submit(blocks, writer_id, last_event_number, event_count,
                                     kind, txn_id, contiguous)
        if isinstance(submitted, AppendResult):
            await self._settle()  # the first copy may still be on its way
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
            if self._switching is not None:
                await asyncio.shield(self._switching)
            elif self._should_roll(self._now_ms()):
                try:
                    await self._roll_over()
                except (BrokerError, LedgerError) as error:
                    self._roll_failures += 1
                    self._roll_error = error
                    raise
            else:
                return
            self._life.check_appendable(self._end)

    def _submit(
        self, blocks: Sequence[Block], writer_id: str, last_event_number: int, event_count: int,
        kind: EntryKind = EntryKind.DATA, txn_id: TxnId | None = None,
        contiguous: bool = False,
    ) -> AppendResult | tuple[int, asyncio.Future[int]]:
        """Hand the entry to the ledger, without awaiting: offsets follow the call order.

        Returns a duplicate's result, or the base offset and the add's future.
        """
        first_offset = self._writers.duplicate_of(writer_id, last_event_number, event_count,
                                                  contiguous=contiguous)
        if first_offset is not None:
            return AppendResult(first_offset, 0, last_event_number, duplicate=True)
        span = self._chain.spans[-1]
        handle = span.handle
        if handle is None:  # pragma: no cover - the open span always has its writer
            raise RuntimeError(f"segment {self._name} has no writer")
        base = self._next_offset
        time_ms = self._now_ms()
        data = encode_entry(kind, base, blocks, writer_id, last_event_number, time_ms, txn_id)
        if len(data) > self._max_entry_bytes:
            raise EventTooLargeError(len(data), self._max_entry_bytes, what="block")
        try:
            future = handle.add_async(data)
        except LedgerError as error:
            self._life.fail(error)
            raise self._life.failure_error() from error
        self._next_offset = base + event_count
        span.submitted_bytes += len(data)
        span.note_entry(len(span.bases), base, base + event_count)
        self._writers.note(writer_id, last_event_number, time_ms, base_offset=base,
                           event_count=event_count)
        self._unconfirmed.append(PendingEntry(span, base, event_count, time_ms, future, kind,
                                          txn_id))
        future.add_done_callback(self._on_confirmed)  # before shield's: end moves first
        return base, future

    def _check_blocks(
        self, blocks: Sequence[Block], writer_id: str, last_event_number: int
    ) -> tuple[int, int]:
        """Validate an append (constant work per block); returns its events and bytes."""
        recorded = self._writers.last_event_number(writer_id)
        if not blocks:
            raise InvalidEventNumberError("an append needs at least one block", recorded)
        if last_event_number < -1:
            raise InvalidEventNumberError(
                f"last_event_number must be >= -1, got {last_event_number}", recorded)
        if len(writer_id.encode("utf-8")) > MAX_WRITER_ID_BYTES:
            raise InvalidArgumentError(
                f"writer_id must be at most {MAX_WRITER_ID_BYTES} bytes of UTF-8")
        total = data_bytes = 0
        for block in blocks:
            count = block.event_count
            if count < 1:
                raise InvalidEventNumberError(
                    f"a block must hold at least one event, got event_count {count}", recorded)
            size = len(block.data)
            check_block_size(size)  # events against max_event_bytes: broker.segments.block_limits
            total += count
            data_bytes += size
        return total, data_bytes

    def _on_confirmed(self, _: asyncio.Future[int]) -> None:
        """Advance the end over the confirmed head of the pipeline, in order."""
        pending = self._unconfirmed
        advanced = False
        while pending and pending[0].future.done():
            head = pending.popleft()
            future = head.future
            error = LedgerError("append cancelled") if future.cancelled() else future.exception()
            if error is not None:
                self._life.fail(error)
                continue
            entry_id = future.result()
            head.span.last_entry_id = entry_id
            head.span.last_entry_ms = head.time_ms
            self._end = head.base_offset + head.event_count
            buffer = self._buffer
            if buffer is not None:
                position = Position(head.span.ledger_id, entry_id)
                if self._txn_deferred is not None:  # noted after the recovery's replay
                    self._txn_deferred.append(
                        (position, head.kind, head.txn_id, head.base_offset))
                else:
                    self._txn_offsets.note(position, head.kind, head.txn_id, head.base_offset)
                buffer.on_entry(LoggedEntry(position, head.kind, head.txn_id))
            advanced = True
        if advanced:
            self._wake()
