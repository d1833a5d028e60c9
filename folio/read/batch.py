"""Batch reads: list a topic's segments between two cuts, read any of them, in any order.

For jobs that want every event of a topic and not its order (counting,
grepping, a Spark job): ``Client.batch_client()`` gives a :class:`BatchClient`;
``segments(topic)`` lists every segment — sealed ones after scaling included —
as a :class:`SegmentSlice` (the segment, its key range and the offsets to
read), and ``read_segment(slice)`` iterates its events. Slices are plain
values: read them one after another, on several threads of one client, or
hand them (``to_dict``) to other processes that each open their own client.
The events of one segment come in offset order; nothing orders segments.

``read_segment`` returns a :class:`SegmentEvents` iterator. A payload the
serializer cannot decode raises ``DeserializationError`` from ``next`` (by
default) and the iterator stays on it: ``next`` raises again, ``position``
names it, ``skip(error)`` steps over it and the range goes on; or choose
``on_deserialization_error="skip"`` or ``"raw"`` when reading.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from folio._transport.read_policies import check_policy
from folio._transport.segment_streams import SegmentStreams
from folio.api.v1 import read_pb2
from folio.errors import DeserializationError, InvalidArgumentError
from folio.models import DeserializationPolicy, Event, SegmentRange
from folio.read.cuts import StreamCut
from folio.serializers import BytesSerializer, Serializer

if TYPE_CHECKING:
    from folio._transport.io_thread import IoThread
    from folio._transport.pool import ReadChannels
    from folio._transport.read_stream_state import SignallingQueue
    from folio.read.catalog import SegmentCatalog

__all__ = ["BatchClient", "SegmentEvents", "SegmentSlice", "check_read_options", "open_range",
           "plan_slices"]

_ISOLATIONS: Final = {
    "read_committed": read_pb2.ReadRequest.READ_COMMITTED,
    "read_uncommitted": read_pb2.ReadRequest.READ_UNCOMMITTED,
}


@dataclass(frozen=True, slots=True)
class SegmentSlice:
    """A segment and the offsets of it to read, ``[start_offset, end_offset)``.

    Attributes:
        segment: the segment (name, key range, sealed or not, its
            predecessors and successors).
        start_offset: the first offset to read.
        end_offset: the offset to stop before (for a sealed segment with no
            ``to`` cut: its final end).
    """

    segment: SegmentRange
    start_offset: int
    end_offset: int

    @property
    def name(self) -> str:
        """The segment's name, ``"<topic>/<number>"``."""
        return self.segment.name

    @property
    def length(self) -> int:
        """How many offsets the slice spans."""
        return self.end_offset - self.start_offset

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict (for another process: ``read_segment`` takes the name and offsets)."""
        return {"segment": self.name, "key_low": self.segment.key_low,
                "key_high": self.segment.key_high, "sealed": self.segment.sealed,
                "start_offset": self.start_offset, "end_offset": self.end_offset}


class BatchClient:
    """Lists segments between cuts and reads them; made by ``Client.batch_client()``.

    Thread-safe: each ``read_segment`` iterator has its own stream.
    """

    def __init__(self, client: SegmentCatalog, *, io: IoThread, channels: ReadChannels) -> None:
        self._client = client
        self._io = io
        self._channels = channels

    def segments(self, topic: str, from_cut: StreamCut | None = None,
                 to_cut: StreamCut | None = None) -> list[SegmentSlice]:
        """The topic's segments to read, by segment number (creation order).

        Args:
            topic: the topic.
            from_cut: start here: its segments from its offsets, and every
                segment after them (successors, transitively) from its
                start; segments before the cut are left out. None: every
                segment from its first retained event.
            to_cut: stop here: its segments up to its offsets; segments after
                them are left out. None: every segment up to its end now
                (final for a sealed one).

        Slices with nothing to read are left out.

        Raises:
            TopicNotFoundError: no such topic.
            InvalidArgumentError: a cut names no segment of ``topic``, or a
                segment the topic does not have.
        """
        return plan_slices(topic, self._client.get_segments(topic, include_sealed=True),
                           from_cut, to_cut)

    def read_segment(self, segment: SegmentSlice | str, start: int | None = None,
                     end: int | None = None, serializer: Serializer[Any] | None = None, *,
                     isolation: str = "read_committed",
                     on_deserialization_error: DeserializationPolicy = "raise",
                     ) -> SegmentEvents:
        """The events of one segment from ``start`` up to (not including) ``end``.

        Args:
            segment: a slice from ``segments``, or a segment's name.
            start: the first offset; None: the slice's start (a name: the
                segment's first retained event).
            end: the offset to stop before; None: the slice's end (a name:
                the segment's end offset now).
            serializer: turns payloads into values (bytes by default).
            isolation: ``"read_committed"`` or ``"read_uncommitted"``.
            on_deserialization_error: a payload ``serializer`` cannot decode:
                ``"raise"`` (``next`` raises ``DeserializationError`` and the
                iterator stays on it until ``skip(error)``), ``"skip"``
                (logged, stepped over) or ``"raw"`` (an ``UndecodedEvent``).

        The iterator ends at ``end`` or at the end of a sealed segment;
        leaving it early (``break``, ``close()``) stops the stream.

        Raises:
            NoSuchSegmentError: no such segment.
            OffsetOutOfRangeError: ``start`` is no longer (or not yet) there.
        """
        if isinstance(segment, SegmentSlice):
            name, first, stop = segment.name, segment.start_offset, segment.end_offset
        else:
            check_read_options(isolation, on_deserialization_error)
            info = self._client.get_segment_info(segment).segment
            name, first, stop = segment, info.start_offset, info.end_offset
        return open_range(self._io, self._channels, name, first if start is None else start,
                          stop if end is None else end, serializer, isolation,
                          on_deserialization_error)


def check_read_options(isolation: str, on_deserialization_error: DeserializationPolicy) -> None:
    """``InvalidArgumentError`` for a bad ``isolation`` or ``on_deserialization_error``."""
    if isolation not in _ISOLATIONS:
        raise InvalidArgumentError(
            f"isolation must be 'read_committed' or 'read_uncommitted', not {isolation!r}")
    check_policy(on_deserialization_error)


def open_range(io: IoThread, channels: ReadChannels, name: str, first: int, stop: int,
               serializer: Serializer[Any] | None, isolation: str,
               on_deserialization_error: DeserializationPolicy) -> SegmentEvents:
    """The events of ``name`` in ``[first, stop)`` on a stream of their own (both faces)."""
    check_read_options(isolation, on_deserialization_error)
    if first < 0 or stop < first:
        raise InvalidArgumentError(f"bad range [{first}, {stop}) of {name!r}")
    deserialize = None if serializer is None or isinstance(serializer, BytesSerializer) \
        else serializer.deserialize
    streams: SegmentStreams[Any] = SegmentStreams(
        io=io, channels=channels, deserialize=deserialize,
        isolation=_ISOLATIONS[isolation], on_deserialization_error=on_deserialization_error)
    return SegmentEvents(streams, name, first, stop)


def plan_slices(topic: str, every: list[SegmentRange], from_cut: StreamCut | None,
                to_cut: StreamCut | None) -> list[SegmentSlice]:
    """``BatchClient.segments`` from the topic's segments, sealed ones included (both faces)."""
    by_name = {s.name: s for s in every}
    starts = {s.name: s.start_offset for s in every}
    if from_cut is not None:
        cut = _topic_part(topic, from_cut, by_name, "from_cut")
        keep = _closure(cut, by_name)
        starts = {name: cut.get(name, by_name[name].start_offset) for name in keep}
    ends = {s.name: s.end_offset for s in every}
    if to_cut is not None:
        cut = _topic_part(topic, to_cut, by_name, "to_cut")
        after = _closure(cut, by_name) - set(cut)
        ends = {name: cut.get(name, end) for name, end in ends.items() if name not in after}
    slices = [SegmentSlice(by_name[name], starts[name], ends[name])
              for name in starts if name in ends and starts[name] < ends[name]]
    slices.sort(key=lambda s: s.segment.number)
    return slices


def _topic_part(topic: str, cut: StreamCut, by_name: Mapping[str, SegmentRange],
                what: str) -> dict[str, int]:
    part = {s: o for s, o in cut.positions.items() if s.rsplit("/", 1)[0] == topic}
    if not part:
        raise InvalidArgumentError(f"{what} names no segment of topic {topic!r}")
    unknown = sorted(set(part) - set(by_name))
    if unknown:
        raise InvalidArgumentError(f"{what} names segments topic {topic!r} does not "
                                   f"have: {', '.join(unknown)}")
    return part


class SegmentEvents(Iterator[Event[Any]]):
    """The events of one segment range ``[start, stop)``, from ``BatchClient.read_segment``.

    An iterator that outlives a ``DeserializationError``: ``next`` raises it
    and stays on that event (``position`` is its offset, ``next`` raises
    again) until ``skip(error)``; the events after it are kept. Leaving it
    early: ``close()`` (also when it is garbage-collected).
    """

    def __init__(self, streams: SegmentStreams[Any], name: str, start: int, stop: int) -> None:
        self._streams = streams
        self._name = name
        self._start = start
        self._stop = stop
        self._done = start >= stop
        if not self._done:
            streams.add(name, start)
        self._finalizer = weakref.finalize(self, streams.close)
        self._finalizer.atexit = False

    @property
    def position(self) -> int:
        """The offset of the next event to return (an undecodable one stays here)."""
        position = self._streams.position(self._name)
        return self._start if position < 0 else min(position, self._stop)

    def __iter__(self) -> SegmentEvents:
        return self

    def __next__(self) -> Event[Any]:
        event = self.take(None)
        assert event is not None  # (it waits)
        return event

    def take(self, timeout: float | None) -> Event[Any] | None:
        """The next event; None if none came within ``timeout`` seconds (None: it waits).

        ``take(0)`` never waits: the asyncio face's (``folio.aio``) step.

        Raises:
            StopIteration: the range is read (or the iterator closed).
            DeserializationError: as ``next``.
        """
        streams, name, stop = self._streams, self._name, self._stop
        while not self._done:
            if streams.position(name) >= stop:
                break  # (past trailing entries left out, e.g. aborted events)
            try:
                event = streams.next_event(timeout)
            except DeserializationError as error:
                if error.offset >= stop:  # after the range: not this range's to decide
                    break
                raise
            if event is None:
                if name in streams.finished():
                    break
                if timeout is not None:
                    return None
                continue
            if event.offset >= stop:
                break
            if event.offset + 1 >= stop:
                self.close()
            return event
        self.close()
        raise StopIteration

    def on_item(self, signal: Callable[[], None]) -> SignallingQueue[Any]:
        """``signal()`` whenever the stream queues a response or a wake-up (as
        ``EventReader.on_item``: the asyncio face awaits it, then ``take(0)``)."""
        return self._streams.items.signal_to(signal)

    def skip(self, error: DeserializationError) -> None:
        """Steps over the one event ``error`` names, which the iterator is on.

        ``InvalidArgumentError`` if it is not on that event.
        """
        self._streams.skip(error)

    def close(self) -> None:
        """Stops the stream; ``next`` then ends the iteration. Idempotent."""
        self._done = True
        self._finalizer()


def _closure(start: Sequence[str] | Mapping[str, int],
             by_name: Mapping[str, SegmentRange]) -> set[str]:
    """The segments and every successor of them, transitively."""
    seen = set(start)
    todo = list(seen)
    while todo:
        segment = by_name.get(todo.pop())
        if segment is None:
            continue
        for successor in segment.successors:
            if successor not in seen:
                seen.add(successor)
                todo.append(successor)
    return seen
