"""LedgerSegment: one segment stored as a chain of ledgers (Pulsar's managed ledger).

**Appends** go to one open ledger. Each append is one entry (``broker.segments.entry``)
whose base offset is the segment's end as submitted so far; it is handed to
``LedgerHandle.add_async`` without awaiting anything in between, so entries,
offsets and confirmations keep the order of the calls, and concurrent appends
are group-committed by the ledger layer. The end offset readers see moves only
as entries are confirmed, contiguously. If an add fails, the ledger fails every
later add, and so does the segment (``usable`` turns False; the owner reloads
it). A fenced ledger means another broker recovered the segment: appends then
raise ``WrongHostError``.

**Rollover**: once the open ledger holds ``ledger_rollover_bytes`` (checked on
append) or is ``ledger_rollover_ms`` old with an entry (``tick``), appends
wait while the old ledger drains, a new ledger is created and compare-and-set
into the segment record, then the old ledger is closed. A crash after the CAS
and before the close is harmless: ledgers other than the writer's are always
opened with recovery, which closes them.

**Recovery** (``load``): the record's last ledger is opened with recovery
(fencing any previous writer), its entry headers are scanned for its end
offset, its offset index and the writers' last event numbers, and a fresh
ledger is started at that end (an empty last ledger is replaced, not kept).

**Writers** (exactly-once): each numbered append records writer id -> (last
event number, time) in memory; the entry header carries the same pair, so the
data and the attribute cannot disagree. Whenever the record gains a ledger
(rollover, load) and when the segment is sealed or closed cleanly, the record
also gets a snapshot of the table, taken while nothing is unconfirmed (after
the old ledger drained): recovery is that snapshot plus the headers of the
record's last ledger (``broker.segments.recovery``). Writers idle longer than
``writer_expiry_ms`` are dropped at each snapshot and maintenance tick.

**Truncation and retention** delete whole closed ledgers from the head; the
record is changed first, then the ledgers deleted, so a crash in between leaves
an orphan ledger, never a record naming a deleted one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from bisect import bisect_right
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

from broker.api import (
    AppendResult,
    Block,
    Isolation,
    ReadBatch,
    SegmentInfo,
    SegmentLedger,
    SegmentRange,
    SegmentState,
    TopicConfig,
)
from broker.errors import (
    BrokerError,
    BrokerShuttingDownError,
    EventTooLargeError,
    InvalidArgumentError,
    InvalidEventNumberError,
    NoSuchSegmentError,
    OffsetOutOfRangeError,
    SegmentSealedError,
    WrongHostError,
)
from broker.metrics import observe_append, observe_txn_buffer_recovery, observe_txn_buffer_snapshot
from broker.segments.block_limits import check_block_size
from broker.segments.entry import MAX_WRITER_ID_BYTES, EntryKind, encode_entry
from broker.segments.names import make_segment_name, segment_path
from broker.segments.offset_index import LedgerSpan, ReadHints
from broker.segments.reads import find_entry, read_blocks, txn_id_of
from broker.segments.records import SegmentRecord, WriterState
from broker.segments.recovery import recover_chain
from broker.segments.retention import ledgers_before, ledgers_past_retention
from broker.segments.transactions import LedgerSegmentLog, TxnOffsets, check_txn_id
from broker.segments.writers import DEFAULT_WRITER_EXPIRY_MS, WriterTable
from ledger.api import MetadataStore
from ledger.client.handle import LedgerHandle
from ledger.client.ledger_client import LedgerClient
from ledger.errors import (
    BadVersionError,
    LedgerError,
    LedgerFencedError,
    NoNodeError,
    NoSuchEntryError,
    NoSuchLedgerError,
)
from txnbuffer.api import EntryKind as TxnKind
from txnbuffer.api import LoggedEntry, Position, SnapshotPolicy, SnapshotStore, TxnId
from txnbuffer.buffer import TransactionBuffer

__all__ = ["LedgerSegment"]

log = logging.getLogger(__name__)


class _Life(Enum):
    OPEN = "open"
    CLOSING = "closing"
    CLOSED = "closed"
    DELETED = "deleted"


@dataclass(slots=True, eq=False)
class _Pending:
    """An entry handed to the ledger and not yet confirmed."""

    span: LedgerSpan
    base_offset: int
    event_count: int
    time_ms: int
    future: asyncio.Future[int]
    kind: EntryKind = EntryKind.DATA
    txn_id: TxnId | None = None


class LedgerSegment:
    """A segment owned by this broker, implementing ``broker.api.SegmentHandle``.

    Build it with ``LedgerSegment.load``, never directly.
    """

    def __init__(
        self, ledgers: LedgerClient, store: MetadataStore, *, topic: str, number: int,
        key_low: float, key_high: float, config: TopicConfig, clock: Callable[[], float],
        record: SegmentRecord, record_version: int, spans: list[LedgerSpan], end_offset: int,
        writers: dict[str, WriterState], writer_expiry_ms: int = DEFAULT_WRITER_EXPIRY_MS,
        txn_store: SnapshotStore | None = None,
        txn_snapshots: SnapshotPolicy | None = None,
    ) -> None:
        self._ledgers = ledgers
        self._store = store
        self._topic = topic
        self._number = number
        self._name = make_segment_name(topic, number)
        self._path = segment_path(topic, number)
        self._key_low = key_low
        self._key_high = key_high
        self._config = config
        self._clock = clock
        self._max_entry_bytes = ledgers.config.max_entry_bytes
        self._record_version = record_version
        self._start = record.start_offset
        self._sealed = record.sealed
        #: Sealed and every append accepted before the seal durable: the end is final.
        self._end_final = record.sealed
        self._spans = spans
        self._firsts = [span.first_offset for span in spans]
        self._end = end_offset
        self._next_offset = end_offset
        self._writers = WriterTable(writers, writer_expiry_ms)
        # The writer snapshot the record holds now (rewritten as is by record
        # writes that take no new one).
        self._snapshot_ledger = record.writers_ledger
        self._snapshot: Mapping[str, WriterState] = record.writers
        self._unconfirmed: deque[_Pending] = deque()
        self._failure: Exception | None = None
        self._life = _Life.OPEN
        self._chain_lock = asyncio.Lock()
        self._open_lock = asyncio.Lock()
        self._switching: asyncio.Future[None] | None = None
        # Appends waiting, in call order, behind a rollover (see ``append``).
        self._gate = asyncio.Lock()
        self._queued = 0
        self._data_event = asyncio.Event()
        self._hints = ReadHints()
        # The transaction buffer (user topics only; system topics take no transactions).
        policy = txn_snapshots or SnapshotPolicy()
        self._buffer = (None if txn_store is None else TransactionBuffer(
            self._name, txn_store, snapshot_every_changes=policy.every_changes,
            snapshot_every_ms=policy.every_ms, chunk_bytes=policy.chunk_bytes or None))
        self._txn_offsets = TxnOffsets()

    # ------------------------------------------------------------- loading

    @classmethod
    async def load(
        cls, ledgers: LedgerClient, store: MetadataStore, *, topic: str, number: int,
        key_low: float, key_high: float, config: TopicConfig,
        clock: Callable[[], float], writer_expiry_ms: int = DEFAULT_WRITER_EXPIRY_MS,
        txn_store: SnapshotStore | None = None, txn_snapshots: SnapshotPolicy | None = None,
    ) -> LedgerSegment:
        """Recover the segment from its record and start a fresh ledger for appends.

        With ``txn_store`` the segment takes transactional appends and owns a
        transaction buffer, recovered here (its snapshot, then a replay of the
        ledgers after it) before the segment is returned.

        Raises ``NoSuchSegmentError`` if it has no record, ``WrongHostError`` if
        another broker changed the record meanwhile, ``LedgerError`` if the
        ledger service fails.
        """
        chain = await recover_chain(ledgers, store, topic, number)
        segment = cls(
            ledgers, store, topic=topic, number=number, key_low=key_low, key_high=key_high,
            config=config, clock=clock, record=chain.record, record_version=chain.version,
            spans=chain.spans, end_offset=chain.end_offset, writers=chain.writers,
            writer_expiry_ms=writer_expiry_ms, txn_store=txn_store, txn_snapshots=txn_snapshots,
        )
        if not chain.record.sealed:
            await segment._start_ledger(replacing=chain.empty)
        if segment._buffer is not None:
            started = time.perf_counter()
            await segment._buffer.recover(
                LedgerSegmentLog(segment._spans, segment._reader, segment._txn_offsets))
            observe_txn_buffer_recovery(time.perf_counter() - started)
        log.info("loaded segment %s: offsets [%d, %d), %d ledgers", segment.name,
                 segment.start_offset, segment.end_offset, len(chain.spans))
        return segment

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

    # ---------------------------------------------------------- properties

    @property
    def name(self) -> str:
        """``"<topic>/<number>"``."""
        return self._name

    @property
    def start_offset(self) -> int:
        """The offset of the first readable event."""
        return self._start

    @property
    def end_offset(self) -> int:
        """The offset the next event will get, as far as readers can see."""
        return self._end

    @property
    def sealed(self) -> bool:
        """Whether the segment takes no more appends."""
        return self._sealed

    @property
    def usable(self) -> bool:
        """False once closed, deleted, or failed; the owner should load it again."""
        return self._life is _Life.OPEN and self._failure is None

    @property
    def failure(self) -> Exception | None:
        """Why appends fail for good (``WrongHostError``: another broker took it), or None."""
        return self._failure

    @property
    def txn_buffer(self) -> TransactionBuffer | None:
        """The segment's transaction buffer (None for a system topic's segment)."""
        return self._buffer

    @property
    def committed_end(self) -> int:
        """The offset a ``read_committed`` reader is served up to (exclusive).

        The offset of the earliest open transaction's first entry, or the end.
        """
        buffer = self._buffer
        if buffer is None or buffer.ongoing_count == 0:
            return self._end
        limit = buffer.max_read_position
        offset = self._txn_offsets.offset_at(Position(limit.ledger_id, limit.entry_id + 1))
        return self._end if offset is None else min(offset, self._end)

    @property
    def config(self) -> TopicConfig:
        """The topic configuration in force."""
        return self._config

    def set_config(self, config: TopicConfig) -> None:
        """Apply a changed topic configuration (rollover, limits; retention on next tick)."""
        self._config = config

    # -------------------------------------------------------------- append

    async def last_event_number(self, writer_id: str) -> int:
        """The last event number recorded for ``writer_id``, -1 if none.

        Answered once every append submitted so far is durable (see ``_settle``).
        """
        self._check_readable()
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
        if self._failure is not None:
            raise self._failure_error()

    @property
    def writer_count(self) -> int:
        """How many writers the segment remembers."""
        return len(self._writers)

    async def append(
        self, blocks: Sequence[Block], writer_id: str, last_event_number: int, *,
        txn_id: bytes = b"",
    ) -> AppendResult:
        """See ``SegmentHandle.append``.

        A ``last_event_number`` of -1 means the blocks carry no event numbers
        (unary Produce): they are written without de-duplication. Otherwise
        the events are numbered consecutively, the first one
        ``last_event_number - (events - 1)``: a call whose last number is not
        above the writer's recorded one is a duplicate; one whose numbers
        begin at or below it and end above it overlaps what was written and
        raises ``InvalidEventNumberError``.

        A non-empty ``txn_id`` (16 bytes) writes a ``TXN_DATA`` entry of that
        transaction: ``read_committed`` readers see it only once a commit
        marker for it is written (``write_marker``). The coordinator checks the
        transaction is open; the segment only writes.
        """
        self._check_appendable()
        event_count, data_bytes = self._check_blocks(blocks, writer_id, last_event_number)
        kind = EntryKind.DATA
        if txn_id:
            self._check_txn(txn_id)
            kind = EntryKind.TXN_DATA
        started = time.perf_counter()
        result = await self._append_entry(blocks, writer_id, last_event_number, event_count,
                                          kind, txn_id)
        if not result.duplicate:
            observe_append(self._topic, event_count, data_bytes, time.perf_counter() - started)
        return result

    async def write_marker(self, kind: EntryKind, txn_id: bytes) -> int:
        """Write a commit or abort marker of ``txn_id`` (an entry of no events), once durable.

        Returns the segment's offset at the marker (markers take no offset).

        Raises:
            InvalidArgumentError: ``kind`` is not a marker, a bad txn id, or a
                segment without a transaction buffer (a system topic's).
            WrongHostError, LedgerError: as ``append``. A sealed segment takes
                markers (``_write_marker_after_seal``).
        """
        if kind not in (EntryKind.COMMIT_MARKER, EntryKind.ABORT_MARKER):
            raise InvalidArgumentError(f"{kind.name} is not a marker kind")
        self._check_readable()
        self._check_txn(txn_id)
        if self._sealed:
            return await self._write_marker_after_seal(kind, txn_id)
        self._check_appendable()
        result = await self._append_entry((), "", -1, 0, kind, txn_id)
        return result.offset

    async def _write_marker_after_seal(self, kind: EntryKind, txn_id: bytes) -> int:
        """A marker for a sealed segment, in a ledger started for it and closed again.

        A seal stops data, not the fate of transactions written before it:
        their commit or abort must still be recorded here (read_committed
        readers wait for it at ``max_read_position``, and only then reach
        the end of the segment). The segment's end offset does not move.
        """
        if self._failure is not None:
            raise self._failure_error()
        async with self._chain_lock:
            self._check_readable()
            await self._start_ledger(replacing=[])
            span = self._spans[-1]
            try:
                submitted = self._submit((), "", -1, 0, kind, txn_id)
                if not isinstance(submitted, AppendResult):
                    await asyncio.shield(submitted[1])
            finally:
                span.writing = False
                if span.handle is not None:
                    with contextlib.suppress(LedgerError):
                        await span.handle.close()
                    span.length_bytes = span.handle.length
                await self._write_record(self._record_of(self._spans, snapshot=True))
        self._wake()
        return self._end

    def _check_txn(self, txn_id: bytes) -> None:
        check_txn_id(txn_id)
        if self._buffer is None:
            raise InvalidArgumentError(f"segment {self._name} takes no transactions")

    async def _append_entry(
        self, blocks: Sequence[Block], writer_id: str, last_event_number: int,
        event_count: int, kind: EntryKind, txn_id: bytes,
    ) -> AppendResult:
        if self._queued or self._switching is not None or self._should_roll(self._now_ms()):
            # Appends that must wait (for a rollover) wait in call order, and
            # every later call queues behind them: a later block overtaking an
            # earlier one would take its offset, or make it look a duplicate.
            self._queued += 1
            try:
                async with self._gate:
                    await self._until_writable()
                    self._check_appendable()  # closing or sealing: no more entries
                    submitted = self._submit(blocks, writer_id, last_event_number,
                                             event_count, kind, txn_id)
            finally:
                self._queued -= 1
        else:
            submitted = self._submit(blocks, writer_id, last_event_number, event_count,
                                     kind, txn_id)
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
                await self._roll_over()
            else:
                return
            self._check_appendable()

    def _submit(
        self, blocks: Sequence[Block], writer_id: str, last_event_number: int, event_count: int,
        kind: EntryKind = EntryKind.DATA, txn_id: bytes = b"",
    ) -> AppendResult | tuple[int, asyncio.Future[int]]:
        """Hand the entry to the ledger, without awaiting: offsets follow the call order.

        Returns a duplicate's result, or the base offset and the add's future.
        """
        if self._writers.is_duplicate(writer_id, last_event_number, event_count):
            return AppendResult(-1, 0, last_event_number, duplicate=True)
        span = self._spans[-1]
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
            self._fail(error)
            raise self._failure_error() from error
        self._next_offset = base + event_count
        span.submitted_bytes += len(data)
        span.note_entry(len(span.bases), base, base + event_count)
        self._writers.note(writer_id, last_event_number, time_ms)
        self._unconfirmed.append(_Pending(span, base, event_count, time_ms, future, kind,
                                          txn_id_of(txn_id) if txn_id else None))
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
                self._fail(error)
                continue
            entry_id = future.result()
            head.span.last_entry_id = entry_id
            head.span.last_entry_ms = head.time_ms
            self._end = head.base_offset + head.event_count
            buffer = self._buffer
            if buffer is not None:
                position = Position(head.span.ledger_id, entry_id)
                self._txn_offsets.note(position, head.kind, head.txn_id, head.base_offset)
                buffer.on_entry(LoggedEntry(position, TxnKind(head.kind), head.txn_id))
            advanced = True
        if advanced:
            self._wake()

    def _fail(self, error: BaseException) -> None:
        if self._failure is not None:
            return
        if isinstance(error, LedgerFencedError):
            log.info("segment %s: its ledger was fenced; another broker owns it", self._name)
            self._failure = WrongHostError(self._name)
        else:
            log.warning("segment %s: ledger write failed, no more appends: %s",
                        self._name, error)
            self._failure = error if isinstance(error, Exception) else LedgerError(str(error))

    def _failure_error(self) -> Exception:
        failure = self._failure
        if isinstance(failure, WrongHostError):
            return WrongHostError(self._name)
        return failure or LedgerError(f"segment {self._name} failed")

    async def _drain(self) -> None:
        """Wait until every entry handed to the ledger is confirmed (or failed)."""
        while self._unconfirmed:
            await asyncio.wait([self._unconfirmed[-1].future])
        if self._failure is not None:
            raise self._failure_error()

    # ------------------------------------------------------------ rollover

    def _should_roll(self, now_ms: int) -> bool:
        if self._sealed or not self._spans or not self._spans[-1].writing:
            return False
        span = self._spans[-1]
        if span.submitted_bytes == 0:
            return False
        if span.submitted_bytes >= self._config.ledger_rollover_bytes:
            return True
        return now_ms - span.created_ms >= self._config.ledger_rollover_ms

    async def tick(self, now_ms: int) -> None:
        """Periodic work: forget idle writers; roll the ledger over if too old or too big."""
        if not self.usable:
            return
        self._expire_writers(now_ms)
        if self._switching is None and self._should_roll(now_ms):
            await self._roll_over()
        if self._buffer is not None:
            try:
                started = time.perf_counter()
                if await self._buffer.maybe_snapshot():
                    observe_txn_buffer_snapshot(time.perf_counter() - started)
            except (BrokerError, LedgerError) as error:
                log.warning("segment %s: transaction buffer snapshot failed: %s",
                            self._name, error)

    def _expire_writers(self, now_ms: int) -> None:
        """Forget writers idle longer than ``writer_expiry_ms``."""
        expired = self._writers.expire(now_ms)
        if expired:
            log.info("segment %s: forgot %d writers idle for over %d ms", self._name,
                     expired, self._writers.expiry_ms)

    async def roll_over(self) -> int:
        """Start a new ledger now unless the open one is empty; its first offset.

        Every append submitted after this returns lands at or after that offset.
        """
        self._check_appendable()
        async with self._chain_lock:
            self._check_appendable()
            if self._spans[-1].submitted_bytes:
                await self._roll_over_locked()
            return self._spans[-1].first_offset

    async def _roll_over(self) -> None:
        async with self._chain_lock:
            if self.usable and self._should_roll(self._now_ms()):
                await self._roll_over_locked()

    async def _roll_over_locked(self) -> None:
        switched: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._switching = switched
        try:
            await self._drain()
            old = self._spans[-1]
            old_handle = old.handle
            if old_handle is None:  # pragma: no cover - the open span always has its writer
                raise RuntimeError(f"segment {self._name} has no writer")
            old.writing = False
            old.length_bytes = old_handle.length
            try:
                await self._start_ledger(replacing=[])
            except BaseException:
                old.writing = True
                old.length_bytes = -1
                raise
            log.info("segment %s rolled over from ledger %d to %d at offset %d", self._name,
                     old.ledger_id, self._spans[-1].ledger_id, self._end)
            try:
                await old_handle.close()
            except LedgerError as error:
                log.warning("segment %s: closing ledger %d failed: %s", self._name,
                            old.ledger_id, error)
        finally:
            self._switching = None
            switched.set_result(None)

    # ---------------------------------------------------------------- read

    async def read(self, offset: int, max_bytes: int,
                   isolation: Isolation = Isolation.READ_COMMITTED) -> ReadBatch:
        """See ``SegmentHandle.read``: whole entries from the one holding ``offset``.

        ``READ_COMMITTED`` (the default) serves entries up to the transaction
        buffer's ``max_read_position`` (``committed_end`` in offsets) and
        leaves out aborted transactions' entries; ``READ_UNCOMMITTED`` every
        data entry. Markers are never served. ``next_offset`` says where the
        next read continues (past entries left out).
        """
        self._check_readable()
        buffer = self._buffer
        committed = None
        if buffer is not None and isolation is Isolation.READ_COMMITTED:
            if not buffer.ready:
                await buffer.wait_ready()
                self._check_readable()
            committed = buffer
        start, end = self._start, self._end
        if offset < start or offset > end:
            raise OffsetOutOfRangeError(self._name, offset, start, end)
        limit = end if committed is None else self.committed_end
        if offset >= limit:
            return ReadBatch([], end, self._end_final and offset >= end, offset)
        span = self._spans[bisect_right(self._firsts, offset) - 1]
        try:
            handle = await self._reader(span)
            last_entry_id = span.last_entry_id if span.writing else handle.last_add_confirmed
            entry_id = await find_entry(span, handle, offset, last_entry_id, self._hints)
            blocks, next_entry, next_offset = await read_blocks(
                span, handle, entry_id, last_entry_id, offset, max(max_bytes, 1), committed)
        except (NoSuchLedgerError, NoSuchEntryError):
            self._check_readable()
            if offset < self._start:  # truncated while we read
                raise OffsetOutOfRangeError(self._name, offset, self._start, self._end) from None
            raise
        if next_entry <= last_entry_id:
            self._hints.put(next_offset, span.ledger_id, next_entry)
        end = self._end
        return ReadBatch(blocks, end, self._end_final and next_offset >= end, next_offset)

    async def _reader(self, span: LedgerSpan) -> LedgerHandle:
        if span.handle is not None:
            return span.handle
        async with self._open_lock:
            if span.handle is None:
                # Recovery closes a ledger a crashed rollover left open; for a
                # closed ledger it only reads the metadata.
                span.handle = await self._ledgers.open(span.ledger_id, recovery=True)
            return span.handle

    async def wait_for_data(self, offset: int, timeout_s: float,
                            isolation: Isolation = Isolation.READ_COMMITTED) -> bool:
        """See ``SegmentHandle.wait_for_data``: woken by confirmations and seals.

        ``READ_COMMITTED`` waits for ``committed_end`` to pass ``offset``.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        committed = self._buffer is not None and isolation is Isolation.READ_COMMITTED
        while True:
            self._check_readable()
            end = self.committed_end if committed else self._end
            if end > offset or (self._end_final and end >= self._end):
                return True
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            event = self._data_event
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(remaining):
                    await event.wait()

    def _wake(self) -> None:
        self._data_event.set()
        self._data_event = asyncio.Event()

    # ---------------------------------------------------------------- info

    def info(self) -> SegmentInfo:
        """Offsets, state, ledgers and bytes now."""
        state = SegmentState.SEALED if self._sealed else SegmentState.OPEN
        return SegmentInfo(
            segment=SegmentRange(self._name, self._number, self._key_low, self._key_high,
                                 state, self._start, self._end),
            ledgers=tuple(SegmentLedger(span.ledger_id, span.first_offset, not span.writing)
                          for span in self._spans),
            length_bytes=sum(span.confirmed_length() for span in self._spans),
        )

    # -------------------------------------------------- truncation, retention

    async def truncate(self, offset: int) -> SegmentInfo:
        """See ``SegmentHandle.truncate``; rolls over first when ``offset`` is the end."""
        self._check_readable()
        async with self._chain_lock:
            if offset > self._end:
                raise OffsetOutOfRangeError(self._name, offset, self._start, self._end)
            if offset <= self._start:
                return self.info()
            last = self._spans[-1] if self._spans else None
            if (last is not None and last.writing and last.first_offset < offset
                    and offset >= self._end):
                self._check_appendable()
                await self._roll_over_locked()
            await self._drop_head_locked(
                self._keep_open_txns(ledgers_before(self._spans, self._end, offset)))
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
        self._check_readable()
        async with self._chain_lock:
            count = self._keep_open_txns(ledgers_past_retention(self._spans, now_ms, config))
            await self._drop_head_locked(count)
            return count

    def _keep_open_txns(self, count: int) -> int:
        """``count`` capped so no ledger holding an open transaction's entries is dropped."""
        buffer = self._buffer
        if buffer is None or buffer.ongoing_count == 0 or not buffer.ready:
            return count
        first_open = buffer.max_read_position.ledger_id
        for index, span in enumerate(self._spans[:count]):
            if span.ledger_id >= first_open:
                return index
        return count

    async def _drop_head_locked(self, count: int) -> None:
        if count == 0:
            return
        dropped, kept = self._spans[:count], self._spans[count:]
        start = kept[0].first_offset if kept else self._end
        await self._write_record(self._record_of(kept, start=start))
        self._set_spans(kept)
        self._start = start
        self._hints.clear()
        log.info("segment %s: deleted %d ledgers, start offset now %d", self._name, count, start)
        if self._buffer is not None:
            self._buffer.on_ledger_deleted(dropped[-1].ledger_id)
        await self._delete_ledgers(dropped)

    async def _delete_ledgers(self, spans: list[LedgerSpan]) -> None:
        for span in spans:
            try:
                await self._ledgers.delete(span.ledger_id)
            except LedgerError as error:
                log.warning("segment %s: ledger %d left behind: %s", self._name,
                            span.ledger_id, error)

    # ------------------------------------------------------- seal, close, delete

    async def seal(self) -> SegmentInfo:
        """Refuse further appends, close the ledger and record the seal. Idempotent."""
        self._check_readable()
        async with self._chain_lock:
            if self._sealed:
                return self.info()
            self._sealed = True  # appends from now on fail at once
            await self._drain()
            last = self._spans[-1]
            if last.writing and last.handle is not None:
                await last.handle.close()
                last.writing = False
                last.length_bytes = last.handle.length
            await self._write_record(self._record_of(self._spans, snapshot=True))
            # Only now may readers be told the end: appends accepted before
            # the seal were still landing during the drain.
            self._end_final = True
            self._wake()
            log.info("segment %s sealed at offset %d", self._name, self._end)
            return self.info()

    async def close(self) -> None:
        """Finish the appends under way and close the open ledger (graceful shutdown)."""
        if self._life is not _Life.OPEN:
            return
        self._life = _Life.CLOSING
        self._wake()
        async with self._chain_lock:
            with contextlib.suppress(Exception):
                await self._drain()
            await self._save_snapshot()
            last = self._spans[-1] if self._spans else None
            if last is not None and last.writing and last.handle is not None:
                try:
                    await last.handle.close()
                except LedgerError as error:
                    log.info("segment %s: ledger %d not closed: %s", self._name,
                             last.ledger_id, error)
            self._life = _Life.CLOSED

    async def _save_snapshot(self) -> None:
        """On a clean close, once drained: record the writer table if it changed."""
        if self._failure is not None or self._unconfirmed or not self._spans:
            return
        self._expire_writers(self._now_ms())
        if (self._writers.matches(self._snapshot)
                and self._snapshot_ledger == self._spans[-1].ledger_id):
            return
        try:
            await self._write_record(self._record_of(self._spans, snapshot=True))
        except Exception as error:  # the next owner recovers from the headers
            log.info("segment %s: writer snapshot not saved on close: %s", self._name, error)

    async def delete(self) -> None:
        """Delete every ledger of the segment, then its record. Later calls: NoSuchSegment."""
        self._life = _Life.DELETED
        self._wake()
        async with self._chain_lock:
            with contextlib.suppress(Exception):
                await self._drain()
            last = self._spans[-1] if self._spans else None
            if last is not None and last.writing and last.handle is not None:
                with contextlib.suppress(LedgerError):
                    await last.handle.close()
            await self._delete_ledgers(self._spans)
            with contextlib.suppress(NoNodeError):
                await self._store.delete(self._path)

    # ------------------------------------------------------------- helpers

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    def _check_readable(self) -> None:
        if self._life is _Life.DELETED:
            raise NoSuchSegmentError(self._name)
        if self._life is not _Life.OPEN:
            raise BrokerShuttingDownError(f"segment {self._name} is closed")

    def _check_appendable(self) -> None:
        self._check_readable()
        if self._sealed:
            raise SegmentSealedError(self._name, self._end)
        if self._failure is not None:
            raise self._failure_error()

    def _set_spans(self, spans: list[LedgerSpan]) -> None:
        self._spans = spans
        self._firsts = [span.first_offset for span in spans]

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
            ledgers=tuple(span.to_ref() for span in spans),
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
            self._life = _Life.DELETED
            self._wake()
            raise NoSuchSegmentError(self._name) from None
