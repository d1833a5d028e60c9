"""One event written by ``folio.aio``: awaitable, with no asyncio future of its own.

A :class:`PendingWrite` is what ``AsyncEventWriter.send`` and ``write_nowait``
return. It holds the event's place once the event is in a batch: its block's
shared outcome and its index there (``folio.write._write_future``; no
``WriteFuture`` of its own), or nothing while it waits in the writer's backlog. Making an
``asyncio.Future`` per event cost more than the rest of the write; so a
pending write makes one only when a coroutine awaits it (``await pending``,
which ``writer.write`` does), and the writer wakes a block's awaiting writes
in one pass when the block is done (``Acks``), one callback per block.

Awaiting needs that one future per awaiting coroutine: a coroutine cancelled
while it waits must be woken alone, at once, and asyncio cancels what the
task awaits (a future shared by a block would wake all its writers).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Generator
from typing import Any

from folio.models import WriteResult
from folio.write._write_future import BlockOutcome, WriteFuture

__all__ = ["Acks", "PendingWrite"]


class PendingWrite:
    """The outcome of one event written by ``AsyncEventWriter``: ``await`` it for its result.

    ``await pending`` returns the event's ``WriteResult`` once the broker
    acknowledged it (or raises its error, as ``writer.write`` does); ``done``,
    ``result`` and ``exception`` ask without waiting; ``cancel`` withdraws an
    event still waiting in the writer's backlog (it is then never sent).
    ``asyncio.ensure_future(pending)`` gives an ``asyncio.Future`` when one is
    needed (``asyncio.gather``, ``asyncio.wait``).
    """

    __slots__ = ("_acks", "_error", "_index", "_outcome", "_waiter")

    def __init__(self, acks: Acks, placed_in: tuple[BlockOutcome, int] | None) -> None:
        self._acks = acks
        #: The event's block outcome and its index there (kept apart: a tuple kept
        #: alive per event would be one more object for the garbage collector to
        #: traverse); None and -1 while it waits in the backlog.
        self._outcome: BlockOutcome | None = None
        self._index = -1
        if placed_in is not None:
            self._outcome, self._index = placed_in
        #: Its failure before it reached a block (withdrawn, too large, closed).
        self._error: BaseException | None = None
        #: The future the awaiting coroutine sleeps on, made when awaited.
        self._waiter: asyncio.Future[None] | None = None

    def done(self) -> bool:
        """Whether the event was acknowledged or failed for good (or withdrawn)."""
        if self._error is not None:
            return True
        outcome = self._outcome
        return outcome is not None and outcome.done

    def cancelled(self) -> bool:
        """Whether the event was withdrawn from the backlog (``cancel``): never sent."""
        return isinstance(self._error, asyncio.CancelledError)

    def cancel(self) -> bool:
        """Withdraws the event if it still waits in the writer's backlog; True if it did.

        An event already in a batch is written whatever the caller does (False).
        """
        if self._outcome is not None or self._error is not None:
            return False
        self._fail(asyncio.CancelledError())
        return True

    def result(self) -> WriteResult:
        """The event's segment and offset (-1 for a block answered as a duplicate).

        Raises:
            asyncio.InvalidStateError: not done yet (``await`` it instead).
            asyncio.CancelledError: it was withdrawn.
            FolioError: the write failed.
        """
        if self._error is not None:
            raise self._error
        outcome = self._outcome
        if outcome is None or not outcome.done:
            raise asyncio.InvalidStateError("the write is not done yet")
        result = outcome.outcome_of(self._index)  # (done: no lock, no wait)
        if isinstance(result, BaseException):
            raise result
        return result

    def exception(self) -> BaseException | None:
        """The failure once done, else None (raises ``InvalidStateError`` while pending)."""
        if not self.done():
            raise asyncio.InvalidStateError("the write is not done yet")
        if self._error is not None:
            return self._error
        assert self._outcome is not None
        result = self._outcome.outcome_of(self._index)
        return result if isinstance(result, BaseException) else None

    def __await__(self) -> Generator[Any, None, WriteResult]:
        waiter = self._waiter_until_done()
        if waiter is not None:
            try:
                yield from waiter
            except asyncio.CancelledError:
                # The awaiting coroutine was cancelled: an event still in the backlog
                # is withdrawn (never sent); one in a block is written all the same.
                self.cancel()
                raise
        return self.result()

    def _waiter_until_done(self) -> asyncio.Future[None] | None:
        """A future set once the write is done (made and watched if need be); None if
        it is done. ``__await__`` sleeps on it, and so does ``AsyncEventWriter.write``
        (directly: no generator per write), withdrawing the event if cancelled."""
        outcome = self._outcome
        if self._error is not None or (outcome is not None and outcome.done):
            return None
        waiter = self._waiter
        if waiter is None or waiter.done():
            waiter = self._waiter = self._acks.loop.create_future()
            if outcome is not None:
                self._acks.watch(outcome, waiter)
            # (else: in the backlog; the writer watches it once it reaches a block)
        return waiter

    def _placed(self, placed_in: tuple[BlockOutcome, int]) -> None:
        """The event left the backlog for a block (the writer's drain)."""
        self._outcome, self._index = placed_in
        if self._waiter is not None and not self._waiter.done():
            self._acks.watch(placed_in[0], self._waiter)

    def _fail(self, error: BaseException) -> None:
        """The event failed before reaching a block."""
        self._error = error
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def __repr__(self) -> str:
        state = "done" if self.done() else "waiting" if self._outcome is None else "pending"
        return f"<PendingWrite {state}>"


class Acks:
    """Wakes the awaited writes of each block in one pass when the block is done.

    Runs on the writer's loop only (block outcomes are settled there: the
    loop is the flows' IO).
    """

    __slots__ = ("_watched", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        #: Block -> the futures its events' awaiting writes sleep on.
        self._watched: dict[BlockOutcome, list[asyncio.Future[None]]] = {}

    def watch(self, outcome: BlockOutcome, waiter: asyncio.Future[None]) -> None:
        """Sets ``waiter`` (an awaiting write's) when the block of ``outcome`` is done
        (at once if it is), unless it is done by then (cancelled)."""
        watched = self._watched.get(outcome)
        if watched is not None:
            watched.append(waiter)
            return
        self._watched[outcome] = [waiter]
        # One callback per block (it runs at once if the block is done).
        outcome.add_callback(self._settle(outcome), WriteFuture(outcome, 0))

    def _settle(self, outcome: BlockOutcome) -> Callable[[WriteFuture], None]:
        def settle(_done: WriteFuture) -> None:
            for waiter in self._watched.pop(outcome, ()):
                if not waiter.done():
                    waiter.set_result(None)
        return settle
