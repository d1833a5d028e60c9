"""The asyncio event writer: the blocking face's writer, run on the caller's loop.

An :class:`AsyncEventWriter` holds an ``EventWriter`` (``folio.write.writer``)
made with the caller's loop as its IO (``folio._transport.loop_io``): the same
routing, batching, segment flows, exactly-once numbering, scaling hand-over
and delivery timeouts, with no thread between. What this face adds is waiting
without blocking the loop, at little cost per event:

- **Room.** The blocking ``write_event`` waits (on a lock) when a segment has
  ``max_in_flight`` blocks out and its batch is full; on the loop that would
  never end. So each event is appended with ``EventWriter.append_nowait``,
  which says when it would wait instead; then (or when events wait already:
  order is kept) it joins this writer's backlog, which is appended in order
  as the segment writers report room (``on_change``, called after each
  acknowledgement, deferred to the loop's next turn: it comes holding the
  segment writer's lock). ``write`` and ``send`` wait only once the backlog
  holds about a batch.
- **Acknowledgement.** Each event's ``PendingWrite`` (``folio.aio._pending``)
  holds its block's shared outcome; only an awaited one makes an asyncio
  future, and a block's awaited writes are woken in one pass.
- **Turns.** ``send`` lets the loop run (``asyncio.sleep(0)``) every
  ``_YIELD_EVERY`` events, so that blocks cut meanwhile are sent and
  acknowledgements handled while a coroutine writes flat out (it never waits
  otherwise while there is room).
- **Flush.** ``EventWriter.try_flush`` (cuts what it can, never waits) again
  after each change until every event is done.

Cancellation: cancelling ``write`` (or ``PendingWrite.cancel``) while the
event waits in the backlog withdraws it: it is never sent. Once it was
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

from folio.aio._pending import Acks, PendingWrite
from folio.errors import FolioError, TimeoutError, WriterClosedError
from folio.models import WriteResult
from folio.serializers import BytesSerializer, Serializer
from folio.write.writer import EventWriter

__all__ = ["AsyncEventWriter", "PendingWrite"]

T = TypeVar("T")

#: An event waiting for room: payload, routing key, headers, its counted bytes, its write.
_Waiting = tuple[bytes, str | None, Mapping[str, bytes] | None, int, PendingWrite]

#: Bytes of events ``write`` and ``send`` let wait in the backlog before they wait
#: themselves. About a batch: when an acknowledgement makes room, what waited fills the
#: next batch at once. (With one event waiting, the loop's next acknowledgements, handled
#: before the writing coroutines run again, cut batches of one event each.)
_BACKLOG_LIMIT_BYTES: Final = 256 * 1024

#: ``send`` lets the loop run once per this many events (see the module docstring):
#: about one default batch (256 KiB) of 100-byte events. The acknowledgements handled
#: in those turns cut the open batch (``SegmentWriter._complete``), so yielding more
#: often cuts smaller blocks: at 1,024 they held ~1,100-1,300 events and the client
#: spent ~2.7 us of CPU per event; at 2,048 ~2,050 (full) and ~2.0 us (``folio perf
#: faces``, 1 writer). Larger events fill the pipe sooner and then wait for room
#: (which lets the loop run), so they need no smaller count. A writing coroutine
#: holds the loop ~3-4 ms at a time.
_YIELD_EVERY: Final = 2048
_YIELD_TURNS: Final = 3


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
        self._acks = Acks(loop)
        self._backlog: collections.deque[_Waiting] = collections.deque()
        self._backlog_bytes = 0
        #: Events ``send`` queued since it last let the loop run.
        self._unyielded = 0
        #: Set on every change the segment writers report (room, done, closed).
        self._changed = asyncio.Event()

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
        while self._backlog_bytes >= _BACKLOG_LIMIT_BYTES and not self._core.closed:
            self._changed.clear()
            await self._changed.wait()
        pending = self.write_nowait(event, routing_key, headers)
        # ``await pending`` without its generator (one object less per write).
        waiter = pending._waiter_until_done()
        if waiter is not None:
            try:
                await waiter
            except asyncio.CancelledError:
                pending.cancel()  # withdrawn if still in the backlog (never sent)
                raise
        return pending.result()

    async def send(self, event: T, routing_key: str | None = None,
                   headers: Mapping[str, bytes] | None = None) -> PendingWrite:
        """Waits for room only (back-pressure), then queues the event; returns its write.

        ``await`` the returned ``PendingWrite`` for the event's ``WriteResult``
        (or its error). Raises as ``write_nowait``.
        """
        while self._backlog_bytes >= _BACKLOG_LIMIT_BYTES and not self._core.closed:
            self._changed.clear()
            await self._changed.wait()
        pending = self.write_nowait(event, routing_key, headers)
        self._unyielded += 1
        if self._unyielded >= _YIELD_EVERY:
            self._unyielded = 0
            for _ in range(_YIELD_TURNS):
                await asyncio.sleep(0)
        return pending

    def write_nowait(self, event: T, routing_key: str | None = None,
                     headers: Mapping[str, bytes] | None = None) -> PendingWrite:
        """Queues one event without waiting at all; returns its write (``await`` it).

        It never waits for room: when the segment's pipe is full the event
        waits in the writer's backlog (in order) without bound; ``write`` and
        ``send`` wait for room instead. No asyncio future is made unless the
        returned ``PendingWrite`` is awaited.

        Raises:
            EventTooLargeError: the event is above the topic's ``max_event_bytes``
                (checked when it leaves the backlog if it waited there: then
                the ``PendingWrite`` holds it).
            WriterClosedError: the writer is closed.
            Exception: whatever the serializer raises.
        """
        if self._raw and type(event) is bytes:
            payload: bytes = event  # type: ignore[assignment]  # T is bytes here
        else:
            payload = self._serialize(event)
        if not self._backlog:
            # (It raises WriterClosedError once the writer is closed.)
            placed_in = self._core.append_nowait(payload, routing_key, headers)
            if placed_in is not None:
                return PendingWrite(self._acks, placed_in)
        elif self._core.closed:
            raise WriterClosedError(f"the writer of topic {self.topic!r} is closed")
        pending = PendingWrite(self._acks, None)
        size = len(payload) + len(routing_key or "")
        if headers:
            size += sum(len(name) + len(value) for name, value in headers.items())
        self._backlog.append((payload, routing_key, headers, size, pending))
        self._backlog_bytes += size
        return pending

    def _on_change(self) -> None:
        """A segment writer's change (holding its lock): handled on the loop's next turn."""
        if not self._drain_soon:
            self._drain_soon = True
            self._loop.call_soon(self._drain)

    def _drain(self) -> None:
        """Appends what waits in the backlog while there is room, in order; wakes waiters."""
        self._drain_soon = False
        backlog = self._backlog
        core = self._core
        while backlog:
            payload, routing_key, headers, size, pending = backlog[0]
            if pending.done():  # withdrawn while waiting: never sent
                backlog.popleft()
                self._backlog_bytes -= size
                continue
            try:
                placed_in = core.append_nowait(payload, routing_key, headers)
            except Exception as error:  # (too large, closed: the event's own outcome)
                pending._fail(error)
            else:
                if placed_in is None:
                    break
                pending._placed(placed_in)
            backlog.popleft()
            self._backlog_bytes -= size
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
                pending = self._backlog.popleft()[4]
                if not pending.done():
                    pending._fail(closed)
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

