"""Events out of a ``ReadResponse``: the one place the SDK unpacks read blocks.

A block that cannot be decoded, or whose payload count is not its stated
``event_count``, raises ``InvalidBlockError`` naming its segment and offset
(the rule is in ``proto/folio/v1/read.proto``): the reader stops there rather
than give events wrong offsets or skip them.

A payload the serializer cannot decode stops nothing here: the block's
payloads are decoded in one ``map`` (the fast path) and only when that raises
one by one, and each payload that fails becomes an ``UndecodedEvent`` (the
raw bytes and a ``DeserializationError`` naming topic, segment and offset) in
its place. Its index is returned beside the events, so the read streams
(``folio._transport.segment_streams``) stop *at* it and apply the reader's
policy, and every event around it is kept in order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import repeat
from typing import Any, TypeVar

from folio.api.v1 import read_pb2
from folio.api.v1.block import decode_block
from folio.errors import DeserializationError, InvalidBlockError
from folio.models import NO_HEADERS, Event, UndecodedEvent

T = TypeVar("T")


def unpack_events(segment: str, position: int, response: read_pb2.ReadResponse,
                  deserialize: Callable[[bytes], Any] | None,
                  ) -> tuple[list[Event[Any]], int, list[int]]:
    """The events of ``response`` at or after ``position``, the position after them,
    and the indexes (in the events) of the ``UndecodedEvent``s, in order.

    Blocks (or their first events) before ``position`` were returned already
    (a stream reopened after a reconnect sends them again) and are left out.
    """
    events: list[Event[Any]] = []
    undecoded: list[int] = []
    for block in response.blocks:
        offset = block.offset
        if offset + block.event_count <= position:
            continue  # sent again after a reconnect
        try:
            decoded = decode_block(block.data)
        except InvalidBlockError as error:
            raise InvalidBlockError(f"segment {segment} offset {offset}: {error}",
                                    segment=segment, offset=offset) from error
        payloads: list[bytes] = decoded.payloads
        count = len(payloads)
        if count != block.event_count:
            # The broker numbered the block's events by its event_count: trusting
            # either number would give some events wrong offsets.
            raise InvalidBlockError(
                f"segment {segment} offset {offset}: the block holds {count} events but "
                f"its event_count is {block.event_count}", segment=segment, offset=offset)
        skip = position - offset if position > offset else 0
        if skip >= count:
            continue
        if skip:
            payloads = payloads[skip:]
        failed: Sequence[tuple[int, Exception]] = ()
        if deserialize is None:
            values: list[Any] = payloads
        else:
            try:
                values = list(map(deserialize, payloads))
            except Exception:  # any serializer's failure: found one by one below
                values, failed = _decode_each(payloads, deserialize)
        first = len(events)
        keys = decoded.routing_keys
        stamps = decoded.timestamps_ms
        headers = decoded.headers
        events.extend(map(
            Event, values, keys[skip:] if keys else repeat(None), repeat(segment),
            range(offset + skip, offset + count),
            stamps[skip:] if stamps else repeat(None),
            headers[skip:] if headers else repeat(NO_HEADERS),
        ))
        for index, cause in failed:
            at = first + index
            events[at] = UndecodedEvent(events[at], _error(events[at], deserialize, cause))
            undecoded.append(at)
        position = offset + count
    return events, position, undecoded


def _decode_each(payloads: list[bytes], deserialize: Callable[[bytes], Any],
                 ) -> tuple[list[Any], list[tuple[int, Exception]]]:
    """Each payload decoded, the undecodable ones left as bytes; and where they are, why."""
    values: list[Any] = []
    failed: list[tuple[int, Exception]] = []
    for index, payload in enumerate(payloads):
        try:
            values.append(deserialize(payload))
        except Exception as cause:  # whatever the serializer raises
            values.append(payload)
            failed.append((index, cause))
    return values, failed


def _error(event: Event[Any], deserialize: object, cause: Exception) -> DeserializationError:
    segment, offset, payload = event.segment, event.offset, event.payload
    topic = segment.rsplit("/", 1)[0]
    serializer = getattr(deserialize, "__self__", deserialize)
    return DeserializationError(
        f"segment {segment} offset {offset}: {serializer!r} cannot decode the payload "
        f"({len(payload)} bytes): {type(cause).__name__}: {cause}",
        topic=topic, segment=segment, offset=offset, payload=payload, cause=cause)
