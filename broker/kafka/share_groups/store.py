"""The share groups' durable state: share partitions and group configs in a compacted topic.

Kept in the system topic ``__folio_kafka_share_state`` (a ``CompactedTopic``,
as the committed offsets are kept in ``_kafka_offsets``), one key per share
partition and one per group's configs; the value is versioned JSON:

- share partition ``["state", group, topic, partition]``:
  ``{"v": 1, "start": SPSO, "runs": [[first, last, state, delivery_count], ...]}``
  where an ACQUIRED run is written as AVAILABLE (a lock does not outlive the
  broker: after a restart the records go to a member again);
- group configs ``["config", group]``: ``{"v": 1, "configs": {name: value}}``.

A write returns once durable; it raises what the topic raises, with an
outcome unknown: it may have landed. The callers say what that means.

**In a cluster** (``container_count`` > 0) the topic has one segment per
segment container, as ``_kafka_offsets`` has: the state of a share partition
of topic partition ``t/p`` is in segment ``__folio_kafka_share_state/<c>``
where ``c`` is the container of segment ``t/p``
(``broker.cluster.containers``), so the broker that owns the partition (its
leader) owns the segment holding its share state, and both move together
when a container gets a new owner (a failover or a hand-over): the next owner
reads the state the last one wrote. This broker reads and writes only the
segments of containers it serves now (``owns``; others raise
``WrongHostError``: reading one would open, and fence, another broker's
segment). A container's segment is read afresh each time this broker claims
it (``forget``). Group configs are not kept here in a cluster but in the
metadata store (``group_configs``), which every broker reads.

Crash windows in a cluster (besides one broker's, ``partitions``): the owner
dies after a state write is durable and before it answers: the next owner
reads that state (an ACCEPT answered with an error is still never delivered
again: what it asked). The owner gives the container up (or loses it) with a
write under way: the segment's ledger is fenced by the next owner's load, so
the write fails (or landed before the fence, and the next owner reads it);
nothing written after the hand-over is lost, as the old owner writes nothing
more (``owns``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from broker.cluster.containers import KAFKA_SHARE_STATE_TOPIC, container_of
from broker.errors import CorruptDataError, TopicNotFoundError, WrongHostError
from broker.kafka.share_groups.records import RecordState, Run, ShareRecords
from broker.segments.names import make_segment_name
from broker.system.compacted_topic import CompactedTopic
from broker.system.compaction import CompactionResult
from broker.topics.manager import TopicManager

__all__ = ["SHARE_STATE_TOPIC", "ShareStore"]

SHARE_STATE_TOPIC = KAFKA_SHARE_STATE_TOPIC
_FORMAT = 1


def _state_key(group_id: str, topic: str, partition: int) -> str:
    return json.dumps(["state", group_id, topic, partition])


def _config_key(group_id: str) -> str:
    return json.dumps(["config", group_id])


class ShareStore:
    """Share partitions' states and groups' configs, durable (module docstring).

    ``container_count`` > 0: a cluster broker's, one segment per container;
    ``owns(segment)``: whether this broker may read and write a segment now.
    """

    def __init__(self, topics: TopicManager, container_count: int = 0,
                 owns: Callable[[str], bool] = lambda _segment: True) -> None:
        self._topics = topics
        self._count = container_count
        self._owns = owns
        if container_count > 0:
            self._parts = [CompactedTopic(topics, SHARE_STATE_TOPIC, maintain=False, number=n,
                                          segment_count=container_count)
                           for n in range(container_count)]
            topics.add_maintenance_hook(self._maintain)
        else:
            self._parts = [CompactedTopic(topics, SHARE_STATE_TOPIC)]

    @property
    def _log(self) -> CompactedTopic:
        """One broker's keyed log (the group configs' too). In a cluster, container 0's,
        and ``WrongHostError`` unless served here: a read of the whole state must go
        through ``_served`` (reading a segment another broker owns would fence it)."""
        part = self._parts[0]
        if self._count > 0 and not self._owns(part.segment_name):
            raise WrongHostError(part.segment_name, "")
        return part

    def container_of(self, topic: str, partition: int) -> int:
        """The container holding the share states of partition ``topic/partition`` (0 on
        one broker)."""
        return container_of(make_segment_name(topic, partition), self._count) \
            if self._count > 0 else 0

    def _part(self, topic: str, partition: int) -> CompactedTopic:
        """The keyed log of the partition's share states: ``WrongHostError`` unless served
        here (a late write after the container went must never load it here)."""
        part = self._parts[self.container_of(topic, partition)]
        if self._count > 0 and not self._owns(part.segment_name):
            raise WrongHostError(part.segment_name, "")
        return part

    def _served(self) -> list[CompactedTopic]:
        """The keyed logs this broker may read now (every one on one broker)."""
        return [part for part in self._parts
                if self._count == 0 or self._owns(part.segment_name)]

    def forget(self, containers: Iterable[int]) -> None:
        """Read these containers' segments afresh on next use (claimed again: another
        broker may have written them meanwhile)."""
        for container in containers:
            if 0 <= container < len(self._parts):
                self._parts[container].forget()

    async def _maintain(self) -> list[CompactionResult]:
        """Compact the served containers' segments only (never load another broker's)."""
        done = []
        for part in self._served():
            result = await part.maybe_compact()
            if result is not None:
                done.append(result)
        return done

    async def load_records(self, group_id: str, topic: str,
                           partition: int) -> ShareRecords | None:
        """The share partition as last written, None if never written."""
        raw = await self._part(topic, partition).get(_state_key(group_id, topic, partition))
        return None if raw is None else _records(raw)

    async def every_records(self) -> dict[tuple[str, str, int], ShareRecords]:
        """Every share partition written, by (group, topic, partition) (in a cluster: of
        the containers served here): one read of the live share states (the lag
        metric's maintenance round); none, and the topic not made, before any share
        group wrote state."""
        try:
            await self._topics.get_topic(SHARE_STATE_TOPIC)
        except TopicNotFoundError:
            return {}
        every = {}
        for part in self._served():
            for key, raw in (await part.read_prefix('["state",')).items():
                _, group_id, topic, partition = json.loads(key)
                every[group_id, topic, int(partition)] = _records(raw)
        return every

    async def write_records(self, group_id: str, topic: str, partition: int,
                            records: ShareRecords) -> None:
        """Write the share partition's state (ACQUIRED runs as AVAILABLE)."""
        runs = [[run.first, run.last,
                 (RecordState.AVAILABLE if run.state is RecordState.ACQUIRED
                  else run.state).value, run.delivery_count] for run in records.runs]
        value = {"v": _FORMAT, "start": records.start, "runs": runs}
        await self._part(topic, partition).write(
            _state_key(group_id, topic, partition),
            json.dumps(value, separators=(",", ":")).encode())

    async def delete_records(self, group_id: str, topic: str, partition: int) -> None:
        """Forget a share partition (a tombstone)."""
        await self._part(topic, partition).write(_state_key(group_id, topic, partition), None)

    async def share_partitions(self, group_id: str) -> list[tuple[str, int]]:
        """The (topic, partition) of every share partition of the group written (in a
        cluster: of the containers served here)."""
        prefix = json.dumps(["state", group_id])[:-1] + ","
        found = [key for part in self._served() for key in await part.read_prefix(prefix)]
        return sorted((json.loads(key)[2], json.loads(key)[3]) for key in found)

    async def topic_partitions(self, topic: str) -> list[tuple[str, int]]:
        """The (group, partition) of every share partition of ``topic`` written (in a
        cluster: of the containers served here)."""
        found = [key for part in self._served() for key in await part.read_prefix('["state",')]
        keys = [json.loads(key) for key in found]
        return sorted((key[1], key[3]) for key in keys if key[2] == topic)

    async def load_configs(self, group_id: str) -> dict[str, str]:
        """The group's configs as set (empty: none)."""
        raw = await self._log.get(_config_key(group_id))
        return {} if raw is None else dict(_decoded(raw)["configs"])

    async def delete_configs(self, group_id: str) -> None:
        """Forget the group's configs (a tombstone)."""
        await self._log.write(_config_key(group_id), None)

    async def write_configs(self, group_id: str, configs: dict[str, str]) -> None:
        """Replace the group's configs."""
        value = {"v": _FORMAT, "configs": configs}
        await self._log.write(_config_key(group_id), json.dumps(value).encode())


def _records(raw: bytes) -> ShareRecords:
    value = _decoded(raw)
    runs = []
    for first, last, code, count in value["runs"]:
        state = RecordState(code)
        if state is RecordState.ACQUIRED:
            state = RecordState.AVAILABLE
        runs.append(Run(int(first), int(last), state, int(count)))
    return ShareRecords(int(value["start"]), runs)


def _decoded(raw: bytes) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except ValueError:
        raise CorruptDataError("share state record is not JSON") from None
    if not isinstance(value, dict) or value.get("v") != _FORMAT:
        raise CorruptDataError(f"share state record has an unknown format: {raw[:40]!r}")
    return value
