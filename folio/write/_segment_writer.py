"""One writer's appends to one segment: batching on the caller's side, a flow on the IO side.

This module is the caller side and the hand-over after a seal; the IO side
(the flow: setup, sends, replies, resends) is ``folio.write._segment_flow``'s
``SegmentFlow`` (the pipelined policy of the flow engine, ``folio._flow``),
which ``SegmentWriter`` holds.

**Caller side** (any thread, under ``_lock``): ``append`` adds an event to the
open batch, column by column. The batch becomes a block — encoded whole with
``encode_block`` — when it reaches ``batch_size_bytes``, when ``linger_s``
passes (a timer on the IO thread), when it opens with nothing in flight (cut
as soon as the IO thread runs, i.e. once the caller lets go of the GIL: what
the caller wrote in one go is in it, and no timer waits when nothing else is
coming), when a block in flight is
acknowledged (there is room in the pipe and the broker is through with it, so
lingering on would only add latency: the batch fills while its predecessors
are in flight, batches grow with the rate up to ``batch_size_bytes``, and the
blocks in flight stay as many as they were), when a keyless event meets a keyed batch or
the other way round (a block's key column is all or nothing), or on flush.
The block goes to the IO thread with one ``call_soon`` per block. At most
``max_in_flight`` blocks are unacknowledged; a caller whose batch is full then
waits on ``_cond`` (backpressure; made when someone waits and dropped when
the last waiter leaves, so an idle writer's segments cost little).

**IO side** (IO thread only): the segment's *flow* on an Append stream shared
with other flows, registered with the first block on the stream the client's
connection pool picks (the least busy channel, ``folio._transport.pool``).
``SetupAppend`` answers the last event number the segment recorded for this
writer; blocks are numbered from there, sent in order, and kept in the
flow engine's queue until ``DataAppended``. When the stream breaks, or the broker
answers a retriable failure, the flow stops sending, sets up again (after
backoff) and resends in order every unacknowledged block numbered above what
the broker recorded; those at or below it were written (the broker answers
duplicates the same way). Every retriable failure is retried so; blocks still
unacknowledged ``delivery_timeout_s`` after they were made fail with
``DeliveryTimeoutError`` (outcome unknown). ``NoSuchSegment`` ends the
flow: its blocks fail, and later ones at once.

**Sealed segment** (scaling). With an ``on_sealed`` callback, ``SegmentIsSealed``
does not fail anything: the flow stops sending and sets up once more, and the
sealed segment's record of this writer's last event number (its writer
attribute) tells which blocks were written before the seal; those are
acknowledged, and ``on_sealed`` is called. The event writer then looks up the
successors and calls ``hand_over``, which, under the caller-side lock, sends
every event of the remaining blocks and of the open batch again through the
writer's routing (to the successor owning its key), in order, forwards their
outcomes, and from then on passes every ``append`` on. Without the callback
(or with no successors, ``fail``) the blocks fail with ``SegmentSealedError``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Final, overload

from folio.api.v1.block import EVENT_OVERHEAD_BYTES, MAX_BLOCK_BYTES, decode_block, encode_block
from folio.errors import (
    FolioError,
    WriterClosedError,
)
from folio.write._batch import Forward, OpenBatch, resend
from folio.write._segment_flow import Block, SegmentFlow
from folio.write._write_future import BlockOutcome, WriteFuture

if TYPE_CHECKING:
    from folio._transport.append_stream import FlowSource
    from folio._transport.io_thread import IoThread
    from folio.api.v1 import append_pb2
    from folio.metrics import TopicMetrics

__all__ = ["MAX_BATCH_BYTES", "Forward", "SegmentWriter"]

log = logging.getLogger(__name__)

#: A batch is cut before its estimate passes this: the broker's block limit
#: less a margin for what the per-event estimate does not count exactly.
MAX_BATCH_BYTES: Final = MAX_BLOCK_BYTES - 63 * 1024

_NO_HEADERS: Final[Mapping[str, bytes]] = {}


class SegmentWriter:
    """Batches one writer's events to one segment and holds their flow (module docstring)."""

    __slots__ = ("_batch_size_bytes", "_closed", "_cond", "_delivery_timeout_s", "_flow",
                 "_handing", "_idle_cut", "_in_flight", "_io", "_linger_s", "_lock",
                 "_max_in_flight", "_metrics", "_on_error", "_on_sealed", "_redirect",
                 "_waiters", "batch", "on_change", "segment")

    def __init__(self, segment: str, *, writer_id: str, io: IoThread, stream: FlowSource,
                 batch_size_bytes: int, linger_s: float, max_in_flight: int,
                 delivery_timeout_s: float,
                 on_error: Callable[[BaseException], None],
                 on_sealed: Callable[[SegmentWriter], None] | None = None,
                 metrics: TopicMetrics | None = None, idle_cut: bool = True) -> None:
        """Args:
        segment: the segment's name.
        writer_id: the writer's identity on the broker.
        io: the client's IO thread.
        stream: where the flow registers (the client's connection pool, or
            one ``AppendStream``; used on the IO thread only).
        batch_size_bytes: cut a block once a batch holds this many bytes.
        linger_s: cut a block this long after its first event at the latest.
        max_in_flight: most unacknowledged blocks before ``append`` waits.
        delivery_timeout_s: give up on a block this long after it was cut.
        on_error: called (on the IO thread) with each block's failure.
        on_sealed: called (on the IO thread) once the segment is found sealed
            and the blocks written before the seal are acknowledged; None:
            a seal fails the blocks.
        metrics: where acknowledged and failed blocks are counted (``folio.metrics``).
        idle_cut: cut a new batch as soon as the IO thread runs if nothing is
            in flight (the default); False: only size, linger, acknowledgements
            and explicit cuts cut (tests that count blocks).
        """
        self.segment = segment
        self._io = io
        self._batch_size_bytes = batch_size_bytes
        self._linger_s = linger_s
        self._max_in_flight = max_in_flight
        self._delivery_timeout_s = delivery_timeout_s
        self._on_error = on_error
        self._metrics = metrics
        self._idle_cut = idle_cut
        #: Where appends go once the segment's events were handed over.
        self._redirect: Forward | None = None
        #: Set (under _lock) once the hand-over is decided: no more blocks are cut.
        self._handing = False
        # Caller side, under _lock.
        self._lock = threading.Lock()
        self._cond: threading.Condition | None = None  # while someone waits
        self._waiters = 0
        #: The batch being filled (changed under ``_lock`` only; read it outside to
        #: ask whether one is open, as ``has_open_batch`` does).
        self.batch: OpenBatch | None = None
        self._in_flight = 0
        self._closed = False
        # IO side, IO thread only: the flow (at most max_in_flight blocks in it).
        self._flow = SegmentFlow(
            segment, writer_id=writer_id, source=stream, delivery_timeout_s=delivery_timeout_s,
            complete=self._complete, on_sealed=self._sealed if on_sealed else None)
        self._on_sealed = on_sealed
        #: Called (holding the caller-side lock: it must not append) whenever room
        #: may have come (a block done, the hand-over made, the writer closed):
        #: how the asyncio face learns it may append (``append(wait=False)``) or is flushed.
        self.on_change: Callable[[], None] | None = None

    # == caller side =========================================================

    @property
    def has_open_batch(self) -> bool:
        """Whether a batch is being filled (False right after a block was cut)."""
        return self.batch is not None

    @overload
    def append(self, payload: bytes, routing_key: str | None,
               headers: Mapping[str, bytes] | None, timestamp_ms: int,
               size: int, force: bool = False) -> WriteFuture: ...

    @overload
    def append(self, payload: bytes, routing_key: str | None,
               headers: Mapping[str, bytes] | None, timestamp_ms: int,
               size: int, force: bool = False, *, wait: bool) -> WriteFuture | None: ...

    def append(self, payload: bytes, routing_key: str | None,
               headers: Mapping[str, bytes] | None, timestamp_ms: int,
               size: int, force: bool = False, *, wait: bool = True) -> WriteFuture | None:
        """Adds one event to the open batch; may cut a block, or wait for room.

        Args:
            payload: the serialized payload.
            routing_key: its key, or None.
            headers: its headers, or None.
            timestamp_ms: its time in ms since the epoch.
            size: its estimated size in the block (payload and key bytes).
            force: never wait for room (the IO thread handing events over):
                cut the batch even beyond ``max_in_flight``.
            wait: False: return None (nothing appended) where it would wait for
                room (the asyncio face, on the IO side's own loop, waits its way).

        Raises:
            WriterClosedError: the writer is closed.
        """
        keyless = routing_key is None
        estimate = size + EVENT_OVERHEAD_BYTES
        with self._lock:
            while self._redirect is None:
                batch = self.batch
                if batch is not None and (batch.keyless is not keyless
                                          or batch.size >= self._batch_size_bytes
                                          or batch.size + estimate > MAX_BATCH_BYTES):
                    if not self._handing and (force or self._in_flight < self._max_in_flight):
                        self._cut_locked()
                        continue
                    # No room; or no more blocks here (handing over: the batch goes
                    # over event by event, and only the IO thread's ``force`` adds).
                    if not (self._handing and force):
                        if self._closed and not self._handing:
                            raise WriterClosedError("the writer is closed")
                        if not wait:
                            return None
                        self._wait_on_locked(1.0)
                        continue
                if self._closed:
                    raise WriterClosedError("the writer is closed")
                if batch is None:
                    batch = self.batch = OpenBatch(self.segment, keyless)
                    self._io.call_soon(self._arm_linger, batch)
                index = batch.count
                batch.payloads.append(payload)
                if not keyless:
                    batch.keys.append(routing_key)  # type: ignore[arg-type]
                batch.timestamps.append(timestamp_ms)
                if headers:
                    if batch.headers is None:
                        batch.headers = [_NO_HEADERS] * index
                    batch.headers.append(dict(headers))
                    estimate += sum(len(name) + len(value) + 4 for name, value in headers.items())
                elif batch.headers is not None:
                    batch.headers.append(_NO_HEADERS)
                batch.count = index + 1
                batch.size += estimate
                if batch.size >= self._batch_size_bytes and self._in_flight < self._max_in_flight:
                    self._cut_locked()
                return WriteFuture(batch.outcome, index)
            redirect = self._redirect
        # Handed over to the successors (outside the lock: the target may wait for room;
        # not when the caller must not wait: then past ``max_in_flight``, as the IO
        # thread's hand-over does, which is rare: the routing names the successors soon).
        return redirect(payload, routing_key, headers, timestamp_ms, size, force or not wait)

    def add_on_loop(self, payload: bytes, routing_key: str | None,
                    headers: Mapping[str, bytes] | None, timestamp_ms: int,
                    size: int) -> tuple[BlockOutcome, int] | None:
        """``append(wait=False)`` by a caller on the IO thread itself: the event's
        block outcome and its index there, or None where it would wait.

        The asyncio face's hot path: there the caller, the flow and every
        callback run on the loop's one thread, so nothing else can hold
        ``_lock`` and the common case (an open batch of the same kind with
        room, no headers) adds the event without taking it and without a
        ``WriteFuture``. Anything else goes through ``append``.

        Raises:
            WriterClosedError: the writer is closed.
        """
        batch = self.batch
        estimate = size + EVENT_OVERHEAD_BYTES
        # (An open batch means neither closed nor handed over: both drop it.)
        if batch is None or headers or batch.keyless is not (routing_key is None) \
                or batch.size >= self._batch_size_bytes or batch.headers is not None \
                or batch.size + estimate > MAX_BATCH_BYTES:
            written = self.append(payload, routing_key, headers, timestamp_ms, size, wait=False)
            return None if written is None else written.block
        index = batch.count
        batch.payloads.append(payload)
        if routing_key is not None:
            batch.keys.append(routing_key)
        batch.timestamps.append(timestamp_ms)
        batch.count = index + 1
        batch.size += estimate
        if batch.size >= self._batch_size_bytes and self._in_flight < self._max_in_flight:
            self._cut_locked()  # (the lock is not needed: see above)
        return batch.outcome, index

    def cut_now(self, deadline: float | None) -> bool:
        """Cuts the open batch into a block (waiting for room); False if ``deadline`` passed."""
        with self._lock:
            while self.batch is not None:
                if self._in_flight < self._max_in_flight:
                    self._cut_locked()
                    break
                if not self._wait_locked(deadline):
                    return False
            return True

    def wait_idle(self, deadline: float | None) -> bool:
        """Waits until every block cut so far is done; False if ``deadline`` passed."""
        with self._lock:
            while self._in_flight > 0 or self.batch is not None:
                if self.batch is not None and self._in_flight < self._max_in_flight \
                        and not self._handing:
                    self._cut_locked()
                    continue
                if not self._wait_locked(deadline):
                    return False
            return True

    def close(self) -> None:
        """Refuses new events and releases the flow; unsent blocks fail (WriterClosedError)."""
        with self._lock:
            self._closed = True
            batch, self.batch = self.batch, None
            self._notify_locked()
        if batch is not None:
            batch.outcome.set_error(WriterClosedError("the writer was closed before the "
                                                      "event was sent"))
        self._io.call_soon(self._release)

    def _wait_on_locked(self, timeout: float) -> None:
        """Waits on ``_cond`` (made if need be) up to ``timeout``; holds ``_lock``."""
        cond = self._cond
        if cond is None:
            cond = self._cond = threading.Condition(self._lock)
        self._waiters += 1
        try:
            cond.wait(timeout)
        finally:
            self._waiters -= 1
            if not self._waiters:
                self._cond = None

    def _notify_locked(self) -> None:
        if self._cond is not None:
            self._cond.notify_all()
        if self.on_change is not None:
            self.on_change()

    def _wait_locked(self, deadline: float | None) -> bool:
        if deadline is None:
            self._wait_on_locked(1.0)
            return True
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        self._wait_on_locked(min(remaining, 1.0))
        return True

    def _cut_locked(self) -> None:
        """Encodes the open batch and hands the block to the IO thread (holds ``_lock``)."""
        batch = self.batch
        if batch is None or self._handing:
            return
        self.batch = None
        try:
            data = encode_block(batch.payloads, None if batch.keyless else batch.keys,
                                batch.timestamps, batch.headers)
        except (FolioError, TypeError, ValueError) as error:
            # A header value that is not bytes, say: fail the block's events.
            self._io.call_soon(self._fail_unsent, batch.outcome, error)
            return
        now = time.monotonic()
        if self._metrics is not None:
            self._metrics.batched(now - batch.started)
        block = Block(data, batch.count, batch.outcome, now + self._delivery_timeout_s)
        self._in_flight += 1
        # call_soon keeps the order of cuts, whichever thread cut.
        self._io.call_soon(self._enqueue, block)

    # == on the IO thread: linger, settling blocks, the hand-over ==========

    def _arm_linger(self, batch: OpenBatch) -> None:
        if self._idle_cut:
            with self._lock:
                if self.batch is not batch:
                    return
                if not self._in_flight:
                    # Nothing in flight, so no acknowledgement will come to cut this
                    # batch: lingering would only add latency. This runs on the IO
                    # thread once the caller let go of the GIL (it blocked, or ran its
                    # switch interval), so what the caller wrote in one go meanwhile is
                    # in the batch already. With blocks out, the next acknowledgement
                    # cuts it: cutting at once whenever the pipe had room (measured)
                    # made blocks per second follow the caller's sends (625/s at
                    # 10k events/s in groups of 16) and the broker's and bookie's work
                    # per block raised the end-to-end median more than it saved.
                    self._cut_locked()
                    return
        self._io.loop.call_later(self._linger_s, self._linger_expired, batch)

    def _linger_expired(self, batch: OpenBatch) -> None:
        with self._lock:
            if self.batch is not batch:
                return
            if self._in_flight < self._max_in_flight:
                self._cut_locked()
            # else: the next acknowledgement cuts it (``_complete``)

    def _fail_unsent(self, outcome: BlockOutcome, error: BaseException) -> None:
        self._on_error(error)
        outcome.set_error(error)

    def hand_over(self, begin: Callable[[], tuple[Forward, Callable[[], None]]]) -> None:
        """Sends the events not written before the seal on to the successors; IO thread.

        No block is cut from now on; then (once the blocks cut before are
        queued here) under the caller-side lock, in order: ``begin()`` gives
        ``forward`` (the new routing) and ``publish`` (making it current);
        every event of the blocks left, then of the open batch, goes through
        ``forward`` and its block's outcome is forwarded to the new futures;
        ``publish`` runs; later ``append`` calls go to ``forward``. Nothing of
        this segment's keys can slip in between.
        """
        with self._lock:
            self._handing = True
        # After the _enqueue of every block cut so far (call_soon keeps order).
        self._io.call_soon(self._move, begin)

    def _move(self, begin: Callable[[], tuple[Forward, Callable[[], None]]]) -> None:
        blocks = self._flow.take_over()  # the flow leaves its stream
        with self._lock:
            forward, publish = begin()
            for block in blocks:
                block.done = True
                decoded = decode_block(block.data)
                block.outcome.forward(resend(forward, decoded.payloads, decoded.routing_keys,
                                              decoded.timestamps_ms, decoded.headers))
            batch, self.batch = self.batch, None
            if batch is not None:
                batch.outcome.forward(resend(
                    forward, batch.payloads, [] if batch.keyless else batch.keys,
                    batch.timestamps, batch.headers or []))
            publish()
            self._redirect = forward
            self._in_flight = 0
            self._notify_locked()

    # == the flow (IO thread) ==================================================

    def _enqueue(self, block: Block) -> None:
        error = self._flow.submit(block, closing=self._closed)
        if error is not None:
            self._complete(block, error=error)

    def _release(self) -> None:
        self._flow.release()

    def _sealed(self) -> None:
        if self._on_sealed is not None:
            self._on_sealed(self)

    def fail(self, error: FolioError) -> None:
        """The segment is sealed for good (no successors) or they cannot be found: fail all."""
        self._flow.fail(error)

    # The stream's calls on the flow (``AppendFlow``), passed to the engine the
    # writer holds: the stream calls the engine itself; tests drive it here.

    def on_reply(self, reply: append_pb2.AppendReply) -> None:
        """A reply to one of the flow's commands (``FlowEngine.on_reply``)."""
        self._flow.engine.on_reply(reply)

    def on_stream_ready(self) -> None:
        """The stream (re)opened (``FlowEngine.on_stream_ready``)."""
        self._flow.engine.on_stream_ready()

    def on_stream_lost(self, error: FolioError) -> None:
        """The stream broke (``FlowEngine.on_stream_lost``)."""
        self._flow.engine.on_stream_lost(error)

    def on_tick(self, now: float) -> None:
        """Periodic (``FlowEngine.on_tick``): blocks past their deadline fail."""
        self._flow.engine.on_tick(now)

    def _complete(self, block: Block, *, offset: int = -1,
                  error: BaseException | None = None) -> None:
        if block.done:
            return
        block.done = True
        metrics = self._metrics
        if error is not None:
            self._on_error(error)
            block.outcome.set_error(error)
            if metrics is not None:
                metrics.failed(error)
        else:
            block.outcome.set_result(offset)
            if metrics is not None:  # the deadline is the cut time + the delivery timeout
                metrics.acknowledged(block.event_count, len(block.data), time.monotonic()
                                     - block.deadline + self._delivery_timeout_s)
        with self._lock:
            self._in_flight -= 1
            batch = self.batch
            # A block came back, so there is room in the pipe and the broker is through
            # with its predecessor: lingering on would only add latency. Cutting on
            # every acknowledgement keeps as many blocks in flight as there were (the
            # batch fills while they are out), so a block waits about a round trip
            # over that number, not the linger timer.
            if batch is not None:
                self._cut_locked()
            self._notify_locked()
