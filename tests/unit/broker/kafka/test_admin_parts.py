"""The admin APIs' small parts: config sources, the CreatePartitions split, subscriptions."""

from __future__ import annotations

import struct

import pytest

from broker.api import SegmentRange, SegmentState, TopicConfig
from broker.kafka.consumer_groups.subscriptions import UNREADABLE, subscribed_topics
from broker.kafka.handlers.partitions_admin import split_plan
from broker.kafka.topic_configs import (
    DEFAULT_CONFIG,
    TOPIC_CONFIG,
    UnknownConfigError,
    described_configs,
    reset_changes,
)


def test_topic_configs_are_reported_with_their_source() -> None:
    defaults = TopicConfig()
    described = {entry.name: entry for entry in described_configs(
        TopicConfig(retention_ms=1000, max_event_bytes=defaults.max_event_bytes), defaults)}
    assert (described["retention.ms"].value, described["retention.ms"].source) \
        == ("1000", TOPIC_CONFIG)
    assert (described["max.message.bytes"].value, described["max.message.bytes"].source) \
        == (str(defaults.max_event_bytes), DEFAULT_CONFIG)
    assert described["cleanup.policy"].source == DEFAULT_CONFIG
    assert reset_changes(["retention.ms", "cleanup.policy"], defaults) == {"retention_ms": -1}
    with pytest.raises(UnknownConfigError):
        reset_changes(["min.insync.replicas"], defaults)


def test_create_partitions_is_one_split_of_the_widest_open_segment() -> None:
    def segment(number: int, low: float, high: float, sealed: bool = False) -> SegmentRange:
        return SegmentRange(f"t/{number}", number, low, high,
                            SegmentState.SEALED if sealed else SegmentState.OPEN)

    segments = [segment(0, 0.0, 1.0, sealed=True), segment(1, 0.0, 0.25),
                segment(2, 0.25, 1.0)]
    plan = split_plan(segments, 6)
    assert not isinstance(plan, str)
    split, ranges = plan
    assert split.number == 2
    assert ranges == [(0.25, 0.5), (0.5, 0.75), (0.75, 1.0)]
    assert "at least two" in str(split_plan(segments, 4))
    assert "already has 3" in str(split_plan(segments, 3))
    assert "higher than the requested 2" in str(split_plan(segments, 2))


def test_subscribed_topics_are_read_from_a_members_metadata() -> None:
    metadata = struct.pack(">hi", 1, 2) + struct.pack(">h", 1) + b"a" + \
        struct.pack(">h", 3) + b"bcd" + b"user data and owned partitions follow"
    assert subscribed_topics(metadata) == {"a", "bcd"}
    assert subscribed_topics(b"\x00") == set(UNREADABLE)
