"""Read responses parsed in one pass (folio._transport.read_view): the same events as a
``ReadResponse`` decoded block by block, and a damaged response still gets its typed
error naming the damaged block (never another exception, never events skipped)."""

from __future__ import annotations

import pytest
from google.protobuf.message import DecodeError

from folio._transport.read_view import ReadView, parse_read_response
from folio._transport.unpack import unpack_events, unpack_response
from folio.api.v1 import read_pb2
from folio.api.v1.block import encode_block
from folio.errors import InvalidBlockError
from folio.serializers import JsonSerializer

_BLOCKS = [
    (0, 3, encode_block([b"a", b"bb", b"ccc"])),
    (3, 2, encode_block([b"1", b"{"], routing_keys=["k1", "k\u00e9"],
                        timestamps_ms=[1_700_000_000_000, -5],
                        headers=[{"h": b"v"}, {}])),
    (7, 1, encode_block([b""], timestamps_ms=[0])),  # offsets 5 and 6 left out
]


def _wire(*blocks: tuple[int, int, bytes], next_offset: int = 8) -> bytes:
    return read_pb2.ReadResponse(
        blocks=[read_pb2.ReadBlock(offset=offset, event_count=count, data=data)
                for offset, count, data in blocks],
        end_offset=20, end_of_segment=True, next_offset=next_offset).SerializeToString()


def test_a_view_unpacks_to_the_events_a_plain_response_gives() -> None:
    wire = _wire(*_BLOCKS)
    view = parse_read_response(wire)
    assert isinstance(view, ReadView)
    assert (view.end_offset, view.end_of_segment, view.next_offset, view.wire_bytes) == (
        20, True, 8, len(wire))
    plain = read_pb2.ReadResponse.FromString(wire)
    for position in range(9):
        for deserialize in (None, JsonSerializer().deserialize):
            assert unpack_events("t/0", position, view, deserialize) == unpack_events(
                "t/0", position, plain, deserialize)
    events, position, undecoded = unpack_events("t/0", 0, view, None)
    assert [event.offset for event in events] == [0, 1, 2, 3, 4, 7]
    assert position == 8 and undecoded == []
    assert (events[4].routing_key, events[4].timestamp) == ("k\u00e9", -5)
    assert dict(events[3].headers) == {"h": b"v"}


def test_a_view_counts_its_response_bytes_as_received() -> None:
    wire = _wire(*_BLOCKS)
    view = parse_read_response(wire)
    unpacked, _ = unpack_response("t/0", 0, view, None)
    blocks = sum(len(data) for _, _, data in _BLOCKS)
    assert unpacked.data_bytes == len(wire)
    assert blocks < unpacked.data_bytes < blocks + 64  # the blocks and their framing


@pytest.mark.parametrize("damaged", [
    b"\xff\xff\xff",                                      # not a message
    encode_block([b"x", b"y"])[:-1],                      # cut short
    b"\x1a\x02\xc3\x28",                                  # a routing key that is not UTF-8
])
def test_a_damaged_block_is_named_and_the_blocks_around_it_are_not_skipped(
        damaged: bytes) -> None:
    wire = _wire(_BLOCKS[0], (3, 2, damaged), _BLOCKS[2])
    parsed = parse_read_response(wire)
    # It does not parse as a view: handed on as a plain response, decoded block by block.
    assert isinstance(parsed, read_pb2.ReadResponse)
    with pytest.raises(InvalidBlockError) as raised:
        unpack_response("t/4", 0, parsed, None)
    assert (raised.value.segment, raised.value.offset) == ("t/4", 3)
    # Past the damaged block (a reader reopened after it), nothing before it is lost.
    assert [event.offset for event in unpack_events("t/4", 0, parse_read_response(
        _wire(_BLOCKS[0])), None)[0]] == [0, 1, 2]


def test_a_view_block_whose_count_disagrees_raises_as_a_plain_one() -> None:
    view = parse_read_response(_wire((0, 5, encode_block([b"a", b"b"]))))
    assert isinstance(view, ReadView)
    with pytest.raises(InvalidBlockError, match="the block holds 2 events but its "
                       "event_count is 5") as raised:
        unpack_response("t/1", 0, view, None)
    assert raised.value.offset == 0


def test_a_view_block_of_an_unknown_format_raises_naming_it() -> None:
    view = parse_read_response(_wire((2, 0, b"\x08\x07")))  # format_version 7
    assert isinstance(view, ReadView)
    with pytest.raises(InvalidBlockError, match="unknown event block format version 7"):
        unpack_response("t/1", 0, view, None)


def test_bytes_that_are_no_response_raise_decode_error() -> None:
    with pytest.raises(DecodeError):
        parse_read_response(b"\x0a\xff\xff\xff\xff\x0f")


def test_every_cut_and_every_flipped_byte_gives_events_or_a_typed_error() -> None:
    """Whatever the damage, parse then unpack either returns events at their offsets
    or raises DecodeError (gRPC fails the call) or InvalidBlockError: nothing else."""
    wire = _wire(*_BLOCKS)
    damaged = [wire[:cut] for cut in range(len(wire))]
    damaged += [wire[:at] + bytes([wire[at] ^ flip]) + wire[at + 1:]
                for at in range(len(wire)) for flip in (0x01, 0x80, 0xff)]
    outcomes = {"events": 0, "invalid": 0, "undecodable": 0}
    for data in damaged:
        try:
            parsed = parse_read_response(data)
        except DecodeError:
            outcomes["undecodable"] += 1
            continue
        try:
            events, position, _ = unpack_events("t/0", 0, parsed, None)
        except InvalidBlockError:
            outcomes["invalid"] += 1
            continue
        outcomes["events"] += 1
        offsets = [event.offset for event in events]
        assert offsets == sorted(set(offsets))
        assert all(offset < position for offset in offsets)
    assert all(outcomes.values()), outcomes
