"""The new offsets of a Kafka group reset, as kafka-consumer-groups --reset-offsets computes them.

``reset_targets`` picks the partitions (every partition of the topics named,
the partitions named, or every topic the group committed); ``new_offsets``
computes each one's new offset from the partition's start and end offsets
and the group's committed offset:

- earliest / latest: the start / end offset;
- offset: the offset given, brought into [start, end] (Kafka's
  ``checkOffsetsRange``: above the end is the end, below the start the start);
- shift: the committed offset plus the shift, brought into [start, end];
  a partition with no committed offset is refused (Kafka: "Cannot shift
  offset for partition ... since there is no current committed offset");
- timestamp: the first offset whose record's timestamp is at or after the
  time (``broker.kafka.timestamps``, as ListOffsets by time answers it, read
  uncommitted as Kafka's tool asks), the end offset if there is none; in a
  cluster read by the broker serving the partition (``OffsetAt``:
  ``broker.kafka.offset_times``);
- current: the committed offset, the end offset where there is none;
- offsets: each partition's given offset, brought into [start, end].

Nothing here writes: ``GroupReport.reset`` commits the plan (or not, dry run).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Mapping

from broker.api import Isolation, SegmentRange, Topics
from broker.errors import InvalidArgumentError
from broker.groups.kafka_view import OffsetReset
from broker.kafka.consumer_groups.offsets import CommittedOffset
from broker.kafka.partitions import partition_segments
from broker.kafka.timestamps import offset_for_time

__all__ = ["OffsetAt", "new_offsets", "reset_targets"]

TopicPartition = tuple[str, int]
#: (segment, time in ms) -> (its first offset at or after the time, -1 if none; its
#: end offset), read uncommitted where the segment is served
#: (``broker.kafka.offset_times.OffsetTimes.offset_at``).
OffsetAt = Callable[[str, int], Awaitable[tuple[int, int]]]


async def reset_targets(topics: Topics, spec: OffsetReset,
                        committed: Collection[TopicPartition]) -> list[tuple[str, SegmentRange]]:
    """The (topic, partition's segment)s ``spec`` resets, by topic then partition.

    Raises ``TopicNotFoundError`` for a topic that does not exist,
    ``InvalidArgumentError`` for a partition it does not have.
    """
    if spec.to == "offsets":
        whole: set[str] = set()
        named = {(topic, partition) for topic, partition, _ in spec.offsets}
    else:
        whole, named = set(spec.topics), set(spec.partitions)
    if not whole and not named:
        whole = {topic for topic, _ in committed}
    chosen: list[tuple[str, SegmentRange]] = []
    for topic in sorted(whole | {topic for topic, _ in named}):
        segments = {s.number: s for s in await partition_segments(topics, topic)}
        if topic in whole:
            chosen += [(topic, segments[number]) for number in sorted(segments)]
            continue
        for partition in sorted(p for t, p in named if t == topic):
            if partition not in segments:
                raise InvalidArgumentError(
                    f"topic {topic!r} has no partition {partition} (it has "
                    f"{_span(sorted(segments))})")
            chosen.append((topic, segments[partition]))
    return chosen


def _span(numbers: list[int]) -> str:
    if not numbers:
        return "none"
    if len(numbers) == 1:
        return f"partition {numbers[0]}"
    return f"partitions {numbers[0]}-{numbers[-1]}"


async def new_offsets(topics: Topics, spec: OffsetReset, chosen: list[tuple[str, SegmentRange]],
                      committed: Mapping[TopicPartition, CommittedOffset],
                      offset_at: OffsetAt | None = None,
                      ) -> list[tuple[TopicPartition, int, int]]:
    """((topic, partition), new offset, end offset) of each partition in ``chosen``.

    ``offset_at`` (a cluster): a time is looked up by the broker serving the
    segment (loading another's here would fence its owner's ledger); None:
    every segment is read here.

    Raises ``InvalidArgumentError`` for a shift where nothing is committed;
    what reading the segment raises for a timestamp (``BrokerError``,
    ``LedgerError``; ``BrokerShuttingDownError`` when no broker serves it).
    """
    given = {(topic, partition): offset for topic, partition, offset in spec.offsets}
    plan: list[tuple[TopicPartition, int, int]] = []
    for topic, segment in chosen:
        key = (topic, segment.number)
        start, end = segment.start_offset, segment.end_offset
        current = committed.get(key)
        if spec.to == "earliest":
            at = start
        elif spec.to == "latest":
            at = end
        elif spec.to == "offset":
            at = _within(spec.value, start, end)
        elif spec.to == "offsets":
            at = _within(given[key], start, end)
        elif spec.to == "current":
            at = end if current is None else current.offset
        elif spec.to == "shift":
            if current is None:
                raise InvalidArgumentError(
                    f"cannot shift the offset of {topic} partition {segment.number}: the "
                    "group has no committed offset there (Kafka refuses the same)")
            at = _within(current.offset + spec.value, start, end)
        else:  # timestamp
            if offset_at is None:
                handle = await topics.segment(segment.name)
                found, _ = await offset_for_time(handle, spec.value, Isolation.READ_UNCOMMITTED)
            else:
                found, end = await offset_at(segment.name, spec.value)
            at = end if found < 0 else found
        plan.append((key, at, end))
    return plan


def _within(offset: int, start: int, end: int) -> int:
    """``offset`` brought into [start, end], as Kafka's tool does (with a warning there)."""
    return max(start, min(offset, end))
