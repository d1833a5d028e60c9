"""``ResetKafkaGroupRequest`` decoded by the ``ReaderGroups`` servicer (``_offset_reset``)."""

from __future__ import annotations

from typing import Any

import pytest

from broker.errors import InvalidArgumentError
from broker.groups.kafka_view import OffsetReset
from broker.services.groups import _offset_reset
from folio.api.v1 import groups_pb2

_TO = groups_pb2.ResetKafkaGroupRequest


def test_each_to_is_decoded_with_its_value() -> None:
    def decoded(**fields: Any) -> OffsetReset:
        return _offset_reset(groups_pb2.ResetKafkaGroupRequest(name="g", **fields))

    assert decoded(to=_TO.TO_EARLIEST, topics=["t"]) == OffsetReset("earliest", ("t",))
    assert decoded(to=_TO.TO_OFFSET, offset=7, dry_run=True) == OffsetReset(
        "offset", value=7, dry_run=True)
    assert decoded(to=_TO.TO_SHIFT, shift_by=-3, offset=9) == OffsetReset("shift", value=-3)
    assert decoded(to=_TO.TO_TIMESTAMP, timestamp_ms=5) == OffsetReset("timestamp", value=5)
    assert decoded(to=_TO.TO_CURRENT, partitions=[groups_pb2.KafkaTopicPartition(
        topic="t", partition=2)]) == OffsetReset("current", partitions=(("t", 2),))
    assert decoded(to=_TO.TO_OFFSETS, offsets=[groups_pb2.KafkaPartitionOffset(
        topic="t", partition=1, offset=4)]) == OffsetReset("offsets", offsets=(("t", 1, 4),))


@pytest.mark.parametrize(("fields", "said"), [
    ({}, "needs `to`"),
    ({"to": 99}, "needs `to`"),
    ({"to": _TO.TO_OFFSET, "offset": -1}, "a negative offset (-1)"),
    ({"to": _TO.TO_TIMESTAMP, "timestamp_ms": -2}, "a negative timestamp (-2)"),
    ({"to": _TO.TO_OFFSETS}, "TO_OFFSETS needs `offsets`"),
])
def test_a_request_asking_nothing_sensible_is_invalid(fields: dict[str, Any], said: str) -> None:
    with pytest.raises(InvalidArgumentError, match=said.replace("(", r"\(").replace(")", r"\)")):
        _offset_reset(groups_pb2.ResetKafkaGroupRequest(name="g", **fields))
