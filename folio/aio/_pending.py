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

    __slots__ = ("_acks", "_error", "_placed_in", "_waiter")

    def __init__(self, acks: Acks, placed_in: tuple[BlockOutcome, int] | None) -> None:
        self._acks = acks
        #: The event's block outcome and index there; None while it waits in the backlog.
        self._placed_in = placed_in
        #: Its failure before it reached a block (withdrawn, too large, closed).
        self._error: BaseException | None = None
        #: The future the awaiting coroutine sleeps on, made when awaited.
        self._waiter: asyncio.Future[None] | None = None

    def done(self) -> bool:
        """Whether the event was acknowledged or failed for good (or withdrawn)."""
        if self._error is not None:
            return True
        placed_in = self._placed_in
        return placed_in is not None and placed_in[0].done

    def cancelled(self) -> bool:
        """Whether the event was withdrawn from the backlog (``cancel``): never sent."""
        return isinstance(self._error, asyncio.CancelledError)

    def cancel(self) -> bool:
        """Withdraws the event if it still waits in the writer's backlog; True if it did.

        An event already in a batch is written whatever the caller does (False).
        """
        if self._placed_in is not None or self._error is not None:
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
        placed_in = self._placed_in
        if placed_in is None or not placed_in[0].done:
            raise asyncio.InvalidStateError("the write is not done yet")
        outcome, index = placed_in
        result = outcome.outcome_of(index)  # (done: no lock, no wait)
        if isinstance(result, BaseException):
            raise result
        return result

    def exception(self) -> BaseException | None:
        """The failure once done, else None (raises ``InvalidStateError`` while pending)."""
        if not self.done():
            raise asyncio.InvalidStateError("the write is not done yet")
        if self._error is not None:
            return self._error
        assert self._placed_in is not None
        outcome, index = self._placed_in
        result = outcome.outcome_of(index)
        return result if isinstance(result, BaseException) else None

    def __await__(self) -> Generator[Any, None, WriteResult]:
        if not self.done():
            waiter = self._waiter
            if waiter is None or waiter.done():
                waiter = self._waiter = self._acks.loop.create_future()
                if self._placed_in is not None:
                    self._acks.watch(self._placed_in[0], self)
                # (else: in the backlog; the writer watches it once it reaches a block)
            try:
                yield from waiter
            except asyncio.CancelledError:
                # The awaiting coroutine was cancelled: an event still in the backlog
                # is withdrawn (never sent); one in a block is written all the same.
                self.cancel()
                raise
        return self.result()

    def _placed(self, placed_in: tuple[BlockOutcome, int]) -> None:
        """The event left the backlog for a block (the writer's drain)."""
        self._placed_in = placed_in
        if self._waiter is not None and not self._waiter.done():
            self._acks.watch(placed_in[0], self)

    def _fail(self, error: BaseException) -> None:
        """The event failed before reaching a block."""
        self._error = error
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def __repr__(self) -> str:
        state = "done" if self.done() else "waiting" if self._placed_in is None else "pending"
        return f"<PendingWrite {state}>"


class Acks:
    """Wakes the awaited writes of each block in one pass when the block is done.

    Runs on the writer's loop only (block outcomes are settled there: the
    loop is the flows' IO).
    """

    __slots__ = ("_watched", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        #: Block -> the awaited writes of its events.
        self._watched: dict[BlockOutcome, list[PendingWrite]] = {}

    def watch(self, outcome: BlockOutcome, pending: PendingWrite) -> None:
        """Wakes ``pending`` when the block of ``outcome`` is done (at once if it is)."""
        watched = self._watched.get(outcome)
        if watched is not None:
            watched.append(pending)
            return
        self._watched[outcome] = [pending]
        # One callback per block (it runs at once if the block is done).
        outcome.add_callback(self._settle(outcome), WriteFuture(outcome, 0))

    def _settle(self, outcome: BlockOutcome) -> Callable[[WriteFuture], None]:
        def settle(_done: WriteFuture) -> None:
            for pending in self._watched.pop(outcome, ()):
                pending._wake()
        return settle
