"""Kafka partitions of a Folio topic: partition ``i`` is the topic's segment number ``i``.

Segments are numbered 0, 1, 2 ... in creation order and never renumbered, so
a topic of N segments that never scaled has partitions 0..N-1 in key order.
When a topic scales, the sealed segments stay partitions (readable to their
end, with the same offsets; Produce to them goes to their heir,
``broker.kafka.succession``) and the successors are new partitions after
them (docs/kafka.md, "Partitions and scaling").
"""

from __future__ import annotations

from broker.api import SegmentRange, Topics
from broker.errors import NoSuchSegmentError, TopicNotFoundError
from broker.segments.names import is_system_topic, make_segment_name

__all__ = ["check_served", "partition_segments", "segment_name"]


def check_served(topic: str) -> None:
    """``TopicNotFoundError`` for a system topic (``is_system_topic``): Kafka clients never see it.

    The broker's own state (transaction log, snapshots, commit keys) is not
    data for clients; Kafka's broker hides its internal topics from
    producers the same way, and Folio hides them from reads too.
    """
    if is_system_topic(topic):
        raise TopicNotFoundError(topic)


def segment_name(topic: str, partition: int) -> str:
    """The name of the segment that is ``partition`` of ``topic``.

    ``NoSuchSegmentError`` for a negative partition (a segment number never is),
    ``TopicNotFoundError`` for a system topic.
    """
    check_served(topic)
    if partition < 0:
        raise NoSuchSegmentError(f"{topic}/{partition}")
    return make_segment_name(topic, partition)


async def partition_segments(topics: Topics, topic: str) -> list[SegmentRange]:
    """Every segment of ``topic`` (sealed ones included), by number = partition.

    Raises ``TopicNotFoundError`` (a system topic included).
    """
    check_served(topic)
    segments = await topics.list_segments(topic, include_sealed=True)
    return sorted(segments, key=lambda segment: segment.number)
