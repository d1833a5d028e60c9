"""Models: conversions from the admin protos, Event, WriteResult."""

from __future__ import annotations

import dataclasses

import pytest

from folio.api.v1 import admin_pb2
from folio.models import (
    TOPIC_CONFIG_FIELDS,
    Event,
    SegmentLedger,
    TopicConfig,
    WriteResult,
    segment_info_from_proto,
    topic_info_from_proto,
)

CONFIG = admin_pb2.TopicConfig(retention_ms=-1, retention_bytes=-1, max_event_bytes=1024,
                               ledger_rollover_bytes=4096, ledger_rollover_ms=60_000,
                               scale_target_events_per_s=0, scale_min_segments=1,
                               scale_cooldown_ms=60_000)


def _segment(number: int, low: float, high: float, *, sealed: bool = False) -> admin_pb2.Segment:
    return admin_pb2.Segment(
        name=f"t/{number}", number=number, key_low=low, key_high=high,
        state=admin_pb2.SEGMENT_STATE_SEALED if sealed else admin_pb2.SEGMENT_STATE_OPEN,
        start_offset=2, end_offset=9)


def test_topic_from_proto() -> None:
    topic = topic_info_from_proto(admin_pb2.Topic(
        name="t", config=CONFIG, segments=[_segment(0, 0.0, 0.5), _segment(1, 0.5, 1.0)],
        created_ms=123))
    assert topic.name == "t" and topic.created_ms == 123
    assert topic.config == TopicConfig(-1, -1, 1024, 4096, 60_000)
    assert [(s.name, s.number, s.key_low, s.key_high, s.sealed, s.start_offset, s.end_offset)
            for s in topic.segments] == [("t/0", 0, 0.0, 0.5, False, 2, 9),
                                         ("t/1", 1, 0.5, 1.0, False, 2, 9)]
    assert isinstance(topic.segments, tuple)


def test_segment_info_from_proto() -> None:
    info = segment_info_from_proto(admin_pb2.SegmentInfo(
        segment=_segment(3, 0.0, 1.0, sealed=True), sealed=True, length_bytes=77,
        ledgers=[admin_pb2.SegmentLedger(ledger_id=5, first_offset=0, closed=True),
                 admin_pb2.SegmentLedger(ledger_id=9, first_offset=4, closed=False)]))
    assert info.sealed and info.segment.sealed
    assert info.ledgers == (SegmentLedger(5, 0, True), SegmentLedger(9, 4, False))
    assert info.length_bytes == 77
    # The explicit flag wins if the state is left unset.
    bare = admin_pb2.Segment(name="t/0")
    assert segment_info_from_proto(admin_pb2.SegmentInfo(segment=bare, sealed=True)).sealed


def test_config_fields_match_the_proto() -> None:
    assert tuple(f.name for f in dataclasses.fields(TopicConfig)) == TOPIC_CONFIG_FIELDS
    assert set(TOPIC_CONFIG_FIELDS) == set(admin_pb2.TopicConfig.DESCRIPTOR.fields_by_name)


def test_models_are_frozen() -> None:
    result = WriteResult("t/0", 4)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.offset = 5  # type: ignore[misc]


def test_event() -> None:
    event = Event(b"p", "k", "t/0", 3, 1700, {"h": b"v"})
    assert (event.payload, event.routing_key, event.segment, event.offset, event.timestamp,
            event.headers) == (b"p", "k", "t/0", 3, 1700, {"h": b"v"})
    assert event == Event(b"p", "k", "t/0", 3, 1700, {"h": b"v"})
    assert event != Event(b"p", "k", "t/0", 4, 1700, {"h": b"v"})
    assert event != "not an event"
    assert "offset=3" in repr(event)
    assert not hasattr(event, "__dict__")
    with pytest.raises(TypeError):
        hash(event)
