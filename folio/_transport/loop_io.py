"""The caller's running event loop as the IO of ``folio.aio`` (no thread of its own).

The SDK's parts (segment writers and their flows, read streams, transactions)
hand work to "the IO": ``call_soon`` (per block, per response), ``submit``
(a coroutine, not waited for), ``loop.call_later`` (linger, retries). For the
blocking face that is an :class:`~folio._transport.io_thread.IoThread`; for the
asyncio face it is :class:`LoopIo`, the loop the application already runs, so
the same parts run there unchanged and the caller's side of them (appending
to a batch, taking a response off a queue) is on the same thread as their IO
side. ``EventLoopIo`` is what both give.

Nothing may block on a ``LoopIo``: ``run`` (the blocking face's wait) raises,
as ``IoThread.run`` does when called from its own thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

if TYPE_CHECKING:
    from folio._transport.io_thread import IoThread

__all__ = ["EventLoopIo", "LoopIo", "as_io_thread"]

R = TypeVar("R")


class EventLoopIo(Protocol):
    """Where the SDK's parts run their IO: one event loop, and how to reach it."""

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The loop the channels, streams and flows live on."""

    @property
    def in_io_thread(self) -> bool:
        """Whether the caller runs on the loop's thread."""

    def run(self, coro: Coroutine[Any, Any, R], timeout: float | None = None) -> R:
        """Runs ``coro`` on the loop and waits (from another thread only)."""

    def submit(self, coro: Coroutine[Any, Any, R]) -> concurrent.futures.Future[R]:
        """Runs ``coro`` on the loop without waiting; cancelling the future cancels it."""

    def call_soon(self, callback: Callable[..., object], *args: object) -> None:
        """Runs ``callback(*args)`` on the loop soon, in the order of the calls."""


class LoopIo:
    """The running loop of the thread that made it (``folio.aio.AsyncClient``'s)."""

    def __init__(self) -> None:
        """Takes the running loop.

        Raises:
            RuntimeError: no loop is running in this thread.
        """
        self.loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()

    @property
    def in_io_thread(self) -> bool:
        """Whether the caller runs on the loop's thread."""
        return threading.get_ident() == self._thread

    def run(self, coro: Coroutine[Any, Any, R], timeout: float | None = None) -> R:
        """Refuses: a blocking wait on the loop's own thread would never end."""
        coro.close()
        raise RuntimeError("a blocking Folio call cannot run on the event loop of a "
                           "folio.aio client: await its coroutine instead")

    def submit(self, coro: Coroutine[Any, Any, R]) -> concurrent.futures.Future[R]:
        """Runs ``coro`` as a task of the loop; its future, as ``IoThread.submit``'s.

        The task starts on the loop's next turn; cancelling the future cancels it.
        """
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def call_soon(self, callback: Callable[..., object], *args: object) -> None:
        """Runs ``callback(*args)`` on the loop soon (after every call queued before)."""
        if self.in_io_thread:
            self.loop.call_soon(callback, *args)
        else:
            self.loop.call_soon_threadsafe(callback, *args)


def as_io_thread(io: EventLoopIo) -> IoThread:
    """``io`` where the SDK's parts are annotated with ``IoThread``.

    Those parts use only what ``EventLoopIo`` names (checked by mypy on both
    classes in ``tests/unit/folio/aio/test_loop_io.py``); their annotations
    keep the concrete class while the write flows are being rewritten into one
    engine (issue 28, item 1), and take the protocol then.
    """
    return cast("IoThread", io)
