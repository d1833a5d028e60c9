"""Kafka record batches (magic 2) on the broker: the 61-byte header, and nothing more.

Layout (big-endian)::

    0  base_offset i64        8  batch_length i32     12 partition_leader_epoch i32
    16 magic i8               17 crc u32 (CRC32C of bytes 21..end)
    21 attributes i16         23 last_offset_delta i32
    27 base_timestamp i64     35 max_timestamp i64
    43 producer_id i64        51 producer_epoch i16   53 base_sequence i32
    57 records_count i32      61 records (compressed as attributes say)

``parse_batch`` checks what Kafka's broker checks without decoding records:
the length, the magic, the CRC32C (hardware CRC, ``crc32c``), a positive
record count that agrees with ``last_offset_delta``. The base offset is not
part of the CRC, so the broker sets it (``with_base_offset``) without
touching the rest.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

from crc32c import crc32c

__all__ = [
    "BATCH_HEADER_BYTES",
    "BatchHeader",
    "InvalidBatchError",
    "max_timestamp",
    "parse_batch",
    "split_batches",
    "with_base_offset",
]

_HEADER = struct.Struct(">qiibIhiqqqhii")
BATCH_HEADER_BYTES: Final = _HEADER.size  # 61
_LENGTH = struct.Struct(">qi")
_OFFSET = struct.Struct(">q")
_CRC_START = 21
_MAGIC = 2
_TRANSACTIONAL = 0x10
_CONTROL = 0x20
_TIMESTAMP_TYPE = 0x08
_CODEC = 0x07
#: gzip, snappy, lz4, zstd (and none): what Kafka defines.
_CODECS = frozenset(range(5))


class InvalidBatchError(Exception):
    """Bytes that are not one well-formed record batch (Kafka's CORRUPT_MESSAGE / INVALID_RECORD).

    ``corrupt``: the CRC or the framing is wrong (CORRUPT_MESSAGE), else the
    batch is well formed but not acceptable (INVALID_RECORD).
    """

    def __init__(self, message: str, *, corrupt: bool) -> None:
        super().__init__(message)
        self.corrupt = corrupt


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """The header fields the broker uses."""

    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def transactional(self) -> bool:
        """Written in a Kafka transaction."""
        return bool(self.attributes & _TRANSACTIONAL)

    @property
    def control(self) -> bool:
        """A control batch (commit or abort marker): only brokers write them."""
        return bool(self.attributes & _CONTROL)

    @property
    def log_append_time(self) -> bool:
        """The timestamps are the broker's (LogAppendTime)."""
        return bool(self.attributes & _TIMESTAMP_TYPE)

    @property
    def last_sequence(self) -> int:
        """The sequence number of the last record (producers with sequences only)."""
        return self.base_sequence + self.last_offset_delta


def split_batches(records: bytes) -> list[bytes]:
    """The batches of a Produce partition's ``records`` bytes, by their length fields.

    Raises ``InvalidBatchError`` (corrupt) if a length runs past the end.
    """
    batches: list[bytes] = []
    position, total = 0, len(records)
    while position < total:
        if total - position < BATCH_HEADER_BYTES:
            raise InvalidBatchError(f"record batch cut: {total - position} bytes left, "
                                    f"a header is {BATCH_HEADER_BYTES}", corrupt=True)
        _, length = _LENGTH.unpack_from(records, position)
        end = position + 12 + length
        if length < BATCH_HEADER_BYTES - 12 or end > total:
            raise InvalidBatchError(f"record batch length {length} does not fit the "
                                    f"{total - position} bytes left", corrupt=True)
        batches.append(records[position:end])
        position = end
    return batches


def parse_batch(batch: bytes) -> BatchHeader:
    """The header of one batch (as ``split_batches`` cut it), checked.

    Raises ``InvalidBatchError``: not magic 2, a CRC mismatch, an unknown
    codec, a record count below 1 or disagreeing with ``last_offset_delta``.
    """
    (_, _, _, magic, crc, attributes, last_offset_delta, base_timestamp, max_timestamp,
     producer_id, producer_epoch, base_sequence, records_count) = _HEADER.unpack_from(batch)
    if magic != _MAGIC:
        raise InvalidBatchError(f"record batch magic {magic}: only magic 2 is taken "
                                "(clients since Kafka 0.11 write it)", corrupt=False)
    actual = crc32c(memoryview(batch)[_CRC_START:])
    if actual != crc:
        raise InvalidBatchError(f"record batch CRC32C is {actual:#010x}, its header says "
                                f"{crc:#010x}", corrupt=True)
    if attributes & _CODEC not in _CODECS:
        raise InvalidBatchError(f"record batch codec {attributes & _CODEC} is unknown",
                                corrupt=False)
    if records_count < 1 or last_offset_delta != records_count - 1:
        raise InvalidBatchError(
            f"record batch of {records_count} records has last_offset_delta "
            f"{last_offset_delta}", corrupt=False)
    return BatchHeader(attributes, last_offset_delta, base_timestamp, max_timestamp,
                       producer_id, producer_epoch, base_sequence, records_count)


def with_base_offset(batch: bytes | memoryview, base_offset: int) -> bytes:
    """``batch`` with its base offset set (outside the CRC: the rest is unchanged)."""
    return b"".join((_OFFSET.pack(base_offset), memoryview(batch)[8:]))


def max_timestamp(batch: bytes | memoryview) -> int:
    """The batch's max timestamp (header only)."""
    (value,) = _OFFSET.unpack_from(batch, 35)
    return int(value)

