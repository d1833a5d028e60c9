"""The append pipeline: number, submit to the ledger in call order, confirm in order.

``AppendPipeline`` is the part of a ``LedgerSegment`` that owns the entries
handed to the ledger and not yet confirmed, the offsets (the next one to give,
and the end readers see, which moves only as entries are confirmed,
contiguously) and the writer table. Each entry is handed to
``WriteHandle.add_async`` without awaiting anything in between, so entries,
offsets and confirmations keep the order of the calls. If an add fails, the
ledger fails every later add, and the pipeline fails the segment through its
``SegmentLife`` (given, not owned).

Constant Python work per block: blocks are checked by size and count only,
and the entry is encoded around them (``broker.segments.entry``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from broker.api import AppendResult, Block
from broker.errors import EventTooLargeError, InvalidArgumentError, InvalidEventNumberError
from broker.segments.block_limits import check_block_size
from broker.segments.entry import MAX_WRITER_ID_BYTES, EntryKind, encode_entry
from broker.segments.life import SegmentLife
from broker.segments.offset_index import LedgerSpan
from broker.segments.writers import WriterTable
from ledger.errors import LedgerError
from txnbuffer.api import TxnId

__all__ = ["AppendPipeline", "PendingEntry"]

log = logging.getLogger(__name__)


@dataclass(slots=True, eq=False)
class PendingEntry:
    """An entry handed to the ledger and not yet confirmed."""

    span: LedgerSpan
    base_offset: int
    event_count: int
    time_ms: int
    future: asyncio.Future[int]
    kind: EntryKind = EntryKind.DATA
    txn_id: TxnId | None = None


class AppendPipeline:
    """Entries on their way to the ledger, offsets, writers (a part of ``LedgerSegment``).

    Args:
        name: the segment's name, for errors and logs.
        end_offset: the recovered end: the offset the next event gets.
        writers: the recovered writer table.
        max_entry_bytes: the ledger's entry limit.
        life: the segment's life cycle, failed here when an add fails.
        wake: wakes the segment's readers (the end moved).
        now_ms: the segment's clock in milliseconds (entry times).
        on_durable: told of each confirmed entry, in order, with its entry id
            (the transaction buffer's notes), before the readers are woken.
    """

    def __init__(self, name: str, end_offset: int, writers: WriterTable, max_entry_bytes: int,
                 life: SegmentLife, wake: Callable[[], None], now_ms: Callable[[], int],
                 on_durable: Callable[[PendingEntry, int], None] | None) -> None:
        self._name = name
        self._end = end_offset
        self._next_offset = end_offset
        self._writers = writers
        self._max_entry_bytes = max_entry_bytes
        self._life = life
        self._wake = wake
        self._now_ms = now_ms
        self._on_durable = on_durable
        self._unconfirmed: deque[PendingEntry] = deque()

    @property
    def end_offset(self) -> int:
        """The offset the next event will get, as far as readers can see (confirmed)."""
        return self._end

    @property
    def writers(self) -> WriterTable:
        """The writer table (numbers recorded when submitted, see ``settle``)."""
        return self._writers

    @property
    def idle(self) -> bool:
        """Nothing handed to the ledger is unconfirmed."""
        return not self._unconfirmed

    async def settle(self) -> None:
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

    async def drain(self) -> None:
        """Wait until every entry handed to the ledger is confirmed (or failed)."""
        while self._unconfirmed:
            await asyncio.wait([self._unconfirmed[-1].future])
        if self._life.failure is not None:
            raise self._life.failure_error()

    def submit(
        self, span: LedgerSpan, blocks: Sequence[Block], writer_id: str,
        last_event_number: int, event_count: int, kind: EntryKind = EntryKind.DATA,
        txn_id: TxnId | None = None, contiguous: bool = False,
    ) -> AppendResult | tuple[int, asyncio.Future[int]]:
        """Hand the entry to ``span``'s ledger, without awaiting: offsets follow the call order.

        Returns a duplicate's result, or the base offset and the add's future.
        """
        first_offset = self._writers.duplicate_of(writer_id, last_event_number, event_count,
                                                  contiguous=contiguous)
        if first_offset is not None:
            return AppendResult(first_offset, 0, last_event_number, duplicate=True)
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

    def check_blocks(
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

    def expire_writers(self, now_ms: int) -> None:
        """Forget writers idle longer than ``writer_expiry_ms``."""
        expired = self._writers.expire(now_ms)
        if expired:
            log.info("segment %s: forgot %d writers idle for over %d ms", self._name,
                     expired, self._writers.expiry_ms)

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
            if self._on_durable is not None:
                self._on_durable(head, entry_id)
            advanced = True
        if advanced:
            self._wake()
