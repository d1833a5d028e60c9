"""Stopping a background task for sure: cancel it until it ends.

One ``task.cancel()`` can be lost: a ``CancelledError`` caught and not
raised again anywhere under the task (Python 3.11's ``asyncio.wait_for`` can
drop one when its inner call finishes at the same moment) leaves the task
running, and a ``close()`` awaiting it then waits for ever (seen as a broker
that never exited after SIGTERM, its group-liveness task "cancelling" but
asleep in its loop). ``cancel_and_wait`` cancels again every second until
the task is done.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, Final

__all__ = ["cancel_and_wait"]

#: How long to wait for a cancelled task before cancelling it again.
RECANCEL_AFTER_S: Final = 1.0


async def cancel_and_wait(task: asyncio.Task[Any]) -> None:
    """Cancel ``task`` (again while it runs) and wait for its end.

    Its cancellation is not raised here; any other exception it ended with is.
    """
    while not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=RECANCEL_AFTER_S)
    with contextlib.suppress(asyncio.CancelledError):
        await task
