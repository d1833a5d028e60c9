"""The event writer: serialize, route, batch per segment, and acknowledge per event.

``write_event`` is the hot path and does only per-event work that cannot be
per block: serialize, check the size, pick the segment (the routing-key hash,
cached per key; keyless events go to one segment at a time, moving on after
each block, so a whole block goes to one segment), and append to that
segment's columns (``folio._segment_writer``). Everything that crosses to the
IO thread crosses per block.

A writer is cheap while idle: a segment's writer (and its flow on one of the
client's pooled channels) is made the first time an event goes to that
segment, and writers of the same topic layout share one copy of its segment
names and key bounds.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
import weakref
from bisect import bisect_right
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Final, Generic, TypeVar

from folio._segment_writer import MAX_BLOCK_BYTES, SegmentWriter
from folio._write_future import WriteFuture
from folio.errors import (
    EventTooLargeError,
    FolioError,
    InvalidArgumentError,
    TimeoutError,
    WriterClosedError,
)
from folio.models import TopicInfo
from folio.routing import routing_point
from folio.serializers import BytesSerializer, Serializer

if TYPE_CHECKING:
    from folio._append_stream import FlowSource
    from folio._io import IoThread

__all__ = ["EventWriter", "WriteFuture"]

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Routing keys whose segment is remembered; the cache starts over when full.
_ROUTE_CACHE_SIZE: Final = 65536


class _Layout:
    """A topic's open segments, by ``key_low``: names and upper key bounds (shared)."""

    __slots__ = ("__weakref__", "key_highs", "names")

    def __init__(self, names: tuple[str, ...], key_highs: tuple[float, ...]) -> None:
        self.names = names
        self.key_highs = key_highs


#: One ``_Layout`` per distinct (topic, segments), shared by that topic's writers.
_LAYOUTS: weakref.WeakValueDictionary[tuple[str, tuple[str, ...], tuple[float, ...]],
                                      _Layout] = weakref.WeakValueDictionary()
_LAYOUTS_LOCK: Final = threading.Lock()


def _layout(topic: str, names: tuple[str, ...], key_highs: tuple[float, ...]) -> _Layout:
    key = (topic, names, key_highs)
    with _LAYOUTS_LOCK:
        layout = _LAYOUTS.get(key)
        if layout is None:
            layout = _LAYOUTS[key] = _Layout(names, key_highs)
        return layout


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
                 on_close: Callable[[EventWriter[T]], None] | None = None) -> None:
        """Made by ``Client.writer``, which documents the arguments."""
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
            raise FolioError(f"topic {topic.name!r} has no open segment to write to")
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
        self._batch_size_bytes = min(batch_size_bytes, MAX_BLOCK_BYTES)
        self._linger_s = linger_ms / 1000.0
        self._max_in_flight = max_in_flight
        self._delivery_timeout_s = delivery_timeout_ms / 1000.0
        self._layout = _layout(topic.name, tuple(s.name for s in ranges),
                               tuple(s.key_high for s in ranges))
        #: Segment index -> its writer, made with the segment's first event.
        self._segments: dict[int, SegmentWriter] = {}
        self._routes: dict[str, SegmentWriter] = {}
        self._keyless_index = 0
        self._keyless: SegmentWriter | None = None

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
        if size > self._max_event_bytes:
            raise EventTooLargeError(
                f"an event of {size} bytes exceeds topic {self.topic!r}'s max_event_bytes "
                f"of {self._max_event_bytes} bytes", size=size, limit=self._max_event_bytes)
        now_ms = time.time_ns() // 1_000_000
        if routing_key is None:
            segment = self._keyless
            if segment is None:
                segment = self._keyless = self._segment(self._keyless_index)
            future = segment.append(payload, None, headers, now_ms, size)
            if not segment.has_open_batch:
                self._next_keyless()
            return future
        routed = self._routes.get(routing_key)
        if routed is None:
            routed = self._route(routing_key)
        return routed.append(payload, routing_key, headers, now_ms, size + len(routing_key))

    def flush(self, timeout: float | None = None) -> None:
        """Sends every batched event and waits until each is acknowledged or failed.

        Args:
            timeout: seconds to wait at most; None for as long as it takes.

        Raises:
            TimeoutError: events still unacknowledged after ``timeout``.
            FolioError: the first write that failed since the last flush
                (each failed event's future holds its own error).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        segments = list(self._segments.values())
        for segment in segments:
            if not segment.cut_now(deadline):
                raise TimeoutError(f"flush did not finish within {timeout} s")
        for segment in segments:
            if not segment.wait_idle(deadline):
                raise TimeoutError(f"flush did not finish within {timeout} s")
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
        self.close()

    def __repr__(self) -> str:
        return f"<EventWriter topic={self.topic!r} writer_id={self.writer_id!r}>"

    def _segment(self, index: int) -> SegmentWriter:
        """The writer of segment ``index``, made on first use (any thread)."""
        segment = self._segments.get(index)
        if segment is not None:
            return segment
        made = SegmentWriter(
            self._layout.names[index], writer_id=self.writer_id, io=self._io,
            stream=self._stream, batch_size_bytes=self._batch_size_bytes,
            linger_s=self._linger_s, max_in_flight=self._max_in_flight,
            delivery_timeout_s=self._delivery_timeout_s, on_error=self._record_error)
        segment = self._segments.setdefault(index, made)  # atomic: one wins a race
        if self._closed:
            segment.close()  # closed meanwhile: its append raises WriterClosedError
        return segment

    def _route(self, routing_key: str) -> SegmentWriter:
        key_highs = self._layout.key_highs
        index = bisect_right(key_highs, routing_point(routing_key))
        segment = self._segment(min(index, len(key_highs) - 1))
        if len(self._routes) >= _ROUTE_CACHE_SIZE:
            self._routes.clear()
        self._routes[routing_key] = segment
        return segment

    def _next_keyless(self) -> None:
        self._keyless_index = (self._keyless_index + 1) % len(self._layout.names)
        self._keyless = None  # made (or found) by the next keyless event

    def _record_error(self, error: BaseException) -> None:
        with self._errors_lock:
            if self._first_error is None:
                self._first_error = error
