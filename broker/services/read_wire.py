"""``ReadResponse`` messages encoded by hand: the blocks' bytes are copied once, by a join.

Built as protobuf messages, a response's blocks were copied into each
``ReadBlock`` and copied again when gRPC serialized the message: two copies of
up to ``max_bytes`` per response, the broker's largest cost per byte in a
catch-up read (profiled: docs/bench.md, "Catch-up consume"). Here a response
is its wire encoding (``proto/folio/v1/read.proto``), one ``b"".join`` of
each block's few header bytes and its data, and the Read method's response
serializer (``broker.services._handlers``) sends ``bytes`` as they are.

The encoding is protobuf's own for these fields, zero values left out (as
``SerializeToString`` does), so a client cannot tell the difference; a unit
test compares the two byte for byte. Constant Python work per block.
"""

from __future__ import annotations

from collections.abc import Sequence

from broker.api import ReadBlock

__all__ = ["encode_response"]

# Tags: (field number << 3) | wire type (0 varint, 2 length-delimited).
_BLOCKS = b"\x0a"          # ReadResponse.blocks = 1
_END_OFFSET = b"\x10"      # ReadResponse.end_offset = 2
_END_OF_SEGMENT = b"\x18\x01"  # ReadResponse.end_of_segment = 3, true
_NEXT_OFFSET = b"\x20"     # ReadResponse.next_offset = 4
_OFFSET = b"\x08"          # ReadBlock.offset = 1
_EVENT_COUNT = b"\x10"     # ReadBlock.event_count = 2
_DATA = b"\x1a"            # ReadBlock.data = 3


def _varint(value: int) -> bytes:
    """A non-negative integer as a protobuf varint."""
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode_response(blocks: Sequence[ReadBlock], end_offset: int, end_of_segment: bool,
                    next_offset: int) -> bytes:
    """A serialized ``folio.v1.ReadResponse`` holding ``blocks`` and the three fields.

    Offsets and counts are never negative here (a segment's offsets start at 0);
    ``ValueError`` if one is, rather than a wrong encoding.
    """
    parts: list[bytes | memoryview] = []
    append = parts.append
    for block in blocks:
        offset, count, data = block.offset, block.event_count, block.data
        if offset < 0 or count < 0:
            raise ValueError(f"a block at offset {offset} with {count} events")
        head = b"".join((
            _OFFSET + _varint(offset) if offset else b"",
            _EVENT_COUNT + _varint(count) if count else b"",
            _DATA + _varint(len(data)) if data else b""))
        append(_BLOCKS + _varint(len(head) + len(data)) + head)
        if data:
            append(data)
    if end_offset < 0 or next_offset < 0:
        raise ValueError(f"end_offset {end_offset}, next_offset {next_offset}")
    if end_offset:
        append(_END_OFFSET + _varint(end_offset))
    if end_of_segment:
        append(_END_OF_SEGMENT)
    if next_offset:
        append(_NEXT_OFFSET + _varint(next_offset))
    return b"".join(parts)
