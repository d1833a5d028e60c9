"""The records of a keyed (compacted) system topic, one per block.

Each record is one block of one event in the topic's segment; the entry around
it is an ordinary ``broker.segments.entry`` DATA entry (no writer id, no event number).
Layout of the block's bytes (big-endian, format 1)::

    u8 format (1) | u8 flags (bit 0: tombstone) | u16 key length | key (utf-8) | value

A tombstone has an empty value and deletes its key. Readers take the latest
record per key in offset order; a key whose latest record is a tombstone is
absent.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from broker.errors import CorruptDataError, EventTooLargeError, InvalidArgumentError
from broker.segments.block_limits import MAX_BLOCK_BYTES
from broker.segments.entry import FRAME_HEADER_BYTES, HEADER_BYTES

__all__ = [
    "MAX_KEY_BYTES",
    "RECORD_FORMAT",
    "SystemRecord",
    "decode_record",
    "encode_record",
    "max_block_bytes",
    "max_value_bytes",
]

RECORD_FORMAT = 1
#: The longest key, in bytes of UTF-8.
MAX_KEY_BYTES = 1024
#: A system topic's ``max_event_bytes`` (the most ``TopicConfig`` allows).
MAX_EVENT_BYTES = 4 * 1024 * 1024
_TOMBSTONE = 1
_RECORD = struct.Struct(">BBH")
RECORD_HEADER_BYTES = _RECORD.size


@dataclass(frozen=True, slots=True)
class SystemRecord:
    """A decoded record: the key and its value, None for a tombstone."""

    key: str
    value: bytes | None


def max_block_bytes(max_entry_bytes: int) -> int:
    """The largest record block one entry of at most ``max_entry_bytes`` can hold alone."""
    return min(max_entry_bytes - HEADER_BYTES - FRAME_HEADER_BYTES, MAX_BLOCK_BYTES)


def max_value_bytes(max_entry_bytes: int) -> int:
    """The largest value a record may carry, whatever its key (up to ``MAX_KEY_BYTES``)."""
    return max_block_bytes(max_entry_bytes) - RECORD_HEADER_BYTES - MAX_KEY_BYTES


def encode_record(key: str, value: bytes | None, max_value: int) -> bytes:
    """The block bytes of one record.

    Raises ``InvalidArgumentError`` for an empty key or one above
    ``MAX_KEY_BYTES``, ``EventTooLargeError`` for a value above ``max_value``.
    """
    raw_key = key.encode("utf-8")
    if not raw_key or len(raw_key) > MAX_KEY_BYTES:
        raise InvalidArgumentError(
            f"a system topic key must be 1 to {MAX_KEY_BYTES} bytes of UTF-8, "
            f"got {len(raw_key)}")
    if value is not None and len(value) > max_value:
        raise EventTooLargeError(len(value), max_value, what=f"record value of key {key!r}")
    flags = _TOMBSTONE if value is None else 0
    return b"".join((_RECORD.pack(RECORD_FORMAT, flags, len(raw_key)), raw_key, value or b""))


def decode_record(data: bytes) -> SystemRecord:
    """The record in a block; ``CorruptDataError`` if the bytes are not one."""
    if len(data) < RECORD_HEADER_BYTES:
        raise CorruptDataError(f"system record of {len(data)} bytes is shorter than its header")
    version, flags, key_length = _RECORD.unpack_from(data)
    if version != RECORD_FORMAT:
        raise CorruptDataError(
            f"system record has format {version}; this broker reads {RECORD_FORMAT}")
    end = RECORD_HEADER_BYTES + key_length
    if len(data) < end or flags & ~_TOMBSTONE:
        raise CorruptDataError("system record key cut or unknown flags")
    try:
        key = data[RECORD_HEADER_BYTES:end].decode("utf-8")
    except UnicodeDecodeError:
        raise CorruptDataError("system record key is not valid UTF-8") from None
    if flags & _TOMBSTONE:
        if len(data) != end:
            raise CorruptDataError(f"tombstone of key {key!r} carries a value")
        return SystemRecord(key, None)
    return SystemRecord(key, data[end:])
