"""The client's IO: one background thread running an asyncio loop, and its channel.

Every gRPC call of a :class:`folio.Client` runs on ``grpc.aio`` inside one
event loop on one daemon thread (:class:`IoThread`). The blocking API hands
work to it with :meth:`IoThread.run` (a coroutine, waited for) or
:meth:`IoThread.call_soon` (a function, not waited for) — once per block or
per response, never per event. The asyncio face (``folio.aio``) runs the same
parts on the caller's loop instead (``folio._transport.loop_io.LoopIo``, the
same ``EventLoopIo`` interface), with no thread.

A :class:`Connection` is one channel (one TCP connection) with its stubs and
its one shared Append stream; a client holds a bounded pool of them
(``folio._transport.pool``, PDP-36) and gives each new flow the least busy one.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import logging
import threading
import weakref
from collections.abc import Callable, Coroutine
from typing import Any, Final, TypeVar

from folio._transport.append_stream import AppendStream
from folio._transport.fork import check_not_forked
from folio._transport.liveness import CHANNEL_KEEPALIVE
from folio.api.v1 import (
    admin_pb2_grpc,
    append_pb2_grpc,
    groups_pb2_grpc,
    read_pb2_grpc,
    transactions_pb2_grpc,
)
from folio.errors import FolioError, TimeoutError
from folio.security import PLAIN, ChannelSecurity

__all__ = ["CHANNEL_OPTIONS", "Connection", "IoThread"]

log = logging.getLogger(__name__)

R = TypeVar("R")

#: Messages up to 16 MiB both ways (blocks are at most 4 MiB; reads ~1 MiB).
#: Each channel keeps its own subchannels (its own TCP connection): gRPC would
#: otherwise share one connection between channels with the same target and
#: options, and a pool of N channels would be one connection. Redialling backs
#: off like the SDK's own retries (at most 2 s, not gRPC's default 120 s), so a
#: restarted broker is found again soon; a connection attempt may take 1 s to
#: its HTTP/2 handshake (gRPC's minimum connect timeout is the minimum backoff:
#: 100 ms failed busy brokers' handshakes on a loaded host). Keepalive PINGs
#: find a broker that is up but silent (stopped) within a few seconds
#: (``folio._transport.liveness``).
CHANNEL_OPTIONS: Final = (
    ("grpc.max_send_message_length", 16 * 1024 * 1024),
    ("grpc.max_receive_message_length", 16 * 1024 * 1024),
    ("grpc.use_local_subchannel_pool", 1),
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 1000),
    ("grpc.max_reconnect_backoff_ms", 2000),
    *CHANNEL_KEEPALIVE,
)


#: Seconds the interpreter's exit gives each IO thread still open to close its channels.
EXIT_TIMEOUT_S: Final = 5.0

#: IO threads not closed yet: closed at the interpreter's exit (``_close_at_exit``).
_OPEN: weakref.WeakSet[IoThread] = weakref.WeakSet()


class IoThread:
    """A daemon thread running one asyncio event loop until :meth:`close`.

    Closing runs ``on_close`` (the client's: closing its ``grpc.aio``
    channels) on the loop and waits for it *before* the loop stops and closes:
    a channel or call still open when its loop is closed (or frozen at the
    interpreter's exit, the thread being a daemon) leaves gRPC's completion
    queue poller with callbacks for a loop that is gone, which it reports as
    "RuntimeError: Event loop is closed" on stderr. A client the application
    never closed is closed the same way at the interpreter's exit (``atexit``),
    within ``EXIT_TIMEOUT_S``.
    """

    def __init__(self, name: str = "folio-io") -> None:
        """Starts the thread and its loop.

        Raises:
            ForkedProcessError: this process was forked while gRPC's asyncio
                state was alive in its parent (``folio._transport.fork``).
        """
        check_not_forked()
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._closed = False
        #: Run on the loop by ``close`` before the loop stops (at most once).
        self.on_close: Callable[[], Coroutine[Any, Any, None]] | None = None
        self._thread.start()
        _OPEN.add(self)

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
        finally:
            try:
                pending = [t for t in asyncio.all_tasks(self.loop) if not t.done()]
                for task in pending:
                    task.cancel()
                if pending:
                    self.loop.run_until_complete(
                        asyncio.gather(*pending, return_exceptions=True))
                self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            finally:
                self.loop.close()

    @property
    def in_io_thread(self) -> bool:
        """Whether the caller runs on this IO thread."""
        return threading.current_thread() is self._thread

    def run(self, coro: Coroutine[Any, Any, R], timeout: float | None = None) -> R:
        """Runs ``coro`` on the loop and waits for its result.

        Args:
            coro: the coroutine.
            timeout: seconds to wait, None for no limit; on expiry the
                coroutine is cancelled.

        Raises:
            TimeoutError: ``timeout`` passed.
            RuntimeError: called from the IO thread itself (it would deadlock),
                or after ``close``.
            Exception: whatever ``coro`` raises.
        """
        if self.in_io_thread:
            coro.close()
            raise RuntimeError("a blocking Folio call cannot run on the SDK's IO thread "
                               "(e.g. inside a write future's done callback)")
        if self._closed:
            coro.close()
            raise RuntimeError("the client's IO thread is closed")
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError as error:
            if future.done():
                # The coroutine's own (a builtins.TimeoutError: the same class):
                # a typed one as is, an asyncio.timeout's as a folio TimeoutError.
                if isinstance(error, FolioError):
                    raise
                raise TimeoutError(str(error) or "the call's own time limit passed") \
                    from error
            future.cancel()
            raise TimeoutError(f"no answer within {timeout} s") from None

    def submit(self, coro: Coroutine[Any, Any, R]) -> concurrent.futures.Future[R]:
        """Runs ``coro`` on the loop without waiting; returns its future."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def call_soon(self, callback: Callable[..., object], *args: object) -> None:
        """Runs ``callback(*args)`` on the loop soon; safe from any thread.

        Calls made from one thread run in the order they were made, and
        (from the IO thread too) after every call queued before them.
        """
        self.loop.call_soon_threadsafe(callback, *args)

    def close(self, timeout: float = 10.0) -> None:
        """Runs ``on_close`` on the loop, then stops the loop (cancelling its tasks) and joins.

        ``on_close`` failing or not finishing within ``timeout`` is logged:
        the loop is stopped anyway.
        """
        if self._closed:
            return
        on_close, self.on_close = self.on_close, None
        if on_close is not None and not self.in_io_thread:
            try:
                self.run(on_close(), timeout)
            except Exception as error:  # closing goes on: the loop must stop
                log.warning("closing the client's channels: %s", error)
        self._closed = True
        _OPEN.discard(self)
        with contextlib.suppress(RuntimeError):  # the loop closed already
            self.loop.call_soon_threadsafe(self.loop.stop)
        if not self.in_io_thread:
            self._thread.join(timeout)


@atexit.register
def _close_at_exit() -> None:
    """Closes the channels and loops of IO threads still open (clients never closed)."""
    for io in list(_OPEN):
        io.close(EXIT_TIMEOUT_S)


class Connection:
    """One ``grpc.aio`` channel to a broker, its stubs and its shared Append stream.

    Its *flows* are the append flows registered on its Append stream plus the
    Read streams running on it (``read_flows``). Made and used on the IO
    thread only.
    """

    def __init__(self, endpoint: str, index: int = 0,
                 security: ChannelSecurity = PLAIN) -> None:
        """Opens the channel (lazily connecting, as gRPC does).

        Args:
            endpoint: ``"host:port"``.
            index: its place in the client's pool.
            security: TLS and token of the client's channels.

        Raises:
            ForkedProcessError: as ``IoThread`` (``folio._transport.fork``).
        """
        check_not_forked()
        self.endpoint = endpoint
        self.index = index
        self.channel = security.channel(endpoint, list(CHANNEL_OPTIONS))
        self.admin = admin_pb2_grpc.AdminStub(self.channel)
        self.read = read_pb2_grpc.ReadStub(self.channel)
        self.transactions = transactions_pb2_grpc.TransactionsStub(self.channel)
        self.groups = groups_pb2_grpc.ReaderGroupsStub(self.channel)
        self.append_stream = AppendStream(append_pb2_grpc.AppendStub(self.channel),
                                          channel=self.channel)
        #: Read streams running on this channel.
        self.read_flows = 0

    @property
    def flows(self) -> int:
        """Append flows plus Read streams on this channel: how busy it is."""
        return self.append_stream.flow_count + self.read_flows

    @property
    def state(self) -> str:
        """The channel's gRPC connectivity: idle, connecting, ready, transient_failure, shutdown."""
        if "channel" not in vars(self):  # closed and let go of
            return "shutdown"
        return self.channel.get_state(try_to_connect=False).name.lower()

    async def close(self) -> None:
        """Ends the Append stream, closes the channel, then lets go of it and its stubs.

        Letting go matters after a fork (``folio._transport.fork``): gRPC's
        asyncio stack keeps process-wide state (a poller thread and a
        completion queue) for as long as any channel object lives, even a
        closed one, and a child forked with that state crashes in its first
        call. Stubs and the Append stream hold the channel's core object too.
        A closed client (still referenced by the application) thus holds no
        channel, and once every client is closed the state is shut down.
        """
        await self.append_stream.close()
        await self.channel.close(grace=None)
        for name in ("channel", "admin", "read", "transactions", "groups"):
            vars(self).pop(name, None)

