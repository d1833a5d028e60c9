"""Appends behind a rollover: they wait in call order, and fail with a rollover that failed.

``RolloverGate`` is the part of a ``LedgerSegment`` that owns the order of the
appends that must wait for a rollover (the open ledger too big or too old, or
a switch to a new ledger under way). Once one append waits, every later one
queues behind it, so a later block never overtakes an earlier one: it would
take its offset, or make it look a duplicate. When a rollover fails, the
appends queued before the failure fail with it rather than roll over again
and land after it: a flow's blocks land as a prefix of those sent.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator

__all__ = ["RolloverGate"]


class RolloverGate:
    """Appends queued behind a rollover, the switch under way (a part of ``LedgerSegment``)."""

    def __init__(self) -> None:
        self._switching: asyncio.Future[None] | None = None
        # Appends waiting, in call order, behind a rollover.
        self._lock = asyncio.Lock()
        self._queued = 0
        # Rollovers that failed so far, and the last one's error: an append
        # queued behind a failed rollover fails with it.
        self._failures = 0
        self._error: Exception | None = None

    @property
    def switching(self) -> bool:
        """A switch to a new ledger is under way."""
        return self._switching is not None

    @property
    def busy(self) -> bool:
        """Appends wait, or a switch is under way: a new append must queue."""
        return self._queued > 0 or self._switching is not None

    @contextlib.asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        """This append's turn, after every append queued before it.

        Raises the error of a rollover that failed while it waited: landing
        this one would put a writer's later block after an earlier one that
        did not land.
        """
        self._queued += 1
        failures = self._failures
        try:
            async with self._lock:
                if self._failures != failures and self._error is not None:
                    # A rollover failed while this append waited, failing the
                    # appends queued before it: landing this one would put a
                    # writer's later block after an earlier one that did not
                    # land (a flow's blocks land as a prefix of those sent).
                    raise self._error
                yield
        finally:
            self._queued -= 1

    async def wait_switch(self) -> bool:
        """Wait for the switch under way, if any; whether there was one."""
        switching = self._switching
        if switching is None:
            return False
        await asyncio.shield(switching)
        return True

    def failed(self, error: Exception) -> None:
        """A rollover an append waited for failed: the appends queued now fail with it."""
        self._failures += 1
        self._error = error

    @contextlib.contextmanager
    def switch(self) -> Iterator[None]:
        """A switch to a new ledger, from entering to leaving (appends queue meanwhile)."""
        switched: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._switching = switched
        try:
            yield
        finally:
            self._switching = None
            switched.set_result(None)
