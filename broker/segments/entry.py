"""The format of a segment's ledger entries: a small fixed header, then the blocks as frames.

One entry holds the blocks of one append. Layout (big-endian, format 1)::

    header  u8 format (1) | u8 kind | i64 base_offset | u32 event_count |
            u32 frame_count | i64 last_event_number | i64 time_ms |
            16s txn_id (zeros: none) | u16 writer_id length | writer_id (utf-8)
    frames  frame_count x ( u32 length | u32 event_count | bytes )

The blocks are opaque (``folio.v1.EventBlock`` bytes packed by the client):
encoding and decoding do constant Python work per block, never per event.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from broker.api import Block, ReadBlock
from broker.errors import CorruptDataError
from txnbuffer.api import EntryKind, TxnId
from txnbuffer.txn_ids import NO_TXN_BYTES, txn_id_from_bytes, txn_id_to_bytes

__all__ = [
    "FORMAT_VERSION",
    "HEADER_BYTES",
    "MAX_WRITER_ID_BYTES",
    "EntryHeader",
    "EntryKind",
    "decode_entry_header",
    "encode_entry",
    "split_frames",
]

FORMAT_VERSION = 1
MAX_WRITER_ID_BYTES = 128

_HEADER = struct.Struct(">BBqIIqq16sH")
_FRAME = struct.Struct(">II")
#: Size of the fixed part of the header (the writer id follows it).
HEADER_BYTES = _HEADER.size
FRAME_HEADER_BYTES = _FRAME.size


@dataclass(frozen=True, slots=True)
class EntryHeader:
    """A decoded entry header.

    Attributes:
        kind: what the entry holds.
        base_offset: the offset of the entry's first event.
        event_count: events in the entry (the sum over its frames).
        frame_count: blocks in the entry.
        writer_id: the writer that appended it ("" for none).
        last_event_number: the writer's number of the entry's last event (-1: none).
        time_ms: when the broker appended it, ms since the epoch.
        txn_id: the transaction (None outside one: ``NO_TXN_BYTES`` on disk).
        size: bytes of the header; the frames start there.
    """

    kind: EntryKind
    base_offset: int
    event_count: int
    frame_count: int
    writer_id: str
    last_event_number: int
    time_ms: int
    txn_id: TxnId | None
    size: int

    @property
    def end_offset(self) -> int:
        """The offset after the entry's last event."""
        return self.base_offset + self.event_count


def encode_entry(
    kind: EntryKind, base_offset: int, blocks: Sequence[Block], writer_id: str,
    last_event_number: int, time_ms: int, txn_id: TxnId | None = None,
) -> bytes:
    """The entry holding ``blocks`` (in order) with a header saying the rest.

    Raises ``ValueError`` for a writer id above ``MAX_WRITER_ID_BYTES`` bytes, or
    values that do not fit their fields (a txn id's halves among them).
    """
    writer = writer_id.encode("utf-8")
    if len(writer) > MAX_WRITER_ID_BYTES:
        raise ValueError(
            f"writer_id is {len(writer)} bytes of UTF-8, at most {MAX_WRITER_ID_BYTES} allowed")
    pack_frame = _FRAME.pack
    parts: list[bytes] = [b"", writer]
    event_count = 0
    try:
        for block in blocks:
            data = block.data
            parts.append(pack_frame(len(data), block.event_count))
            parts.append(data)
            event_count += block.event_count
        parts[0] = _HEADER.pack(
            FORMAT_VERSION, kind, base_offset, event_count, len(blocks), last_event_number,
            time_ms, NO_TXN_BYTES if txn_id is None else txn_id_to_bytes(txn_id), len(writer),
        )
    except struct.error as error:
        raise ValueError(f"entry field out of range: {error}") from None
    return b"".join(parts)


def decode_entry_header(data: bytes) -> EntryHeader:
    """The header of an entry; ``CorruptDataError`` if it is not a well-formed one."""
    if len(data) < HEADER_BYTES:
        raise CorruptDataError(
            f"entry of {len(data)} bytes is shorter than the {HEADER_BYTES}-byte header")
    (version, kind, base_offset, event_count, frame_count, last_event_number, time_ms,
     txn_id, writer_length) = _HEADER.unpack_from(data)
    if version != FORMAT_VERSION:
        raise CorruptDataError(
            f"entry has format version {version}; this broker reads {FORMAT_VERSION}")
    try:
        entry_kind = EntryKind(kind)
    except ValueError:
        raise CorruptDataError(f"entry has unknown kind {kind}") from None
    size = HEADER_BYTES + writer_length
    if writer_length > MAX_WRITER_ID_BYTES or len(data) < size:
        raise CorruptDataError(f"entry writer id of {writer_length} bytes is cut or too long")
    if base_offset < 0:
        raise CorruptDataError(f"entry has a negative base offset {base_offset}")
    try:
        writer_id = data[HEADER_BYTES:size].decode("utf-8")
    except UnicodeDecodeError:
        raise CorruptDataError("entry writer id is not valid UTF-8") from None
    return EntryHeader(entry_kind, base_offset, event_count, frame_count, writer_id,
                       last_event_number, time_ms, txn_id_from_bytes(txn_id), size)


def split_frames(data: bytes, header: EntryHeader) -> list[ReadBlock]:
    """The entry's blocks, each with the offset of its first event.

    Raises ``CorruptDataError`` when the frames do not fill the entry exactly or
    their event counts do not add up to the header's.
    """
    unpack_frame = _FRAME.unpack_from
    frame_bytes = FRAME_HEADER_BYTES
    total = len(data)
    cursor = header.size
    offset = header.base_offset
    blocks: list[ReadBlock] = []
    for _ in range(header.frame_count):
        if cursor + frame_bytes > total:
            raise CorruptDataError(
                f"entry at offset {header.base_offset}: frame header cut at byte {cursor}")
        length, event_count = unpack_frame(data, cursor)
        cursor += frame_bytes
        end = cursor + length
        if end > total:
            raise CorruptDataError(
                f"entry at offset {header.base_offset}: frame of {length} bytes at byte "
                f"{cursor} runs past the entry's {total} bytes")
        blocks.append(ReadBlock(offset, event_count, data[cursor:end]))
        offset += event_count
        cursor = end
    if cursor != total:
        raise CorruptDataError(
            f"entry at offset {header.base_offset}: {total - cursor} bytes after its frames")
    if offset - header.base_offset != header.event_count:
        raise CorruptDataError(
            f"entry at offset {header.base_offset}: frames hold {offset - header.base_offset} "
            f"events, the header says {header.event_count}")
    return blocks
