"""The topic records as the parts of a ``TopicManager`` read and change them.

``TopicCatalog`` is a part that owns its state: the per-topic locks (one
change of a topic at a time, whichever part makes it: ``crud`` or
``scale``). Over its collaborators (the metadata store, the ledger service
for the end offset of a segment not loaded here, the table of loaded
segments) it reads a topic record, replaces it by a compare-and-set whose
unknown outcome it reads back, creates a segment record, gives a topic of
an earlier build its topic id (``topic_id``), and describes a
topic (``TopicInfo``) and its segments (``SegmentRange``: offsets from the
loaded segment, else from its record).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
import weakref
from collections.abc import Mapping
from dataclasses import replace

from broker.api import SegmentRange, SegmentState, TopicInfo
from broker.errors import BrokerError, TopicExistsError, TopicNotFoundError
from broker.segments.names import (
    make_segment_name,
    segment_path,
    topic_path,
)
from broker.segments.reads import peek_end_offset
from broker.segments.records import SegmentRecord
from broker.topics.loaded import LoadedSegments, read_topic
from broker.topics.records import TopicRecord, TopicSegment
from ledger.api import LedgerService, MetadataStore
from ledger.errors import BadVersionError, MetadataUnavailableError, NodeExistsError, NoNodeError
from ledger.metadata.read_back import landed

__all__ = ["CAS_ATTEMPTS", "TopicCatalog"]

log = logging.getLogger(__name__)

#: How often a compare-and-set of a topic record is tried before giving up.
CAS_ATTEMPTS = 100


class TopicCatalog:
    """The topic records, their locks and their descriptions (a part of ``TopicManager``).

    Args:
        ledgers: the ledger service (end offsets of segments not loaded here).
        store: where topic and segment records live.
        loaded: the table of loaded segments (offsets of the loaded ones).
    """

    def __init__(self, ledgers: LedgerService, store: MetadataStore,
                 loaded: LoadedSegments) -> None:
        self._ledgers = ledgers
        self._store = store
        self._loaded = loaded
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = (
            weakref.WeakValueDictionary())

    def lock(self, topic: str) -> asyncio.Lock:
        """The topic's lock: one change of its record (create, delete, config, scale) at a time."""
        lock = self._locks.get(topic)
        if lock is None:
            lock = asyncio.Lock()
            self._locks[topic] = lock
        return lock

    async def read(self, name: str) -> tuple[TopicRecord, int]:
        """The topic's record and its version. ``TopicNotFoundError`` (a bad name too)."""
        return await read_topic(self._store, name)

    async def replace(self, topic: str, record: TopicRecord, version: int, *,
                      change: str) -> bool:
        """CAS the topic record; False if it changed meanwhile (``change`` names it in the log).

        ``TopicNotFoundError`` if it is gone.
        """
        try:
            await self._store.set(topic_path(topic), record.to_bytes(), version)
        except BadVersionError:
            log.info("topic %s changed %s; retrying", topic, change)
            return False
        except NoNodeError:
            raise TopicNotFoundError(topic) from None
        except MetadataUnavailableError:
            # Maybe applied: our record there means it was; otherwise (not
            # applied, or changed since) the caller reads again and retries.
            return await landed(self._store, topic_path(topic), record.to_bytes()) is not None
        return True

    async def topic_id(self, name: str) -> str:
        """The topic's id; a record of an earlier build (none) is given one here.

        No lock: the compare-and-set is the guard, against this broker's other
        changes of the record (they keep the id: they ``replace`` the record
        read) and other brokers giving it one at the same time (one id wins,
        the others read it back). Crash windows: before the set, nothing
        changed (the next reader gives one); after it, the id is stored and
        every reader sees it. An unknown outcome of the set is read back
        (``replace``): ours landed, else the loop reads the record again and
        finds the id that won or tries again. ``TopicNotFoundError``;
        ``MetadataUnavailableError`` when the store cannot say (ask again).
        """
        for _ in range(CAS_ATTEMPTS):
            record, version = await self.read(name)
            if record.topic_id:
                return record.topic_id
            given = replace(record, topic_id=str(uuid.uuid4()))
            if await self.replace(name, given, version, change="while given its topic id"):
                log.info("gave topic %s (made by an earlier build) topic id %s",
                         name, given.topic_id)
                return given.topic_id
        raise BrokerError(f"topic {name!r} kept changing; no topic id given")

    async def create_segment_record(self, topic: str, number: int, *,
                                    new_topic: bool = False) -> None:
        """Write the record of a new segment (before the topic record that lists it).

        ``new_topic`` (``create_topic``'s segments) raises ``TopicExistsError``
        when the record exists and the topic's record does too, or changes
        meanwhile (below).
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

    async def info(self, record: TopicRecord) -> TopicInfo:
        """The topic with its open segments by ``key_low`` (and its id, given if none)."""
        topic_id = record.topic_id or await self.topic_id(record.name)
        ranges = [await self.segment_range(record.name, entry)
                  for entry in record.segments if entry.state is SegmentState.OPEN]
        ranges.sort(key=lambda r: r.key_low)
        return TopicInfo(record.name, record.config, tuple(ranges), record.created_ms,
                         record.sealed, topic_id)

    async def segment_range(self, topic: str, entry: TopicSegment,
                            successors: Mapping[int, list[int]] | None = None) -> SegmentRange:
        """The segment as the topic record lists it, with its offsets and neighbours."""
        found = await self.segment_offsets(topic, entry)
        after = successors.get(entry.number, []) if successors is not None else []
        return replace(
            found,
            # The topic record is the authority: a seal it records is under way.
            state=SegmentState.SEALED if entry.state is SegmentState.SEALED else found.state,
            predecessors=tuple(make_segment_name(topic, n) for n in entry.predecessors),
            successors=tuple(make_segment_name(topic, n) for n in after))

    async def segment_offsets(self, topic: str, entry: TopicSegment) -> SegmentRange:
        """The segment's offsets: from the loaded segment, else its record (0, 0 if gone)."""
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
