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

**Layout.** ``LedgerSegment`` holds parts that own their state, each tested
alone: ``life.SegmentLife`` (open, closing, moved, deleted; sealed; failed,
and the error each state raises), ``chain.LedgerChain`` (the ledgers, the
record's compare-and-set, new and deleted ledgers) and
``pipeline.AppendPipeline`` (numbering, submit, confirm; the offsets and the
writer table) and ``gate.RolloverGate`` (appends queued in call order behind
a rollover). The rest is still written as mixins on the fields of
``_core.SegmentCore``: ``_rollover``, ``_append`` (the order of appends around
a rollover), ``_markers`` (commit and abort markers),
``_reading`` (reads, long polls), ``_head`` (truncation, retention) and
``_lifecycle`` (seal, close, delete). Each mixin calls only the ones it
derives from, so they read in that order.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from broker.api import TopicConfig
from broker.metrics import observe_txn_buffer_recovery
from broker.segments._core import SegmentSetup
from broker.segments.head import SegmentHead
from broker.segments.lifecycle import SegmentLifecycle
from broker.segments.markers import SegmentMarkers
from broker.segments.reading import SegmentReads
from broker.segments.recovery import recover_chain
from broker.segments.transactions import LedgerSegmentLog
from broker.segments.writers import DEFAULT_WRITER_EXPIRY_MS
from ledger.api import LedgerService, MetadataStore
from txnbuffer.api import SnapshotPolicy, SnapshotStore

__all__ = ["LedgerSegment"]

log = logging.getLogger(__name__)


class LedgerSegment(SegmentMarkers, SegmentReads, SegmentHead, SegmentLifecycle):
    """A segment owned by this broker, implementing ``broker.api.SegmentHandle``.

    Build it with ``LedgerSegment.load``, never directly.
    """

    @classmethod
    async def load(
        cls, ledgers: LedgerService, store: MetadataStore, *, topic: str, number: int,
        key_low: float, key_high: float, config: TopicConfig,
        clock: Callable[[], float], writer_expiry_ms: int = DEFAULT_WRITER_EXPIRY_MS,
        txn_store: SnapshotStore | None = None, txn_snapshots: SnapshotPolicy | None = None,
        delete_empty: bool = True,
    ) -> LedgerSegment:
        """Recover the segment from its record and start a fresh ledger for appends.

        With ``txn_store`` the segment takes transactional appends and owns a
        transaction buffer, recovered here (its snapshot, then a replay of the
        ledgers after it) before the segment is returned.

        ``delete_empty=False`` (a cluster) keeps the empty ledgers recovery set
        aside instead of deleting them: a previous owner may still hold one
        open, and a deleted ledger loses its fence on the bookies, so that
        owner's late appends would be accepted into a ledger nobody reads.
        Kept, the fenced ledger refuses them (the owner answers WrongHost).

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
            await segment._start_ledger(replacing=chain.empty if delete_empty else [])
        if segment._buffer is not None:
            # In the background: its replay reads every entry since the last
            # snapshot (seconds after a busy minute), and appends need none of it.
            segment._txn_deferred = []
            segment._recovery = asyncio.create_task(
                segment._recover_buffer(), name=f"transaction buffer of {segment.name}")
        log.info("loaded segment %s: offsets [%d, %d), %d ledgers, in %.3f s (chain "
                 "recovered in %.3f s)", segment.name, segment.start_offset,
                 segment.end_offset, len(chain.spans), time.perf_counter() - started,
                 recovered - started)
        return segment

    async def _recover_buffer(self) -> None:
        """The transaction buffer's recovery (``recovered`` waits for it).

        The buffer keeps the entries appended meanwhile and applies them after
        its replay, each once (``TransactionBuffer.recover``); their notes in
        ``_txn_offsets`` wait for the replay's notes the same way.
        """
        buffer = self._buffer
        assert buffer is not None  # (only started for a segment with a buffer)
        started = time.perf_counter()
        replay = LedgerSegmentLog(self._chain.spans, self._reader, self._txn_offsets)
        try:
            await buffer.recover(replay)
        except Exception as error:  # a bookie or the snapshot store failed
            log.warning("segment %s: transaction buffer not recovered: %s", self._name, error)
            self._recovery_error = error
            self._life.fail(error)  # loaded again on its next use
            self._wake()
            return
        # Nothing was awaited since the replay's last entry: every entry confirmed
        # after it is in the deferred list, and none is confirmed before this ends.
        for position, kind, txn_id, base_offset in self._txn_deferred or ():
            if replay.last_position is None or position > replay.last_position:
                self._txn_offsets.note(position, kind, txn_id, base_offset)
        self._txn_deferred = None
        observe_txn_buffer_recovery(time.perf_counter() - started)
        self._wake()  # read_committed waiters: the committed end is known now
