"""Waking a segment's long polls: one event per wake-up, replaced when it fires.

``ReadWakeup`` is the part of a ``LedgerSegment`` that owns the event its
readers wait on (``wait_for_data``). The append pipeline wakes it when the
end moves (once per confirmed run of entries, not per event), the life cycle
when a seal makes the end final or the segment leaves this broker. Each
wake-up sets the current event and puts a fresh one in its place, so a waiter
wakes at most once per wake-up and then checks the offsets itself.
"""

from __future__ import annotations

import asyncio
import time

from broker.metrics import observe_read_wake

__all__ = ["ReadWakeup"]


class ReadWakeup:
    """The event readers of one segment wait on (a part of ``LedgerSegment``)."""

    def __init__(self) -> None:
        self._event = asyncio.Event()
        self._woken_at = 0.0  # perf_counter of the last wake (folio_read_wake_seconds)

    def wake(self) -> None:
        """Wake every reader waiting now (a later ``wait`` waits for the next wake-up)."""
        self._woken_at = time.perf_counter()
        self._event.set()
        self._event = asyncio.Event()

    async def wait(self, timeout_s: float) -> bool:
        """Wait for the next wake-up, at most ``timeout_s``; whether it came.

        Check the condition before calling: a wake-up before the call is not seen.
        """
        event = self._event
        try:
            async with asyncio.timeout(timeout_s):
                await event.wait()
        except TimeoutError:
            return False
        observe_read_wake(time.perf_counter() - self._woken_at)
        return True
