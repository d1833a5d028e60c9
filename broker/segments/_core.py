"""The state of a ``LedgerSegment`` and what every part of it uses.

``SegmentCore`` holds the fields (the ledger chain as ``LedgerSpan``s, offsets,
the writer table, the pipeline of unconfirmed entries, locks, the transaction
buffer) and the small helpers the parts share: the life checks, failing the
segment, draining the pipeline, waking readers, ``info``. The parts
(``_chain``, ``_rollover``, ``_append``, ``_markers``, ``_reading``, ``_head``,
``_lifecycle``) are mixins on it, composed in ``broker.segments.segment``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum

from broker.api import SegmentInfo, SegmentLedger, SegmentRange, SegmentState, TopicConfig
from broker.errors import (
    BrokerShuttingDownError,
    NoSuchSegmentError,
    SegmentSealedError,
    WrongHostError,
)
from broker.segments.entry import EntryKind
from broker.segments.names import make_segment_name, segment_path
from broker.segments.offset_index import LedgerSpan, ReadHints
from broker.segments.records import SegmentRecord, WriterState
from broker.segments.transactions import TxnOffsets
from broker.segments.writers import DEFAULT_WRITER_EXPIRY_MS, WriterTable
from ledger.api import LedgerService, MetadataStore
from ledger.errors import LedgerError, LedgerFencedError
from txnbuffer.api import Position, SnapshotPolicy, SnapshotStore, TxnId
from txnbuffer.buffer import TransactionBuffer

__all__ = ["PendingEntry", "SegmentCore", "SegmentLife"]

log = logging.getLogger(__name__)


class SegmentLife(Enum):
    """Where a loaded segment is in its life on this broker."""

    OPEN = "open"
    CLOSING = "closing"
    CLOSED = "closed"
    DELETED = "deleted"


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


class SegmentCore:
    """The fields of a segment and the helpers its parts share (see ``LedgerSegment``)."""

    def __init__(
        self, ledgers: LedgerService, store: MetadataStore, *, topic: str, number: int,
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
        self._max_entry_bytes = ledgers.max_entry_bytes
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
        self._unconfirmed: deque[PendingEntry] = deque()
        self._failure: Exception | None = None
        #: Set when this broker hands the segment over or loses it (cluster):
        #: calls then fail WrongHost rather than "closed".
        self._moved = False
        self._life = SegmentLife.OPEN
        self._chain_lock = asyncio.Lock()
        self._open_lock = asyncio.Lock()
        self._switching: asyncio.Future[None] | None = None
        # Appends waiting, in call order, behind a rollover (see ``append``).
        self._gate = asyncio.Lock()
        self._queued = 0
        # Rollovers that failed so far, and the last one's error: an append
        # queued behind a failed rollover fails with it (see ``append``).
        self._roll_failures = 0
        self._roll_error: Exception | None = None
        self._data_event = asyncio.Event()
        self._woken_at = 0.0  # perf_counter of the last _wake (folio_read_wake_seconds)
        self._hints = ReadHints()
        # The transaction buffer (user topics only; system topics take no transactions).
        policy = txn_snapshots or SnapshotPolicy()
        self._buffer = (None if txn_store is None else TransactionBuffer(
            self._name, txn_store, snapshot_every_changes=policy.every_changes,
            snapshot_every_ms=policy.every_ms, chunk_bytes=policy.chunk_bytes or None))
        self._txn_offsets = TxnOffsets()
        # The buffer's recovery, run in the background by ``LedgerSegment.load`` so
        # appends need not wait for its replay; what it failed with; and the entries
        # confirmed while it runs, noted in ``_txn_offsets`` once its replay is done
        # (the replay notes the entries before them: the order must hold).
        self._recovery: asyncio.Task[None] | None = None
        self._recovery_error: Exception | None = None
        self._txn_deferred: list[tuple[Position, EntryKind, TxnId | None, int]] | None = None

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
        return self._life is SegmentLife.OPEN and self._failure is None

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
        if buffer is not None and not buffer.ready:
            return self._start  # unknown until recovered: nothing is claimed committed
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

    @property
    def writer_count(self) -> int:
        """How many writers the segment remembers."""
        return len(self._writers)

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

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    async def recovered(self) -> None:
        """Wait until the transaction buffer is recovered (at once without one).

        ``LedgerSegment.load`` recovers it in the background: appends go on
        meanwhile (the buffer keeps the entries they report), reads of
        committed data wait here. Raises what the recovery failed with (the
        segment failed too: it is loaded again on its next use), or why the
        segment is gone if it was closed meanwhile.
        """
        task = self._recovery
        if task is not None and not task.done():
            await asyncio.wait([task])
        if self._recovery_error is not None:
            raise self._recovery_error
        if task is not None and task.cancelled():
            self._check_readable()
            raise BrokerShuttingDownError(f"segment {self._name} is closed")

    def _stop_recovery(self) -> None:
        """The segment leaves this broker: a recovery under way ends (``recovered`` raises)."""
        if self._recovery is not None and not self._recovery.done():
            self._recovery.cancel()

    def _check_readable(self) -> None:
        if self._life is SegmentLife.DELETED:
            raise NoSuchSegmentError(self._name)
        if self._life is not SegmentLife.OPEN or self._moved:
            if self._moved:
                raise WrongHostError(self._name)
            raise BrokerShuttingDownError(f"segment {self._name} is closed")

    def _check_appendable(self) -> None:
        self._check_readable()
        if self._sealed:
            raise SegmentSealedError(self._name, self._end)
        if self._failure is not None:
            raise self._failure_error()

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

    def _wake(self) -> None:
        self._woken_at = time.perf_counter()
        self._data_event.set()
        self._data_event = asyncio.Event()

    def _set_spans(self, spans: list[LedgerSpan]) -> None:
        self._spans = spans
        self._firsts = [span.first_offset for span in spans]

    def _expire_writers(self, now_ms: int) -> None:
        """Forget writers idle longer than ``writer_expiry_ms``."""
        expired = self._writers.expire(now_ms)
        if expired:
            log.info("segment %s: forgot %d writers idle for over %d ms", self._name,
                     expired, self._writers.expiry_ms)
