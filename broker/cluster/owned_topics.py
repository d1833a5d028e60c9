"""``OwnedTopics``: the topics as the public services of a cluster broker see them.

The calls on one segment's data (``segment``, ``writable_segment``: the
Append stream's SetupAppend, Read, GetSegmentInfo, TruncateSegment, Produce)
are served only while this broker owns the segment's container; elsewhere
they raise ``WrongHostError`` carrying the owner when known. The ownership
check is a set lookup in memory, made once per call or SetupAppend, never
per block: a segment that moves while a stream is bound to it fails that
stream's next block itself (``LedgerSegment.hand_over`` / ``abandon``).

**Writes pause** while the broker's metadata session is SUSPENDED
(``check_writable`` raises a WrongHost without an owner, saying why): a
SetupAppend, Produce or TruncateSegment is refused, and so is every block of
a stream bound before (the segment handles given out check it
before each append: one call per block, constant work). Appends already
handed to a segment finish. Reads are not gated (docs/cluster.md, "Session
loss"). ScaleTopic and SealTopic, which write ledgers and the metadata store
the broker cannot reach, are refused with ``MetadataUnavailableError``.

Topic-level calls (create, get, list, configure, scale, seal, delete) are
answered by any broker from the shared metadata store. Scaling and sealing
may seal segments another broker owns: this broker loads them (recovery
fences the owner's ledger), seals them, and lets them go again; the owner's
next append meets the fence and it loads the segment again, sealed.

The broker's own components (coordinator, system topics, snapshots) use the
``TopicManager`` itself, not this view; the snapshot store checks ownership
itself (``broker.cluster.snapshots``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from broker.api import (
    AppendResult,
    Block,
    Isolation,
    ReadBatch,
    ScaleOutcome,
    SegmentHandle,
    SegmentInfo,
    SegmentRange,
    StoredWriter,
    TopicConfig,
    TopicInfo,
    WriterStates,
)
from broker.cluster.containers import PER_CONTAINER_TOPICS, container_of
from broker.cluster.snapshots import ContainerSnapshotStore
from broker.errors import WrongHostError
from broker.segments.names import is_system_topic, parse_segment_name
from broker.topics.manager import TopicManager
from ledger.errors import MetadataUnavailableError
from txnbuffer.api import TxnId

__all__ = ["OwnedTopics", "TopicsHandover"]


class OwnedTopics:
    """``Topics`` restricted to the segments ``owns`` accepts (see the module docstring).

    Args:
        topics: the broker's topic manager.
        owns: whether this broker serves a segment now.
        owner_of: the owner's address, "" when unknown.
        check_writable: raises ``WrongHostError`` (no owner) while writes are
            paused (the metadata session is SUSPENDED); default: never.
    """

    def __init__(self, topics: TopicManager, owns: Callable[[str], bool],
                 owner_of: Callable[[str], str],
                 check_writable: Callable[[str], None] = lambda _segment: None) -> None:
        self._topics = topics
        self._owns = owns
        self._owner_of = owner_of
        self._check_writable = check_writable

    def _check(self, name: str) -> None:
        if not self._owns(name):
            raise WrongHostError(name, self._owner_of(name))

    async def segment(self, name: str) -> SegmentHandle:
        self._check(name)
        return await self._still_owned(name, await self._topics.segment(name))

    async def writable_segment(self, name: str, action: str) -> SegmentHandle:
        self._check(name)
        self._check_writable(name)
        segment = await self._still_owned(name,
                                          await self._topics.writable_segment(name, action))
        return _GatedSegment(segment, self._check_writable)

    async def stored_writer(self, name: str, writer_id: str,
                            failed_ledger_id: int) -> StoredWriter:
        # A read of the stored state: served whoever owns the segment (that is
        # what it is for: a failed append's outcome after the segment moved).
        return await self._topics.stored_writer(name, writer_id, failed_ledger_id)

    def _check_topic_writable(self, topic: str) -> None:
        """Scale and seal write ledgers and metadata: refused at once while paused."""
        try:
            self._check_writable(topic)
        except WrongHostError as error:  # (raised only while paused)
            raise MetadataUnavailableError(str(error)) from None

    async def _still_owned(self, name: str, segment: SegmentHandle) -> SegmentHandle:
        """``segment`` if its container is still ours after the load, else WrongHost.

        A load (recovery) takes round trips; the container may have been
        released meanwhile, after the handover had unloaded what was loaded
        then. The segment just loaded is handed over too, not left behind.
        """
        if self._owns(name):
            return segment
        await self._topics.release_segments(lambda loaded: loaded == name)
        raise WrongHostError(name, self._owner_of(name))

    async def create_topic(self, name: str, segment_count: int,
                           config: TopicConfig) -> TopicInfo:
        return await self._topics.create_topic(name, segment_count, config)

    async def get_topic(self, name: str) -> TopicInfo:
        return await self._topics.get_topic(name)

    async def list_topics(self, *, include_internal: bool = False) -> list[TopicInfo]:
        return await self._topics.list_topics(include_internal=include_internal)

    async def topic_id(self, name: str) -> str:
        return await self._topics.topic_id(name)

    async def delete_topic(self, name: str) -> None:
        await self._topics.delete_topic(name)

    async def update_topic_config(self, name: str, changes: Mapping[str, int]) -> TopicInfo:
        return await self._topics.update_topic_config(name, changes)

    def default_config(self) -> TopicConfig:
        return self._topics.default_config()

    async def list_segments(self, topic: str, *, include_sealed: bool) -> list[SegmentRange]:
        return await self._topics.list_segments(topic, include_sealed=include_sealed)

    async def scale_topic(self, topic: str, seal: Sequence[str],
                          new_ranges: Sequence[tuple[float, float]]) -> ScaleOutcome:
        self._check_topic_writable(topic)
        try:
            return await self._topics.scale_topic(topic, seal, new_ranges)
        finally:
            await self._let_go()

    async def get_successors(self, segment: str) -> tuple[SegmentRange, list[SegmentRange]]:
        return await self._topics.get_successors(segment)

    async def seal_topic(self, topic: str) -> TopicInfo:
        self._check_topic_writable(topic)
        try:
            return await self._topics.seal_topic(topic)
        finally:
            await self._let_go()

    async def close(self) -> None:
        await self._topics.close()

    async def _let_go(self) -> None:
        """Close the segments a scale or seal loaded here without owning them."""
        owns = self._owns
        await self._topics.release_segments(
            lambda name: not owns(name) and not is_system_topic(parse_segment_name(name)[0]))


class _GatedSegment:
    """A writable segment whose writes pass ``check_writable`` first (see the module docstring).

    A stream bound before the pause keeps its handle: the check is here, not
    at the setup alone. Reads pass through.
    """

    __slots__ = ("_check", "_segment")

    def __init__(self, segment: SegmentHandle, check: Callable[[str], None]) -> None:
        self._segment = segment
        self._check = check

    @property
    def name(self) -> str:
        return self._segment.name

    @property
    def config(self) -> TopicConfig:
        return self._segment.config

    async def last_event_number(self, writer_id: str) -> int:
        return await self._segment.last_event_number(writer_id)

    async def append(self, blocks: Sequence[Block], writer_id: str, last_event_number: int,
                     *, txn_id: TxnId | None = None, contiguous: bool = False) -> AppendResult:
        self._check(self._segment.name)
        return await self._segment.append(blocks, writer_id, last_event_number, txn_id=txn_id,
                                          contiguous=contiguous)

    async def read(self, offset: int, max_bytes: int,
                   isolation: Isolation = Isolation.READ_COMMITTED) -> ReadBatch:
        return await self._segment.read(offset, max_bytes, isolation)

    @property
    def committed_end(self) -> int:
        return self._segment.committed_end

    async def wait_for_data(self, offset: int, timeout_s: float,
                            isolation: Isolation = Isolation.READ_COMMITTED) -> bool:
        return await self._segment.wait_for_data(offset, timeout_s, isolation)

    def info(self) -> SegmentInfo:
        return self._segment.info()

    async def truncate(self, offset: int) -> SegmentInfo:
        self._check(self._segment.name)
        return await self._segment.truncate(offset)

    def writer_states(self) -> dict[str, tuple[int, int]]:
        segment = self._segment
        return segment.writer_states() if isinstance(segment, WriterStates) else {}


class TopicsHandover:
    """``ContainerHandover`` on a ``TopicManager``: unload the segments of containers.

    User segments and the per-container system segments (snapshots,
    ``broker.cluster.snapshots``; the Kafka listener's offsets) move with
    their containers. The other system topics' segments are the
    coordinator's, moved by ``broker.app.cluster_ownership``: left alone here.
    """

    def __init__(self, topics: TopicManager, container_count: int,
                 snapshots: ContainerSnapshotStore | None = None) -> None:
        self._topics = topics
        self._count = container_count
        self._snapshots = snapshots

    def _in(self, containers: frozenset[int]) -> Callable[[str], bool]:
        count = self._count

        def moving(name: str) -> bool:
            topic, _number = parse_segment_name(name)
            return ((not is_system_topic(topic) or topic in PER_CONTAINER_TOPICS)
                    and container_of(name, count) in containers)
        return moving

    async def release(self, containers: frozenset[int]) -> None:
        await self._topics.release_segments(self._in(containers))
        if self._snapshots is not None:
            self._snapshots.forget(containers)

    def drop(self, containers: frozenset[int]) -> None:
        self._topics.drop_segments(self._in(containers))
        if self._snapshots is not None:
            self._snapshots.forget(containers)
