"""The segment's ledger chain and its record: compare-and-set, new ledgers, deletions.

``LedgerChain`` is the part of a ``LedgerSegment`` that owns the chain: its
``LedgerSpan``s (and their first offsets, for the read path's search), the
segment's start offset (the first readable event, moved by truncation and
retention together with the spans), the
version of the record this broker last wrote, the writer snapshot and the
leader-epoch history that record holds, and the lock every change of the
chain takes. It writes the record, and
fails the segment through its ``SegmentLife`` (given, not owned) when the
record shows another owner or is gone.

The record (``broker.segments.records``) changes only by compare-and-set on the
version this broker last wrote: a failed CAS means another broker took the
segment (``WrongHostError``), a missing node that it was deleted. A new
ledger is created first and recorded second, so a crash in between leaves an
orphan ledger, never a record naming a ledger that does not exist.

A write whose answer is lost (``MetadataUnavailableError``: the connection
dropped after ZooKeeper may have applied it; a cancelled call) has an unknown
outcome, and nothing that is only safe if it failed may follow it. The record
is read back on the same session: ZooKeeper answers one session's requests in
order and the store sends them in order, so the read sees the write if it was
ever applied. The read decides (``_reconcile``): our bytes, the write was
applied (its version is adopted); the version we wrote on, it was not; another
version, someone else wrote (WrongHost). When the read fails too, the outcome
stays unknown: the segment fails (a plain failure, so the next use loads it
again from the record) and whatever the write would have replaced is left
alone. A ledger is deleted only after a read that shows no record names it
(``_forget_new_ledger``); otherwise it stays, an orphan at worst, which is safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping

from broker.errors import NoSuchSegmentError, WrongHostError
from broker.segments.epoch_history import EpochHistory
from broker.segments.life import ResidenceEvent, SegmentLife
from broker.segments.names import make_segment_name, segment_path
from broker.segments.offset_index import LedgerSpan
from broker.segments.records import SegmentRecord, WriterState
from broker.segments.recovery import RecoveredChain
from ledger.api import LedgerService, MetadataStore
from ledger.errors import BadVersionError, LedgerError, MetadataUnavailableError, NoNodeError

__all__ = ["LedgerChain"]

log = logging.getLogger(__name__)


class LedgerChain:
    """The ledgers of one segment and its record (a part of ``LedgerSegment``).

    Args:
        ledgers: the ledger service the chain's ledgers live in.
        store: the metadata store holding the segment record.
        topic, number: the segment's.
        recovered: the chain as ``recover_chain`` found it (record, version, spans).
        life: the segment's life cycle, failed here when the record says so.
        wake: wakes the segment's readers (a record found gone ends their waits).
        now_ms: the segment's clock in milliseconds (a new ledger's creation time).
    """

    def __init__(self, ledgers: LedgerService, store: MetadataStore, topic: str, number: int,
                 recovered: RecoveredChain, life: SegmentLife, wake: Callable[[], None],
                 now_ms: Callable[[], int]) -> None:
        self._ledgers = ledgers
        self._store = store
        self._topic = topic
        self._number = number
        self._name = make_segment_name(topic, number)
        self._path = segment_path(topic, number)
        self._life = life
        self._wake = wake
        self._now_ms = now_ms
        self._spans = recovered.spans
        self._firsts = [span.first_offset for span in self._spans]
        self._start = recovered.record.start_offset
        self._record_version = recovered.version
        # The writer snapshot the record holds now (rewritten as is by record
        # writes that take no new one).
        self._snapshot_ledger = recovered.record.writers_ledger
        self._snapshot: Mapping[str, WriterState] = recovered.record.writers
        # The leader-epoch history every record write carries (``assign_epoch``
        # adds this ownership's before the load's first write).
        self._epochs = recovered.record.leader_epochs
        #: Taken by every change of the chain (rollover, seal, truncation, close).
        self.lock = asyncio.Lock()

    @property
    def spans(self) -> list[LedgerSpan]:
        """The ledgers, oldest first; the last one is written while the segment is open."""
        return self._spans

    @property
    def firsts(self) -> list[int]:
        """The first offset of each span, for a bisection."""
        return self._firsts

    @property
    def start_offset(self) -> int:
        """The offset of the first readable event."""
        return self._start

    @property
    def record_version(self) -> int:
        """The version of the record this broker last wrote (or loaded)."""
        return self._record_version

    @property
    def snapshot(self) -> Mapping[str, WriterState]:
        """The writer snapshot the record holds."""
        return self._snapshot

    @property
    def snapshot_ledger(self) -> int:
        """The ledger the record's writer snapshot was taken at (-1: none)."""
        return self._snapshot_ledger

    @property
    def leader_epochs(self) -> EpochHistory:
        """The leader-epoch history (``broker.segments.epoch_history``), from the start offset."""
        return self._epochs

    def assign_epoch(self, epoch: int, start_offset: int) -> None:
        """``epoch`` starts at ``start_offset``: written by the next record write.

        Only ``LedgerSegment.load`` calls it, right before the write that records
        its new ledger: if that write fails the load fails and this chain is
        dropped; the next load assigns again, at the same end offset (nothing
        was appended meanwhile).
        """
        self._epochs = self._epochs.assign(epoch, start_offset)

    def set_spans(self, spans: list[LedgerSpan], start_offset: int | None = None) -> None:
        """The chain is ``spans`` now (their record is written), from ``start_offset`` if given."""
        self._spans = spans
        self._firsts = [span.first_offset for span in spans]
        if start_offset is not None:
            self._start = start_offset

    def record_of(self, spans: list[LedgerSpan], *, start_offset: int, end_offset: int,
                  sealed: bool, writers: Mapping[str, WriterState] | None) -> SegmentRecord:
        """The record for ``spans``; with ``writers``, a fresh writer snapshot.

        Give ``writers`` only when nothing is unconfirmed (the table may hold
        numbers of entries not yet durable otherwise); without, the record
        keeps the snapshot it has.
        """
        writers_ledger, snapshot = self._snapshot_ledger, self._snapshot
        if writers is not None:
            writers_ledger = spans[-1].ledger_id if spans else -1
            snapshot = writers
        return SegmentRecord(
            topic=self._topic, number=self._number,
            ledgers=tuple(span.to_record() for span in spans),
            start_offset=start_offset,
            sealed=sealed,
            end_offset=end_offset if sealed else -1,
            writers_ledger=writers_ledger,
            writers=snapshot,
            leader_epochs=self._epochs.truncated(start_offset),
        )

    async def write_record(self, record: SegmentRecord) -> None:
        """Compare-and-set the segment record on the version this broker last wrote.

        Returns once the record is written. Raises ``WrongHostError`` (someone
        else wrote it), ``NoSuchSegmentError`` (it is gone), or
        ``MetadataUnavailableError`` when it was not written or its outcome
        stays unknown (then the segment has failed: see the module docstring).
        """
        data = record.to_bytes()
        expected = self._record_version
        try:
            version = await self._store.set(self._path, data, expected)
        except BadVersionError:
            raise self._taken() from None
        except NoNodeError:
            raise self._gone() from None
        except MetadataUnavailableError as error:
            version = await self._reconcile(data, expected, error)
        except asyncio.CancelledError:
            # The call may still be applied: nothing this broker holds about the
            # record can be trusted any more. Loaded again, it is read afresh.
            self._life.fail(MetadataUnavailableError(
                f"segment {self._name}: record write cancelled; its outcome is unknown"))
            raise
        self._record_version = version
        self._snapshot_ledger = record.writers_ledger
        self._snapshot = record.writers
        self._epochs = record.leader_epochs

    async def _reconcile(self, data: bytes, expected: int,
                         error: MetadataUnavailableError) -> int:
        """After a lost answer: the version our write made, or raise why it did not land."""
        try:
            current = await self._store.get(self._path)
        except NoNodeError:
            raise self._gone() from None
        except LedgerError as read_error:
            log.warning("segment %s: record write outcome unknown (%s) and not readable "
                        "(%s); the segment loads again", self._name, error, read_error)
            self._life.fail(error)
            raise error from None
        if current.data == data and current.version > expected:
            log.info("segment %s: record write answer lost, but it was applied", self._name)
            return current.version
        if current.version == expected:
            log.info("segment %s: record write answer lost; it was not applied", self._name)
            raise error
        raise self._taken()

    def _taken(self) -> WrongHostError:
        log.info("segment %s: record changed by someone else; giving it up", self._name)
        return self._life.taken()

    def _gone(self) -> NoSuchSegmentError:
        self._life.move(ResidenceEvent.DELETE)
        self._wake()
        return NoSuchSegmentError(self._name)

    async def start_ledger(self, replacing: list[LedgerSpan], first_offset: int,
                           record_for: Callable[[list[LedgerSpan]], SegmentRecord]) -> None:
        """Create a ledger from ``first_offset``, record it, then delete ``replacing``.

        ``record_for`` makes the record naming the new chain (with a writer
        snapshot: see below). Raises what ``write_record`` raises, after
        ``_forget_new_ledger``.
        """
        handle = await self._ledgers.create(properties={"folio.segment": self._name})
        span = LedgerSpan(handle.ledger_id, first_offset, created_ms=self._now_ms(),
                          handle=handle, writing=True, indexed_end=first_offset)
        expected = self._record_version
        try:
            # Nothing is unconfirmed here (a rollover drained the old ledger):
            # the table matches the data, so it is the new ledger's snapshot.
            await self.write_record(record_for([*self._spans, span]))
        except BaseException:
            await self._forget_new_ledger(handle.ledger_id, expected)
            raise
        self.set_spans([*self._spans, span])
        await self.delete_ledgers(replacing)

    async def _forget_new_ledger(self, ledger_id: int, expected: int) -> None:
        """The record write of a new ledger failed: delete the ledger only if no record names it.

        Only a read decides, never the error: a failed write may have been
        applied (module docstring). The ledger is deleted when the record is
        gone, or still at the version the write was made on (nobody applied
        ours) and does not name it. Otherwise (unreadable, named, or changed
        by someone else, who may have built on our write) it stays: an orphan
        ledger costs space, a record naming a deleted ledger loses events.
        """
        try:
            current = await asyncio.shield(self._store.get(self._path))
        except NoNodeError:
            current = None
        except LedgerError as error:
            log.warning("segment %s: new ledger %d left in place (record not readable: %s)",
                        self._name, ledger_id, error)
            return
        except asyncio.CancelledError:
            # Cancelled mid-check: leave the ledger (an orphan is safe) and stop.
            log.warning("segment %s: new ledger %d left in place (cancelled)",
                        self._name, ledger_id)
            raise
        if current is not None:
            try:
                named = ledger_id in {entry.ledger_id for entry
                                      in SegmentRecord.from_bytes(current.data).ledgers}
            except (ValueError, KeyError, TypeError):  # unreadable: it may name it
                named = True
            if named or current.version != expected:
                log.warning("segment %s: new ledger %d left in place (record version %d, "
                            "named: %s)", self._name, ledger_id, current.version, named)
                return
        try:
            await asyncio.shield(self._ledgers.delete(ledger_id))
        except LedgerError as error:
            log.warning("segment %s: unrecorded ledger %d left behind: %s", self._name,
                        ledger_id, error)
        except asyncio.CancelledError:
            log.warning("segment %s: unrecorded ledger %d left behind (cancelled)",
                        self._name, ledger_id)
            raise

    async def delete_ledgers(self, spans: list[LedgerSpan]) -> None:
        """Delete ``spans``' ledgers (no longer in the record); one that fails is left behind."""
        for span in spans:
            try:
                await self._ledgers.delete(span.ledger_id)
            except LedgerError as error:
                log.warning("segment %s: ledger %d left behind: %s", self._name,
                            span.ledger_id, error)

    async def delete_record(self) -> None:
        """Delete the segment record (after its ledgers); gone already is fine."""
        with contextlib.suppress(NoNodeError):
            await self._store.delete(self._path)
