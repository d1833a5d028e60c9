"""Committed offsets and group records in the compacted system topic ``_kafka_offsets``.

One record per (group, topic, partition), keyed
``o/<len(group)>/<group>/<topic>/<partition>`` (the length makes a group's
prefix unambiguous whatever characters its id has), and one per group,
``g/<group>``, with the generation and protocol of its last rebalance (so
generations keep growing over restarts and DescribeGroups knows the group),
and one per group with members, ``s/<group>``: the group's state (its members,
their subscriptions and assignments; ``_classic_state`` and ``_modern_state``
write and read it), so members are kept over a restart or failover; a
tombstone when the group empties or is deleted. Values are versioned JSON.
The topic is compacted: only the latest record per key stays, so its size
follows the number of partitions committed, not the number of commits.

Commits are per partition, as in Kafka: a commit of N partitions writes N
records, in one durable append (``CompactedTopic.write`` calls made together
are group-committed), and updates the in-memory view only once durable.
Everything is loaded once, at start; fetches answer from memory.

**In a cluster** (``container_count`` > 0) the topic has one segment per
segment container: the records of group ``g`` are in segment
``_kafka_offsets/<container_of(GROUP_KEY, g)>``, which is placed in that
container (``broker.cluster.containers``), so the broker coordinating ``g``
owns the segment it writes. Nothing is loaded at start: a container's records
are loaded when this broker claims it (``load_container``) and forgotten when
it gives it up (``forget_container``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from broker.errors import WrongHostError
from broker.system.compacted_topic import CompactedTopic
from broker.system.compaction import CompactionResult
from broker.topics.manager import TopicManager
from ledger.records import dump_record, load_record

__all__ = ["OFFSETS_TOPIC", "CommittedOffset", "ConsumerGroupRecord", "OffsetStore",
           "TopicPartition"]

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "_kafka_offsets"
_VERSION = 1
#: (topic, partition).
TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    """A committed position: the next offset to read, the leader epoch, the client's metadata."""

    offset: int
    leader_epoch: int = -1
    metadata: str | None = ""
    commit_time_ms: int = 0

    def encode(self) -> bytes:
        return dump_record(_VERSION, {"offset": self.offset, "epoch": self.leader_epoch,
                                      "metadata": self.metadata, "time_ms": self.commit_time_ms},
                           legacy_key="v")

    @staticmethod
    def decode(value: bytes) -> CommittedOffset:
        # Earlier builds kept the version under "v" (ledger.records).
        data = load_record(value, "offset record", (_VERSION,), legacy_key="v")
        metadata = data.get("metadata")
        return CommittedOffset(int(data["offset"]), int(data.get("epoch", -1)),
                               None if metadata is None else str(metadata),
                               int(data.get("time_ms", 0)))


@dataclass(frozen=True, slots=True)
class ConsumerGroupRecord:
    """What is kept of a group over restarts: its generation and protocol (not its members).

    ``group_protocol``: ``classic`` (JoinGroup/SyncGroup; the generation) or
    ``consumer`` (KIP-848's ConsumerGroupHeartbeat: the generation is the
    group epoch, ``protocol_name`` the server-side assignor). Records of
    earlier builds have none: classic. ``empty_since_ms``: when a classic
    group written Empty became so (its offsets' retention counts from then,
    ``expiry``); 0: written with members, or by an earlier build.
    """

    generation: int
    protocol_type: str | None
    protocol_name: str | None
    group_protocol: str = "classic"
    empty_since_ms: int = 0

    def encode(self) -> bytes:
        fields: dict[str, object] = {"generation": self.generation,
                                     "protocol_type": self.protocol_type,
                                     "protocol_name": self.protocol_name}
        if self.group_protocol != "classic":  # a classic record stays as earlier builds wrote it
            fields["group_protocol"] = self.group_protocol
        if self.empty_since_ms:
            fields["empty_since_ms"] = self.empty_since_ms
        return dump_record(_VERSION, fields, legacy_key="v")

    @staticmethod
    def decode(value: bytes) -> ConsumerGroupRecord:
        data = load_record(value, "group record", (_VERSION,), legacy_key="v")
        return ConsumerGroupRecord(int(data["generation"]), data.get("protocol_type"),
                           data.get("protocol_name"), str(data.get("group_protocol", "classic")),
                           int(data.get("empty_since_ms", 0)))

    @property
    def modern(self) -> bool:
        """Whether the group speaks the consumer protocol (KIP-848)."""
        return self.group_protocol == "consumer"


def offset_key(group_id: str, topic: str, partition: int) -> str:
    """The record key of a group's offset of a partition."""
    return f"{_group_prefix(group_id)}{topic}/{partition}"


def _group_prefix(group_id: str) -> str:
    return f"o/{len(group_id)}/{group_id}/"


def _group_key(group_id: str) -> str:
    return f"g/{group_id}"


def _state_key(group_id: str) -> str:
    return f"s/{group_id}"


class OffsetStore:
    """The committed offsets and group records of every group, on ``_kafka_offsets``.

    ``container_count`` > 0: one segment per container (see the module
    docstring); ``container_of(group id)`` is the group's container
    (``broker.kafka.locator.container_of``) and ``owns(segment)`` whether this
    broker may write a segment now (only those are written and compacted).
    """

    def __init__(self, topics: TopicManager, container_count: int = 0,
                 owns: Callable[[str], bool] = lambda _segment: True,
                 container_of: Callable[[str], int] = lambda _group: 0) -> None:
        self._count = container_count
        self._owns = owns
        self._container_of = container_of
        if container_count > 0:
            self._parts = [CompactedTopic(topics, OFFSETS_TOPIC, maintain=False, number=n,
                                          segment_count=container_count)
                           for n in range(container_count)]
            topics.add_maintenance_hook(self._maintain)
        else:
            self._parts = [CompactedTopic(topics, OFFSETS_TOPIC)]
        self._offsets: dict[str, dict[TopicPartition, CommittedOffset]] = {}
        self._groups: dict[str, ConsumerGroupRecord] = {}
        #: The groups' state images (``s/<group>``), as stored.
        self._states: dict[str, bytes] = {}
        #: (group, partition) -> commits of it being written now (``expire`` leaves them).
        self._writing: Counter[tuple[str, TopicPartition]] = Counter()

    def container_of(self, group_id: str) -> int:
        """The container (segment number) holding ``group_id``'s records; 0 on one broker."""
        return self._container_of(group_id) if self._count > 0 else 0

    def _topic_of(self, group_id: str) -> CompactedTopic:
        """The group's keyed log, to write: ``WrongHostError`` unless this broker may write it.

        In a cluster a write may come late (a background record of a
        generation) after the container went: it must never load the
        segment here, which would fence its new owner.
        """
        part = self._parts[self.container_of(group_id)]
        if self._count > 0 and not self._owns(part.segment_name):
            raise WrongHostError(part.segment_name, "")
        return part

    async def _maintain(self) -> list[CompactionResult]:
        """Compact the served containers' segments only (never load another broker's)."""
        done = []
        for part in self._parts:
            if self._owns(part.segment_name):
                result = await part.maybe_compact()
                if result is not None:
                    done.append(result)
        return done

    async def load(self) -> None:
        """Read every record (once, at start, one broker only); see ``load_container``."""
        await self.load_container(0)

    async def load_container(self, container: int) -> None:
        """Read ``container``'s records afresh; one that does not decode is logged, left out."""
        part = self._parts[container]
        part.forget()  # another broker may have written it since we last had it
        for key, value in (await part.read_prefix("")).items():
            try:
                self._load_one(key, value)
            except (ValueError, KeyError, TypeError) as error:
                log.error("kafka groups: record %r of %s is unreadable (%s: %s); left out",
                          key[:128], OFFSETS_TOPIC, type(error).__name__, error)
        log.info("kafka groups: loaded %d groups' offsets and %d group records from %s",
                 len(self._offsets), len(self._groups), part.segment_name)

    def forget_container(self, container: int) -> None:
        """Forget the records of the groups of ``container`` (another broker has it now)."""
        for group_id in [g for g in self.group_ids() if self.container_of(g) == container]:
            self._offsets.pop(group_id, None)
            self._groups.pop(group_id, None)
            self._states.pop(group_id, None)
        self._parts[container].forget()

    def _load_one(self, key: str, value: bytes) -> None:
        kind, _, rest = key.partition("/")
        if kind == "g":
            self._groups[rest] = ConsumerGroupRecord.decode(value)
            return
        if kind == "s":
            self._states[rest] = value  # decoded by the side that owns the group's kind
            return
        if kind != "o":
            raise ValueError("unknown key kind")
        length, _, rest = rest.partition("/")
        group_id, rest = rest[:int(length)], rest[int(length) + 1:]
        topic, _, partition = rest.rpartition("/")
        offset = CommittedOffset.decode(value)
        if not offset.commit_time_ms:  # an earlier build's: its retention counts from now
            offset = replace(offset, commit_time_ms=int(time.time() * 1000))
        self._offsets.setdefault(group_id, {})[(topic, int(partition))] = offset

    def group_ids(self) -> set[str]:
        """Every group with committed offsets or a group record."""
        return set(self._offsets) | set(self._groups)

    def group_record(self, group_id: str) -> ConsumerGroupRecord | None:
        """The group's record, None if it has none."""
        return self._groups.get(group_id)

    def group_state(self, group_id: str) -> bytes | None:
        """The group's state image (its members) as stored, None if it has none."""
        return self._states.get(group_id)

    def offsets(self, group_id: str) -> dict[TopicPartition, CommittedOffset]:
        """The group's committed offsets (a copy)."""
        return dict(self._offsets.get(group_id, {}))

    def offset(self, group_id: str, partition: TopicPartition) -> CommittedOffset | None:
        """The group's committed offset of ``partition``, None if none."""
        return self._offsets.get(group_id, {}).get(partition)

    async def commit(self, group_id: str,
                     offsets: Iterable[tuple[TopicPartition, CommittedOffset]]) -> None:
        """Write each partition's offset durably (one append for all), then remember them.

        Raises what the topic raises (``BrokerError``, ``LedgerError``); on
        failure nothing is remembered, though some records may have landed
        (they are then read at the next start: a commit the client saw fail
        may hold, as in Kafka).
        """
        items = list(offsets)
        now_ms = int(time.time() * 1000)
        items = [(tp, value if value.commit_time_ms else CommittedOffset(
            value.offset, value.leader_epoch, value.metadata, now_ms)) for tp, value in items]
        topic = self._topic_of(group_id)
        writing = [(group_id, tp) for tp, _ in items]
        self._writing.update(writing)
        try:
            await asyncio.gather(*(topic.write(offset_key(group_id, *tp), value.encode())
                                   for tp, value in items))
        finally:
            self._writing.subtract(writing)
            for key in writing:
                if self._writing[key] <= 0:
                    del self._writing[key]
        stored = self._offsets.setdefault(group_id, {})
        for tp, value in items:
            stored[tp] = value

    async def delete_group(self, group_id: str) -> None:
        """Write tombstones for the group's offsets and record (one append), then forget them."""
        keys = [offset_key(group_id, *tp) for tp in self._offsets.get(group_id, {})]
        keys.append(_group_key(group_id))
        if group_id in self._states:
            keys.append(_state_key(group_id))
        topic = self._topic_of(group_id)
        await asyncio.gather(*(topic.write(key, None) for key in keys))
        self._offsets.pop(group_id, None)
        self._groups.pop(group_id, None)
        self._states.pop(group_id, None)

    async def delete_offsets(self, group_id: str, partitions: Iterable[TopicPartition]) -> None:
        """Tombstones for these committed offsets of the group (OffsetDelete), then forget them.

        Raises what the topic raises; on failure nothing is forgotten though some
        tombstones may have landed (a retry writes them again: deleting is idempotent).
        """
        items = list(partitions)
        topic = self._topic_of(group_id)
        await asyncio.gather(*(topic.write(offset_key(group_id, *tp), None) for tp in items))
        stored = self._offsets.get(group_id, {})
        for tp in items:
            stored.pop(tp, None)

    def committing(self, group_id: str) -> bool:
        """Whether a commit of the group is being written now."""
        return any(group == group_id for group, _ in self._writing)

    async def expire(self, group_id: str,
                     expired: dict[TopicPartition, CommittedOffset]) -> list[TopicPartition]:
        """Tombstones for offsets that expired (``expiry``) or whose topic went; those removed.

        Only an offset still the very one given and with no commit of it
        being written is removed: a commit that lands meanwhile wins, whether
        its record goes before the tombstone (it is remembered after the
        tombstone's removal, see below) or after it. Raises what the topic
        raises; on failure nothing is forgotten, some tombstones maybe written
        (the next sweep writes them again: harmless).
        """
        stored = self._offsets.get(group_id, {})
        doomed = [tp for tp, value in expired.items()
                  if stored.get(tp) is value and (group_id, tp) not in self._writing]
        if not doomed:
            return []
        topic = self._topic_of(group_id)
        await asyncio.gather(*(topic.write(offset_key(group_id, *tp), None) for tp in doomed))
        removed = []
        for tp in doomed:
            # A commit written while the tombstone was: its record follows the
            # tombstone's in the topic, and it is what stays.
            if stored.get(tp) is expired[tp]:
                del stored[tp]
                removed.append(tp)
        if not stored:
            self._offsets.pop(group_id, None)
        return removed

    async def write_group(self, group_id: str, record: ConsumerGroupRecord) -> None:
        """Write the group's record durably."""
        await self._topic_of(group_id).write(_group_key(group_id), record.encode())
        self._groups[group_id] = record

    async def write_state(self, group_id: str, state: bytes | None,
                          record: ConsumerGroupRecord | None = None) -> None:
        """Write the group's state image (None: a tombstone) and ``record``, in one append.

        A tombstone is written only over a stored image. Raises what the topic
        raises (``WrongHostError`` when another broker has the group's
        container now); on failure nothing is remembered, though either
        record may have landed (the outcome is unknown: the reader of the
        image checks it against the group record, ``_classic_state``).
        """
        topic = self._topic_of(group_id)
        writes = []
        if record is not None:
            writes.append(topic.write(_group_key(group_id), record.encode()))
        if state is not None or group_id in self._states:
            writes.append(topic.write(_state_key(group_id), state))
        await asyncio.gather(*writes)
        if record is not None:
            self._groups[group_id] = record
        if state is None:
            self._states.pop(group_id, None)
        else:
            self._states[group_id] = state
