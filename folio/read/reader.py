"""The event reader: a topic's segments from chosen offsets, followed across scaling.

The streaming is ``folio._transport.segment_streams`` (the engine reader
groups and batch reads use too): one ``Read`` server stream per segment on the
IO thread, whole responses queued with credit (a slow reader slows the streams
instead of filling memory), reopened from the next offset after backoff, and
unpacked into ``Event`` objects on the caller's thread, skipping the events
before the offset asked for (a block may begin before it) and any a reconnect
sent twice.

What this module adds is **scaling.** A segment read to the end of its seal
(``end_of_segment``, every event returned) is finished; the reader then asks
for its successors (on the IO thread, retrying while the broker does not know
them yet) and starts each one once every predecessor is finished
(predecessors of the segments it started with, sealed before, count as
finished: it never reads them). A successor starts only after its
predecessors' last events were returned, so the events of one routing key come
in the order they were written, across splits and merges.

A payload the serializer cannot decode never skips anything by itself: with
the default policy ``read_next`` raises ``DeserializationError`` (topic,
segment, offset, raw bytes) and the reader stays on that event — its
``positions`` name it, the next ``read_next`` raises again — until the
application calls ``skip(error)``; ``on_deserialization_error="skip"`` steps
over such events with a warning, ``"raw"`` returns them as ``UndecodedEvent``.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from concurrent.futures import Future
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, Generic, Literal, TypeVar

from folio._transport.append_stream import Backoff
from folio._transport.scaling import SuccessorLookup
from folio._transport.segment_streams import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_WAIT_MS,
    SegmentStreams,
)
from folio.api.v1 import read_pb2
from folio.errors import DeserializationError, FolioError, InvalidArgumentError
from folio.models import DeserializationPolicy, Event, SegmentRange
from folio.read._event_read import DEFAULT_MAX_EVENTS, check_max_events
from folio.serializers import BytesSerializer, Serializer

if TYPE_CHECKING:
    from folio._transport.io_thread import IoThread
    from folio._transport.pool import ReadChannels
    from folio._transport.read_stream_state import SignallingQueue
    from folio.api.v1.read_pb2_grpc import ReadAsyncStub
    from folio.metrics import TopicMetrics

__all__ = ["DEFAULT_MAX_BYTES", "DEFAULT_MAX_EVENTS", "DEFAULT_MAX_WAIT_MS", "EventReader",
           "Isolation"]

log = logging.getLogger(__name__)

T = TypeVar("T")

#: What a reader is served of transactional events (``ReadRequest.isolation``).
Isolation = Literal["read_committed", "read_uncommitted"]
_ISOLATIONS: Final[dict[str, read_pb2.ReadRequest.Isolation.ValueType]] = {
    "read_committed": read_pb2.ReadRequest.READ_COMMITTED,
    "read_uncommitted": read_pb2.ReadRequest.READ_UNCOMMITTED,
}

#: A finished segment with its successors, or the error looking them up ended with.
_Found = tuple[str, list[SegmentRange] | FolioError]


class EventReader(Generic[T]):
    """Reads a topic's segments from chosen offsets; made by ``Client.reader``.

    Events of one segment come in offset order (so events of one routing key
    come in the order they were written); segments interleave. Use from one
    thread. A context manager and an iterator: iterating blocks at the tail
    until ``close``.
    """

    def __init__(self, topic: str, positions: Mapping[str, int], serializer: Serializer[T], *,
                 io: IoThread, channels: ReadChannels | None = None,
                 stub: ReadAsyncStub | None = None, max_bytes: int = DEFAULT_MAX_BYTES,
                 max_wait_ms: int = DEFAULT_MAX_WAIT_MS, on_close: object = None,
                 isolation: Isolation = "read_committed",
                 successors: SuccessorLookup | None = None,
                 metrics: TopicMetrics | None = None,
                 read_before: Collection[str] = (),
                 on_deserialization_error: DeserializationPolicy = "raise") -> None:
        """Made by ``Client.reader``; ``positions`` maps each segment to read to its offset.

        Each segment's stream takes a channel from ``channels`` (the client's
        pool) when it starts, or uses ``stub`` if given instead. ``isolation``
        is ``"read_committed"`` (events of open or aborted transactions left
        out; the stream waits before an open transaction's first event) or
        ``"read_uncommitted"`` (every event). ``successors`` looks up a sealed
        segment's successors (None: a sealed segment's stream just ends);
        ``read_before`` names the segments before the start (the ancestors of
        ``positions``' segments), which count as read to their end.
        ``on_deserialization_error`` is what a payload the serializer cannot
        decode does: ``"raise"`` (stay on it), ``"skip"`` or ``"raw"``.
        """
        if (channels is None) == (stub is None):
            raise ValueError("give the reader either channels or a stub")
        if isolation not in _ISOLATIONS:
            raise InvalidArgumentError(
                f"isolation must be 'read_committed' or 'read_uncommitted', not {isolation!r}")
        self.isolation: Isolation = isolation
        self.topic = topic
        self._io = io
        self._on_close = on_close
        self._closed = False
        self._successors = successors
        self._metrics = metrics
        self._streams: SegmentStreams[T] = SegmentStreams(
            io=io, channels=channels, stub=stub,
            deserialize=None if isinstance(serializer, BytesSerializer) else
            serializer.deserialize,
            isolation=_ISOLATIONS[isolation], max_bytes=max_bytes, max_wait_ms=max_wait_ms,
            metrics=metrics, on_deserialization_error=on_deserialization_error)
        #: Segments read to their end, or before the start.
        self._finished: set[str] = set(read_before)
        #: Every segment started, held or not.
        self._started: set[str] = set(positions)
        #: Positions of the segments no longer held (finished, or failed).
        self._done: dict[str, int] = {}
        #: Successor lookups running on the IO thread, and what they found.
        self._lookups: set[Future[None]] = set()
        self._found: collections.deque[_Found] = collections.deque()
        #: A failure met after ``read_many`` had events to return: raised by the next call.
        self._failed: FolioError | None = None
        for segment, offset in positions.items():
            self._streams.add(segment, offset)

    @property
    def positions(self) -> dict[str, int]:
        """The offset of the next event to return, per segment.

        After a ``DeserializationError`` it names the undecodable event: a
        reader started there reads it again.
        """
        return {**self._done, **self._streams.positions()}

    def read_next(self, timeout: float | None = None) -> Event[T] | None:
        """The next event, waiting up to ``timeout`` seconds for one.

        Args:
            timeout: seconds to wait; None waits until an event comes (or
                the reader is closed).

        Returns:
            The event, or None when ``timeout`` passed (or the reader is closed).

        Raises:
            OffsetOutOfRangeError: a segment's next offset is gone (truncated
                or deleted by retention; ``start_offset`` says where the
                segment now begins). Other segments go on being read.
            NoSuchSegmentError: a segment (or the topic) was deleted.
            DeserializationError: the next event's payload cannot be decoded
                (the default policy): the reader stays on it, and raises again
                until ``skip(error)``. Other segments' events buffered are kept.
            FolioError: another failure of one segment's stream.
        """
        streams = self._streams
        # Most calls find an event already unpacked: return it at once.
        event = streams.next_buffered()
        if event is not None:
            return event
        if self._failed is not None:
            failed, self._failed = self._failed, None
            raise failed
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._closed:
            if streams.ended:
                self._end_finished()
            if self._found:
                self._start_found()
            try:
                event = streams.next_event(
                    None if deadline is None else max(0.0, deadline - time.monotonic()))
            except FolioError:
                if streams.dropped is not None:  # keep its position, as it stopped
                    segment, self._done[segment] = streams.dropped
                    streams.dropped = None
                raise
            if event is not None:
                return event
            if deadline is not None and time.monotonic() >= deadline:
                return None
        # Closed: what was unpacked before still comes out, then nothing.
        return streams.next_event(0)

    def read_many(self, max_events: int = DEFAULT_MAX_EVENTS,
                  timeout: float | None = None) -> list[Event[T]]:
        """The next events, up to ``max_events``, waiting up to ``timeout`` seconds for the first.

        What as many ``read_next`` calls would return, in the same order,
        handed over in one list: it waits for the first event as
        ``read_next(timeout)`` does, then adds those that are there already
        (``read_next(0)``'s) until ``max_events``; it never waits for more.
        ``positions`` then name the event after the last one returned. A
        failure met once the list holds events ends the list, and the next
        call raises it (a ``DeserializationError``: the reader stays on that
        event, as ``read_next``); nothing is skipped.

        Args:
            max_events: the most events to return (at least 1).
            timeout: seconds to wait for the first event; None waits until
                one comes (or the reader is closed).

        Returns:
            The events; empty when ``timeout`` passed (or the reader is closed).

        Raises:
            InvalidArgumentError: ``max_events`` is not a positive int.
            The errors of ``read_next``.
        """
        check_max_events(max_events)
        take = self._streams.take_buffered
        events = take(max_events)
        if not events:
            first = self.read_next(timeout)
            if first is None:
                return events
            events.append(first)
            events += take(max_events - 1)
        while len(events) < max_events:
            try:
                event = self.read_next(0)  # the responses queued already
            except DeserializationError:
                break  # the reader stays on it: the next call raises it again
            except FolioError as error:
                self._failed = error
                break
            if event is None:
                break
            events.append(event)
            events += take(max_events - len(events))
        return events

    def on_item(self, signal: Callable[[], None]) -> SignallingQueue[Any]:
        """``signal()`` whenever a stream queues a response or a wake-up (the asyncio face's
        reader awaits it, then calls ``read_next(0)``, until the queue returned is empty;
        ``SegmentStreams.items``). It must only signal."""
        return self._streams.items.signal_to(signal)

    def skip(self, error: DeserializationError) -> None:
        """Steps over the one event ``error`` names, which the reader is on.

        The application decided (logged it, stored its ``payload`` aside):
        the next ``read_next`` returns the event after it, and ``positions``
        move past it.

        Raises:
            InvalidArgumentError: the reader is not on that event (skipped
                already, or the error is another reader's).
        """
        self._streams.skip(error)

    def __iter__(self) -> Iterator[Event[T]]:
        """Every event from the start positions on; ends only when the reader is closed."""
        # One event at a time, so that leaving the loop early loses nothing:
        # the next read_next or loop goes on from the event after the last one.
        next_buffered = self._streams.next_buffered
        while not self._closed:
            event = next_buffered()
            if event is None:
                event = self.read_next(None)
                if event is None:
                    return
            yield event
        while (event := self.read_next(None)) is not None:  # what close left unreturned
            yield event

    def close(self) -> None:
        """Stops every stream; ``read_next`` returns None and iteration ends. Idempotent."""
        if self._closed:
            return
        self._closed = True
        for lookup in list(self._lookups):
            lookup.cancel()
        self._streams.close()
        if callable(self._on_close):
            self._on_close(self)

    @property
    def closed(self) -> bool:
        """Whether ``close`` was called."""
        return self._closed

    def __enter__(self) -> EventReader[T]:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<EventReader topic={self.topic!r} segments={sorted(self.positions)}>"

    # -- scaling ------------------------------------------------------------

    def _end_finished(self) -> None:
        """Drops the segments read to their end and looks up their successors."""
        for segment in self._streams.finished():
            position = self._streams.remove(segment)
            self._done[segment] = -1 if position is None else position
            self._finished.add(segment)
            if self._successors is not None:
                # Pruned here rather than by a done callback (that runs on the IO
                # thread): only the caller's thread touches the set.
                self._lookups = {lookup for lookup in self._lookups if not lookup.done()}
                self._lookups.add(self._io.submit(self._look_up(segment)))

    async def _look_up(self, segment: str) -> None:
        """Asks for ``segment``'s successors until the broker knows them (IO thread)."""
        assert self._successors is not None  # only looked up when there is a lookup
        backoff = Backoff()
        while not self._closed:
            try:
                found: list[SegmentRange] | FolioError = await self._successors(segment)
                break
            except FolioError as error:
                if not error.retriable:
                    found = error
                    break
                log.info("successors of %s not found (%s); asking again", segment, error)
            await asyncio.sleep(backoff.next_delay())
        else:
            return
        self._found.append((segment, found))
        self._streams.wake()

    def _start_found(self) -> None:
        """Starts each successor found whose predecessors are all finished."""
        while self._found:
            _segment, found = self._found.popleft()
            if isinstance(found, FolioError):
                if self._metrics is not None:
                    self._metrics.failed(found)
                raise found
            for successor in found:
                name = successor.name
                if name in self._started:
                    continue  # read already (e.g. a merge's other predecessor started it)
                if any(p not in self._finished for p in successor.predecessors):
                    continue  # the last predecessor to finish starts it
                self._started.add(name)
                self._streams.add(name, successor.start_offset)
