"""Events out of a ``ReadResponse``: the one place the SDK unpacks read blocks.

A block that cannot be decoded, or whose payload count is not its stated
``event_count``, raises ``InvalidBlockError`` naming its segment and offset
(the rule is in ``proto/folio/v1/read.proto``): the reader stops there rather
than give events wrong offsets or skip them.

A response is unpacked by column (``unpack_response``): each block is decoded
with one parse and a ``list`` per column, and the response's columns are
chained, so the work here is per block. The ``Event`` objects are made one at
a time, as the caller takes them (``UnpackedEvents.take``, one step of a
C-level ``map``), not all at once: a response of thousands of small events
then never holds thousands of live objects the cyclic garbage collector would
traverse again and again (profiled: that collector's passes were more than
half of the unpacking time when every event of a response was made at once;
docs/bench.md, "Catch-up consume").

A payload the serializer cannot decode stops nothing here: the block's
payloads are decoded in one ``map`` (the fast path) and only when that raises
one by one, and each payload that fails becomes an ``UndecodedEvent`` (the
raw bytes and a ``DeserializationError`` naming topic, segment and offset) in
its place. Their indexes are returned beside the events, so the read streams
(``folio._transport.segment_streams``) stop *at* one and apply the reader's
policy, and every event around it is kept in order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from itertools import chain, islice, repeat
from typing import Any, Final

from folio._transport.read_view import ReadView
from folio.api.v1 import read_pb2
from folio.api.v1.block import decode_block, decode_parsed_block
from folio.errors import DeserializationError, InvalidBlockError
from folio.models import NO_HEADERS, Event, UndecodedEvent

__all__ = ["EMPTY", "UnpackedEvents", "unpack_events", "unpack_response"]


class UnpackedEvents:
    """The events of one response of one segment, in offset order, made as they are taken.

    Attributes:
        segment: the segment they were read from.
        offsets: each event's offset (index ``i`` is the ``i``-th event).
        undecoded: the indexes of the events whose payload the serializer
            could not decode, in order (an ``UndecodedEvent`` each, in
            ``undecodable``).
        undecodable: those events by index.
        data_bytes: the bytes of the response's blocks, as received.
    """

    __slots__ = ("_events", "_make", "data_bytes", "offsets", "segment", "undecodable",
                 "undecoded")

    def __init__(self, segment: str, offsets: list[int], make: Iterable[Event[Any]],
                 undecodable: dict[int, UndecodedEvent], data_bytes: int) -> None:
        self.segment = segment
        self.offsets = offsets
        self.undecodable = undecodable
        self.undecoded = sorted(undecodable)
        self.data_bytes = data_bytes
        self._events = iter(make)
        self._make = self._events.__next__

    def __len__(self) -> int:
        return len(self.offsets)

    @property
    def take(self) -> Callable[[], Event[Any]]:
        """Makes the next event (the first call the first event, and so on).

        At an index of ``undecoded`` it makes a plain ``Event`` holding the
        raw payload: the caller takes the ``UndecodedEvent`` from
        ``undecodable`` instead (and still calls ``take`` once, to step on).
        Called more times than there are events it raises ``StopIteration``.
        """
        return self._make

    def take_many(self, count: int) -> list[Event[Any]]:
        """The next ``count`` events, made at once (as ``count`` calls of ``take``, in C)."""
        return list(islice(self._events, count))

    def events(self) -> list[Event[Any]]:
        """Every event not taken yet, made at once (the undecodable ones in place)."""
        events = list(self._events)
        first = len(self.offsets) - len(events)
        for index, event in self.undecodable.items():
            if index >= first:
                events[index - first] = event
        return events


#: A response with no events (what the read streams hold before the first one).
EMPTY: Final = UnpackedEvents("", [], (), {}, 0)


def unpack_response(segment: str, position: int, response: read_pb2.ReadResponse | ReadView,
                    deserialize: Callable[[bytes], Any] | None,
                    ) -> tuple[UnpackedEvents, int]:
    """The events of ``response`` at or after ``position``, and the position after them.

    Blocks (or their first events) before ``position`` were returned already
    (a stream reopened after a reconnect sends them again) and are left out.
    ``response`` is a ``ReadView`` (its blocks parsed with it, in one pass:
    ``folio._transport.read_view``) or a plain ``ReadResponse`` (its blocks
    decoded one by one, as a response with a damaged block is).
    """
    values: list[Any] = []
    offsets: list[int] = []
    keys: list[Iterable[str | None]] = []
    stamps: list[Iterable[int | None]] = []
    headers: list[Iterable[Any]] = []
    undecodable: dict[int, UndecodedEvent] = {}
    # A view counts its whole response (blocks and their few bytes of framing):
    # its blocks' own sizes are not known without encoding them again.
    data_bytes = response.wire_bytes if isinstance(response, ReadView) else 0
    for block in response.blocks:
        offset = block.offset
        if offset + block.event_count <= position:
            continue  # sent again after a reconnect
        data = block.data
        try:
            if isinstance(data, bytes):
                data_bytes += len(data)
                decoded = decode_block(data)
            else:  # parsed with the response (folio._transport.read_view)
                decoded = decode_parsed_block(data)
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
        first = len(values)
        if deserialize is None:
            values.extend(payloads)
        else:
            try:
                values.extend(map(deserialize, payloads))
            except Exception:  # any serializer's failure: found one by one below
                del values[first:]
                for index, cause in _decode_each(values, payloads, deserialize):
                    at = skip + index
                    event: Event[bytes] = Event(
                        payloads[index], _item(decoded.routing_keys, at, None), segment,
                        offset + at, _item(decoded.timestamps_ms, at, None),
                        _item(decoded.headers, at, NO_HEADERS))
                    undecodable[first + index] = UndecodedEvent(
                        event, _error(event, deserialize, cause))
        offsets.extend(range(offset + skip, offset + count))
        keys.append(_column(decoded.routing_keys, skip, count, None))
        stamps.append(_column(decoded.timestamps_ms, skip, count, None))
        headers.append(_column(decoded.headers, skip, count, NO_HEADERS))
        position = offset + count
    make = map(Event, values, chain.from_iterable(keys), repeat(segment), offsets,
               chain.from_iterable(stamps), chain.from_iterable(headers))
    return UnpackedEvents(segment, offsets, make, undecodable, data_bytes), position


def unpack_events(segment: str, position: int, response: read_pb2.ReadResponse | ReadView,
                  deserialize: Callable[[bytes], Any] | None,
                  ) -> tuple[list[Event[Any]], int, list[int]]:
    """``unpack_response`` with every event made at once: the events of ``response`` at
    or after ``position``, the position after them, and the indexes (in the events) of
    the ``UndecodedEvent``s, in order."""
    unpacked, position = unpack_response(segment, position, response, deserialize)
    return unpacked.events(), position, unpacked.undecoded


def _column(column: Sequence[Any], skip: int, count: int, missing: Any) -> Iterable[Any]:
    """A block's optional column from event ``skip`` on (empty: ``missing`` for each)."""
    if not column:
        return repeat(missing, count - skip)
    return column[skip:] if skip else column


def _item(column: Sequence[Any], index: int, missing: Any) -> Any:
    """Item ``index`` of a block's optional column (empty: ``missing``)."""
    return column[index] if column else missing


def _decode_each(values: list[Any], payloads: list[bytes], deserialize: Callable[[bytes], Any],
                 ) -> list[tuple[int, Exception]]:
    """Each payload decoded onto ``values``, the undecodable ones as bytes; where those
    are (indexes in ``payloads``), and why."""
    failed: list[tuple[int, Exception]] = []
    for index, payload in enumerate(payloads):
        try:
            values.append(deserialize(payload))
        except Exception as cause:  # whatever the serializer raises
            values.append(payload)
            failed.append((index, cause))
    return failed


def _error(event: Event[Any], deserialize: object, cause: Exception) -> DeserializationError:
    segment, offset, payload = event.segment, event.offset, event.payload
    topic = segment.rsplit("/", 1)[0]
    serializer = getattr(deserialize, "__self__", deserialize)
    return DeserializationError(
        f"segment {segment} offset {offset}: {serializer!r} cannot decode the payload "
        f"({len(payload)} bytes): {type(cause).__name__}: {cause}",
        topic=topic, segment=segment, offset=offset, payload=payload, cause=cause)
