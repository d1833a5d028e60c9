"""The state of a ``LedgerSegment`` and what every part of it uses.

``SegmentCore`` holds the parts that own their state (the life cycle,
``broker.segments.life``; the ledger chain and its record, ``broker.segments.chain``;
the append pipeline with the offsets and the writer table,
``broker.segments.pipeline``; the queue of appends behind a rollover,
``broker.segments.gate``), the fields the rest share (the start offset,
locks, the transaction buffer) and the small helpers:
waking readers, the record of a chain, what a confirmed entry tells the
transaction buffer, ``info``. The
parts still written as mixins on it (``_rollover``, ``_append``, ``_markers``,
``_reading``, ``_head``, ``_lifecycle``) are composed in ``broker.segments.segment``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from broker.api import SegmentInfo, SegmentLedger, SegmentRange, SegmentState, TopicConfig
from broker.errors import BrokerShuttingDownError
from broker.segments.chain import LedgerChain
from broker.segments.entry import EntryKind
from broker.segments.gate import RolloverGate
from broker.segments.life import SegmentLife
from broker.segments.names import make_segment_name
from broker.segments.offset_index import LedgerSpan, ReadHints
from broker.segments.pipeline import AppendPipeline, PendingEntry
from broker.segments.records import SegmentRecord
from broker.segments.recovery import RecoveredChain
from broker.segments.transactions import TxnOffsets
from broker.segments.writers import DEFAULT_WRITER_EXPIRY_MS, WriterTable
from ledger.api import LedgerService, MetadataStore
from txnbuffer.api import LoggedEntry, Position, SnapshotPolicy, SnapshotStore, TxnId
from txnbuffer.buffer import TransactionBuffer

__all__ = ["SegmentCore", "SegmentSetup"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SegmentSetup:
    """What a loaded segment is and how it runs, besides its topic's configuration."""

    topic: str
    number: int
    key_low: float
    key_high: float
    clock: Callable[[], float]
    writer_expiry_ms: int = DEFAULT_WRITER_EXPIRY_MS
    #: With a store the segment takes transactions (owns a transaction buffer).
    txn_store: SnapshotStore | None = None
    txn_snapshots: SnapshotPolicy | None = None


class SegmentCore:
    """The parts of a segment, the fields the rest share, and helpers (see ``LedgerSegment``)."""

    def __init__(self, ledgers: LedgerService, store: MetadataStore, setup: SegmentSetup,
                 config: TopicConfig, recovered: RecoveredChain) -> None:
        self._ledgers = ledgers
        self._topic = setup.topic
        self._number = setup.number
        self._name = make_segment_name(setup.topic, setup.number)
        self._key_low = setup.key_low
        self._key_high = setup.key_high
        self._config = config
        self._clock = setup.clock
        self._start = recovered.record.start_offset
        # Open, closing, moved or deleted; sealed; failed: the one place that says
        # whether a call may go on, and with which error it fails.
        self._life = SegmentLife(self._name, sealed=recovered.record.sealed)
        # The ledgers and the record: their compare-and-set, new and deleted ledgers.
        self._chain = LedgerChain(ledgers, store, setup.topic, setup.number, recovered,
                                  self._life, self._wake, self._now_ms)
        self._open_lock = asyncio.Lock()
        # Appends queued, in call order, behind a rollover; the switch under way.
        self._rollover = RolloverGate()
        self._data_event = asyncio.Event()
        self._woken_at = 0.0  # perf_counter of the last _wake (folio_read_wake_seconds)
        self._hints = ReadHints()
        # The transaction buffer (user topics only; system topics take no transactions).
        policy = setup.txn_snapshots or SnapshotPolicy()
        self._buffer = (None if setup.txn_store is None else TransactionBuffer(
            self._name, setup.txn_store, snapshot_every_changes=policy.every_changes,
            snapshot_every_ms=policy.every_ms, chunk_bytes=policy.chunk_bytes or None))
        self._txn_offsets = TxnOffsets()
        # The entries on their way to the ledger, the offsets and the writers.
        self._pipeline = AppendPipeline(
            self._name, recovered.end_offset,
            WriterTable(recovered.writers, setup.writer_expiry_ms), ledgers.max_entry_bytes,
            self._life, self._wake, self._now_ms,
            None if self._buffer is None else self._note_durable)
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
        return self._pipeline.end_offset

    @property
    def sealed(self) -> bool:
        """Whether the segment takes no more appends."""
        return self._life.sealed

    @property
    def usable(self) -> bool:
        """False once closed, deleted, or failed; the owner should load it again."""
        return self._life.usable

    @property
    def failure(self) -> Exception | None:
        """Why appends fail for good (``WrongHostError``: another broker took it), or None."""
        return self._life.failure

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
            return self._pipeline.end_offset
        limit = buffer.max_read_position
        offset = self._txn_offsets.offset_at(Position(limit.ledger_id, limit.entry_id + 1))
        end = self._pipeline.end_offset
        return end if offset is None else min(offset, end)

    @property
    def config(self) -> TopicConfig:
        """The topic configuration in force."""
        return self._config

    def set_config(self, config: TopicConfig) -> None:
        """Apply a changed topic configuration (rollover, limits; retention on next tick)."""
        self._config = config

    def writer_states(self) -> dict[str, tuple[int, int]]:
        """Each writer remembered: (last event number, last append time in ms)."""
        return {writer_id: (state.last_event_number, state.last_update_ms)
                for writer_id, state in self._pipeline.writers.snapshot().items()}

    @property
    def writer_count(self) -> int:
        """How many writers the segment remembers."""
        return len(self._pipeline.writers)

    def info(self) -> SegmentInfo:
        """Offsets, state, ledgers and bytes now."""
        state = SegmentState.SEALED if self._life.sealed else SegmentState.OPEN
        return SegmentInfo(
            segment=SegmentRange(self._name, self._number, self._key_low, self._key_high,
                                 state, self._start, self._pipeline.end_offset),
            ledgers=tuple(SegmentLedger(span.ledger_id, span.first_offset, not span.writing)
                          for span in self._chain.spans),
            length_bytes=sum(span.confirmed_length() for span in self._chain.spans),
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
            self._life.check_readable()
            raise BrokerShuttingDownError(f"segment {self._name} is closed")

    def _stop_recovery(self) -> None:
        """The segment leaves this broker: a recovery under way ends (``recovered`` raises)."""
        if self._recovery is not None and not self._recovery.done():
            self._recovery.cancel()

    def _wake(self) -> None:
        self._woken_at = time.perf_counter()
        self._data_event.set()
        self._data_event = asyncio.Event()

    def _record_of(self, spans: list[LedgerSpan], *, start: int | None = None,
                   snapshot: bool = False) -> SegmentRecord:
        """The record for ``spans``; ``snapshot``: with a fresh writer snapshot.

        Take a snapshot only when nothing is unconfirmed (the table may hold
        numbers of entries not yet durable otherwise); without one, the
        record keeps the snapshot it has.
        """
        writers = None
        if snapshot:
            self._pipeline.expire_writers(self._now_ms())
            writers = self._pipeline.writers.snapshot()
        return self._chain.record_of(
            spans, start_offset=self._start if start is None else start,
            end_offset=self._pipeline.end_offset, sealed=self._life.sealed, writers=writers)

    async def _start_ledger(self, replacing: list[LedgerSpan]) -> None:
        """A new ledger from the end, recorded with a writer snapshot (``LedgerChain``)."""
        await self._chain.start_ledger(replacing, self._pipeline.end_offset,
                                       lambda spans: self._record_of(spans, snapshot=True))

    def _note_durable(self, entry: PendingEntry, entry_id: int) -> None:
        """A confirmed entry, told to the transaction buffer (segments that have one)."""
        buffer = self._buffer
        assert buffer is not None  # (only given to the pipeline with a buffer)
        position = Position(entry.span.ledger_id, entry_id)
        if self._txn_deferred is not None:  # noted after the recovery's replay
            self._txn_deferred.append((position, entry.kind, entry.txn_id, entry.base_offset))
        else:
            self._txn_offsets.note(position, entry.kind, entry.txn_id, entry.base_offset)
        buffer.on_entry(LoggedEntry(position, entry.kind, entry.txn_id))
