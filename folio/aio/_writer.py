"""The asyncio event writer: the blocking face's writer, run on the caller's loop.

An :class:`AsyncEventWriter` holds an ``EventWriter`` (``folio.write.writer``)
made with the caller's loop as its IO (``folio._transport.loop_io``): the same
routing, batching, segment flows, exactly-once numbering, scaling hand-over
and delivery timeouts, with no thread between. What this face adds is waiting
without blocking the loop:

- **Room.** The blocking ``write_event`` waits (on a lock) when a segment has
  ``max_in_flight`` blocks out and its batch is full; on the loop that would
  never end. So each event first asks its segment writer ``would_wait``; if
  it would (or events wait already: order is kept), it joins this writer's
  backlog, which is appended in order as the segment writers report room
  (``on_change``, called after each acknowledgement, deferred to the loop's
  next turn: it comes holding the segment writer's lock). ``write`` and
  ``send`` wait only once the backlog holds about a batch.
- **Acknowledgement.** Each event's ``WriteFuture`` completes an
  ``asyncio.Future`` on the loop.
- **Flush.** ``EventWriter.try_flush`` (cuts what it can, never waits) again
  after each change until every event is done.

Cancellation: cancelling ``write`` (or the future of ``write_nowait``) while
the event waits in the backlog withdraws it: it is never sent. Once it was
appended to a batch it is written exactly once whatever the caller does
(a block cannot be recalled), and ``flush``/``close`` wait for it. Cancelling
``flush`` leaves the flows as they are (the events go on being written);
cancelling ``close`` still closes: the flows are released at once, and events
not acknowledged yet fail with ``WriterClosedError`` (some may still have
been written, as when the blocking face's close times out).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Final, Generic, TypeVar

from folio.api.v1.block import HEADER_OVERHEAD_BYTES
from folio.errors import FolioError, TimeoutError, WriterClosedError
from folio.models import WriteResult
from folio.serializers import BytesSerializer, Serializer
from folio.write._write_future import BlockOutcome
from folio.write.writer import EventWriter

__all__ = ["AsyncEventWriter"]

T = TypeVar("T")

#: An event waiting for room: payload, routing key, headers, size, its future.
_Waiting = tuple[bytes, str | None, Mapping[str, bytes] | None, int,
                 "asyncio.Future[WriteResult]"]

#: Bytes of events ``write`` and ``send`` let wait in the backlog before they wait
#: themselves. About a batch: when an acknowledgement makes room, what waited fills the
#: next batch at once. (With one event waiting, the loop's next acknowledgements, handled
#: before the writing coroutines run again, cut batches of one event each.)
_BACKLOG_LIMIT_BYTES: Final = 256 * 1024


class AsyncEventWriter(Generic[T]):
    """Writes events to one topic from coroutines; made by ``AsyncClient.writer``.

    Events with the same routing key are written in the order of the calls,
    exactly once per writer id. Use from the client's loop only. An async
    context manager: leaving it flushes and closes.
    """

    def __init__(self, make_core: Callable[[Callable[[], None]], EventWriter[bytes]],
                 serializer: Serializer[T], loop: asyncio.AbstractEventLoop) -> None:
        """Made by ``AsyncClient.writer``: ``make_core(on_change)`` makes the ``EventWriter``
        (of payload bytes: this face serializes) that tells this one of its changes."""
        self._drain_soon = False
        self._core = make_core(self._on_change)
        self._serialize = serializer.serialize
        self._raw = isinstance(serializer, BytesSerializer)
        self._loop = loop
        self._backlog: collections.deque[_Waiting] = collections.deque()
        self._backlog_bytes = 0
        #: Whether ``write_nowait`` just cut a block (``send`` then lets the loop send it).
        self._cut = False
        #: Set on every change the segment writers report (room, done, closed).
        self._changed = asyncio.Event()
        #: The block the last event went to, and the futures of its events so far.
        self._block: BlockOutcome | None = None
        self._block_futures: list[tuple[asyncio.Future[WriteResult], int]] = []

    @property
    def topic(self) -> str:
        """The topic written to."""
        return self._core.topic

    @property
    def writer_id(self) -> str:
        """The writer's identity for de-duplication."""
        return self._core.writer_id

    @property
    def closed(self) -> bool:
        """Whether ``close`` was called."""
        return self._core.closed

    # -- writing ----------------------------------------------------------------

    async def write(self, event: T, routing_key: str | None = None,
                    headers: Mapping[str, bytes] | None = None) -> WriteResult:
        """Writes one event and returns once the broker acknowledged it.

        Returns:
            The event's segment and offset (-1 if its block was answered as a
            duplicate; see ``WriteResult``).

        Raises:
            EventTooLargeError: the event is above the topic's ``max_event_bytes``.
            WriterClosedError: the writer is closed.
            FolioError: the write failed (``DeliveryTimeoutError``, ``SegmentSealedError``...).
        """
        return await (await self.send(event, routing_key, headers))

    async def send(self, event: T, routing_key: str | None = None,
                   headers: Mapping[str, bytes] | None = None) -> asyncio.Future[WriteResult]:
        """Waits for room only (back-pressure), then queues the event; returns its future.

        The future's result is the event's ``WriteResult`` (or its error).
        Raises as ``write_nowait``.
        """
        while self._backlog_bytes >= _BACKLOG_LIMIT_BYTES and not self._core.closed:
            self._changed.clear()
            await self._changed.wait()
        future = self.write_nowait(event, routing_key, headers)
        if self._cut:
            # A block was cut: let the loop send it now rather than after the
            # next batches (the IO side runs only when the writing coroutine waits).
            self._cut = False
            await asyncio.sleep(0)
        return future

    def write_nowait(self, event: T, routing_key: str | None = None,
                     headers: Mapping[str, bytes] | None = None) -> asyncio.Future[WriteResult]:
        """Queues one event without waiting at all; returns its future.

        It never waits for room: when the segment's pipe is full the event
        waits in the writer's backlog (in order) without bound; ``write`` and
        ``send`` wait for room instead.

        Raises:
            EventTooLargeError: the event is above the topic's ``max_event_bytes``
                (checked when it leaves the backlog: then in its future).
            WriterClosedError: the writer is closed.
            Exception: whatever the serializer raises.
        """
        if self._core.closed:
            raise WriterClosedError(f"the writer of topic {self.topic!r} is closed")
        if self._raw and type(event) is bytes:
            payload: bytes = event  # type: ignore[assignment]  # T is bytes here
        else:
            payload = self._serialize(event)
        size = len(payload) + len(routing_key or "")
        if headers:
            size += sum(len(name) + len(value) + HEADER_OVERHEAD_BYTES
                        for name, value in headers.items())
        future: asyncio.Future[WriteResult] = self._loop.create_future()
        segment = self._core.target(routing_key)
        if self._backlog or segment.would_wait(routing_key is None, size):
            self._backlog.append((payload, routing_key, headers, size, future))
            self._backlog_bytes += size
        else:
            self._append(payload, routing_key, headers, future)
            if not segment.has_open_batch:
                self._cut = True
        return future

    def _append(self, payload: bytes, routing_key: str | None,
                headers: Mapping[str, bytes] | None, future: asyncio.Future[WriteResult],
                ) -> None:
        try:
            written = self._core.write_event(payload, routing_key, headers)
        except Exception as error:  # (too large, closed: the event's own outcome)
            future.set_exception(error)
            return
        # One callback per block settles all its events' futures.
        outcome, index = written.block
        if outcome is self._block:
            self._block_futures.append((future, index))
            return
        self._block = outcome
        self._block_futures = waiting = [(future, index)]
        outcome.add_callback(lambda _done: _settle(outcome, waiting), written)

    def _on_change(self) -> None:
        """A segment writer's change (holding its lock): handled on the loop's next turn."""
        if not self._drain_soon:
            self._drain_soon = True
            self._loop.call_soon(self._drain)

    def _drain(self) -> None:
        """Appends what waits in the backlog while there is room, in order; wakes waiters."""
        self._drain_soon = False
        backlog = self._backlog
        while backlog:
            payload, routing_key, headers, size, future = backlog[0]
            if future.done():  # cancelled while waiting: withdrawn, never sent
                backlog.popleft()
                self._backlog_bytes -= size
                continue
            if not self._core.closed and self._core.target(routing_key).would_wait(
                    routing_key is None, size):
                break
            backlog.popleft()
            self._backlog_bytes -= size
            self._append(payload, routing_key, headers, future)
        self._changed.set()

    # -- flushing and closing -----------------------------------------------------

    async def flush(self) -> None:
        """Sends every event queued and waits until each is acknowledged or failed.

        Bound it with ``asyncio.timeout``: cancelling it stops only the wait.

        Raises:
            FolioError: the first write that failed since the last flush, once.
        """
        while True:
            self._changed.clear()
            if not self._backlog and self._core.try_flush():
                break
            await self._changed.wait()
        error = self._core.take_error()
        if error is not None:
            raise error

    async def close(self) -> None:
        """Flushes, then releases the writer's flows. Idempotent.

        The writer is closed whatever the flush did (failed, or was cancelled:
        ``asyncio.timeout`` around it bounds it): events not acknowledged by
        then fail with ``WriterClosedError``.

        Raises:
            FolioError: as ``flush``.
        """
        if self._core.closed:
            return
        try:
            await self.flush()
        finally:
            closed = WriterClosedError("the writer was closed before the event was sent")
            while self._backlog:
                future = self._backlog.popleft()[4]
                if not future.done():
                    future.set_exception(closed)
            self._backlog_bytes = 0
            # A zero timeout: the flush above did the waiting; this only releases.
            with contextlib.suppress(TimeoutError, FolioError):
                self._core.close(0)

    async def __aenter__(self) -> AsyncEventWriter[T]:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, traceback: TracebackType | None) -> None:
        """Closes; a failure of the close never takes the place of the body's error."""
        if exc is None:
            await self.close()
            return
        try:
            await self.close()
        except Exception as error:  # kept as a note, as the blocking face does
            exc.add_note(f"closing the writer of topic {self.topic!r} also failed: "
                         f"{type(error).__name__}: {error}")

    def __repr__(self) -> str:
        return f"<AsyncEventWriter topic={self.topic!r} writer_id={self.writer_id!r}>"


def _settle(outcome: BlockOutcome,
            waiting: list[tuple[asyncio.Future[WriteResult], int]]) -> None:
    """Completes the futures of a block's events once it is done (on the loop)."""
    for future, index in waiting:
        if future.done():  # its waiter was cancelled: the event was written all the same
            continue
        result = outcome.outcome_of(index)
        if isinstance(result, BaseException):
            future.set_exception(result)
        else:
            future.set_result(result)
