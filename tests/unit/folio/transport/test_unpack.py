"""Reading blocks back (folio._transport.unpack): events at their offsets, or InvalidBlockError."""

from __future__ import annotations

import pytest

from folio._transport.unpack import unpack_events
from folio.api.v1 import read_pb2
from folio.api.v1.block import encode_block
from folio.errors import InvalidBlockError


def _response(*blocks: tuple[int, int, bytes]) -> read_pb2.ReadResponse:
    return read_pb2.ReadResponse(blocks=[
        read_pb2.ReadBlock(offset=offset, event_count=count, data=data)
        for offset, count, data in blocks])


def test_events_get_their_offsets_and_resent_blocks_are_skipped() -> None:
    response = _response((0, 2, encode_block([b"a", b"b"])), (2, 1, encode_block([b"c"])))
    events, position = unpack_events("t/0", 1, response, None)
    assert [(e.offset, e.payload) for e in events] == [(1, b"b"), (2, b"c")]
    assert position == 3


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
