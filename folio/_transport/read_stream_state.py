"""What ``SegmentStreams`` keeps of one segment's Read stream, its credit, and its queue.

A stream's *credit* is its window of responses queued for the caller and not
yet taken: the IO side acquires one before it queues a response, the caller's
take gives it back (on the IO thread). ``free + queued == size`` at every
moment on the IO thread, whatever the stream does (reconnects, moves), so at
most ``size`` responses of one segment are ever held.
"""

from __future__ import annotations

import asyncio
import queue
from collections.abc import Callable
from concurrent.futures import Future
from typing import TypeVar

__all__ = ["Credit", "ReadStreamState", "SignallingQueue"]

Item = TypeVar("Item")


class SignallingQueue(queue.Queue[Item]):
    """The streams' queue for the caller; ``on_put``, if set, is called after each put.

    On the putting thread, holding the queue's lock: it must only signal (the
    asyncio face sets an ``asyncio.Event``, its loop being the putting thread).
    """

    on_put: Callable[[], None] | None = None

    def signal_to(self, signal: Callable[[], None]) -> SignallingQueue[Item]:
        """Calls ``signal()`` after each put from now on; returns the queue."""
        self.on_put = signal
        return self

    def _put(self, item: Item) -> None:
        super()._put(item)
        if self.on_put is not None:
            self.on_put()


class Credit:
    """``size`` permits; :meth:`acquire` waits for a free one. IO thread only."""

    def __init__(self, size: int) -> None:
        self.size = size
        #: Permits not held by a queued response.
        self.free = size
        self._freed = asyncio.Event()

    async def acquire(self) -> None:
        """Takes a permit, waiting for one (cancelling the wait takes none)."""
        while self.free == 0:
            self._freed.clear()
            await self._freed.wait()
        self.free -= 1

    def release(self) -> None:
        """Gives a permit back."""
        self.free += 1
        self._freed.set()


class ReadStreamState:
    """One segment's stream: its token, position, end, task and credit."""

    __slots__ = ("credit", "ended", "position", "queued", "task", "token")

    def __init__(self, token: int, position: int) -> None:
        self.token = token
        self.position = position
        self.ended = False
        self.credit: Credit | None = None
        self.task: Future[None] | None = None
        #: Responses queued for the caller and not yet taken (IO thread only).
        self.queued = 0

    def give_back(self) -> None:
        """The caller took one of the stream's responses: its credit is free again (IO thread)."""
        self.queued -= 1
        if self.credit is not None:
            self.credit.release()
