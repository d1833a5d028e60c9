"""One Append stream per connection, shared by every writer's flows (PDP-36).

Each segment a writer appends to is a *flow* with its own flow id. Commands
carry ``request_id = flow_id << 32 | sequence`` and replies are routed back to
their flow by ``request_id >> 32``, so one bidirectional stream carries all of
a client's appends. The stream lives on the IO thread: one task writes queued
commands, one reads replies. When the stream breaks (the broker restarts, the
connection drops) every flow hears ``on_stream_lost``; the stream reconnects
with backoff (50 ms doubling to 2 s, ended early when the channel turns READY:
``folio._transport.liveness.wait_to_reconnect``) and tells every flow
``on_stream_ready``, upon which each flow sets itself up again and resends what
was not acknowledged. A ticker calls every flow's ``on_tick`` ten times a second so
flows can give up on blocks past their delivery deadline.

**Progress.** The stream knows which commands await a reply (a
``SetupAppend``, a block with ``end``: the broker answers each, the others only
when it refuses them). When some do and no reply at all has come for
``PROGRESS_TIMEOUT_S``, the broker is taken as silent (up, but answering
nothing: ``folio._transport.liveness``): the ticker cuts the stream, every flow
hears ``on_stream_lost`` and the stream opens again, as after any break.

Flow ids are unique per stream (a connection of the client's pool, see
``folio._transport.pool``): they count up from 1, wrap below 2**32 and skip ids still in
use. Sequences are the low 32 bits, masked whole, and wrap to 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from typing import TYPE_CHECKING, Final, Protocol

import grpc
from grpc import aio

from folio._status import error_from_rpc
from folio._transport.liveness import PROGRESS_TIMEOUT_S, wait_to_reconnect
from folio.api.v1 import append_pb2
from folio.errors import FolioError, FolioUnavailableError

if TYPE_CHECKING:
    from folio.api.v1.append_pb2_grpc import AppendAsyncStub

__all__ = ["BACKOFF_MAX_S", "BACKOFF_MIN_S", "AppendFlow", "AppendStream", "Backoff",
           "FlowSource"]

log = logging.getLogger(__name__)

#: First reconnect / retry delay.
BACKOFF_MIN_S: Final = 0.05
#: Longest reconnect / retry delay.
BACKOFF_MAX_S: Final = 2.0
#: How often flows are asked to expire blocks past their deadline.
TICK_S: Final = 0.1

_SEQUENCE_MASK: Final = (1 << 32) - 1
#: The largest flow id: request ids are ``flow_id << 32 | sequence`` in 64 bits.
_MAX_FLOW_ID: Final = (1 << 32) - 1


class Backoff:
    """Delays that double from ``min_s`` (``BACKOFF_MIN_S``) to ``max_s``; ``reset`` starts over.

    Each delay is drawn between half its step and the whole (equal jitter): the
    clients of a broker that went away all retry at once otherwise, in step,
    against the broker that takes its segments over.
    """

    __slots__ = ("_max_s", "_min_s", "_next")

    def __init__(self, max_s: float = BACKOFF_MAX_S, *, min_s: float = BACKOFF_MIN_S) -> None:
        self._min_s = min_s
        self._next = min_s
        self._max_s = max(max_s, min_s)

    def next_delay(self) -> float:
        """The delay to wait now, in [step / 2, step]; the next step is twice as long
        (up to the cap)."""
        step = self._next
        self._next = min(step * 2, self._max_s)
        return step * random.uniform(0.5, 1.0)  # jitter, not a secret

    def reset(self) -> None:
        """After a success: the next delay is the shortest again."""
        self._next = self._min_s


class AppendFlow(Protocol):
    """What the stream calls on a flow; every call comes on the IO thread."""

    #: The segment the flow appends to (the client routes it to the segment's owner).
    segment: str

    def on_reply(self, reply: append_pb2.AppendReply) -> None:
        """A reply to one of the flow's commands."""

    def on_stream_ready(self) -> None:
        """The stream is (again) open: set up and resend."""

    def on_stream_lost(self, error: FolioError) -> None:
        """The stream broke; commands sent on it may or may not have arrived."""

    def on_tick(self, now: float) -> None:
        """Periodic: ``now`` is ``time.monotonic()``."""


class FlowSource(Protocol):
    """Where a flow gets its stream: one ``AppendStream``, or the client's pool of them."""

    def open_flow(self, flow: AppendFlow) -> tuple[AppendStream, int]:
        """Registers ``flow`` on a stream (IO thread); returns the stream and the flow id."""


class AppendStream:
    """The shared Append stream of one connection. IO thread only."""

    def __init__(self, stub: AppendAsyncStub,
                 progress_timeout_s: float = PROGRESS_TIMEOUT_S, *,
                 channel: aio.Channel | None = None, backoff: Backoff | None = None) -> None:
        """Makes the stream object; the gRPC stream opens with the first flow.

        Args:
            stub: the Append stub of ``channel``.
            progress_timeout_s: cut the stream after this long without any
                reply while commands await one (see "Progress").
            channel: the stub's channel: a reconnect waits for it to turn
                READY rather than for the whole backoff (None: the backoff).
            backoff: the reconnect backoff (tests give a long one).
        """
        self._stub = stub
        self._channel = channel
        self._backoff = backoff or Backoff()
        self._progress_timeout_s = progress_timeout_s
        #: Request ids of the commands sent on this stream that await a reply.
        self._awaiting: set[int] = set()
        #: ``time.monotonic()`` of the last reply, or of the first command awaited since.
        self._progress_at = 0.0
        #: Why the ticker cut the stream (None: it did not).
        self._stalled: FolioUnavailableError | None = None
        self._flows: dict[int, AppendFlow] = {}
        self._sequences: dict[int, int] = {}
        self._next_flow_id = 1
        self._queue: asyncio.Queue[append_pb2.AppendCommand] | None = None
        self._task: asyncio.Task[None] | None = None
        self._ticker: asyncio.Task[None] | None = None
        self._closed = False
        self._call: aio.StreamStreamCall[append_pb2.AppendCommand,
                                         append_pb2.AppendReply] | None = None
        self.connected = False
        #: How many times the stream broke (and was opened again) so far.
        self.restarts = 0
        #: How many times the gRPC stream was opened (the first time and after each break).
        self.attempts = 0
        #: Reopenings that did not wait the backoff out: the channel turned READY first.
        self.ready_wakeups = 0
        #: How the broken stream waits to open again: ``"channel"`` (until the
        #: channel turns READY, at most the backoff), ``"backoff"`` (the whole
        #: backoff), ``""`` (it is not waiting).
        self.reconnect_wait = ""

    # -- flows --------------------------------------------------------------

    @property
    def flow_count(self) -> int:
        """How many flows are registered."""
        return len(self._flows)

    def open_flow(self, flow: AppendFlow) -> tuple[AppendStream, int]:
        """``register`` as a ``FlowSource``: this stream and the new flow id."""
        return self, self.register(flow)

    def register(self, flow: AppendFlow) -> int:
        """Adds a flow; returns its flow id. The flow hears ``on_stream_ready`` when open."""
        if self._closed:
            raise FolioUnavailableError("the client's append stream is closed")
        if len(self._flows) >= _MAX_FLOW_ID:
            raise FolioUnavailableError("no free flow id on this append stream")
        flow_id = self._next_flow_id
        while flow_id in self._flows:  # after a wrap, ids still in use are skipped
            flow_id = flow_id % _MAX_FLOW_ID + 1
        self._next_flow_id = flow_id % _MAX_FLOW_ID + 1
        self._flows[flow_id] = flow
        self._sequences[flow_id] = 0
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())
            if self._ticker is None:
                self._ticker = asyncio.get_running_loop().create_task(self._tick())
        elif self.connected:
            asyncio.get_running_loop().call_soon(flow.on_stream_ready)
        return flow_id

    def unregister(self, flow_id: int) -> None:
        """Removes a flow; later replies to it are dropped."""
        self._flows.pop(flow_id, None)
        self._sequences.pop(flow_id, None)

    def send(self, flow_id: int, command: append_pb2.AppendCommand) -> int | None:
        """Queues ``command`` for the flow, setting its request id.

        Returns:
            The command's sequence number, or None when the stream is not
            connected (nothing is sent; the flow resends on ``on_stream_ready``).
        """
        if not self.connected or self._queue is None:
            return None
        previous = self._sequences.get(flow_id)
        if previous is None:
            return None  # not (or no longer) registered
        sequence = (previous + 1) & _SEQUENCE_MASK
        self._sequences[flow_id] = sequence
        command.request_id = flow_id << 32 | sequence
        if command.HasField("setup_append") or command.append_block.end:
            if not self._awaiting:
                self._progress_at = time.monotonic()
            self._awaiting.add(command.request_id)
        self._queue.put_nowait(command)
        return sequence

    # -- the stream ---------------------------------------------------------

    async def _run(self) -> None:
        backoff = self._backoff
        # Whether the stream was last opened because its channel turned READY.
        woke_on_ready = False
        while not self._closed:
            self.attempts += 1
            replied = False
            call = self._stub.Append(None)  # commands go in with call.write
            queue: asyncio.Queue[append_pb2.AppendCommand] = asyncio.Queue()
            writer = asyncio.get_running_loop().create_task(self._write(call, queue))
            self._queue = queue
            self._call = call
            self._awaiting.clear()
            self._stalled = None
            self.connected = True
            for flow in list(self._flows.values()):
                flow.on_stream_ready()
            error: FolioError
            try:
                async for reply in call:
                    replied = True
                    backoff.reset()
                    self._awaiting.discard(reply.request_id)
                    self._progress_at = time.monotonic()
                    target = self._flows.get(reply.request_id >> 32)
                    if target is not None:
                        target.on_reply(reply)
                error = FolioUnavailableError("the broker ended the append stream")
            except grpc.RpcError as rpc_error:
                error = self._stalled or error_from_rpc(rpc_error)
                if not isinstance(rpc_error, aio.AioRpcError) or \
                        rpc_error.code() != grpc.StatusCode.CANCELLED or self._stalled:
                    log.info("append stream to the broker broke: %s", error)
            except asyncio.CancelledError:
                # The ticker cancels the call of a silent broker (the read then
                # raises CancelledError, the task itself is not cancelled).
                stalled = self._stalled
                task = asyncio.current_task()
                if stalled is None or self._closed or (task is not None and task.cancelling()):
                    writer.cancel()
                    call.cancel()
                    raise
                error = stalled
                log.info("append stream to the broker cut: %s", error)
            finally:
                self.connected = False
                self._queue = None
                self._call = None
            writer.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await writer
            call.cancel()
            if self._closed:
                return
            self.restarts += 1
            for flow in list(self._flows.values()):
                flow.on_stream_lost(error)
            if not self._flows:
                # Every flow left (in a cluster, for their segments' owners): no
                # redialling a broker that may be gone; the next flow opens it again.
                self._task = None
                return
            woke_on_ready = await self._wait_to_reopen(
                on_ready=replied or not woke_on_ready)

    async def _wait_to_reopen(self, *, on_ready: bool) -> bool:
        """After a break: the backoff, or less when the channel turns READY (``on_ready``).

        The first attempt once a cut connection or a stopped broker is back
        goes at once, not up to 2 s later. The caller passes ``on_ready``
        False for a stream that was opened that way and broke again before
        any reply (a broker that accepts connections and drops them): it
        waits the whole backoff, so nothing is retried in a tight loop. True
        when the wait ended because the channel turned READY.
        """
        channel = self._channel
        self.reconnect_wait = "channel" if on_ready and channel is not None else "backoff"
        try:
            woke = await wait_to_reconnect(channel, self._backoff.next_delay(),
                                           on_ready=on_ready)
        finally:
            self.reconnect_wait = ""
        if woke:
            self.ready_wakeups += 1
        return woke

    @staticmethod
    async def _write(call: aio.StreamStreamCall[append_pb2.AppendCommand,
                                                append_pb2.AppendReply],
                     queue: asyncio.Queue[append_pb2.AppendCommand]) -> None:
        while True:
            command = await queue.get()
            try:
                await call.write(command)
            except (grpc.RpcError, asyncio.InvalidStateError):
                return  # the reading side sees the failure and reconnects

    async def _tick(self) -> None:
        while not self._closed:
            await asyncio.sleep(TICK_S)
            now = time.monotonic()
            if self._awaiting and self._call is not None and self._stalled is None and \
                    now - self._progress_at > self._progress_timeout_s:
                self._stalled = FolioUnavailableError(
                    f"no reply from the broker for {self._progress_timeout_s:g} s while "
                    f"{len(self._awaiting)} commands awaited one (it is up but silent)")
                self._call.cancel()
            for flow in list(self._flows.values()):
                try:
                    flow.on_tick(now)
                except Exception:
                    log.exception("append flow tick failed")

    async def close(self) -> None:
        """Ends the stream for good (flows should have been unregistered)."""
        self._closed = True
        self.connected = False
        for task in (self._task, self._ticker):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        # Let go of the channel (``Connection.close`` says why: a fork after close).
        self._call = None
        self._channel = None
        vars(self).pop("_stub", None)
