"""Transaction-buffer snapshots in a cluster: each written by the owner of the segment it describes.

Standalone keeps every snapshot in the one segment of ``_txnbuffer_snapshots``
(``broker.system.snapshot_store``). In a cluster that one segment would be
written by every broker holding transactional segments, and each broker's
first write loads it, which fences the copy of the broker that wrote last:
that one reloads on its next write and fences back (safe, but a fencing war).

Here the topic has ``container_count`` segments, and segment
``_txnbuffer_snapshots/<n>`` belongs to container ``n``
(``broker.cluster.containers.container_of``). The snapshot chunks of segment
``S`` (keys ``S-1 … S-end``, PIP-178) go to the snapshot segment of
``container_of(S)``. The broker serving ``S`` owns that container, hence its
snapshot segment: it is the only one writing or loading it, so no broker
fences another's snapshots. When ``S`` moves (handover, failover) its
snapshot segment moves with it, in the same container: the new owner loads
it (fencing only the previous owner's ledger, as for ``S`` itself) and
recovers ``S``'s buffer from it.

A broker may load a segment it does not own: a scale or seal answered
elsewhere loads the segments it seals, and loading recovers the buffer. Such
a broker must not load the snapshot segment (that would fence its owner): it
reads no snapshot (``read_prefix`` answers nothing, so the buffer replays the
whole segment: slower, never wrong) and writes none (``write`` raises
``WrongHostError``, which the segment's tick logs).

Each container's keyed log is its own ``CompactedTopic`` (index, group
commits, compaction): compaction runs only for the containers served here.

**A cluster from an older build** has a one-segment ``_txnbuffer_snapshots``
(every broker wrote its segment 0). Snapshots are only a shortcut (a buffer
without one replays its segment), so the topic is replaced rather than
converted: the owner of container 0, which alone uses segment 0 now, checks
the layout at its first maintenance round after claiming container 0 and
deletes a topic with fewer segments than containers; the next snapshot write
creates it again with one segment per container. Meanwhile reads of the
missing segments answer nothing (replay) and writes fail (logged, retried at
the next snapshot).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Mapping

from prometheus_client import Counter

from broker.cluster.containers import SNAPSHOT_TOPIC, container_of
from broker.errors import BrokerError, NoSuchSegmentError, TopicNotFoundError, WrongHostError
from broker.segments.names import make_segment_name
from broker.system.compacted_topic import CompactedTopic
from broker.system.compaction import CompactionResult
from broker.topics.manager import TopicManager
from ledger.errors import LedgerError

__all__ = ["ContainerSnapshotStore", "snapshot_segment_of"]

log = logging.getLogger(__name__)

# Kept here rather than in broker.metrics: they exist only in a cluster broker.
SNAPSHOT_SEGMENT_OPENS = Counter(
    "folio_txn_snapshot_segment_opens",
    "Times this broker opened (loaded, fencing the previous owner) a container's "
    "transaction-buffer snapshot segment.", ["container"])
SNAPSHOT_FENCED_WRITES = Counter(
    "folio_txn_snapshot_fenced_writes",
    "Snapshot writes refused because another broker had fenced the snapshot segment "
    "(0 while only owners write snapshots).", ["container"])
SNAPSHOT_NOT_OWNER = Counter(
    "folio_txn_snapshot_not_owner",
    "Snapshot reads (answered empty: full replay) and writes (refused) for a segment "
    "of a container this broker does not own.", ["operation"])


def snapshot_segment_of(segment: str, container_count: int) -> str:
    """The snapshot segment holding ``segment``'s snapshot: the one of its container."""
    return make_segment_name(SNAPSHOT_TOPIC, container_of(segment, container_count))


def _segment_of_key(key: str) -> str:
    """The segment a snapshot key or key prefix names: ``S`` of ``S-<i>``, ``S-end``, ``S-``."""
    segment, dash, _suffix = key.rpartition("-")
    if not dash or not segment:
        raise ValueError(f"not a transaction-buffer snapshot key: {key!r}")
    return segment


class ContainerSnapshotStore:
    """``txnbuffer.api.SnapshotStore`` with one snapshot segment per container (module docstring).

    Args:
        topics: the broker's topic manager.
        container_count: the cluster's number of containers.
        owns: whether this broker serves a segment now (``SegmentOwners.owns``);
            asked with the snapshot segment's name.
    """

    def __init__(self, topics: TopicManager, container_count: int,
                 owns: Callable[[str], bool]) -> None:
        if container_count <= 0:
            raise ValueError(f"container_count must be positive, got {container_count}")
        self._count = container_count
        self._owns = owns
        self._topics = [CompactedTopic(topics, SNAPSHOT_TOPIC, maintain=False, number=n,
                                       segment_count=container_count)
                        for n in range(container_count)]
        self._opened: set[int] = set()
        self._manager = topics
        self._layout_checked = False
        topics.add_maintenance_hook(self.maintain)

    @property
    def container_count(self) -> int:
        return self._count

    @property
    def max_record_bytes(self) -> int:
        """The largest value ``write`` accepts (the same for every container)."""
        return self._topics[0].max_record_bytes

    def topic(self, container: int) -> CompactedTopic:
        """The keyed log of ``container``'s snapshots."""
        return self._topics[container]

    def _served(self, key: str, operation: str) -> CompactedTopic | None:
        """The keyed log for ``key``'s segment if its container is served here, else None."""
        container = container_of(_segment_of_key(key), self._count)
        topic = self._topics[container]
        if not self._owns(topic.segment_name):
            SNAPSHOT_NOT_OWNER.labels(operation).inc()
            return None
        if container not in self._opened:
            self._opened.add(container)
            SNAPSHOT_SEGMENT_OPENS.labels(str(container)).inc()
            log.info("transaction-buffer snapshots of container %d: using %s", container,
                     topic.segment_name)
        return topic

    async def write(self, key: str, value: bytes | None) -> None:
        """Write ``value`` under ``key`` in its container's snapshot segment; None deletes.

        Raises:
            WrongHostError: the container of ``key``'s segment is not served here.
        """
        topic = self._served(key, "write")
        if topic is None:
            raise WrongHostError(snapshot_segment_of(_segment_of_key(key), self._count))
        try:
            await topic.write(key, value)
        except WrongHostError:
            # Our copy's ledger was fenced by another broker: it loaded the
            # snapshot segment while we served it (never, unless ownership broke).
            SNAPSHOT_FENCED_WRITES.labels(
                str(container_of(_segment_of_key(key), self._count))).inc()
            raise

    async def read_prefix(self, prefix: str) -> Mapping[str, bytes]:
        """The latest value of every live key starting with ``prefix`` (one segment's keys).

        Empty for a segment of a container not served here (the buffer then
        replays its whole segment), and for a container whose snapshot
        segment is missing (a topic of an older build, being replaced).
        """
        topic = self._served(prefix, "read")
        if topic is None:
            log.info("snapshot of %s not read: its container's snapshot segment %s is not "
                     "served here (the buffer replays the segment)", _segment_of_key(prefix),
                     snapshot_segment_of(_segment_of_key(prefix), self._count))
            return {}
        try:
            return await topic.read_prefix(prefix)
        except NoSuchSegmentError:
            log.warning("snapshot segment %s is missing (%s from an older build, being "
                        "replaced): replaying %s whole", topic.segment_name,
                        SNAPSHOT_TOPIC, _segment_of_key(prefix))
            return {}

    def forget(self, containers: frozenset[int]) -> None:
        """``containers`` were released or claimed: reread their snapshot segments on next use.

        Another broker may have written them since this broker last read
        them; the index must come from the segment as the new load finds it.
        """
        for container in containers:
            if 0 <= container < self._count:
                self._topics[container].forget()
                self._opened.discard(container)
        if 0 in containers:
            self._layout_checked = False

    async def maintain(self) -> list[CompactionResult]:
        """The maintenance round: replace an outdated topic, compact what is due."""
        if not self._layout_checked and self._owns(self._topics[0].segment_name):
            try:
                await self._replace_outdated_topic()
                self._layout_checked = True
            except (BrokerError, LedgerError) as error:  # the next round tries again
                log.warning("%s: layout not checked: %s", SNAPSHOT_TOPIC, error)
        return await self.maybe_compact()

    async def _replace_outdated_topic(self) -> None:
        """Delete a snapshot topic with fewer segments than containers (module docstring).

        Only the owner of container 0 deletes, and only a short topic: the
        topic recreated by a write (with every segment) is never deleted.
        """
        try:
            info = await self._manager.get_topic(SNAPSHOT_TOPIC)
        except TopicNotFoundError:
            return  # created by the first snapshot write
        if len(info.segments) >= self._count:
            return
        log.warning("%s has %d segment(s), from an older build; the cluster has %d "
                    "containers: deleting it (its snapshots are replaced as segments "
                    "snapshot again; until then their buffers replay)", SNAPSHOT_TOPIC,
                    len(info.segments), self._count)
        with contextlib.suppress(TopicNotFoundError):  # (only we delete it, but be safe)
            await self._manager.delete_topic(SNAPSHOT_TOPIC, internal=True)
        self.forget(frozenset(range(1, self._count)))
        self._topics[0].forget()
        self._opened.discard(0)

    async def maybe_compact(self) -> list[CompactionResult]:
        """Compact the served containers' snapshot segments that are due."""
        results = []
        for container in sorted(self._opened):
            topic = self._topics[container]
            if not self._owns(topic.segment_name):
                continue
            try:
                result = await topic.maybe_compact()
            except (BrokerError, LedgerError) as error:  # released meanwhile, say
                log.warning("snapshot segment %s: compaction failed: %s", topic.segment_name,
                            error)
                continue
            if result is not None:
                results.append(result)
        return results
