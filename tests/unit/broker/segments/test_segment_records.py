"""The persisted topic and segment records."""

from __future__ import annotations

import json

import pytest

from broker.api import SegmentState, TopicConfig
from broker.errors import CorruptDataError
from broker.segments.records import LedgerRecord, SegmentRecord
from broker.topics.records import TopicRecord, TopicSegment


def test_topic_record_round_trip() -> None:
    record = TopicRecord("orders", TopicConfig(retention_ms=5000),
                         (TopicSegment(0, 0.0, 0.5), TopicSegment(1, 0.5, 1.0,
                                                                  SegmentState.SEALED)),
                         2, 123)
    assert TopicRecord.from_bytes(record.to_bytes()) == record
    assert json.loads(record.to_bytes())["format_version"] == 2


def test_topic_record_scaling_fields_round_trip_and_format_1_is_read() -> None:
    record = TopicRecord("orders", TopicConfig(scale_target_events_per_s=100),
                         (TopicSegment(0, 0.0, 1.0, SegmentState.SEALED),
                          TopicSegment(1, 0.0, 0.5, predecessors=(0,)),
                          TopicSegment(2, 0.5, 1.0, predecessors=(0,))),
                         3, 123, sealed=True, scaled_ms=77)
    assert TopicRecord.from_bytes(record.to_bytes()) == record
    old = json.loads(record.to_bytes())
    old["format_version"] = 1
    for segment in old["segments"]:
        del segment["predecessors"]
    del old["sealed"], old["scaled_ms"]
    read = TopicRecord.from_bytes(json.dumps(old).encode())
    assert [s.predecessors for s in read.segments] == [(), (), ()]
    assert not read.sealed and read.scaled_ms == 0


def test_segment_record_round_trip() -> None:
    record = SegmentRecord("orders", 3, (LedgerRecord(7, 0, 100, 55), LedgerRecord(9, 10)),
                           start_offset=0, sealed=True, end_offset=20)
    assert SegmentRecord.from_bytes(record.to_bytes()) == record


@pytest.mark.parametrize("data", [b"\xff", b"[]", b"{}", b'{"format_version": 3}',
                                  b'{"format_version": 1, "topic": "x"}'])
def test_bad_records_raise(data: bytes) -> None:
    with pytest.raises(CorruptDataError):
        SegmentRecord.from_bytes(data)
    with pytest.raises(CorruptDataError):
        TopicRecord.from_bytes(data)
