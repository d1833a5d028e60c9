"""TopicManager: topics, their records and their loaded segments (``broker.api.Topics``).

A topic is a record at ``/folio/topics/<name>`` listing its segments; each
segment has its own record at ``/folio/segments/<topic>/<number>``
(``broker.segments.records``). Creation writes the segment records first and
the topic record last: the topic record is the commit point, so a crash in
between leaves only segment records that a later create of the same name
overwrites. Deletion goes the other way (segments, their ledgers, then the
topic record), so a crash in between leaves a topic that deleting again
finishes.

Segments are loaded (recovered, ``LedgerSegment.load``) on first use, one load
at a time per segment, and cached. A background task rolls ledgers over by age,
applies retention and forgets idle writers of the loaded segments every
``retention_interval_s``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import fields, replace

from broker.api import ScaleOutcome, SegmentRange, SegmentState, TopicConfig, TopicInfo
from broker.errors import (
    BrokerError,
    BrokerShuttingDownError,
    InvalidArgumentError,
    NoSuchSegmentError,
    SegmentSealedError,
    TopicExistsError,
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
    segments_path,
    topic_path,
)
from broker.segments.reads import peek_end_offset
from broker.segments.records import SegmentRecord, TopicRecord, TopicSegment
from broker.segments.segment import LedgerSegment
from broker.segments.writers import DEFAULT_WRITER_EXPIRY_MS
from broker.topics.internal import refuse_internal_segment, refuse_internal_topic
from broker.topics.scaling import RateMeter, auto_scale, plan_scale, successors_of
from ledger.api import MetadataStore
from ledger.client.ledger_client import LedgerClient
from ledger.errors import (
    BadVersionError,
    LedgerError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
)
from txnbuffer.api import SnapshotPolicy, SnapshotStore

__all__ = ["MAX_SEGMENT_COUNT", "TopicManager"]

log = logging.getLogger(__name__)

MAX_SEGMENT_COUNT = 1024
_CONFIG_FIELDS = frozenset(f.name for f in fields(TopicConfig))
_CAS_ATTEMPTS = 100


class TopicManager:
    """Topics and their segments on this broker (standalone: all of them).

    Args:
        ledgers: the ledger service.
        store: where topic and segment records live.
        defaults: the configuration of fields a topic's creator leaves unset.
        retention_interval_s: how often the background task applies retention,
            age rollover and writer expiry.
        clock: seconds since the epoch (injectable for tests).
        writer_expiry_ms: a segment forgets writers (their last event number)
            idle longer than this; default 7 days.
        txn_snapshots: when the segments' transaction buffers snapshot themselves.
        txn_store_factory: makes the transaction buffers' snapshot store on
            this manager, once, when the first user segment loads (the store is
            a system topic on this very manager, so the caller passes how to
            make it: ``broker.system.snapshot_store.snapshot_store``; this
            package never imports the system topics above it).
    """

    def __init__(
        self, ledgers: LedgerClient, store: MetadataStore, *,
        txn_store_factory: Callable[[TopicManager], SnapshotStore],
        defaults: TopicConfig | None = None, retention_interval_s: float = 60.0,
        clock: Callable[[], float] = time.time,
        writer_expiry_ms: int = DEFAULT_WRITER_EXPIRY_MS,
        txn_snapshots: SnapshotPolicy | None = None,
    ) -> None:
        if writer_expiry_ms <= 0:
            raise ValueError(f"writer_expiry_ms must be positive, got {writer_expiry_ms}")
        self._ledgers = ledgers
        self._store = store
        self._defaults = defaults or TopicConfig()
        self._interval_s = retention_interval_s
        self._clock = clock
        self._writer_expiry_ms = writer_expiry_ms
        self._txn_snapshots = txn_snapshots or SnapshotPolicy()
        self._segments: dict[str, LedgerSegment] = {}
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = (
            weakref.WeakValueDictionary())
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self._hooks: list[Callable[[], Awaitable[object]]] = []
        self._txn_store_factory = txn_store_factory
        self._txn_store: SnapshotStore | None = None
        self._rates = RateMeter()

    async def start(self) -> None:
        """Start the background task (retention, rollover by age)."""
        if self._task is None and not self._closed:
            self._task = asyncio.create_task(self._maintain_forever(), name="topic-maintenance")

    async def close(self) -> None:
        """Stop background work and close every loaded segment's ledger cleanly."""
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        segments, self._segments = list(self._segments.values()), {}
        await asyncio.gather(*(segment.close() for segment in segments))

    @property
    def max_entry_bytes(self) -> int:
        """The ledger entry limit: one append (header and blocks) is at most this."""
        return self._ledgers.config.max_entry_bytes

    def add_maintenance_hook(self, hook: Callable[[], Awaitable[object]]) -> None:
        """Run ``hook`` after every maintenance round (e.g. compaction of a system topic)."""
        self._hooks.append(hook)

    def default_config(self) -> TopicConfig:
        """The configuration a topic gets for the fields its creator leaves unset."""
        return self._defaults

    def txn_snapshot_store(self) -> SnapshotStore:
        """The transaction buffers' snapshot store (``_txnbuffer_snapshots``), made once."""
        if self._txn_store is None:
            self._txn_store = self._txn_store_factory(self)
        return self._txn_store

    # -------------------------------------------------------------- topics

    async def create_topic(
        self, name: str, segment_count: int, config: TopicConfig, *, internal: bool = False,
    ) -> TopicInfo:
        """Create a topic of ``segment_count`` equal key ranges.

        ``internal`` allows a system topic name (``_`` prefix). Raises
        ``TopicNameError``, ``InternalTopicError`` (a ``_`` name without
        ``internal``), ``InvalidArgumentError`` (count outside [1, 1024], a bad
        config value), ``TopicExistsError``.
        """
        self._check_open()
        check_topic_name(name, internal=True)
        if not internal:
            refuse_internal_topic(name, "CreateTopic")
        if not 1 <= segment_count <= MAX_SEGMENT_COUNT:
            raise InvalidArgumentError(
                f"segment_count must be in [1, {MAX_SEGMENT_COUNT}], got {segment_count}")
        try:
            config = replace(config)  # checks it again: callers may have built it loosely
        except (TypeError, ValueError) as error:
            raise InvalidArgumentError(str(error)) from None
        async with self._lock(f"topic:{name}"):
            if await self._store.exists(topic_path(name)):
                raise TopicExistsError(name)
            segments = tuple(
                TopicSegment(i, i / segment_count,
                             1.0 if i + 1 == segment_count else (i + 1) / segment_count)
                for i in range(segment_count)
            )
            for segment in segments:
                await self._create_segment_record(name, segment.number)
            record = TopicRecord(name, config, segments, segment_count, self._now_ms())
            try:
                await self._store.create(topic_path(name), record.to_bytes(), make_parents=True)
            except NodeExistsError:
                raise TopicExistsError(name) from None
        log.info("created topic %s with %d segments", name, segment_count)
        return await self._topic_info(record)

    async def _create_segment_record(self, topic: str, number: int) -> None:
        data = SegmentRecord(topic, number).to_bytes()
        path = segment_path(topic, number)
        try:
            await self._store.create(path, data, make_parents=True)
        except NodeExistsError:
            # Left by a create that crashed before its topic record: no topic
            # owns it, so it is ours to overwrite.
            await self._store.set(path, data, -1)

    async def get_topic(self, name: str) -> TopicInfo:
        """The topic with its active segments and their offsets. ``TopicNotFoundError``."""
        self._check_open()
        record, _ = await self._read_topic(name)
        return await self._topic_info(record)

    async def list_topics(self, *, include_internal: bool = False) -> list[TopicInfo]:
        """Every user topic by name; system topics too with ``include_internal``."""
        self._check_open()
        try:
            names = await self._store.children(TOPICS_ROOT)
        except NoNodeError:
            return []
        topics = []
        for name in sorted(names):
            if is_system_topic(name) and not include_internal:
                continue
            with contextlib.suppress(TopicNotFoundError):  # deleted meanwhile
                topics.append(await self.get_topic(name))
        return topics

    async def delete_topic(self, name: str) -> None:
        """Delete the topic, its segments and their ledgers. ``TopicNotFoundError``.

        Loaded segments are closed first; their handles then fail every call
        with ``NoSuchSegmentError``. ``InternalTopicError`` for a system topic.
        """
        self._check_open()
        refuse_internal_topic(name, "DeleteTopic")
        async with self._lock(f"topic:{name}"):
            record, _ = await self._read_topic(name)
            for entry in record.segments:
                segment_name = make_segment_name(name, entry.number)
                async with self._lock(f"segment:{segment_name}"):
                    segment = self._segments.pop(segment_name, None)
                    if segment is not None:
                        await segment.delete()
                    else:
                        await self._delete_unloaded_segment(name, entry.number)
            with contextlib.suppress(NoNodeError, NotEmptyError):
                await self._store.delete(segments_path(name))
            try:
                await self._store.delete(topic_path(name))
            except NoNodeError:
                raise TopicNotFoundError(name) from None
        log.info("deleted topic %s", name)

    async def _delete_unloaded_segment(self, topic: str, number: int) -> None:
        path = segment_path(topic, number)
        try:
            node = await self._store.get(path)
        except NoNodeError:
            return
        for ref in SegmentRecord.from_bytes(node.data).ledgers:
            try:
                await self._ledgers.delete(ref.ledger_id)
            except LedgerError as error:
                log.warning("topic %s: ledger %d left behind: %s", topic, ref.ledger_id, error)
        with contextlib.suppress(NoNodeError):
            await self._store.delete(path)

    async def update_topic_config(self, name: str, changes: Mapping[str, int], *,
                                  internal: bool = False) -> TopicInfo:
        """Set the named ``TopicConfig`` fields; the others keep their values.

        Raises ``TopicNotFoundError``, ``InvalidArgumentError`` (unknown field,
        bad value), ``InternalTopicError`` (a system topic, unless ``internal``:
        only the broker passes it).
        """
        self._check_open()
        if not internal:
            refuse_internal_topic(name, "UpdateTopicConfig")
        unknown = sorted(set(changes) - _CONFIG_FIELDS)
        if unknown:
            raise InvalidArgumentError(f"unknown topic config fields {unknown}; known: "
                                       f"{sorted(_CONFIG_FIELDS)}")
        async with self._lock(f"topic:{name}"):
            for _ in range(_CAS_ATTEMPTS):
                record, version = await self._read_topic(name)
                try:
                    config = replace(record.config, **changes)
                except (TypeError, ValueError) as error:
                    raise InvalidArgumentError(str(error)) from None
                updated = record.with_config(config)
                try:
                    await self._store.set(topic_path(name), updated.to_bytes(), version)
                except BadVersionError:
                    log.info("topic %s changed while updating its config; retrying", name)
                    continue
                except NoNodeError:
                    raise TopicNotFoundError(name) from None
                break
            else:
                raise BrokerError(f"topic {name!r} kept changing; config not updated")
        for entry in updated.segments:
            segment = self._segments.get(make_segment_name(name, entry.number))
            if segment is not None:
                segment.set_config(config)
        return await self._topic_info(updated)

    # ------------------------------------------------------------- scaling

    async def list_segments(self, topic: str, *, include_sealed: bool) -> list[SegmentRange]:
        """Open segments by ``key_low``, or (``include_sealed``) every segment by number."""
        self._check_open()
        record, _ = await self._read_topic(topic)
        successors = successors_of(record)
        entries = [e for e in record.segments
                   if include_sealed or e.state is SegmentState.OPEN]
        ranges = [await self._segment_range(topic, e, successors) for e in entries]
        ranges.sort(key=(lambda r: r.number) if include_sealed else (lambda r: r.key_low))
        return ranges

    async def scale_topic(self, topic: str, seal: Sequence[str],
                          new_ranges: Sequence[tuple[float, float]], *,
                          scaled_ms: int | None = None) -> ScaleOutcome:
        """Seal ``seal`` and create successors whose ranges exactly cover theirs.

        One conditional update of the topic record makes the change (all or
        nothing); the sealed segments are then sealed in the ledger service
        before this returns (loading a successor also seals its predecessors
        first, so a crash in between is rolled forward). ``scaled_ms``
        (auto-scaling) is recorded as the topic's last scaling time.

        Raises ``InvalidArgumentError`` (see ``broker.topics.scaling.plan_scale``),
        ``InternalTopicError`` (a system topic), ``NoSuchSegmentError``,
        ``SegmentSealedError``, ``TopicNotFoundError``.
        """
        self._check_open()
        refuse_internal_topic(topic, "ScaleTopic")
        async with self._lock(f"topic:{topic}"):
            for _ in range(_CAS_ATTEMPTS):
                record, version = await self._read_topic(topic)
                try:
                    plan = plan_scale(record, seal, new_ranges)
                except SegmentSealedError as error:
                    end = await self._end_offset(topic, error.segment)
                    raise SegmentSealedError(error.segment, end) from None
                for entry in plan.created:
                    await self._create_segment_record(topic, entry.number)
                updated = replace(
                    record,
                    segments=tuple(
                        replace(s, state=SegmentState.SEALED) if s.number in plan.seal else s
                        for s in record.segments) + plan.created,
                    next_segment_number=record.next_segment_number + len(plan.created),
                    scaled_ms=record.scaled_ms if scaled_ms is None else scaled_ms)
                if await self._replace_topic(topic, updated, version):
                    break
            else:
                raise BrokerError(f"topic {topic!r} kept changing; not scaled")
            for number in plan.seal:
                await self._ensure_sealed(topic, number)
        log.info("scaled topic %s: sealed %s, created %s", topic, list(plan.seal),
                 [(e.number, e.key_low, e.key_high) for e in plan.created])
        successors = successors_of(updated)
        by_number = {e.number: e for e in updated.segments}
        sealed = [await self._segment_range(topic, by_number[n], successors) for n in plan.seal]
        created = [await self._segment_range(topic, e, successors) for e in plan.created]
        return ScaleOutcome(tuple(sorted(sealed, key=lambda r: r.key_low)),
                            tuple(sorted(created, key=lambda r: r.key_low)))

    async def get_successors(self, segment: str) -> tuple[SegmentRange, list[SegmentRange]]:
        """The segment and its successors by ``key_low``. ``NoSuchSegmentError``."""
        self._check_open()
        topic, number = parse_segment_name(segment)
        try:
            record, _ = await self._read_topic(topic)
        except TopicNotFoundError:
            raise NoSuchSegmentError(segment) from None
        entry = next((s for s in record.segments if s.number == number), None)
        if entry is None:
            raise NoSuchSegmentError(segment)
        successors = successors_of(record)
        after = [await self._segment_range(topic, e, successors)
                 for e in record.segments if number in e.predecessors]
        after.sort(key=lambda r: r.key_low)
        return await self._segment_range(topic, entry, successors), after

    async def seal_topic(self, topic: str) -> TopicInfo:
        """Seal every open segment, without successors; the topic takes no more events.

        Idempotent. ``TopicNotFoundError``; ``InternalTopicError`` for a system topic.
        """
        self._check_open()
        refuse_internal_topic(topic, "SealTopic")
        async with self._lock(f"topic:{topic}"):
            for _ in range(_CAS_ATTEMPTS):
                record, version = await self._read_topic(topic)
                to_seal = [e.number for e in record.segments if e.state is SegmentState.OPEN]
                updated = replace(record, sealed=True, segments=tuple(
                    replace(s, state=SegmentState.SEALED) for s in record.segments))
                if record.sealed and not to_seal:
                    break  # sealed already: finish any seal a crash cut short below
                if await self._replace_topic(topic, updated, version):
                    break
            else:
                raise BrokerError(f"topic {topic!r} kept changing; not sealed")
            # Sealed already: finish the seals a crash may have cut short.
            targets = to_seal or [e.number for e in updated.segments
                                  if e.number not in successors_of(updated)]
            for number in targets:
                await self._ensure_sealed(topic, number)
        log.info("sealed topic %s", topic)
        return await self._topic_info(updated)

    async def _replace_topic(self, topic: str, record: TopicRecord, version: int) -> bool:
        """CAS the topic record; False if it changed meanwhile."""
        try:
            await self._store.set(topic_path(topic), record.to_bytes(), version)
        except BadVersionError:
            log.info("topic %s changed under a scaling change; retrying", topic)
            return False
        except NoNodeError:
            raise TopicNotFoundError(topic) from None
        return True

    async def _ensure_sealed(self, topic: str, number: int) -> None:
        """Seal the segment in the ledger service unless it is sealed already."""
        name = make_segment_name(topic, number)
        loaded = self._segments.get(name)
        if loaded is not None and not _needs_reload(loaded):
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

    async def _end_offset(self, topic: str, segment: str) -> int:
        _, number = parse_segment_name(segment)
        with contextlib.suppress(BrokerError, LedgerError, NoNodeError):
            return (await self._segment_range(topic, TopicSegment(number, 0.0, 1.0))).end_offset
        return -1

    # ------------------------------------------------------------ segments

    async def segment(self, name: str) -> LedgerSegment:
        """The segment, loaded (and recovered) on first use. ``NoSuchSegmentError``."""
        self._check_open()
        segment = self._segments.get(name)
        if segment is not None and not _needs_reload(segment):
            return segment
        topic, number = parse_segment_name(name)
        async with self._lock(f"segment:{name}"):
            self._check_open()
            failed = self._segments.get(name)
            if failed is not None:
                if not _needs_reload(failed):
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
            return segment

    async def writable_segment(self, name: str, action: str) -> LedgerSegment:
        """``segment(name)`` for a public write (``action``: Append, Produce, TruncateSegment).

        ``InternalTopicError`` for a system topic's segment: only the broker's
        own components write those, through ``segment``.
        """
        refuse_internal_segment(name, action)
        return await self.segment(name)

    async def _load_segment(self, name: str, topic: str, number: int) -> LedgerSegment:
        """Load (recover) the segment from its record; the caller registers it."""
        try:
            record, _ = await self._read_topic(topic)
        except TopicNotFoundError:
            raise NoSuchSegmentError(name) from None
        entry = next((s for s in record.segments if s.number == number), None)
        if entry is None:
            raise NoSuchSegmentError(name)
        for predecessor in entry.predecessors:
            # A successor takes no append before all its predecessors are sealed.
            await self._ensure_sealed(topic, predecessor)
        segment = await LedgerSegment.load(
            self._ledgers, self._store, topic=topic, number=number,
            key_low=entry.key_low, key_high=entry.key_high, config=record.config,
            clock=self._clock, writer_expiry_ms=self._writer_expiry_ms,
            txn_store=None if is_system_topic(topic) else self.txn_snapshot_store(),
            txn_snapshots=self._txn_snapshots,
        )
        if entry.state is SegmentState.SEALED and not segment.sealed:
            await segment.seal()  # a scale whose seal a crash cut short
        return segment

    def loaded_segments(self) -> list[LedgerSegment]:
        """The segments loaded on this broker now (a copy; ``broker.metrics`` reads it)."""
        return list(self._segments.values())

    # --------------------------------------------------------- maintenance

    async def run_maintenance(self) -> None:
        """One round of background work on every loaded segment.

        Forgets idle writers, rolls ledgers over by age, applies retention,
        then runs the maintenance hooks.
        """
        now_ms = self._now_ms()
        for segment in list(self._segments.values()):
            if not segment.usable:
                continue
            try:
                await segment.tick(now_ms)
                await segment.apply_retention(now_ms)
            except (BrokerError, LedgerError) as error:
                log.warning("segment %s: maintenance failed: %s", segment.name, error)
        await self._auto_scale(now_ms)
        for hook in list(self._hooks):
            try:
                await hook()
            except (BrokerError, LedgerError) as error:
                log.warning("maintenance hook %r failed: %s", hook, error)

    async def _auto_scale(self, now_ms: int) -> None:
        """Measure the event rates of auto-scaled topics' segments; scale where the rule says."""
        topics = {segment.name.rpartition("/")[0] for segment in self._segments.values()
                  if segment.usable and segment.config.scale_target_events_per_s > 0}
        for topic in sorted(topics):
            if is_system_topic(topic):
                continue
            try:
                record, _ = await self._read_topic(topic)
                open_entries = [e for e in record.segments if e.state is SegmentState.OPEN]
                ends: dict[int, int | None] = {}
                for entry in open_entries:
                    # From the loaded segment, else its record (a segment never written).
                    ends[entry.number] = (await self._segment_offsets(topic, entry)).end_offset
                rates = self._rates.sample(topic, now_ms, ends)
                config = record.config
                if now_ms - record.scaled_ms < config.scale_cooldown_ms:
                    continue
                change = auto_scale(topic, open_entries, rates, config)
                if change is not None:
                    seal, ranges = change
                    log.info("auto-scaling topic %s: sealing %s, new ranges %s (rates %s)",
                             topic, seal, ranges, rates)
                    await self.scale_topic(topic, seal, ranges, scaled_ms=now_ms)
            except (BrokerError, LedgerError) as error:
                log.warning("topic %s: auto-scaling failed: %s", topic, error)

    async def _maintain_forever(self) -> None:
        while True:
            await asyncio.sleep(self._interval_s)
            try:
                await self.run_maintenance()
            except Exception:
                log.exception("topic maintenance failed")

    # ------------------------------------------------------------- helpers

    def _check_open(self) -> None:
        if self._closed:
            raise BrokerShuttingDownError("the broker is shutting down")

    def _lock(self, key: str) -> asyncio.Lock:
        lock = self._locks.get(key)
        if lock is None:
            lock = asyncio.Lock()
            self._locks[key] = lock
        return lock

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    async def _read_topic(self, name: str) -> tuple[TopicRecord, int]:
        try:
            check_topic_name(name, internal=True)
        except TopicNameError:
            raise TopicNotFoundError(name) from None
        try:
            node = await self._store.get(topic_path(name))
        except NoNodeError:
            raise TopicNotFoundError(name) from None
        return TopicRecord.from_bytes(node.data), node.version

    async def _topic_info(self, record: TopicRecord) -> TopicInfo:
        ranges = [await self._segment_range(record.name, entry)
                  for entry in record.segments if entry.state is SegmentState.OPEN]
        ranges.sort(key=lambda r: r.key_low)
        return TopicInfo(record.name, record.config, tuple(ranges), record.created_ms,
                         record.sealed)

    async def _segment_range(self, topic: str, entry: TopicSegment,
                             successors: Mapping[int, list[int]] | None = None) -> SegmentRange:
        found = await self._segment_offsets(topic, entry)
        after = successors.get(entry.number, []) if successors is not None else []
        return replace(
            found,
            # The topic record is the authority: a seal it records is under way.
            state=SegmentState.SEALED if entry.state is SegmentState.SEALED else found.state,
            predecessors=tuple(make_segment_name(topic, n) for n in entry.predecessors),
            successors=tuple(make_segment_name(topic, n) for n in after))

    async def _segment_offsets(self, topic: str, entry: TopicSegment) -> SegmentRange:
        name = make_segment_name(topic, entry.number)
        segment = self._segments.get(name)
        if segment is not None and segment.usable:
            return segment.info().segment
        start = end = 0
        try:
            node = await self._store.get(segment_path(topic, entry.number))
            record = SegmentRecord.from_bytes(node.data)
            start, end = record.start_offset, await peek_end_offset(self._ledgers, record)
        except NoNodeError:
            pass  # being deleted
        return SegmentRange(name, entry.number, entry.key_low, entry.key_high, entry.state,
                            start, end)


def _needs_reload(segment: LedgerSegment) -> bool:
    # A segment another broker took (WrongHostError) stays failed: loading it
    # again would fence the new owner.
    failure = segment.failure
    return failure is not None and not isinstance(failure, WrongHostError)
