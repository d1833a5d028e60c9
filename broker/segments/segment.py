"""LedgerSegment: one segment stored as a chain of ledgers (Pulsar's managed ledger).

**Appends** go to one open ledger. Each append is one entry (``broker.segments.entry``)
whose base offset is the segment's end as submitted so far; it is handed to
``WriteHandle.add_async`` without awaiting anything in between, so entries,
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
The owner's leader epoch, when it has one (a cluster), is added to the
segment's leader-epoch history at that end in the same record write
(``broker.segments.epoch_history``).

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

**Layout.** ``LedgerSegment`` holds parts that own their state or their one
job, each tested alone and given its collaborators explicitly; it keeps the
public API (``broker.api.SegmentHandle``) and delegates, once per call:

- ``life.SegmentLife``: the state tables (residence: open, closing, moved,
  deleted; seal; failure) and the error each state raises;
- ``chain.LedgerChain``: the ledgers, the start offset, the record's
  compare-and-set, new and deleted ledgers;
- ``pipeline.AppendPipeline``: numbering, submit, confirm; the end offset and
  the writer table;
- ``txns.SegmentTxns``: the transaction buffer, its background recovery, the
  committed end;
- ``wakeup.ReadWakeup``: the event long polls wait on;
- ``recorder.SegmentRecorder``: the record from the parts' fields;
- ``rollover.SegmentRollover`` (with its ``gate.RolloverGate``): new ledgers,
  appends queued in call order behind a switch;
- ``appends.SegmentAppends``, ``markers.SegmentMarkers``, ``reading.SegmentReads``,
  ``head.SegmentHead`` (truncation, retention) and ``lifecycle.SegmentLifecycle``
  (seal, close, hand-over, delete): the operations, through the parts above.

Each part imports only the parts beneath it (the "Segments" import contract
in ``pyproject.toml``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

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
from broker.segments.appends import SegmentAppends
from broker.segments.chain import LedgerChain
from broker.segments.entry import EntryKind
from broker.segments.head import SegmentHead
from broker.segments.life import SegmentLife
from broker.segments.lifecycle import SegmentLifecycle
from broker.segments.markers import SegmentMarkers
from broker.segments.names import make_segment_name
from broker.segments.pipeline import AppendPipeline
from broker.segments.reading import SegmentReads
from broker.segments.recorder import SegmentRecorder
from broker.segments.recovery import RecoveredChain, recover_chain
from broker.segments.rollover import SegmentRollover
from broker.segments.txns import SegmentTxns
from broker.segments.wakeup import ReadWakeup
from broker.segments.writers import DEFAULT_WRITER_EXPIRY_MS, WriterTable
from ledger.api import LedgerService, MetadataStore
from txnbuffer.api import SnapshotPolicy, SnapshotStore, TxnId
from txnbuffer.buffer import TransactionBuffer

__all__ = ["LedgerSegment", "SegmentSetup"]

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


class LedgerSegment:
    """A segment owned by this broker, implementing ``broker.api.SegmentHandle``.

    Build it with ``LedgerSegment.load``, never directly.
    """

    def __init__(self, ledgers: LedgerService, store: MetadataStore, setup: SegmentSetup,
                 config: TopicConfig, recovered: RecoveredChain) -> None:
        name = make_segment_name(setup.topic, setup.number)
        self._setup = setup
        self._name = name
        self._config = config
        now_ms = self._now_ms
        # Open, closing, moved or deleted; sealed; failed: the one place that says
        # whether a call may go on, and with which error it fails.
        life = self._life = SegmentLife(name, sealed=recovered.record.sealed)
        wakeup = ReadWakeup()
        txns = self._txns = SegmentTxns(name, setup.txn_store, setup.txn_snapshots, life,
                                        wakeup.wake)
        chain = self._chain = LedgerChain(ledgers, store, setup.topic, setup.number,
                                          recovered, life, wakeup.wake, now_ms)
        pipeline = self._pipeline = AppendPipeline(
            name, recovered.end_offset,
            WriterTable(recovered.writers, setup.writer_expiry_ms), ledgers.max_entry_bytes,
            life, wakeup.wake, now_ms, None if txns.buffer is None else txns.note_durable)
        recorder = self._recorder = SegmentRecorder(chain, pipeline, life, now_ms)
        rollover = self._rollover = SegmentRollover(name, chain, pipeline, life, recorder,
                                                    lambda: self._config, now_ms)
        appends = self._appends = SegmentAppends(name, setup.topic, life, chain, pipeline,
                                                 rollover, txns)
        self._markers = SegmentMarkers(life, txns, appends, chain, pipeline, recorder,
                                       wakeup.wake)
        reads = self._reads = SegmentReads(name, ledgers, life, chain, pipeline, txns, wakeup)
        self._head = SegmentHead(name, life, chain, pipeline, rollover, recorder, txns, reads)
        self._lifecycle = SegmentLifecycle(name, life, chain, pipeline, recorder, txns,
                                           wakeup.wake)

    @classmethod
    async def load(
        cls, ledgers: LedgerService, store: MetadataStore, *, topic: str, number: int,
        key_low: float, key_high: float, config: TopicConfig,
        clock: Callable[[], float], writer_expiry_ms: int = DEFAULT_WRITER_EXPIRY_MS,
        txn_store: SnapshotStore | None = None, txn_snapshots: SnapshotPolicy | None = None,
        delete_empty: bool = True, leader_epoch: int = -1,
    ) -> LedgerSegment:
        """Recover the segment from its record and start a fresh ledger for appends.

        With ``txn_store`` the segment takes transactional appends and owns a
        transaction buffer, recovered here (its snapshot, then a replay of the
        ledgers after it) before the segment is returned.

        ``delete_empty=False`` (a cluster) keeps the empty ledgers recovery set
        aside instead of deleting them: a previous owner may still hold one
        open, and its late appends into a deleted ledger are refused as
        deleted (the owner would answer NoSuchSegment for a segment that only
        moved). Kept, the fenced ledger refuses them as fenced (WrongHost).

        ``leader_epoch`` (>= 0: the loading broker owns the segment in that
        epoch) starts at the recovered end in the leader-epoch history, written
        with the new ledger's record (nothing for a sealed segment: it takes no
        appends in any later epoch).

        Raises ``NoSuchSegmentError`` if it has no record, ``WrongHostError`` if
        another broker changed the record meanwhile, ``LedgerError`` if the
        ledger service fails.
        """
        started = time.perf_counter()
        chain = await recover_chain(ledgers, store, topic, number)
        recovered = time.perf_counter()
        setup = SegmentSetup(topic, number, key_low, key_high, clock, writer_expiry_ms,
                             txn_store, txn_snapshots)
        segment = cls(ledgers, store, setup, config, chain)
        if not chain.record.sealed:
            # Crash windows: the record write that makes the epoch's entry is the
            # new ledger's compare-and-set (``LedgerChain.write_record``: a lost
            # answer is read back). Not written, the load fails and nothing of
            # the epoch was appended: the next load assigns it again.
            segment._chain.assign_epoch(leader_epoch, chain.end_offset)
            await segment._recorder.start_ledger(replacing=chain.empty if delete_empty else [])
        if segment._txns.buffer is not None:
            # In the background: appends need none of its replay.
            segment._txns.start_recovery(segment._chain, segment._reads.reader)
        log.info("loaded segment %s: offsets [%d, %d), %d ledgers, in %.3f s (chain "
                 "recovered in %.3f s)", segment.name, segment.start_offset,
                 segment.end_offset, len(chain.spans), time.perf_counter() - started,
                 recovered - started)
        return segment

    @property
    def name(self) -> str:
        """``"<topic>/<number>"``."""
        return self._name

    @property
    def start_offset(self) -> int:
        """The offset of the first readable event."""
        return self._chain.start_offset

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
        return self._txns.buffer

    @property
    def committed_end(self) -> int:
        """The offset a ``read_committed`` reader is served up to (exclusive).

        The offset of the earliest open transaction's first entry, or the end.
        """
        return self._reads.committed_end()

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

    def leader_epochs(self) -> tuple[tuple[int, int], ...]:
        """The leader-epoch history: (epoch, start offset), oldest first (``LeaderEpochs``)."""
        return self._chain.leader_epochs.entries

    @property
    def writer_count(self) -> int:
        """How many writers the segment remembers."""
        return len(self._pipeline.writers)

    def info(self) -> SegmentInfo:
        """Offsets, state, ledgers and bytes now."""
        setup, spans = self._setup, self._chain.spans
        state = SegmentState.SEALED if self._life.sealed else SegmentState.OPEN
        return SegmentInfo(
            segment=SegmentRange(self._name, setup.number, setup.key_low, setup.key_high,
                                 state, self._chain.start_offset, self._pipeline.end_offset),
            ledgers=tuple(SegmentLedger(span.ledger_id, span.first_offset, not span.writing)
                          for span in spans),
            length_bytes=sum(span.confirmed_length() for span in spans),
        )

    def _now_ms(self) -> int:
        return int(self._setup.clock() * 1000)

    async def recovered(self) -> None:
        """Wait until the transaction buffer is recovered (at once without one).

        ``LedgerSegment.load`` recovers it in the background: appends go on
        meanwhile (the buffer keeps the entries they report), reads of
        committed data wait here. Raises what the recovery failed with (the
        segment failed too: it is loaded again on its next use), or why the
        segment is gone if it was closed meanwhile.
        """
        await self._txns.recovered()

    async def tick(self, now_ms: int) -> None:
        """Periodic work: forget idle writers; roll the ledger over if too old or too big."""
        if not self._life.usable:
            return
        self._pipeline.expire_writers(now_ms)
        await self._rollover.tick(now_ms)
        await self._txns.maybe_snapshot()

    async def roll_over(self) -> int:
        """Start a new ledger now unless the open one is empty; its first offset.

        Every append submitted after this returns lands at or after that offset.
        """
        return await self._rollover.roll_over()

    async def last_event_number(self, writer_id: str) -> int:
        """The last event number recorded for ``writer_id``, -1 if none.

        Answered once every append submitted so far is durable.
        """
        return await self._appends.last_event_number(writer_id)

    async def append(
        self, blocks: Sequence[Block], writer_id: str, last_event_number: int, *,
        txn_id: TxnId | None = None, contiguous: bool = False,
    ) -> AppendResult:
        """See ``SegmentHandle.append`` and ``SegmentAppends.append``."""
        return await self._appends.append(blocks, writer_id, last_event_number,
                                          txn_id=txn_id, contiguous=contiguous)

    async def write_marker(self, kind: EntryKind, txn_id: TxnId) -> int:
        """A commit or abort marker of ``txn_id``, once durable (``SegmentMarkers``)."""
        return await self._markers.write_marker(kind, txn_id)

    async def read(self, offset: int, max_bytes: int,
                   isolation: Isolation = Isolation.READ_COMMITTED) -> ReadBatch:
        """See ``SegmentHandle.read`` and ``SegmentReads.read``."""
        return await self._reads.read(offset, max_bytes, isolation)

    async def wait_for_data(self, offset: int, timeout_s: float,
                            isolation: Isolation = Isolation.READ_COMMITTED) -> bool:
        """See ``SegmentHandle.wait_for_data``: woken by confirmations and seals."""
        return await self._reads.wait_for_data(offset, timeout_s, isolation)

    async def truncate(self, offset: int) -> SegmentInfo:
        """See ``SegmentHandle.truncate``; rolls over first when ``offset`` is the end."""
        await self._head.truncate(offset)
        return self.info()

    async def apply_retention(self, now_ms: int, config: TopicConfig | None = None) -> int:
        """Delete the oldest closed ledgers beyond the retention limits; returns how many."""
        return await self._head.apply_retention(now_ms, config or self._config)

    async def seal(self) -> SegmentInfo:
        """Refuse further appends, close the ledger and record the seal. Idempotent."""
        await self._lifecycle.seal()
        return self.info()

    async def close(self) -> None:
        """Finish the appends under way and close the open ledger (graceful shutdown)."""
        await self._lifecycle.close()

    async def hand_over(self) -> None:
        """Another broker takes the segment: finish appends under way, close, refuse the rest."""
        await self._lifecycle.hand_over()

    def abandon(self) -> None:
        """This broker lost the segment (session lost): refuse everything now, touch nothing."""
        self._lifecycle.abandon()

    def deleted_elsewhere(self) -> None:
        """Another broker deleted the segment (its record is gone): refuse everything now."""
        self._lifecycle.deleted_elsewhere()

    def record_changed(self, version: int) -> None:
        """The segment record is at ``version`` now: if another broker wrote it, give up."""
        self._lifecycle.record_changed(version)

    async def delete(self) -> None:
        """Delete every ledger of the segment, then its record. Later calls: NoSuchSegment."""
        await self._lifecycle.delete()
