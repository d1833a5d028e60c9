"""The event reader: one Read stream per segment, decoded on the caller's thread.

On the IO thread, one task per segment runs a ``Read`` server stream (on a
channel of the client's connection pool, where it counts as a flow while it
runs) and puts
each response — many blocks, not one event — on the reader's queue, holding
at most ``_BUFFERED_RESPONSES`` of them per segment (the caller's consumption
gives credit back, so a slow reader slows the streams instead of filling
memory). A stream that breaks is opened again from the next offset after
backoff. The caller's thread takes responses off the queue and unpacks their
blocks into ``Event`` objects in one tight loop per block, skipping the events
before the offset it asked for (a block may begin before it) and any a
reconnect sent twice.

**Scaling.** A segment read to the end of its seal (``end_of_segment``) is
finished; the reader then asks for its successors and starts each one once
every predecessor is finished (predecessors of the segments it started with,
sealed before, count as finished: it never reads them). Responses reach the
caller in the order they were queued, so the events of one routing key come
in the order they were written, across splits and merges.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import time
from collections.abc import Collection, Iterator, Mapping
from concurrent.futures import Future
from types import TracebackType
from typing import TYPE_CHECKING, Final, Generic, Literal, TypeVar

import grpc

from folio._status import error_from_rpc
from folio._transport.append_stream import Backoff
from folio._transport.scaling import SuccessorLookup
from folio._transport.unpack import unpack_events
from folio.api.v1 import read_pb2
from folio.errors import FolioError, InvalidArgumentError
from folio.models import Event
from folio.serializers import BytesSerializer, Serializer

if TYPE_CHECKING:
    from folio._transport.io_thread import IoThread
    from folio._transport.pool import ReadChannels
    from folio.api.v1.read_pb2_grpc import ReadAsyncStub
    from folio.metrics import TopicMetrics

__all__ = ["DEFAULT_MAX_BYTES", "DEFAULT_MAX_WAIT_MS", "EventReader", "Isolation"]

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Bytes of blocks per Read response asked for.
DEFAULT_MAX_BYTES: Final = 1024 * 1024
#: How long the broker waits at the tail before an empty (heartbeat) response.
DEFAULT_MAX_WAIT_MS: Final = 500
#: Responses of one segment buffered before its stream waits for the caller.
#: Retries of a read stream failing with statuses the broker did not give.
_UNEXPLAINED_RETRIES = 5
_BUFFERED_RESPONSES: Final = 4

# Queue items: (segment, response, error); (None, None, None) wakes a closed reader.
#: What a reader is served of transactional events (``ReadRequest.isolation``).
Isolation = Literal["read_committed", "read_uncommitted"]
_ISOLATIONS: Final[dict[str, read_pb2.ReadRequest.Isolation.ValueType]] = {
    "read_committed": read_pb2.ReadRequest.READ_COMMITTED,
    "read_uncommitted": read_pb2.ReadRequest.READ_UNCOMMITTED,
}

_Item = tuple[str | None, read_pb2.ReadResponse | None, FolioError | None]


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
                 read_before: Collection[str] = ()) -> None:
        """Made by ``Client.reader``; ``positions`` maps each segment to read to its offset.

        Each segment's stream takes a channel from ``channels`` (the client's
        pool) when it starts, or uses ``stub`` if given instead. ``isolation``
        is ``"read_committed"`` (events of open or aborted transactions left
        out; the stream waits before an open transaction's first event) or
        ``"read_uncommitted"`` (every event). ``successors`` looks up a sealed
        segment's successors (None: a sealed segment's stream just ends);
        ``read_before`` names the segments before the start (the ancestors of
        ``positions``' segments), which count as read to their end.
        """
        if (channels is None) == (stub is None):
            raise ValueError("give the reader either channels or a stub")
        if isolation not in _ISOLATIONS:
            raise InvalidArgumentError(
                f"isolation must be 'read_committed' or 'read_uncommitted', not {isolation!r}")
        self.isolation: Isolation = isolation
        self._isolation = _ISOLATIONS[isolation]
        self.topic = topic
        self._io = io
        self._channels = channels
        self._stub = stub
        self._max_bytes = max_bytes
        self._max_wait_ms = max_wait_ms
        self._deserialize = None if isinstance(serializer, BytesSerializer) else \
            serializer.deserialize
        self._on_close = on_close
        self._queue: queue.Queue[_Item] = queue.Queue()
        self._positions = dict(positions)
        self._credits: dict[str, asyncio.Semaphore] = {}
        self._events: list[Event[T]] = []
        self._index = 0
        self._closed = False
        self._successors = successors
        self._metrics = metrics
        #: Segments read to their end, or before the start (IO thread).
        self._finished: set[str] = set(read_before)
        #: Successor tasks started on the IO thread.
        self._followers: set[asyncio.Future[None]] = set()
        # A snapshot: the first tasks may add successors to ``_positions`` (IO thread).
        starts = list(self._positions.items())
        self._tasks: list[Future[None]] = [
            io.submit(self._read_segment(segment, offset)) for segment, offset in starts
        ]

    @property
    def positions(self) -> dict[str, int]:
        """The offset of the next event to return, per segment."""
        positions = dict(self._positions)
        if self._index < len(self._events):
            # Unpacked but not yet returned: they all come from one response.
            pending = self._events[self._index]
            positions[pending.segment] = pending.offset
        return positions

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
            FolioError: another failure of one segment's stream.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            index = self._index
            if index < len(self._events):
                self._index = index + 1
                return self._events[index]
            if self._closed:
                return None
            if not self._fill(deadline):
                return None

    def __iter__(self) -> Iterator[Event[T]]:
        """Every event from the start positions on; ends only when the reader is closed."""
        while True:
            events = self._events
            # One event at a time, so that leaving the loop early loses nothing:
            # the next read_next or loop goes on from the event after the last one.
            for index in range(self._index, len(events)):
                self._index = index + 1
                yield events[index]
            if self._closed:
                return
            self._fill(None)

    def close(self) -> None:
        """Stops every stream; ``read_next`` returns None and iteration ends. Idempotent."""
        if self._closed:
            return
        self._closed = True
        for task in self._tasks:
            task.cancel()
        self._io.call_soon(self._cancel_followers)
        self._queue.put((None, None, None))
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
        return f"<EventReader topic={self.topic!r} segments={sorted(self._positions)}>"

    # -- the caller's side --------------------------------------------------

    def _fill(self, deadline: float | None) -> bool:
        """Takes one response off the queue into ``_events``; False on timeout or close."""
        try:
            if deadline is None:
                segment, response, error = self._queue.get()
            else:
                segment, response, error = self._queue.get(
                    timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            return False
        if segment is None:
            return False
        if error is not None:
            if self._metrics is not None:
                self._metrics.failed(error)
            raise error
        credit = self._credits.get(segment)
        if credit is not None:
            self._io.call_soon(credit.release)
        if response is not None and response.blocks:
            self._events = self._unpack(segment, response)
            self._index = 0
            if self._metrics is not None:
                self._metrics.received(len(self._events),
                                       sum(len(block.data) for block in response.blocks))
        return True

    def _unpack(self, segment: str, response: read_pb2.ReadResponse) -> list[Event[T]]:
        events, self._positions[segment] = unpack_events(
            segment, self._positions[segment], response, self._deserialize)
        return events

    # -- the IO side --------------------------------------------------------

    async def _read_segment(self, segment: str, offset: int) -> None:
        if self._channels is None:
            assert self._stub is not None
            ended = await self._read_segment_on(self._stub, segment, offset)
        else:
            try:
                lease = self._channels.lease_read()
            except FolioError as error:  # the client is closed
                self._queue.put((segment, None, error))
                return
            try:
                ended = await self._read_segment_on(lease.stub, segment, offset)
            finally:
                lease.release()
        if ended:
            await self._follow(segment)

    async def _follow(self, segment: str) -> None:
        """``segment`` is read to its end: start its successors whose predecessors all are."""
        self._finished.add(segment)
        if self._successors is None or self._closed:
            return
        backoff = Backoff()
        while not self._closed:
            try:
                successors = await self._successors(segment)
                break
            except FolioError as error:
                if not error.retriable:
                    self._queue.put((segment, None, error))
                    return
                log.info("successors of %s not found (%s); asking again", segment, error)
            await asyncio.sleep(backoff.next_delay())
        else:
            return
        for successor in successors:
            name = successor.name
            if name in self._positions or self._closed:
                continue  # read already (e.g. a merge's other predecessor started it)
            if any(p not in self._finished for p in successor.predecessors):
                continue  # the last predecessor to finish starts it
            self._positions[name] = successor.start_offset
            task = asyncio.ensure_future(self._read_segment(name, successor.start_offset))
            self._followers.add(task)
            task.add_done_callback(self._followers.discard)

    def _cancel_followers(self) -> None:
        for task in list(self._followers):
            task.cancel()

    async def _read_segment_on(self, stub: ReadAsyncStub, segment: str, offset: int) -> bool:
        """Streams ``segment`` onto the queue; True once it is read to the end of its seal."""
        credit = asyncio.Semaphore(_BUFFERED_RESPONSES)
        self._credits[segment] = credit
        backoff = Backoff()
        next_offset = offset
        unexplained = 0
        while not self._closed:
            call = stub.Read(read_pb2.ReadRequest(
                segment=segment, offset=next_offset, max_bytes=self._max_bytes,
                max_wait_ms=self._max_wait_ms, isolation=self._isolation))
            try:
                async for response in call:
                    backoff.reset()
                    unexplained = 0
                    for block in response.blocks:
                        next_offset = max(next_offset, block.offset + block.event_count)
                    await credit.acquire()
                    self._queue.put((segment, response, None))
                    if response.end_of_segment:
                        return True
            except grpc.RpcError as rpc_error:
                error = error_from_rpc(rpc_error)
                # A status the broker did not give (no folio-error: gRPC's own,
                # e.g. INTERNAL from a cut connection) gets a few retries too.
                unexplained = unexplained + 1 if error.error_name is None else 0
                if not error.retriable and not 0 < unexplained <= _UNEXPLAINED_RETRIES:
                    self._queue.put((segment, None, error))
                    return False
                log.info("read stream of %s broke (%s); reopening at offset %d",
                         segment, error, next_offset)
            finally:
                call.cancel()
            await asyncio.sleep(backoff.next_delay())
        return False
