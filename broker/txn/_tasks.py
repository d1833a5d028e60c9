"""The coordinator's background work: tasks that run to their end whoever waits for them.

A commit or abort must not stop halfway because the call that asked for it
went away (a connection cut cancels its handler): stopped after its
COMMITTING record, the transaction would stay COMMITTING without markers
until a restart, and read_committed readers would wait at it. So that work,
the timeout aborts, the retries of failed finishing steps and the decisions
a replay drives on all run as tasks of one ``BackgroundTasks``: ``wait``
(the coordinator's ``close``) waits for them, ``cancel`` (its
``stand_down``) cancels them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Coroutine
from typing import Any, TypeVar

__all__ = ["BackgroundTasks"]

T = TypeVar("T")


class BackgroundTasks:
    """The tasks a coordinator started and did not see end yet."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Future[Any]] = set()

    def __len__(self) -> int:
        return len(self._tasks)

    def spawn(self, work: Awaitable[T]) -> asyncio.Task[T]:
        """``work`` as a task of this set (dropped from it once done)."""
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def start_to_end(self, work: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        """``work`` as a task that runs to its end whoever waits for it (``run_to_end``).

        Its error, if nobody is left to take it, is marked as seen: the caller
        that is still there raises it.
        """
        task = self.spawn(work)
        task.add_done_callback(_retrieve)
        return task

    async def run_to_end(self, work: Coroutine[Any, Any, T]) -> T:
        """``work``, run to its end even when the caller is cancelled (module docstring).

        The caller that is still there gets the result or the error; ``wait``
        waits for the work of callers that went away.
        """
        return await asyncio.shield(self.start_to_end(work))

    def cancel(self) -> None:
        """Cancel every task under way (their owner stands down)."""
        for task in list(self._tasks):
            task.cancel()

    async def wait(self) -> None:
        """Wait until every task under way now has ended, whatever its outcome."""
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)


def _retrieve(task: asyncio.Future[Any]) -> None:
    """Mark the error of work whose caller went away as seen (the caller still there raises it)."""
    if not task.cancelled():
        task.exception()
