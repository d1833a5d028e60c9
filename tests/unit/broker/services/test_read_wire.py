"""Read responses encoded by hand (broker.services.read_wire): byte for byte what
protobuf's SerializeToString makes of the same message, and parsed back the same."""

from __future__ import annotations

import pytest

from broker.api import ReadBlock
from broker.services.read_wire import encode_response
from folio.api.v1 import read_pb2

_CASES = [
    ([], 0, False, 0),
    ([], 5, True, 5),
    ([ReadBlock(0, 1, b"x")], 1, False, 1),
    ([ReadBlock(0, 0, b"")], 0, False, 0),  # every block field zero
    ([ReadBlock(127, 128, b"a" * 127), ReadBlock(255, 16_384, b"b" * 128)],
     2**40, True, 2**40 - 3),
    ([ReadBlock(2**62, 2**32 - 1, bytes(range(256)) * 4097)], 2**63 - 1, False, 2**62 + 9),
]


@pytest.mark.parametrize(("blocks", "end_offset", "end_of_segment", "next_offset"), _CASES)
def test_the_encoding_is_protobufs(blocks: list[ReadBlock], end_offset: int,
                                   end_of_segment: bool, next_offset: int) -> None:
    encoded = encode_response(blocks, end_offset, end_of_segment, next_offset)
    message = read_pb2.ReadResponse(
        blocks=[read_pb2.ReadBlock(offset=b.offset, event_count=b.event_count, data=b.data)
                for b in blocks],
        end_offset=end_offset, end_of_segment=end_of_segment, next_offset=next_offset)
    assert encoded == message.SerializeToString(deterministic=True)
    parsed = read_pb2.ReadResponse.FromString(encoded)
    assert [(b.offset, b.event_count, b.data) for b in parsed.blocks] == [
        (b.offset, b.event_count, b.data) for b in blocks]
    assert (parsed.end_offset, parsed.end_of_segment, parsed.next_offset) == (
        end_offset, end_of_segment, next_offset)


@pytest.mark.parametrize("values", [(-1, 1, 0, 0), (0, -1, 0, 0), (0, 1, -1, 0), (0, 1, 0, -1)])
def test_negative_values_are_refused(values: tuple[int, int, int, int]) -> None:
    offset, count, end_offset, next_offset = values
    with pytest.raises(ValueError):
        encode_response([ReadBlock(offset, count, b"x")], end_offset, False, next_offset)
