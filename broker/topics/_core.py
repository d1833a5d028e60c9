"""The state of a ``TopicManager`` and what every part of it uses.

``TopicsCore`` holds the fields (ledgers, metadata store, clock, per-topic
locks, the table of loaded segments: ``loaded.LoadedSegments``, a part that
owns its state) and the record helpers the mixins share: reading a topic
record, a segment's offsets (from the loaded segment, else its record), a
topic's ``TopicInfo``. The mixins ``_crud`` and ``_scale`` are on it, composed
in ``broker.topics.manager`` with the maintenance round (a part too,
``broker.topics.maintenance``).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Self

from broker.api import SegmentRange, SegmentState, StoredWriter, TopicConfig, TopicInfo
from broker.errors import (
    BrokerShuttingDownError,
    TopicExistsError,
)
from broker.segments.names import (
    make_segment_name,
    segment_path,
    topic_path,
)
from broker.segments.reads import peek_end_offset
from broker.segments.records import SegmentRecord
from broker.segments.segment import LedgerSegment
from broker.segments.writers import DEFAULT_WRITER_EXPIRY_MS
from broker.topics.loaded import LoadedSegments, read_topic
from broker.topics.records import TopicRecord, TopicSegment
from ledger.api import LedgerService, MetadataStore
from ledger.errors import BadVersionError, NodeExistsError, NoNodeError
from txnbuffer.api import SnapshotPolicy, SnapshotStore

__all__ = ["CAS_ATTEMPTS", "TopicsCore"]

log = logging.getLogger(__name__)

#: How often a compare-and-set of a topic record is tried before giving up.
CAS_ATTEMPTS = 100


class TopicsCore:
    """The fields of a topic manager and the helpers its parts share (see ``TopicManager``)."""

    def __init__(
        self, ledgers: LedgerService, store: MetadataStore, *,
        txn_store_factory: Callable[[Self], SnapshotStore],
        defaults: TopicConfig | None = None,
        clock: Callable[[], float] = time.time,
        writer_expiry_ms: int = DEFAULT_WRITER_EXPIRY_MS,
        txn_snapshots: SnapshotPolicy | None = None,
        reload_fenced: bool = False,
    ) -> None:
        if writer_expiry_ms <= 0:
            raise ValueError(f"writer_expiry_ms must be positive, got {writer_expiry_ms}")
        self._ledgers = ledgers
        self._store = store
        self._defaults = defaults or TopicConfig()
        self._clock = clock
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = (
            weakref.WeakValueDictionary())
        self._closed = False
        self._loaded = LoadedSegments(
            ledgers, store, check_open=self._check_open, clock=clock,
            writer_expiry_ms=writer_expiry_ms,
            txn_snapshots=txn_snapshots or SnapshotPolicy(),
            make_txn_store=functools.partial(txn_store_factory, self),
            reload_fenced=reload_fenced)

    async def close(self) -> None:
        """Refuse further calls and close every loaded segment's ledger cleanly."""
        self._closed = True
        await self._loaded.close()

    @property
    def max_entry_bytes(self) -> int:
        """The ledger entry limit: one append (header and blocks) is at most this."""
        return self._ledgers.max_entry_bytes

    def default_config(self) -> TopicConfig:
        """The configuration a topic gets for the fields its creator leaves unset."""
        return self._defaults

    def txn_snapshot_store(self) -> SnapshotStore:
        """The transaction buffers' snapshot store (``_txnbuffer_snapshots``), made once."""
        return self._loaded.txn_snapshot_store()

    async def segment(self, name: str) -> LedgerSegment:
        """The segment, loaded (and recovered) on first use. ``NoSuchSegmentError``.

        Its transaction buffer is recovered too (``LedgerSegment.recovered``).
        """
        return await self._loaded.segment(name)

    async def writable_segment(self, name: str, action: str) -> LedgerSegment:
        """``segment(name)`` for a public write (``action``: Append, Produce, TruncateSegment).

        ``InternalTopicError`` for a system topic's segment (``LoadedSegments``).
        """
        return await self._loaded.writable_segment(name, action)

    async def stored_writer(self, name: str, writer_id: str,
                            failed_ledger_id: int) -> StoredWriter:
        """A writer's state as segment ``name`` stores it, without loading it here."""
        return await self._loaded.stored_writer(name, writer_id, failed_ledger_id)

    async def release_segments(self, moving: Callable[[str], bool]) -> None:
        """Hand over every loaded segment whose name ``moving`` accepts, and forget it."""
        await self._loaded.release_segments(moving)

    def drop_segments(self, moving: Callable[[str], bool]) -> None:
        """Forget every loaded segment ``moving`` accepts, at once, touching no store."""
        self._loaded.drop_segments(moving)

    async def open_segment_names(self) -> list[str]:
        """The names of every open (unsealed) segment of the user topics, from their records."""
        return await self._loaded.open_segment_names()

    def loaded_segments(self) -> list[LedgerSegment]:
        """The segments loaded on this broker now (a copy; ``broker.metrics`` reads it)."""
        return self._loaded.loaded_segments()

    async def _create_segment_record(self, topic: str, number: int, *,
                                     new_topic: bool = False) -> None:
        """Write a segment's first record; ``new_topic``: for ``create_topic``.

        ``new_topic`` raises ``TopicExistsError`` when the record exists and
        the topic's record does too, or changes meanwhile (below).
        """
        data = SegmentRecord(topic, number).to_bytes()
        path = segment_path(topic, number)
        try:
            await self._store.create(path, data, make_parents=True)
        except NodeExistsError:
            if not new_topic:
                # A successor left by a scaling that did not land (the topic
                # record did not list it): no topic owns it, ours to overwrite.
                await self._store.set(path, data, -1)
                return
            # Left by a create that crashed before its topic record (no topic
            # owns it: ours to overwrite), or made by a concurrent create of
            # the same name (another connection's or broker's: Kafka clients
            # auto-create topics), whose topic may be in use already. So it is
            # overwritten only while no topic record exists, and only at the
            # version read: a change since (a ledger recorded by the topic's
            # first append) makes the set fail, and the topic exists.
            existing = await self._store.get(path)
            if await self._store.exists(topic_path(topic)):
                raise TopicExistsError(topic) from None
            try:
                await self._store.set(path, data, existing.version)
            except BadVersionError:
                raise TopicExistsError(topic) from None

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
        return await read_topic(self._store, name)

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
        segment = self._loaded.get(name)
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

