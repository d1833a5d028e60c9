"""Event blocks: packing events into one block and unpacking them again.

A block is one serialized ``folio.v1.EventBlock``, laid out by column; the
format, its rules and a test vector are in ``proto/folio/v1/events.proto``.
Work here is per block, not per event, wherever protobuf allows: a block is
built from whole columns and decoded with one parse and a ``list()`` per
column. Only headers, one small message per event, cost a step per event,
and only in blocks that carry them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from google.protobuf.message import DecodeError

from folio.api.v1.events_pb2 import EventBlock
from folio.api.v1.kafka_batch import decode_kafka_batch
from folio.errors import InvalidBlockError

__all__ = [
    "EVENT_OVERHEAD_BYTES",
    "FORMAT_VERSION",
    "HEADER_OVERHEAD_BYTES",
    "KAFKA_FORMAT_VERSION",
    "MAX_BLOCK_BYTES",
    "DecodedBlock",
    "decode_block",
    "decode_parsed_block",
    "encode_block",
]

#: The block format version this SDK writes.
FORMAT_VERSION = 1
#: Blocks written through the Kafka listener: one Kafka record batch (events.proto).
KAFKA_FORMAT_VERSION = 2
#: The largest serialized block the broker takes (append.proto): 4 MiB - 1 KiB,
#: so that a ReadResponse carrying it fits gRPC's default 4 MiB message limit.
MAX_BLOCK_BYTES: Final = 4 * 1024 * 1024 - 1024
#: What packing adds to one event beyond its payload and its routing key's
#: UTF-8 bytes, as the SDK's writers count it when they fill blocks: the
#: payload's tag and length (at most 5 bytes), the key's (3 for keys under
#: 2 MiB), the timestamp varint (6 bytes for times between 2004 and 2109) and
#: an empty ``Headers`` placeholder (2) make 16; 20 leaves a margin.
EVENT_OVERHEAD_BYTES: Final = 20
#: What one header entry adds beyond its name's UTF-8 and its value (tags and
#: lengths of the map entry, name and value; values under 2 MiB).
HEADER_OVERHEAD_BYTES: Final = 10


@dataclass(frozen=True, slots=True)
class DecodedBlock:
    """The events of one block, by column, as ``decode_block`` returns them.

    Event ``i`` is index ``i`` of each column. An optional column is either as
    long as ``payloads`` or empty, empty meaning that no event of the block
    has that attribute (as on the wire).

    Attributes:
        payloads: each event's payload.
        routing_keys: each event's routing key, or empty for "no key".
        timestamps_ms: each event's time in ms since the epoch, or empty.
        headers: each event's headers, or empty when no event has any.
    """

    payloads: list[bytes]
    routing_keys: list[str] = field(default_factory=list)
    timestamps_ms: list[int] = field(default_factory=list)
    headers: list[dict[str, bytes]] = field(default_factory=list)

    @property
    def event_count(self) -> int:
        """The number of events in the block."""
        return len(self.payloads)


def encode_block(
    payloads: Sequence[bytes],
    routing_keys: Sequence[str] | None = None,
    timestamps_ms: Sequence[int] | None = None,
    headers: Sequence[Mapping[str, bytes]] | None = None,
) -> bytes:
    """Packs events, given by column, into one block.

    The output is protobuf's deterministic serialization, so the same events
    always make the same bytes (the proto's test vector among them).

    Args:
        payloads: each event's payload; its length is the event count.
        routing_keys: each event's routing key, or None when no event has one.
        timestamps_ms: each event's time in ms since the epoch, or None.
        headers: each event's headers, or None when no event has any.

    Returns:
        The serialized ``folio.v1.EventBlock``.

    Raises:
        InvalidBlockError: a given column's length differs from the event
            count, or a value does not fit the format (a timestamp outside
            int64, a routing key or header name with no UTF-8 encoding).
        TypeError: a value of the wrong type (a ``str`` payload, say).
    """
    count = len(payloads)
    columns: dict[str, Any] = {"format_version": FORMAT_VERSION, "payloads": payloads}
    if routing_keys is not None:
        _check_length("routing_keys", len(routing_keys), count)
        columns["routing_keys"] = routing_keys
    if timestamps_ms is not None:
        _check_length("timestamps_ms", len(timestamps_ms), count)
        columns["timestamps_ms"] = timestamps_ms
    if headers is not None:
        _check_length("headers", len(headers), count)
        # One Headers message per event: the map gives no columnar form.
        columns["headers"] = [{"entries": entries} for entries in headers]
    try:
        message = EventBlock(**columns)
    except ValueError as error:  # UnicodeEncodeError included
        raise InvalidBlockError(f"events cannot be packed into a block: {error}") from error
    return message.SerializeToString(deterministic=True)


def decode_block(data: bytes) -> DecodedBlock:
    """Unpacks a block into its events, by column.

    Accepts any valid protobuf encoding of an ``EventBlock``, not only the
    deterministic one ``encode_block`` writes.

    Args:
        data: one serialized ``folio.v1.EventBlock``, as read from a segment.

    Returns:
        The block's events.

    Raises:
        InvalidBlockError: the bytes are not a protobuf ``EventBlock``
            (garbage, truncated, bad UTF-8 in a string), its format version
            is neither 1 nor 2, or its columns disagree in length; a block
            of format 2 (a Kafka record batch, ``folio.api.v1.kafka_batch``)
            that does not decode.
    """
    message = EventBlock()
    try:
        message.ParseFromString(data)
    except DecodeError as error:
        raise InvalidBlockError(f"not an event block ({len(data)} bytes): {error}") from error
    return decode_parsed_block(message)


def decode_parsed_block(message: EventBlock) -> DecodedBlock:
    """``decode_block`` of a block protobuf has parsed already (a reader parses a whole
    read response in one pass: ``proto/folio/v1/read_view.proto``).

    Raises:
        InvalidBlockError: as ``decode_block``, but for the parse.
    """
    if message.format_version == KAFKA_FORMAT_VERSION:
        payloads, keys, stamps, headers = decode_kafka_batch(message.kafka_record_batch)
        return DecodedBlock(payloads, keys, stamps, headers)
    if message.format_version != FORMAT_VERSION:
        raise InvalidBlockError(
            f"unknown event block format version {message.format_version}"
            f" (this SDK reads versions {FORMAT_VERSION} and {KAFKA_FORMAT_VERSION})"
        )
    count = len(message.payloads)
    for name, length in (
        ("routing_keys", len(message.routing_keys)),
        ("timestamps_ms", len(message.timestamps_ms)),
        ("headers", len(message.headers)),
    ):
        if length:
            _check_length(name, length, count)
    return DecodedBlock(
        payloads=list(message.payloads),
        routing_keys=list(message.routing_keys),
        timestamps_ms=list(message.timestamps_ms),
        headers=[dict(entries.entries) for entries in message.headers],
    )


def _check_length(name: str, length: int, count: int) -> None:
    if length != count:
        raise InvalidBlockError(
            f"event block column {name} has {length} values for {count} events"
            " (it must have one per event, or none)"
        )
