"""The event writer: serialize, route, batch per segment, and acknowledge per event.

``write_event`` is the hot path and does only per-event work that cannot be
per block: serialize, check the size, pick the segment (the routing-key hash,
cached per key; keyless events go to one segment at a time, moving on after
each block, starting at a random one, so a whole block goes to one segment), and append to that
segment's columns (``folio.write._segment_writer``). Everything that crosses to the
IO thread crosses per block.

A writer is cheap while idle: a segment's writer (and its flow on one of the
client's pooled channels) is made the first time an event goes to that
segment, and writers of the same topic layout share one copy of its segment
names and key bounds.

**Scaling.** When a segment turns out sealed, its segment writer learns which
of its blocks the segment holds (``folio.write._segment_writer``); this writer then
asks the broker for the successors, replaces the sealed segment's key
interval in its routing by the successors' parts of it, and has the segment
writer hand its remaining events over, in order, through the new routing,
before any later event of those keys. So per-key order holds across splits
and merges, and each event is written once.
"""

from __future__ import annotations

import asyncio
import logging
import random
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from time import time_ns as _time_ns
from types import TracebackType
from typing import TYPE_CHECKING, Final, Generic, TypeVar

from folio._exits import clean_up
from folio._transport.append_stream import Backoff
from folio._transport.scaling import SuccessorLookup
from folio.api.v1.block import EVENT_OVERHEAD_BYTES, HEADER_OVERHEAD_BYTES, MAX_BLOCK_BYTES
from folio.api.v1.routing import segment_index
from folio.errors import (
    EventTooLargeError,
    FolioError,
    FolioUnavailableError,
    InvalidArgumentError,
    SegmentSealedError,
    TimeoutError,
    WriterClosedError,
)
from folio.models import SegmentRange, TopicInfo
from folio.serializers import BytesSerializer, Serializer
from folio.write._batch import Forward
from folio.write._layout import shared_layout
from folio.write._segment_writer import MAX_BATCH_BYTES, SegmentWriter
from folio.write._write_future import BlockOutcome, WriteFuture

if TYPE_CHECKING:
    from folio._transport.append_stream import FlowSource
    from folio._transport.io_thread import IoThread
    from folio.metrics import TopicMetrics

__all__ = ["EventWriter", "WriteFuture"]

log = logging.getLogger(__name__)

#: The most an event's payload, key and headers may count and still fit one
#: block (its framing, and the block's own fields, take the rest).
_MAX_EVENT_IN_BLOCK_BYTES = MAX_BLOCK_BYTES - EVENT_OVERHEAD_BYTES - 32

T = TypeVar("T")

#: Routing keys whose segment is remembered; the cache starts over when full.
_ROUTE_CACHE_SIZE: Final = 65536


class EventWriter(Generic[T]):
    """Writes events to one topic; made by ``Client.writer``.

    Events with the same routing key are written in the order of
    ``write_event`` calls (from one thread), exactly once per writer id even
    across reconnects. Thread-safe. A context manager: leaving it closes the
    writer (flushing first).
    """

    def __init__(self, topic: TopicInfo, serializer: Serializer[T], *, io: IoThread,
                 stream: FlowSource, linger_ms: float, batch_size_bytes: int,
                 max_in_flight: int, delivery_timeout_ms: int, writer_id: str | None,
                 on_close: Callable[[EventWriter[T]], None] | None = None,
                 successors: SuccessorLookup | None = None,
                 metrics: TopicMetrics | None = None,
                 on_change: Callable[[], None] | None = None) -> None:
        """Made by ``Client.writer``, which documents the arguments.

        ``on_change`` is given to each segment writer (``SegmentWriter.on_change``):
        the asyncio face's way to learn that room came or a flush may be done.
        """
        if linger_ms < 0:
            raise InvalidArgumentError(f"linger_ms must be >= 0, not {linger_ms}")
        if batch_size_bytes < 1:
            raise InvalidArgumentError(f"batch_size_bytes must be >= 1, not {batch_size_bytes}")
        if max_in_flight < 1:
            raise InvalidArgumentError(f"max_in_flight must be >= 1, not {max_in_flight}")
        if delivery_timeout_ms <= 0:
            raise InvalidArgumentError(
                f"delivery_timeout_ms must be > 0, not {delivery_timeout_ms}")
        if writer_id is not None and not 1 <= len(writer_id) <= 128:
            raise InvalidArgumentError("writer_id must be 1 to 128 characters")
        ranges = sorted((s for s in topic.segments if not s.sealed), key=lambda s: s.key_low)
        if not ranges:
            raise SegmentSealedError(f"topic {topic.name!r} is sealed: it has no open segment "
                                     "to write to")
        self.topic = topic.name
        self.writer_id = writer_id or uuid.uuid4().hex
        self._serializer = serializer
        self._serialize = serializer.serialize
        self._raw = isinstance(serializer, BytesSerializer)
        self._max_event_bytes = topic.config.max_event_bytes
        self._on_close = on_close
        self._errors_lock = threading.Lock()
        self._first_error: BaseException | None = None
        self._closed = False
        self._io = io
        self._stream = stream
        self._batch_size_bytes = min(batch_size_bytes, MAX_BATCH_BYTES)
        self._linger_s = linger_ms / 1000.0
        self._max_in_flight = max_in_flight
        self._delivery_timeout_s = delivery_timeout_ms / 1000.0
        self._layout = shared_layout(topic.name, tuple(s.name for s in ranges),
                               tuple(s.key_high for s in ranges))
        #: Segment name -> its writer, made with the segment's first event.
        self._segments: dict[str, SegmentWriter] = {}
        self._routes: dict[str, SegmentWriter] = {}
        # Keyless events start at a random segment, so that writers that each send
        # a few blocks (one `folio produce` run) spread over the topic, not all on
        # its first segment; then they move on one segment per block.
        self._keyless_index = random.randrange(len(ranges)) if ranges else 0
        self._keyless: SegmentWriter | None = None
        #: Whether ``append_nowait`` put a keyless event in ``_keyless``'s open batch.
        self._keyless_open = False
        self._successors = successors
        self._metrics = metrics
        #: Successor look-ups under way (IO thread).
        self._following: set[asyncio.Future[None]] = set()
        #: Bumped by every routing change (flush waits until it holds still).
        self._generation = 0
        self._on_change = on_change

    def write_event(self, event: T, routing_key: str | None = None,
                    headers: Mapping[str, bytes] | None = None) -> WriteFuture:
        """Queues one event for writing; returns at once with its future.

        Args:
            event: the value, serialized with the writer's serializer.
            routing_key: events with the same key go to the same segment, in
                order. None: any open segment.
            headers: application headers, names to bytes values.

        Returns:
            The event's future; ``result()`` gives its segment and offset.

        Raises:
            EventTooLargeError: the serialized event is above the topic's
                ``max_event_bytes`` (nothing is sent).
            WriterClosedError: the writer is closed.
            Exception: whatever the serializer raises.
        """
        if self._closed:
            raise WriterClosedError(f"the writer of topic {self.topic!r} is closed")
        if self._raw and type(event) is bytes:
            payload: bytes = event  # type: ignore[assignment]  # T is bytes here
        else:
            payload = self._serialize(event)
        size = len(payload)
        if headers or size > self._max_event_bytes or \
                size > _MAX_EVENT_IN_BLOCK_BYTES - len(routing_key or ""):
            size = self._event_size(payload, routing_key, headers)  # (raises, or headers)
        now_ms = time.time_ns() // 1_000_000
        if routing_key is None:
            segment = self._keyless
            if segment is None:
                segment = self._keyless = self._keyless_segment()
            future = segment.append(payload, None, headers, now_ms, size)
            if not segment.has_open_batch:
                self._next_keyless()
            return future
        routed = self._routes.get(routing_key)
        if routed is None:
            routed = self._route(routing_key)
        return routed.append(payload, routing_key, headers, now_ms, size + len(routing_key))

    def append_nowait(self, payload: bytes, routing_key: str | None,
                      headers: Mapping[str, bytes] | None) -> tuple[BlockOutcome, int] | None:
        """``write_event`` of a serialized payload that never waits, for a caller on the
        IO's own thread: the event's block outcome and its index there; None where it
        would wait.

        The asyncio face's hot path (one call per event; no lock and no
        ``WriteFuture`` in the common case: ``SegmentWriter.add_on_loop``, whose
        caller must be on the IO's thread).
        None means the event's segment has ``max_in_flight`` blocks out and a
        full batch, and nothing was appended (the face keeps the event until
        ``on_change``).

        Raises:
            As ``write_event``.
        """
        if self._closed:
            raise WriterClosedError(f"the writer of topic {self.topic!r} is closed")
        size = len(payload)
        if headers or size > self._max_event_bytes or \
                size > _MAX_EVENT_IN_BLOCK_BYTES - len(routing_key or ""):
            size = self._event_size(payload, routing_key, headers)  # (raises, or headers)
        now_ms = _time_ns() // 1_000_000
        if routing_key is None:
            segment = self._keyless
            if segment is not None and self._keyless_open and segment.batch is None:
                # Its batch was cut since (by an acknowledgement or linger: on the loop
                # they run between this face's events, where the blocking face's caller
                # mostly fills batches to their size itself): move on, as after a cut
                # here. Else keyless events stay on one segment, its pipe full, while
                # the others idle.
                self._next_keyless()
                segment = None
            if segment is None:
                segment = self._keyless = self._keyless_segment()
            placed = segment.add_on_loop(payload, None, headers, now_ms, size)
            if placed is not None:
                self._keyless_open = True
                if segment.batch is None:
                    self._next_keyless()
            return placed
        routed = self._routes.get(routing_key)
        if routed is None:
            routed = self._route(routing_key)
        return routed.add_on_loop(payload, routing_key, headers, now_ms,
                                 size + len(routing_key))

    def _event_size(self, payload: bytes, routing_key: str | None,
                    headers: Mapping[str, bytes] | None) -> int:
        """The event's size in a block (payload and headers); raises if too large."""
        size = len(payload)
        if size > self._max_event_bytes:
            raise EventTooLargeError(
                f"an event of {size} bytes exceeds topic {self.topic!r}'s max_event_bytes "
                f"of {self._max_event_bytes} bytes", size=size, limit=self._max_event_bytes)
        if headers:
            size += sum(len(name) + len(value) + HEADER_OVERHEAD_BYTES
                        for name, value in headers.items())
        if size > _MAX_EVENT_IN_BLOCK_BYTES - len(routing_key or ""):  # near 4 MiB
            raise EventTooLargeError(
                f"an event of {size} bytes (payload and headers) does not fit in a block of "
                f"at most {MAX_BLOCK_BYTES} bytes", size=size, limit=_MAX_EVENT_IN_BLOCK_BYTES)
        return size

    def try_flush(self) -> bool:
        """Cuts every batch it can and says whether every event is done; never waits.

        The asyncio face's flush: it calls this again after each ``on_change``
        until True, then ``take_error``.
        """
        segments = list(self._segments.values())
        cut = [segment.cut_now(0.0) for segment in segments]  # every one, not the first
        return all(cut) and all(segment.wait_idle(0.0) for segment in segments)

    def take_error(self) -> BaseException | None:
        """The first write that failed since the last flush (then forgotten), or None."""
        with self._errors_lock:
            error, self._first_error = self._first_error, None
        return error

    def flush(self, timeout: float | None = None) -> None:
        """Sends every batched event and waits until each is acknowledged or failed.

        Args:
            timeout: seconds to wait at most; None for as long as it takes.

        Raises:
            TimeoutError: events still unacknowledged after ``timeout``.
            FolioError: the first write that failed since the last flush,
                once: a later flush or close does not raise it again (each
                failed event's future holds its own error, read or not).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            # Events handed to successors meanwhile are waited for too.
            generation = self._generation
            segments = list(self._segments.values())
            for segment in segments:
                if not segment.cut_now(deadline):
                    raise TimeoutError(f"flush did not finish within {timeout} s")
            for segment in segments:
                if not segment.wait_idle(deadline):
                    raise TimeoutError(f"flush did not finish within {timeout} s")
            if generation == self._generation:
                break
        with self._errors_lock:
            error, self._first_error = self._first_error, None
        if error is not None:
            raise error

    def close(self, timeout: float | None = None) -> None:
        """Flushes, then releases the writer's flows. Idempotent.

        Args:
            timeout: the flush's timeout.

        Raises:
            TimeoutError, FolioError: as ``flush``; the writer is closed anyway.
                (Leaving a ``with`` block whose body raised never raises these in
                place of the body's exception: see ``__exit__``.)
        """
        if self._closed:
            return
        try:
            self.flush(timeout)
        finally:
            self._closed = True
            for segment in list(self._segments.values()):
                segment.close()
            if self._on_close is not None:
                self._on_close(self)

    @property
    def closed(self) -> bool:
        """Whether ``close`` was called."""
        return self._closed

    def __enter__(self) -> EventWriter[T]:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        """Closes the writer; a failure it reports never takes the place of the body's error.

        When the body raised, its exception propagates: what ``close`` raises
        (the first write that failed since the last flush, already in its
        events' futures, or any other failure) is added to it as a note
        (``folio._exits``), as Java's
        try-with-resources keeps a failed ``close()`` as a suppressed exception.
        """
        clean_up(exc, self.close, f"closing the writer of topic {self.topic!r}")

    def __repr__(self) -> str:
        return f"<EventWriter topic={self.topic!r} writer_id={self.writer_id!r}>"

    def _segment(self, name: str) -> SegmentWriter:
        """The writer of segment ``name``, made on first use (any thread)."""
        segment = self._segments.get(name)
        if segment is not None:
            return segment
        made = SegmentWriter(
            name, writer_id=self.writer_id, io=self._io,
            stream=self._stream, batch_size_bytes=self._batch_size_bytes,
            linger_s=self._linger_s, max_in_flight=self._max_in_flight,
            delivery_timeout_s=self._delivery_timeout_s, on_error=self._record_error,
            on_sealed=None if self._successors is None else self._on_sealed,
            metrics=self._metrics)
        made.on_change = self._on_change
        segment = self._segments.setdefault(name, made)  # atomic: one wins a race
        if self._closed:
            segment.close()  # closed meanwhile: its append raises WriterClosedError
        return segment

    def _route(self, routing_key: str) -> SegmentWriter:
        layout = self._layout  # one layout throughout: another may be published meanwhile
        segment = self._segment(layout.names[segment_index(layout.key_highs, routing_key)])
        if len(self._routes) >= _ROUTE_CACHE_SIZE:
            self._routes.clear()
        self._routes[routing_key] = segment
        return segment

    def _keyless_segment(self) -> SegmentWriter:
        segments = self._layout.segments
        return self._segment(segments[self._keyless_index % len(segments)])

    def _next_keyless(self) -> None:
        self._keyless_index = (self._keyless_index + 1) % len(self._layout.segments)
        self._keyless = None  # made (or found) by the next keyless event
        self._keyless_open = False

    # -- following a sealed segment to its successors (IO thread) ---------------

    def _on_sealed(self, sealed: SegmentWriter) -> None:
        task = asyncio.ensure_future(self._follow(sealed))
        self._following.add(task)
        task.add_done_callback(self._following.discard)

    async def _follow(self, sealed: SegmentWriter) -> None:
        """Finds the successors of ``sealed`` and hands its events over to them."""
        assert self._successors is not None
        backoff = Backoff()
        deadline = time.monotonic() + self._delivery_timeout_s
        while True:
            try:
                successors = await self._successors(sealed.segment)
                break
            except FolioUnavailableError as error:
                delay = backoff.next_delay()
                if time.monotonic() + delay >= deadline or self._closed:
                    sealed.fail(error)
                    return
                log.info("successors of %s not found (%s); asking again in %.2f s",
                         sealed.segment, error, delay)
                await asyncio.sleep(delay)
            except FolioError as error:
                sealed.fail(error)
                return
        if not successors:
            sealed.fail(SegmentSealedError(
                f"segment {sealed.segment!r} is sealed and has no successors: its topic "
                f"{self.topic!r} is sealed", segment=sealed.segment))
            return
        log.info("writer %s: segment %s is sealed; its keys go to %s", self.writer_id,
                 sealed.segment, [s.name for s in successors])
        sealed.hand_over(lambda: self._reroute(sealed.segment, successors))

    def _reroute(self, sealed: str, successors: list[SegmentRange],
                 ) -> tuple[Forward, Callable[[], None]]:
        """The routing without ``sealed``: how to send its events, and how to make it current.

        Runs on the IO thread, which alone changes the routing, in one go with
        the hand-over (so two follows never interleave). The sealed segment's
        events (and later ones that still reach it) go to the successor owning
        their key: successors only, never back through a routing table, which
        may still name a segment sealed earlier whose hand-over is under way.
        """
        layout = self._layout.replaced(sealed, successors)
        names = [s.name for s in successors]
        highs = [s.key_high for s in successors]

        def forward(payload: bytes, routing_key: str | None,
                    headers: Mapping[str, bytes] | None, timestamp_ms: int, size: int,
                    force: bool) -> WriteFuture:
            index = 0 if routing_key is None else segment_index(highs, routing_key)
            return self._segment(names[index]).append(payload, routing_key, headers,
                                                      timestamp_ms, size, force)

        def publish() -> None:
            self._layout = layout
            self._routes.clear()
            self._keyless = None
            self._generation += 1

        return forward, publish

    def _record_error(self, error: BaseException) -> None:
        with self._errors_lock:
            if self._first_error is None:
                self._first_error = error
