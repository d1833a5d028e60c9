"""Loaded segments: load (recover) on first use, one load at a time, cache, reload failed.

``LoadedSegments`` is a part of ``TopicManager`` that owns its state: the
table of loaded segments, their load locks, the transaction buffers'
snapshot store, and what a load needs (ledger service, metadata store, clock,
writer expiry, snapshot policy, whether fenced segments are loaded again).

A segment whose ledger failed is loaded again on its next use; while that
fails too (storage or bookies still down) the failed one is kept, so reads of
what it holds keep working. A segment another broker took is never reloaded
(it would fence the new owner). A topic's deletion deletes its segments here,
loaded or not (``delete_segment``), each under its load lock.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections.abc import Callable

from broker.api import SegmentState, StoredWriter
from broker.errors import (
    NoSuchSegmentError,
    TopicNameError,
    TopicNotFoundError,
    WrongHostError,
)
from broker.segments.names import (
    TOPICS_ROOT,
    check_topic_name,
    is_system_topic,
    make_segment_name,
    parse_segment_name,
    segment_path,
    topic_path,
)
from broker.segments.records import SegmentRecord
from broker.segments.recovery import stored_writer
from broker.segments.segment import LedgerSegment
from broker.topics.internal import refuse_internal_segment
from broker.topics.records import TopicRecord
from ledger.api import LedgerService, MetadataStore
from ledger.errors import LedgerError, LedgerFencedError, NoNodeError, NoSuchLedgerError
from txnbuffer.api import SnapshotPolicy, SnapshotStore

__all__ = ["LoadedSegments", "needs_reload", "read_topic"]

#: How long ``ensure_sealed`` waits for the owner's seal of a segment it raced.
_SEALED_ELSEWHERE_WAIT_S = 10.0
log = logging.getLogger(__name__)


async def read_topic(store: MetadataStore, name: str) -> tuple[TopicRecord, int]:
    """The topic's record and its version. ``TopicNotFoundError`` (a bad name too)."""
    try:
        check_topic_name(name, internal=True)
    except TopicNameError:
        raise TopicNotFoundError(name) from None
    try:
        node = await store.get(topic_path(name))
    except NoNodeError:
        raise TopicNotFoundError(name) from None
    return TopicRecord.from_bytes(node.data), node.version


def needs_reload(segment: LedgerSegment, reload_fenced: bool = False) -> bool:
    """Whether a failed segment should be loaded again.

    A segment another broker took (``WrongHostError``) stays failed: loading
    it again would fence the new owner. In a cluster (``reload_fenced``) the
    services only ask for segments this broker owns, so a fenced one was
    fenced by a broker that wrote to it without owning it (a scale, seal or
    transaction marker of another broker): it is loaded again, and sees what
    that broker wrote.
    """
    failure = segment.failure
    if failure is None:
        return False
    return reload_fenced or not isinstance(failure, WrongHostError)


class LoadedSegments:
    """The table of loaded segments (a part of ``TopicManager``).

    Args:
        ledgers: the ledger service.
        store: where topic and segment records live.
        check_open: raises ``BrokerShuttingDownError`` once the owner closes.
        clock: seconds since the epoch.
        writer_expiry_ms: a segment forgets writers idle longer than this.
        txn_snapshots: when the segments' transaction buffers snapshot themselves.
        make_txn_store: makes the transaction buffers' snapshot store, once,
            when the first user segment loads.
        reload_fenced: a cluster broker's (``needs_reload``); it also watches
            the records of the user segments it loads.
        leader_epoch_of: a cluster broker's: the leader epoch of its ownership
            of a segment, -1 when it does not own it (``LedgerSegment.load``
            adds it to the segment's leader-epoch history); None: no epochs.
    """

    def __init__(self, ledgers: LedgerService, store: MetadataStore, *,
                 check_open: Callable[[], None], clock: Callable[[], float],
                 writer_expiry_ms: int, txn_snapshots: SnapshotPolicy,
                 make_txn_store: Callable[[], SnapshotStore], reload_fenced: bool,
                 leader_epoch_of: Callable[[str], int] | None = None) -> None:
        self._ledgers = ledgers
        self._store = store
        self._check_open = check_open
        self._clock = clock
        self._writer_expiry_ms = writer_expiry_ms
        self._txn_snapshots = txn_snapshots
        self._make_txn_store = make_txn_store
        self._txn_store: SnapshotStore | None = None
        self._reload_fenced = reload_fenced
        self._leader_epoch_of = leader_epoch_of
        self._segments: dict[str, LedgerSegment] = {}
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = (
            weakref.WeakValueDictionary())

    def lock(self, name: str) -> asyncio.Lock:
        """The segment's load lock: one load, release or deletion of it at a time."""
        lock = self._locks.get(name)
        if lock is None:
            lock = asyncio.Lock()
            self._locks[name] = lock
        return lock

    def get(self, name: str) -> LedgerSegment | None:
        """The segment if it is loaded now (usable or not), without loading it."""
        return self._segments.get(name)

    def loaded_segments(self) -> list[LedgerSegment]:
        """The segments loaded now (a copy)."""
        return list(self._segments.values())

    async def close(self) -> None:
        """Forget every loaded segment and close its ledger cleanly."""
        segments, self._segments = list(self._segments.values()), {}
        await asyncio.gather(*(segment.close() for segment in segments))

    def txn_snapshot_store(self) -> SnapshotStore:
        """The transaction buffers' snapshot store (``_txnbuffer_snapshots``), made once."""
        if self._txn_store is None:
            self._txn_store = self._make_txn_store()
        return self._txn_store

    async def segment(self, name: str) -> LedgerSegment:
        """The segment, loaded (and recovered) on first use. ``NoSuchSegmentError``.

        Its transaction buffer is recovered too (``LedgerSegment.recovered``).
        """
        segment = await self.loaded(name)
        await segment.recovered()
        return segment

    async def loaded(self, name: str) -> LedgerSegment:
        """The segment, loaded on first use; its transaction buffer may still recover."""
        self._check_open()
        segment = self._segments.get(name)
        if segment is not None and not needs_reload(segment, self._reload_fenced):
            return segment
        topic, number = parse_segment_name(name)
        async with self.lock(name):
            self._check_open()
            failed = self._segments.get(name)
            if failed is not None:
                if not needs_reload(failed, self._reload_fenced):
                    return failed
                log.info("segment %s failed (%s); loading it again", name, failed.failure)
            try:
                segment = await self._load_segment(name, topic, number)
            except LedgerError as error:
                if failed is None:
                    raise
                # The ledger service still fails (a full disk, bookies down): keep
                # the failed segment, which still serves reads of what it holds and
                # refuses appends with its (plain) failure; the next use tries again.
                log.info("segment %s: loading it again failed: %s", name, error)
                return failed
            if failed is not None:
                await failed.close()
            self._segments[name] = segment
            if self._reload_fenced and not is_system_topic(topic):
                # Some system topics are reached by every broker's own components
                # (docs/cluster.md, "Segment containers and ownership"; the
                # snapshot and coordinator segments are owned): a watch would make
                # those reload each other's copies in turn.
                await self._watch_record(name, segment)
            return segment

    async def writable_segment(self, name: str, action: str) -> LedgerSegment:
        """``segment(name)`` for a public write (``action``: Append, Produce, TruncateSegment).

        ``InternalTopicError`` for a system topic's segment: only the broker's
        own components write those, through ``segment``.
        """
        refuse_internal_segment(name, action)
        # Appends need the ledger chain recovered, not the transaction buffer:
        # they go on while it replays (a failover's writers wait less).
        return await self.loaded(name)

    async def stored_writer(self, name: str, writer_id: str,
                            failed_ledger_id: int) -> StoredWriter:
        """A writer's state as segment ``name`` stores it, without loading it here.

        ``broker.segments.recovery.stored_writer``: for an append handed to
        ledger ``failed_ledger_id`` before it failed, when the segment cannot
        be loaded here (it moved, or writes are paused). Reads only.
        """
        self._check_open()
        topic, number = parse_segment_name(name)
        return await stored_writer(self._ledgers, self._store, topic, number, writer_id,
                                   failed_ledger_id)

    async def _load_segment(self, name: str, topic: str, number: int) -> LedgerSegment:
        """Load (recover) the segment from its record; the caller registers it."""
        try:
            record, _ = await read_topic(self._store, topic)
        except TopicNotFoundError:
            raise NoSuchSegmentError(name) from None
        entry = next((s for s in record.segments if s.number == number), None)
        if entry is None:
            raise NoSuchSegmentError(name)
        for predecessor in entry.predecessors:
            # A successor takes no append before all its predecessors are sealed.
            await self.ensure_sealed(topic, predecessor)
        segment = await LedgerSegment.load(
            self._ledgers, self._store, topic=topic, number=number,
            key_low=entry.key_low, key_high=entry.key_high, config=record.config,
            clock=self._clock, writer_expiry_ms=self._writer_expiry_ms,
            txn_store=None if is_system_topic(topic) else self.txn_snapshot_store(),
            txn_snapshots=self._txn_snapshots, delete_empty=not self._reload_fenced,
            leader_epoch=-1 if self._leader_epoch_of is None else self._leader_epoch_of(name),
        )
        if entry.state is SegmentState.SEALED and not segment.sealed:
            await segment.seal()  # a scale whose seal a crash cut short
        return segment

    async def _watch_record(self, name: str, segment: LedgerSegment) -> None:
        """In a cluster: follow the loaded segment's record (one watch, no read per append).

        Another broker deleting the topic, or writing the record (a takeover,
        a seal by a scale elsewhere), must not leave this copy taking appends:
        a deletion makes it refuse everything (NoSuchSegment) and forgets it; a
        foreign write fails it WrongHost (``record_changed``), so it is loaded
        again on its next use.
        """
        topic, number = parse_segment_name(name)
        path = segment_path(topic, number)
        loop = asyncio.get_running_loop()

        def fired(_event: object, _path: str) -> None:
            loop.call_soon_threadsafe(lambda: asyncio.ensure_future(check()))

        async def check() -> None:
            if self._segments.get(name) is not segment:
                return  # unloaded or replaced: its watch ends here
            try:
                node = await self._store.get(path, watch=fired)
            except NoNodeError:
                if self._segments.get(name) is segment:
                    del self._segments[name]
                segment.deleted_elsewhere()
                return
            except LedgerError as error:  # unreachable: the next change or use tells
                log.info("segment %s: record not watched: %s", name, error)
                return
            segment.record_changed(node.version)

        await check()

    async def release_segments(self, moving: Callable[[str], bool]) -> None:
        """Hand over every loaded segment whose name ``moving`` accepts, and forget it.

        Each waits for its load lock (a load under way finishes first), then
        finishes its appends under way and closes its ledger (``hand_over``).
        """
        names = [name for name in list(self._segments) if moving(name)]

        async def one(name: str) -> None:
            async with self.lock(name):
                segment = self._segments.pop(name, None)
                if segment is not None:
                    await segment.hand_over()
        await asyncio.gather(*(one(name) for name in names))

    def drop_segments(self, moving: Callable[[str], bool]) -> None:
        """Forget every loaded segment ``moving`` accepts, at once, touching no store."""
        for name in [name for name in list(self._segments) if moving(name)]:
            self._segments.pop(name).abandon()

    async def open_segment_names(self) -> list[str]:
        """The names of every open (unsealed) segment of the user topics, from their records.

        One read of the topic list and one per topic: for a cluster broker that
        just claimed containers and loads their segments before clients ask
        (``broker.cluster.warmup``).
        """
        self._check_open()
        try:
            topics = await self._store.children(TOPICS_ROOT)
        except NoNodeError:
            return []
        names = []
        for topic in sorted(topics):
            if is_system_topic(topic):
                continue
            try:
                record, _ = await read_topic(self._store, topic)
            except TopicNotFoundError:  # deleted meanwhile
                continue
            names += [make_segment_name(topic, entry.number) for entry in record.segments
                      if entry.state is not SegmentState.SEALED]
        return names

    async def ensure_sealed(self, topic: str, number: int) -> None:
        """Seal the segment in the ledger service unless it is sealed already.

        In a cluster its owner may seal it at the same time (it reloads the
        segment once the topic's record changes), recovering and dropping the
        empty ledger this broker's load opened: this seal then fails on that
        ledger (gone, or fenced). Sealed by either is what was asked, so the
        segment's record is read until it says sealed (a few seconds at most),
        else the failure is raised.
        """
        try:
            await self._seal(topic, number)
        except (NoSuchLedgerError, LedgerFencedError) as error:
            deadline = asyncio.get_running_loop().time() + _SEALED_ELSEWHERE_WAIT_S
            while not await self._record_sealed(topic, number):
                if asyncio.get_running_loop().time() > deadline:
                    raise error
                await asyncio.sleep(0.1)
            log.info("segment %s: sealed by its owner meanwhile (%s)",
                     make_segment_name(topic, number), error)

    async def _record_sealed(self, topic: str, number: int) -> bool:
        """Whether the segment's record says sealed (or is gone: being deleted)."""
        try:
            node = await self._store.get(segment_path(topic, number))
        except NoNodeError:
            return True
        return SegmentRecord.from_bytes(node.data).sealed

    async def _seal(self, topic: str, number: int) -> None:
        name = make_segment_name(topic, number)
        loaded = self._segments.get(name)
        if loaded is not None and not needs_reload(loaded, self._reload_fenced):
            if not loaded.sealed:
                await loaded.seal()
            return
        try:
            node = await self._store.get(segment_path(topic, number))
        except NoNodeError:
            return  # being deleted
        if not SegmentRecord.from_bytes(node.data).sealed:
            segment = await self.segment(name)  # seals it: its entry is SEALED
            await segment.seal()

    async def delete_segment(self, topic: str, number: int) -> None:
        """Delete the segment (for its topic's deletion): loaded or not, with its ledgers.

        A loaded one is closed first (its handles then fail every call with
        ``NoSuchSegmentError``); one not loaded here has its ledgers and
        record deleted from its record. A crash in between leaves what a
        deletion of the topic again finishes.
        """
        name = make_segment_name(topic, number)
        async with self.lock(name):
            segment = self._segments.pop(name, None)
            if segment is not None:
                await segment.delete()
                return
            path = segment_path(topic, number)
            try:
                node = await self._store.get(path)
            except NoNodeError:
                return
            ledgers = SegmentRecord.from_bytes(node.data).ledgers
            if self._reload_fenced and ledgers:
                # In a cluster another broker may have the segment loaded: fence its
                # ledger first, so its appends fail (and it finds the segment gone)
                # rather than land in a ledger about to be deleted.
                try:
                    await self._ledgers.open(ledgers[-1].ledger_id, recovery=True)
                except LedgerError as error:
                    log.info("topic %s: ledger %d not fenced before deletion: %s", topic,
                             ledgers[-1].ledger_id, error)
            for ledger in ledgers:
                try:
                    await self._ledgers.delete(ledger.ledger_id)
                except LedgerError as error:
                    log.warning("topic %s: ledger %d left behind: %s", topic,
                                ledger.ledger_id, error)
            with contextlib.suppress(NoNodeError):
                await self._store.delete(path)
