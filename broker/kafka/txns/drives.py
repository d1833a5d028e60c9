"""Background drives: one task per key, retrying a step with backoff until it reports done.

``TxnProducers`` drives a decided transaction's record (its offsets) to its
end this way; the part owns its tasks, and ``cancel_all`` stops them (the
coordinator moved: whoever takes over drives them again from the records).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

__all__ = ["Drives"]


class Drives:
    """At most one task per key, each calling ``step(key, next_delay_s)`` until it returns True.

    Args:
        step: one attempt; True: done (the task ends), False: again after a delay.
        first_s: the delay before the first attempt, doubled after each one...
        max_s: ...up to this.
    """

    def __init__(self, step: Callable[[str, float], Awaitable[bool]], first_s: float,
                 max_s: float) -> None:
        self._step = step
        self._first_s = first_s
        self._max_s = max_s
        self._tasks: dict[str, asyncio.Task[None]] = {}

    def start(self, key: str) -> None:
        """Drive ``key`` unless it is driven already."""
        if key in self._tasks:
            return
        task = asyncio.get_running_loop().create_task(self._run(key))
        self._tasks[key] = task
        task.add_done_callback(lambda done: self._tasks.pop(key, None)
                               if self._tasks.get(key) is done else None)

    def cancel_all(self) -> None:
        """Cancel every drive (not waited for)."""
        for task in self._tasks.values():
            task.cancel()
        self._tasks.clear()

    async def _run(self, key: str) -> None:
        delay_s = self._first_s
        while True:
            await asyncio.sleep(delay_s)
            delay_s = min(delay_s * 2, self._max_s)
            if await self._step(key, delay_s):
                return
