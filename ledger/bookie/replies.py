"""Handing a group commit's results to the event loops that wait for them: one wake-up each.

The storage's writer thread completes every operation of a group commit at
once. A completion that belongs to an asyncio future (``LoopReply``, what
``ledger.bookie.bookie.Bookie`` submits) is not handed over one by one:
``complete`` gathers them per event loop and makes **one**
``call_soon_threadsafe`` per loop and group commit, which settles every
future of the batch in one callback. One thread hop, one self-pipe write
and one loop wake-up per group commit, instead of one per add request.

The time from the commit's end to that callback running (the hop to the
event loop, and the loop's queue before it) is ``folio_bookie_ack_seconds``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable
from typing import Any

from ledger import metrics
from ledger.bookie.ops import Done
from ledger.errors import LedgerError

__all__ = ["LoopReply", "complete"]

log = logging.getLogger(__name__)


class LoopReply:
    """A completion callback that settles ``future`` on its own event loop."""

    __slots__ = ("future", "loop")

    def __init__(self, future: asyncio.Future[Any]) -> None:
        self.future = future
        self.loop = future.get_loop()

    def __call__(self, result: object) -> None:
        """Complete alone (failures outside a group commit)."""
        complete(((self, result),))


def _settle(future: asyncio.Future[Any], result: object) -> None:
    if not future.done():
        if isinstance(result, LedgerError):
            future.set_exception(result)
        else:
            future.set_result(result)


def _settle_all(replies: list[tuple[asyncio.Future[Any], object]], ended: float) -> None:
    metrics.observe_ack(time.perf_counter() - ended)
    for future, result in replies:
        _settle(future, result)


def complete(replies: Iterable[tuple[Done, object]]) -> None:
    """Call each ``done`` with its result; ``LoopReply``s with one hop per event loop.

    Runs on the storage's only writer thread, which must never raise: if a
    caller's loop closed meanwhile, nobody awaits those results any more.
    """
    by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Any], object]]] = {}
    for done, result in replies:
        if isinstance(done, LoopReply):
            by_loop.setdefault(done.loop, []).append((done.future, result))
        else:
            done(result)
    ended = time.perf_counter()
    for loop, settled in by_loop.items():
        try:
            loop.call_soon_threadsafe(_settle_all, settled, ended)
        except RuntimeError:
            log.debug("dropping %d storage results for a closed event loop", len(settled))
