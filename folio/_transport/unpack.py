"""Events out of a ``ReadResponse``: the one place the SDK unpacks read blocks.

A block that cannot be decoded, or whose payload count is not its stated
``event_count``, raises ``InvalidBlockError`` naming its segment and offset
(the rule is in ``proto/folio/v1/read.proto``): the reader stops there rather
than give events wrong offsets or skip them.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import repeat
from typing import Any, TypeVar

from folio.api.v1 import read_pb2
from folio.api.v1.block import decode_block
from folio.errors import InvalidBlockError
from folio.models import NO_HEADERS, Event

T = TypeVar("T")


def unpack_events(segment: str, position: int, response: read_pb2.ReadResponse,
                  deserialize: Callable[[bytes], Any] | None,
                  ) -> tuple[list[Event[Any]], int]:
    """The events of ``response`` at or after ``position``, and the position after them.

    Blocks (or their first events) before ``position`` were returned already
    (a stream reopened after a reconnect sends them again) and are left out.
    """
    events: list[Event[Any]] = []
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
        values = payloads if deserialize is None else list(map(deserialize, payloads))
        keys = decoded.routing_keys
        stamps = decoded.timestamps_ms
        headers = decoded.headers
        events.extend(map(
            Event, values, keys[skip:] if keys else repeat(None), repeat(segment),
            range(offset + skip, offset + count),
            stamps[skip:] if stamps else repeat(None),
            headers[skip:] if headers else repeat(NO_HEADERS),
        ))
        position = offset + count
    return events, position
