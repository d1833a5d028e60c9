"""Domain objects <-> public protobuf messages, for the thin servicers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from broker.api import SegmentInfo, SegmentRange, SegmentState, TopicConfig, TopicInfo
from folio.api.v1 import admin_pb2

__all__ = ["CONFIG_FIELDS", "config_changes", "segment_info_message", "segment_message",
           "topic_message"]

#: The ``TopicConfig`` fields, in proto and dataclass alike.
CONFIG_FIELDS = ("retention_ms", "retention_bytes", "max_event_bytes",
                 "ledger_rollover_bytes", "ledger_rollover_ms", "scale_target_events_per_s",
                 "scale_min_segments", "scale_cooldown_ms")

_STATES = {
    SegmentState.OPEN: admin_pb2.SEGMENT_STATE_OPEN,
    SegmentState.SEALED: admin_pb2.SEGMENT_STATE_SEALED,
}


def config_changes(config: admin_pb2.TopicConfig) -> dict[str, int]:
    """The fields set in a request's ``TopicConfig`` (unset ones are left out)."""
    fields: Any = config  # HasField wants each name as a literal; these are all optional fields
    return {name: getattr(config, name) for name in CONFIG_FIELDS if fields.HasField(name)}


def _config_message(config: TopicConfig) -> admin_pb2.TopicConfig:
    return admin_pb2.TopicConfig(**{name: getattr(config, name) for name in CONFIG_FIELDS})


def _no_owner(segment: str) -> str:
    return ""


def segment_message(segment: SegmentRange,
                    owner_of: Callable[[str], str] = _no_owner) -> admin_pb2.Segment:
    """A ``Segment`` message; ``owner_of`` gives its owner's address (``SegmentOwners``)."""
    return admin_pb2.Segment(
        name=segment.name, number=segment.number, key_low=segment.key_low,
        key_high=segment.key_high, state=_STATES[segment.state],
        start_offset=segment.start_offset, end_offset=segment.end_offset,
        predecessors=segment.predecessors, successors=segment.successors,
        owner=owner_of(segment.name),
    )


def topic_message(topic: TopicInfo,
                  owner_of: Callable[[str], str] = _no_owner) -> admin_pb2.Topic:
    """A ``Topic`` message, every config field set."""
    return admin_pb2.Topic(
        name=topic.name, config=_config_message(topic.config),
        segments=[segment_message(segment, owner_of) for segment in topic.segments],
        created_ms=topic.created_ms, sealed=topic.sealed,
    )


def segment_info_message(info: SegmentInfo,
                         owner_of: Callable[[str], str] = _no_owner) -> admin_pb2.SegmentInfo:
    """A ``SegmentInfo`` message."""
    return admin_pb2.SegmentInfo(
        segment=segment_message(info.segment, owner_of), sealed=info.sealed,
        ledgers=[
            admin_pb2.SegmentLedger(ledger_id=ledger.ledger_id, first_offset=ledger.first_offset,
                                    closed=ledger.closed)
            for ledger in info.ledgers
        ],
        length_bytes=info.length_bytes,
    )
