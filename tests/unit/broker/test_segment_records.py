"""The persisted topic and segment records."""

from __future__ import annotations

import json

import pytest

from broker.api import SegmentState, TopicConfig
from broker.errors import CorruptDataError
from broker.segment_records import LedgerRef, SegmentRecord, TopicRecord, TopicSegment


def test_topic_record_round_trip() -> None:
    record = TopicRecord("orders", TopicConfig(retention_ms=5000),
                         (TopicSegment(0, 0.0, 0.5), TopicSegment(1, 0.5, 1.0,
                                                                  SegmentState.SEALED)),
                         2, 123)
    assert TopicRecord.from_bytes(record.to_bytes()) == record
    assert json.loads(record.to_bytes())["format_version"] == 1


def test_segment_record_round_trip() -> None:
    record = SegmentRecord("orders", 3, (LedgerRef(7, 0, 100, 55), LedgerRef(9, 10)),
                           start_offset=0, sealed=True, end_offset=20)
    assert SegmentRecord.from_bytes(record.to_bytes()) == record


@pytest.mark.parametrize("data", [b"\xff", b"[]", b"{}", b'{"format_version": 2}',
                                  b'{"format_version": 1, "topic": "x"}'])
def test_bad_records_raise(data: bytes) -> None:
    with pytest.raises(CorruptDataError):
        SegmentRecord.from_bytes(data)
    with pytest.raises(CorruptDataError):
        TopicRecord.from_bytes(data)
