"""Kafka record batches in Folio blocks, and Folio blocks as Kafka record batches.

**Kafka -> Folio** (Produce): one record batch becomes one block of format 2
(``proto/folio/v1/events.proto``): the serialized ``EventBlock`` with
``format_version = 2`` and ``kafka_record_batch`` = the batch, made by
putting a 3-byte tag prefix and the length varint before the batch bytes:
constant work per batch, whatever it holds or how it is compressed. SDK
readers decode such blocks (``folio.api.v1.kafka_batch``). The batch's
``partition_leader_epoch`` (outside the CRC) is set to the partition's leader
epoch as it is written (``broker.kafka.leader_epochs``), as Kafka's broker
sets it on append.

**Folio -> Kafka** (Fetch): a format-2 block gives back its batch with the
block's offset written into the base offset field (outside the CRC): again
constant work. A block an SDK writer packed (format 1) has no Kafka form, so
it is converted here, record by record, into an uncompressed batch
(kafka-python's ``DefaultRecordBatchBuilder``): the one per-event cost of the
Kafka path, paid only when Kafka consumers read events SDK writers wrote
(docs/kafka.md, like KoP's conversion of Pulsar-format entries).
"""

from __future__ import annotations

import struct
from typing import Any

from google.protobuf.message import DecodeError

from broker.api import ReadBlock
from broker.errors import CorruptDataError
from broker.kafka.batches import with_base_offset
from folio.api.v1.events_pb2 import EventBlock

__all__ = ["KAFKA_BLOCK_FORMAT", "batch_of_block", "block_of_batch", "with_leader_epoch"]

#: ``format_version`` of a block that is a Kafka record batch.
KAFKA_BLOCK_FORMAT = 2
#: field 1 (format_version) varint 2, then field 6 (kafka_record_batch) length-delimited.
_PREFIX = b"\x08\x02\x32"
_TIMESTAMP_NONE = -1
#: ``partition_leader_epoch``: its place in a batch, and its format.
_EPOCH_AT = 12
_EPOCH = struct.Struct(">i")


def block_of_batch(batch: bytes, leader_epoch: int = -1) -> bytes:
    """The format-2 block (a serialized ``EventBlock``) carrying ``batch``.

    With ``leader_epoch`` >= 0 the batch's ``partition_leader_epoch`` is set
    to it on the way (the same one copy).
    """
    if leader_epoch < 0:
        return b"".join((_PREFIX, _varint(len(batch)), batch))
    view = memoryview(batch)
    return b"".join((_PREFIX, _varint(len(batch)), view[:_EPOCH_AT], _EPOCH.pack(leader_epoch),
                     view[_EPOCH_AT + _EPOCH.size:]))


def with_leader_epoch(block: bytes, leader_epoch: int) -> bytes:
    """A block made by ``block_of_batch`` with its batch's leader epoch ``leader_epoch``.

    The block itself (no copy) when it has that epoch already, or for
    ``leader_epoch`` < 0 (unknown: the epoch set before stays).
    """
    if leader_epoch < 0 or not block.startswith(_PREFIX):
        return block
    _length, start = _read_varint(block, len(_PREFIX))
    at = start + _EPOCH_AT
    packed = _EPOCH.pack(leader_epoch)
    if block[at:at + _EPOCH.size] == packed:
        return block
    view = memoryview(block)
    return b"".join((view[:at], packed, view[at + _EPOCH.size:]))


def batch_of_block(block: ReadBlock) -> bytes:
    """The Kafka record batch of a stored block, its base offset the block's offset.

    Raises ``CorruptDataError`` for bytes that are no event block.
    """
    data = block.data
    if data.startswith(_PREFIX):
        length, start = _read_varint(data, len(_PREFIX))
        if start + length == len(data):
            return with_base_offset(memoryview(data)[start:], block.offset)
    try:
        message = EventBlock.FromString(data)
    except DecodeError:
        raise CorruptDataError(f"block at offset {block.offset} is not an event block") from None
    if message.format_version == KAFKA_BLOCK_FORMAT:
        return with_base_offset(message.kafka_record_batch, block.offset)
    if message.format_version != 1:
        raise CorruptDataError(f"block at offset {block.offset} has unknown format "
                               f"{message.format_version}")
    return _convert(message, block.offset)


def _convert(message: Any, base_offset: int) -> bytes:
    """An SDK block as an uncompressed record batch (per event: the only place)."""
    from kafka.record.default_records import (  # noqa: PLC0415
        DefaultRecordBatchBuilder,
    )

    payloads = message.payloads
    keys = message.routing_keys
    stamps = message.timestamps_ms
    headers = message.headers
    builder: Any = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=False, producer_id=-1,
        producer_epoch=-1, base_sequence=-1, batch_size=1 << 31)
    for index, payload in enumerate(payloads):
        key = keys[index].encode("utf-8", "surrogateescape") if keys else None
        entries = list(headers[index].entries.items()) if headers else []
        builder.append(index, stamps[index] if stamps else _TIMESTAMP_NONE, key,
                       payload, entries)
    return with_base_offset(bytes(builder.build()), base_offset)


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _read_varint(data: bytes, position: int) -> tuple[int, int]:
    value = shift = 0
    while position < len(data) and shift < 35:
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, position
        shift += 7
    return -1, position
