"""The ledger entry format: round trips and corrupt input."""

from __future__ import annotations

import contextlib
import random
import struct

import pytest

from broker.api import Block, ReadBlock
from broker.errors import CorruptDataError
from broker.segments.entry import (
    HEADER_BYTES,
    EntryKind,
    decode_entry_header,
    encode_entry,
    split_frames,
)
from txnbuffer.txn_ids import NO_TXN_BYTES, txn_id_from_bytes


def test_round_trip() -> None:
    blocks = [Block(b"first", 3), Block(b"", 1), Block(b"third" * 100, 7)]
    txn_id = txn_id_from_bytes(b"t" * 16)
    data = encode_entry(EntryKind.DATA, 40, blocks, "writer-é", 99, 1234, txn_id=txn_id)
    header = decode_entry_header(data)
    assert header.kind is EntryKind.DATA
    assert (header.base_offset, header.event_count, header.frame_count) == (40, 11, 3)
    assert (header.writer_id, header.last_event_number, header.time_ms) == ("writer-é", 99, 1234)
    assert header.txn_id == txn_id
    assert b"t" * 16 in data  # on disk: the 16 wire bytes
    assert header.end_offset == 51
    assert split_frames(data, header) == [
        ReadBlock(40, 3, b"first"), ReadBlock(43, 1, b""), ReadBlock(44, 7, b"third" * 100)]


def test_defaults_and_empty_writer() -> None:
    data = encode_entry(EntryKind.DATA, 0, [Block(b"a", 1)], "", -1, 0)
    header = decode_entry_header(data)
    assert header.txn_id is None
    assert NO_TXN_BYTES in data
    assert header.writer_id == ""
    assert header.size == HEADER_BYTES
    assert split_frames(data, header) == [ReadBlock(0, 1, b"a")]


def test_encode_refuses_bad_fields() -> None:
    with pytest.raises(ValueError, match="writer_id"):
        encode_entry(EntryKind.DATA, 0, [Block(b"a", 1)], "w" * 129, 0, 0)
    with pytest.raises(ValueError, match="out of range"):
        encode_entry(EntryKind.DATA, 0, [Block(b"a", 1)], "w", 0, 0, txn_id=(1 << 64, 0))
    with pytest.raises(ValueError, match="out of range"):
        encode_entry(EntryKind.DATA, 0, [Block(b"a", -1)], "w", 0, 0)


def _entry() -> bytes:
    return encode_entry(EntryKind.DATA, 5, [Block(b"abc", 2), Block(b"defg", 1)], "w", 3, 9)


@pytest.mark.parametrize(("corrupt", "message"), [
    (lambda d: d[:10], "shorter"),
    (lambda d: b"\x02" + d[1:], "format version"),
    (lambda d: d[:1] + b"\x09" + d[2:], "unknown kind"),
    (lambda d: d[:HEADER_BYTES], "writer id"),
    (lambda d: d[:-1], "runs past"),
    (lambda d: d + b"!", "after its frames"),
    (lambda d: d[:-8], "frame"),
])
def test_corrupt_entries_raise(corrupt: object, message: str) -> None:
    data = corrupt(_entry())  # type: ignore[operator]
    with pytest.raises(CorruptDataError, match=message):
        split_frames(data, decode_entry_header(data))


def test_event_counts_must_add_up() -> None:
    data = bytearray(_entry())
    struct.pack_into(">I", data, 10, 4)  # header event_count: 3 -> 4
    with pytest.raises(CorruptDataError, match="the header says 4"):
        split_frames(bytes(data), decode_entry_header(bytes(data)))


def test_garbage_never_crashes() -> None:
    generator = random.Random(7)
    entry = _entry()
    for _ in range(2000):
        data = bytearray(entry)
        for _ in range(generator.randint(1, 4)):
            data[generator.randrange(len(data))] = generator.randrange(256)
        data = data[: generator.randint(0, len(data) + 1)]
        with contextlib.suppress(CorruptDataError):
            split_frames(bytes(data), decode_entry_header(bytes(data)))
