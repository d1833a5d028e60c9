"""Unpacking by column (folio._transport.unpack.unpack_response): events made one at a
time as taken, at the same offsets, with the same columns and the same errors as
``unpack_events`` made them all at once."""

from __future__ import annotations

import gc

import pytest

from folio._transport.unpack import EMPTY, unpack_events, unpack_response
from folio.api.v1 import read_pb2
from folio.api.v1.block import MAX_BLOCK_BYTES, encode_block
from folio.errors import InvalidBlockError
from folio.models import NO_HEADERS, Event, UndecodedEvent
from folio.serializers import JsonSerializer


def _response(*blocks: tuple[int, int, bytes]) -> read_pb2.ReadResponse:
    return read_pb2.ReadResponse(blocks=[
        read_pb2.ReadBlock(offset=offset, event_count=count, data=data)
        for offset, count, data in blocks])


def _taken(response: read_pb2.ReadResponse, position: int = 0) -> list[Event[object]]:
    unpacked, _ = unpack_response("t/0", position, response, None)
    return [unpacked.take() for _ in range(len(unpacked))]


def test_every_column_and_offset_across_blocks_and_a_gap() -> None:
    # Block 1 has keys, times and headers; block 2 none of them; a gap (left-out
    # entries) between them: each event keeps its own block's columns and offset.
    first = encode_block([b"a", b"b"], ["k1", "k2"], [10, 20], [{"h": b"1"}, {}])
    second = encode_block([b"c"])
    response = _response((5, 2, first), (9, 1, second))
    unpacked, position = unpack_response("t/0", 0, response, None)
    assert position == 10 and len(unpacked) == 3 and unpacked.offsets == [5, 6, 9]
    assert unpacked.segment == "t/0" and unpacked.undecoded == []
    assert unpacked.data_bytes == len(first) + len(second)
    events = [unpacked.take() for _ in range(3)]
    assert events == [Event(b"a", "k1", "t/0", 5, 10, {"h": b"1"}),
                      Event(b"b", "k2", "t/0", 6, 20, {}),
                      Event(b"c", None, "t/0", 9, None, NO_HEADERS)]
    assert events[2].headers is NO_HEADERS
    with pytest.raises(StopIteration):
        unpacked.take()


@pytest.mark.parametrize("position", range(0, 7))
def test_every_position_inside_and_at_the_edges_of_the_blocks(position: int) -> None:
    response = _response((0, 3, encode_block([b"0", b"1", b"2"], None, [0, 1, 2])),
                         (3, 2, encode_block([b"3", b"4"], ["x", "y"])))
    taken = _taken(response, position)
    assert [(e.offset, e.payload) for e in taken] == [
        (offset, str(offset).encode()) for offset in range(position, 5)]
    assert [e.timestamp for e in taken if e.offset < 3] == list(range(position, 3))
    assert [e.routing_key for e in taken if e.offset >= 3] == ["x", "y"][max(position - 3, 0):]
    assert taken == unpack_events("t/0", position, response, None)[0]
    _, after = unpack_response("t/0", position, response, None)
    assert after == max(position, 5)


def test_empty_blocks_and_an_empty_response() -> None:
    unpacked, position = unpack_response("t/0", 4, read_pb2.ReadResponse(), None)
    assert (len(unpacked), position, unpacked.events()) == (0, 4, [])
    empty = encode_block([])
    taken = _taken(_response((0, 0, empty), (0, 1, encode_block([b"a"])), (1, 0, empty)))
    assert [(e.offset, e.payload) for e in taken] == [(0, b"a")]
    assert len(EMPTY) == 0 and EMPTY.events() == []


def test_a_large_event_comes_whole() -> None:
    payload = bytes(range(256)) * ((MAX_BLOCK_BYTES - 1024) // 256)
    [event] = _taken(_response((7, 1, encode_block([payload], ["k"]))))
    assert (event.offset, event.routing_key, event.payload) == (7, "k", payload)


def test_events_are_made_as_they_are_taken() -> None:
    response = _response((0, 1000, encode_block([b"e"] * 1000)))
    unpacked, _ = unpack_response("t/0", 0, response, None)
    tracked = len(gc.get_objects())
    events = [unpacked.take() for _ in range(10)]
    # 10 events made (and the list): nowhere near the block's 1000.
    assert len(gc.get_objects()) - tracked < 100
    assert [e.offset for e in events] == list(range(10))
    rest = unpacked.events()
    assert [e.offset for e in rest] == list(range(10, 1000))


def test_undecodable_payloads_keep_their_place_and_columns() -> None:
    response = _response((4, 3, encode_block([b"1", b"not json", b"3"], ["k"] * 3, [1, 2, 3],
                                             [{}, {"a": b"b"}, {}])),
                         (7, 2, encode_block([b"{", b"5"])))
    unpacked, position = unpack_response("my/topic/2", 5, response,
                                         JsonSerializer().deserialize)
    assert position == 9 and unpacked.undecoded == [0, 2]
    first, second = unpacked.undecodable[0], unpacked.undecodable[2]
    assert isinstance(first, UndecodedEvent) and isinstance(second, UndecodedEvent)
    assert (first.payload, first.routing_key, first.offset, first.timestamp, first.headers) \
        == (b"not json", "k", 5, 2, {"a": b"b"})
    assert (first.error.segment, first.error.offset, first.error.payload) == (
        "my/topic/2", 5, b"not json")
    assert (second.routing_key, second.offset, second.headers) == (None, 7, NO_HEADERS)
    taken = [unpacked.take() for _ in range(4)]
    assert [(e.offset, e.payload) for e in taken] == [
        (5, b"not json"), (6, 3), (7, b"{"), (8, 5)]
    events, _, undecoded = unpack_events("my/topic/2", 5, response,
                                         JsonSerializer().deserialize)
    assert undecoded == [0, 2] and isinstance(events[0], UndecodedEvent)


@pytest.mark.parametrize("data", [b"\xff\xff", encode_block([b"a"])[:-1], b"\x08\x07"])
def test_a_corrupt_block_raises_the_typed_error_naming_segment_and_offset(data: bytes) -> None:
    response = _response((0, 1, encode_block([b"a"])), (1, 1, data))
    with pytest.raises(InvalidBlockError) as raised:
        unpack_response("t/3", 0, response, None)
    assert (raised.value.segment, raised.value.offset) == ("t/3", 1)
    assert str(raised.value).startswith("segment t/3 offset 1: ")


def test_a_count_disagreeing_with_the_block_raises() -> None:
    with pytest.raises(InvalidBlockError, match="holds 2 events but its event_count is 3"):
        unpack_response("t/0", 0, _response((0, 3, encode_block([b"a", b"b"]))), None)
