"""Keyed, compacted system topics: the broker's own state in its own segments.

A ``CompactedTopic`` is a one-segment system topic (``_`` name, created
internal on first use) whose blocks are records ``key -> value | tombstone``
(``broker.system.records``). Readers see the latest record per key. The topic
keeps an index in memory, key -> offset and size of its latest live record,
rebuilt on load by reading the segment from its start; values are read from
the segment when asked for.

Writes are committed in groups (as a bookie's journal commits): a write
queues its record, and whoever holds the write lock next appends every queued
record that fits one entry, waits until that entry is durable, updates the
index and wakes the writers of the group. So concurrent writers share one
durable append, and the index always follows the segment's order. An append
that fails (or is cancelled) may still have landed: the index is then rebuilt
from the segment before the next call, and every writer of the group gets the
error. ``compact``
(``broker.system.compaction``) rewrites the topic without covered records.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

from broker.api import Block, TopicConfig
from broker.errors import (
    BrokerShuttingDownError,
    CorruptDataError,
    NoSuchSegmentError,
    OffsetOutOfRangeError,
    TopicExistsError,
)
from broker.segments.entry import FRAME_HEADER_BYTES, HEADER_BYTES
from broker.segments.names import (
    SYSTEM_TOPIC_PREFIX,
    check_topic_name,
    is_system_topic,
    make_segment_name,
)
from broker.segments.segment import LedgerSegment
from broker.system.compaction import CompactionPolicy, CompactionResult, compact
from broker.system.records import (
    MAX_EVENT_BYTES,
    decode_record,
    encode_record,
    max_value_bytes,
)
from broker.topics.manager import TopicManager

__all__ = ["CompactedTopic", "TopicStats"]

log = logging.getLogger(__name__)

#: Bytes asked of the segment per read when loading or fetching values.
READ_BYTES = 1024 * 1024
_READ_ATTEMPTS = 10


@dataclass(frozen=True, slots=True)
class _Queued:
    """A record waiting for its group's append."""

    key: str
    data: bytes
    tombstone: bool
    done: asyncio.Future[None]


@dataclass(frozen=True, slots=True)
class TopicStats:
    """Sizes of a compacted topic, in record bytes (entry framing left out).

    Attributes:
        live_keys: keys with a live value.
        live_bytes: bytes of their latest records.
        total_bytes: bytes of every record in the segment (live, covered, tombstones).
        start_offset: the segment's first offset.
        end_offset: the segment's end.
    """

    live_keys: int
    live_bytes: int
    total_bytes: int
    start_offset: int
    end_offset: int

    @property
    def dead_bytes(self) -> int:
        """Bytes of records a later one covers, and of tombstones."""
        return self.total_bytes - self.live_bytes


class CompactedTopic:
    """A keyed system topic on ``topics``: latest record per key, compacted.

    Args:
        topics: the broker's topics.
        name: the system topic's name (``broker.segments.names.is_system_topic``).
        policy: when ``maybe_compact`` compacts.
        maintain: run ``maybe_compact`` at each maintenance round of ``topics``.
        batch_bytes: most bytes of records compaction copies per entry
            (default: as much as one entry holds).
        number: the segment this instance keeps (default 0). A topic of
            several segments (``segment_count``) is several independent keyed
            logs, one instance each: the cluster's snapshot topic has one per
            segment container (``broker.cluster.snapshots``).
        segment_count: the segments the topic is created with, if it is missing.
    """

    def __init__(self, topics: TopicManager, name: str, *,
                 policy: CompactionPolicy | None = None, maintain: bool = True,
                 batch_bytes: int | None = None, number: int = 0,
                 segment_count: int = 1) -> None:
        check_topic_name(name, internal=True)
        if not is_system_topic(name):
            raise ValueError(f"system topic name must start with {SYSTEM_TOPIC_PREFIX!r}, "
                             f"got {name!r}")
        self._topics = topics
        self._name = name
        if not 0 <= number < segment_count:
            raise ValueError(f"segment number {number} not in [0, {segment_count})")
        self._segment_name = make_segment_name(name, number)
        self._segment_count = segment_count
        self._policy = policy or CompactionPolicy()
        entry_room = topics.max_entry_bytes - HEADER_BYTES
        self._batch_bytes = min(batch_bytes or entry_room, entry_room)
        self._max_value = max_value_bytes(topics.max_entry_bytes)
        self._index: dict[str, tuple[int, int]] = {}  # key -> (offset, record bytes)
        self._queue: collections.deque[_Queued] = collections.deque()  # writes not yet appended
        self._live_bytes = 0
        self._total_bytes = 0
        self._loaded = False
        self._lock = asyncio.Lock()  # writes, loads, compaction's copies
        self._compaction_lock = asyncio.Lock()
        if maintain:
            topics.add_maintenance_hook(self.maybe_compact)

    @property
    def name(self) -> str:
        """The topic's name."""
        return self._name

    @property
    def max_record_bytes(self) -> int:
        """The largest value ``write`` accepts (the entry limit less framing and key)."""
        return self._max_value

    # ------------------------------------------------------------- reading

    async def stats(self) -> TopicStats:
        """Sizes now (loads the topic first)."""
        segment = await self._ready()
        return TopicStats(len(self._index), self._live_bytes, self._total_bytes,
                          segment.start_offset, segment.end_offset)

    async def read_prefix(self, prefix: str) -> Mapping[str, bytes]:
        """The latest value of every live key starting with ``prefix``, by key."""
        for _ in range(_READ_ATTEMPTS):
            await self._ready()
            wanted = sorted((slot[0], key) for key, slot in self._index.items()
                            if key.startswith(prefix))
            try:
                values = await self._read_values(wanted)
            except OffsetOutOfRangeError:
                continue  # compaction truncated what the index named: look again
            return {key: values[key] for key in sorted(values)}
        raise OffsetOutOfRangeError(self._segment_name, -1, -1, -1)

    async def get(self, key: str) -> bytes | None:
        """The latest value of ``key``, None if it has none."""
        values = await self.read_prefix(key)
        return values.get(key)

    async def _read_values(self, wanted: Sequence[tuple[int, str]]) -> dict[str, bytes]:
        """Values of the records at the given (offset, key), sorted by offset."""
        segment = await self._topics.segment(self._segment_name)
        values: dict[str, bytes] = {}
        fetched: dict[int, bytes] = {}
        for offset, key in wanted:
            data = fetched.pop(offset, None)
            if data is None:
                fetched = {}
                batch = await segment.read(offset, READ_BYTES)
                for block in batch.blocks:
                    fetched[block.offset] = block.data
                data = fetched.pop(offset)
            value = decode_record(data).value
            if value is not None:
                values[key] = value
        return values

    # ------------------------------------------------------------- writing

    async def write(self, key: str, value: bytes | None) -> None:
        """Append ``key -> value`` (None: a tombstone) and wait until it is durable.

        Raises ``InvalidArgumentError`` for a bad key, ``EventTooLargeError`` for
        a value above ``max_record_bytes``, and what the segment raises.
        """
        data = encode_record(key, value, self._max_value)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        # A writer cancelled while it waits (its gRPC call was cancelled, say)
        # never looks at ``done``, though a leader fails it with the group's
        # error; without this asyncio logs "Future exception was never
        # retrieved" for it (seen after crashes, when clients cut and retry).
        done.add_done_callback(_retrieve)
        self._queue.append(_Queued(key, data, value is None, done))
        while not done.done():
            await self._lock.acquire()
            if done.done():  # an earlier leader's group held this record
                self._lock.release()
                break
            # The group commit runs as a task of its own, holding the lock until it
            # ends: a leader cancelled meanwhile (its gRPC call was cut) leaves the
            # others' records to be committed, instead of failing them with it.
            commit = asyncio.ensure_future(self._commit_group_locked())
            commit.add_done_callback(self._end_commit)
            await asyncio.shield(commit)
        done.result()

    def _end_commit(self, commit: asyncio.Future[None]) -> None:
        """A group commit ended: the lock is free; its error was given to its writers."""
        self._lock.release()
        if not commit.cancelled():
            commit.exception()  # seen: every writer of the group got it

    async def _commit_group_locked(self) -> None:
        """Append the queued records that fit one entry, as one entry; wake their writers."""
        group: list[_Queued] = []
        room = self._batch_bytes
        while self._queue and (not group
                               or len(self._queue[0].data) + FRAME_HEADER_BYTES <= room):
            queued = self._queue.popleft()
            room -= len(queued.data) + FRAME_HEADER_BYTES
            group.append(queued)
        try:
            segment = await self._load_locked()
            offsets = await self._append_locked(segment, [q.data for q in group])
        except BaseException as error:
            # The others see the error; a cancelled commit (a shutdown) is no error of theirs.
            failure = (error if isinstance(error, Exception)
                       else BrokerShuttingDownError(f"write to {self._name} was cancelled"))
            for queued in group:
                if not queued.done.done():
                    queued.done.set_exception(failure)
            raise
        for queued, offset in zip(group, offsets, strict=True):
            self._note(queued.key, offset, queued.data, queued.tombstone)
            if not queued.done.done():
                queued.done.set_result(None)

    async def _append_locked(self, segment: LedgerSegment, records: list[bytes]) -> list[int]:
        """Append ``records`` as one entry; their offsets."""
        try:
            result = await segment.append([Block(data, 1) for data in records], "", -1)
        except BaseException:
            self._loaded = False  # it may have landed anyway: read the segment again
            raise
        return list(range(result.offset, result.offset + len(records)))

    def _note(self, key: str, offset: int, data: bytes, tombstone: bool) -> None:
        old = self._index.pop(key, None)
        if old is not None:
            self._live_bytes -= old[1]
        if not tombstone:
            self._index[key] = (offset, len(data))
            self._live_bytes += len(data)
        self._total_bytes += len(data)

    # ------------------------------------------------------------- loading

    async def _ready(self) -> LedgerSegment:
        if self._loaded:
            return await self._topics.segment(self._segment_name)
        async with self._lock:
            return await self._load_locked()

    async def _load_locked(self) -> LedgerSegment:
        """The segment, with the index rebuilt first if it is not current."""
        segment = await self._open_segment()
        if self._loaded:
            return segment
        self._index, self._live_bytes, self._total_bytes = {}, 0, 0
        await self._restore_config()
        offset = segment.start_offset
        while True:
            batch = await segment.read(offset, READ_BYTES)
            if not batch.blocks:
                break
            for block in batch.blocks:
                try:
                    record = decode_record(block.data)
                except CorruptDataError as error:
                    self._skip(block.offset, block.data, error)
                    continue
                self._note(record.key, block.offset, block.data, record.value is None)
            offset = batch.blocks[-1].offset + batch.blocks[-1].event_count
        self._loaded = True
        log.info("system topic %s: loaded %d live keys from offsets [%d, %d)", self._name,
                 len(self._index), segment.start_offset, offset)
        return segment

    def forget(self) -> None:
        """Rebuild the index from the segment on next use (another broker may have written it)."""
        self._loaded = False

    def _skip(self, offset: int, data: bytes, error: CorruptDataError) -> None:
        """Leave out a block that is no record: it names no key, so no key's state changes.

        Such a block was never written by ``write`` (which only appends encoded
        records): it is bytes a public write put there before system topics
        were closed to them, or damage. Compaction drops it with the covered
        records (it is in no key's index slot); this line is what remains of it.
        """
        self._total_bytes += len(data)
        log.error("system topic %s: skipped the block at offset %d of segment %s "
                  "(%d bytes, starting %s): not a system record: %s", self._name, offset,
                  self._segment_name, len(data), data[:16].hex(), error)

    def offset_of(self, key: str) -> int | None:
        """The offset of ``key``'s latest record (for log lines), None if it has none."""
        slot = self._index.get(key)
        return None if slot is None else slot[0]

    @property
    def segment_name(self) -> str:
        """The segment this instance keeps, ``"<topic>/<number>"`` (``"<topic>/0"``)."""
        return self._segment_name

    def _config(self) -> TopicConfig:
        """The configuration the broker gives its system topics (no retention, no scaling)."""
        return TopicConfig(max_event_bytes=min(MAX_EVENT_BYTES, self._topics.max_entry_bytes))

    async def _open_segment(self) -> LedgerSegment:
        try:
            return await self._topics.segment(self._segment_name)
        except NoSuchSegmentError:
            pass  # the topic is not there yet
        with contextlib.suppress(TopicExistsError):  # created meanwhile
            await self._topics.create_topic(self._name, self._segment_count, self._config(),
                                            internal=True)
        return await self._topics.segment(self._segment_name)

    async def _restore_config(self) -> None:
        """Put the system configuration back if the topic's differs.

        Only a public UpdateTopicConfig from before system topics were closed
        to it could have changed it, and a changed one breaks the broker: a
        small ``max_event_bytes`` refuses every record, a retention deletes
        state (commit keys, transactions) that must stay.
        """
        expected = self._config()
        actual = (await self._topics.get_topic(self._name)).config
        changes = {name: getattr(expected, name) for name in TopicConfig.__dataclass_fields__
                   if getattr(actual, name) != getattr(expected, name)}
        if changes:
            log.error("system topic %s: its configuration was changed (%s); putting back %s",
                      self._name, {name: getattr(actual, name) for name in changes}, changes)
            await self._topics.update_topic_config(self._name, changes, internal=True)

    # ---------------------------------------------------------- compaction

    async def compact(self, hook: Callable[[str], Awaitable[None]] | None = None,
                      ) -> CompactionResult:
        """Rewrite the topic without covered records (``broker.system.compaction``)."""
        return await compact(self, hook=hook)

    async def maybe_compact(self) -> CompactionResult | None:
        """Compact if the policy says the dead bytes are worth it (a topic in use only)."""
        if not self._loaded or not self._policy.due(await self.stats()):
            return None
        return await self.compact()

    @property
    def compaction_lock(self) -> asyncio.Lock:
        """Held by a compaction for its whole run (one at a time)."""
        return self._compaction_lock

    async def start_compaction(self) -> tuple[int, list[tuple[int, str]], int]:
        """Compaction step 1: roll the ledger over, with no write under way.

        Returns the compaction point (the new ledger's first offset), the
        (offset, key) of the live records before it by offset, and the record
        bytes before it.
        """
        async with self._lock:
            segment = await self._load_locked()
            point = await segment.roll_over()
            before = sorted((slot[0], key) for key, slot in self._index.items()
                            if slot[0] < point)
            return point, before, self._total_bytes

    def batches(self, records: list[tuple[int, str]]) -> list[list[tuple[int, str]]]:
        """Split ``records`` into groups whose copies fit one entry each."""
        groups: list[list[tuple[int, str]]] = [[]]
        room = self._batch_bytes
        for offset, key in records:
            slot = self._index.get(key)
            size = (slot[1] if slot else 0) + FRAME_HEADER_BYTES
            if groups[-1] and size > room:
                groups.append([])
                room = self._batch_bytes
            groups[-1].append((offset, key))
            room -= size
        return [group for group in groups if group]

    async def copy_records(self, records: list[tuple[int, str]]) -> int:
        """Compaction step 2: append again those of ``records`` still latest; how many.

        The values are read first; then, under the write lock, a record whose
        key was written since is left out (the newer record covers it), and
        the others are appended as one entry.
        """
        try:
            values = await self._read_values(records)
        except OffsetOutOfRangeError:
            values = {}
        async with self._lock:
            segment = await self._load_locked()
            current = [(offset, key) for offset, key in records
                       if key in values and self._index.get(key, (-1, 0))[0] == offset]
            if not current:
                return 0
            datas = [encode_record(key, values[key], self._max_value) for _, key in current]
            offsets = await self._append_locked(segment, datas)
            for (_, key), offset, data in zip(current, offsets, datas, strict=True):
                self._note(key, offset, data, tombstone=False)
            return len(current)

    async def finish_compaction(self, point: int, bytes_before: int) -> int:
        """Compaction step 3: delete the ledgers before ``point``; the new start offset."""
        async with self._lock:
            segment = await self._load_locked()
            info = await segment.truncate(point)
            self._total_bytes -= bytes_before
            return info.segment.start_offset


def _retrieve(future: asyncio.Future[None]) -> None:
    """Mark ``future``'s exception as seen: its writer raises it, or was cancelled."""
    if not future.cancelled():
        future.exception()
