"""``cancel_and_wait`` ends a task that swallowed its first cancellation."""

from __future__ import annotations

import asyncio

import pytest

from ledger import tasks
from ledger.tasks import cancel_and_wait


async def test_a_task_that_swallows_a_cancellation_is_cancelled_again_until_it_ends(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tasks, "RECANCEL_AFTER_S", 0.01)
    swallowed = asyncio.Event()
    started = asyncio.Event()

    async def stubborn() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            swallowed.set()  # lost, as under a wait_for that finished at that moment
        await asyncio.Event().wait()  # goes on as if never cancelled (a loop's next sleep)

    task = asyncio.create_task(stubborn())
    await started.wait()
    await asyncio.wait_for(cancel_and_wait(task), 30)
    assert swallowed.is_set() and task.cancelled()


async def test_a_task_that_failed_raises_its_error_and_a_finished_one_nothing() -> None:
    async def failing() -> None:
        raise ValueError("broken")

    task = asyncio.create_task(failing())
    await asyncio.wait({task})
    with pytest.raises(ValueError, match="broken"):
        await cancel_and_wait(task)

    async def done() -> int:
        return 1

    finished = asyncio.create_task(done())
    await finished
    await cancel_and_wait(finished)
    assert finished.result() == 1
