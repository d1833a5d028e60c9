"""Reading blocks back (folio._transport.unpack): events at their offsets, or InvalidBlockError;
payloads the serializer cannot decode become ``UndecodedEvent``s in their place."""

from __future__ import annotations

import pytest

from folio._transport.unpack import unpack_events
from folio.api.v1 import read_pb2
from folio.api.v1.block import encode_block
from folio.errors import DeserializationError, InvalidBlockError
from folio.models import UndecodedEvent
from folio.serializers import JsonSerializer


def _response(*blocks: tuple[int, int, bytes]) -> read_pb2.ReadResponse:
    return read_pb2.ReadResponse(blocks=[
        read_pb2.ReadBlock(offset=offset, event_count=count, data=data)
        for offset, count, data in blocks])


def test_events_get_their_offsets_and_resent_blocks_are_skipped() -> None:
    response = _response((0, 2, encode_block([b"a", b"b"])), (2, 1, encode_block([b"c"])))
    events, position, undecoded = unpack_events("t/0", 1, response, None)
    assert [(e.offset, e.payload) for e in events] == [(1, b"b"), (2, b"c")]
    assert position == 3
    assert undecoded == []


def test_undecodable_payloads_stay_in_place_as_undecoded_events() -> None:
    response = _response((4, 3, encode_block([b"1", b"not json", b"3"], ["k"] * 3)),
                         (7, 2, encode_block([b"{", b"5"])))
    events, position, undecoded = unpack_events("my/topic/2", 5, response,
                                                JsonSerializer().deserialize)
    assert position == 9
    assert [(e.offset, e.payload) for e in events] == [
        (5, b"not json"), (6, 3), (7, b"{"), (8, 5)]
    assert undecoded == [0, 2]
    first, second = events[0], events[2]
    assert isinstance(first, UndecodedEvent) and isinstance(second, UndecodedEvent)
    assert first.routing_key == "k"
    error = first.error
    assert isinstance(error, DeserializationError) and not error.retriable
    assert (error.topic, error.segment, error.offset, error.payload) == (
        "my/topic", "my/topic/2", 5, b"not json")
    assert str(error).startswith("segment my/topic/2 offset 5: JsonSerializer() cannot decode")
    assert type(error.__cause__).__name__ == "JSONDecodeError"
    assert second.error.offset == 7


@pytest.mark.parametrize("stated", [1, 3])
def test_a_block_whose_event_count_disagrees_raises_naming_segment_and_offset(
        stated: int) -> None:
    response = _response((0, 1, encode_block([b"a"])), (1, stated, encode_block([b"b", b"c"])))
    with pytest.raises(InvalidBlockError) as raised:
        unpack_events("t/4", 0, response, None)
    assert (raised.value.segment, raised.value.offset) == ("t/4", 1)
    assert f"segment t/4 offset 1: the block holds 2 events but its event_count is {stated}" \
        in str(raised.value)


def test_an_undecodable_block_raises_naming_segment_and_offset() -> None:
    with pytest.raises(InvalidBlockError, match="segment t/0 offset 7: not an event block") as r:
        unpack_events("t/0", 7, _response((7, 1, b"\xff\xff")), None)
    assert (r.value.segment, r.value.offset) == ("t/0", 7)
