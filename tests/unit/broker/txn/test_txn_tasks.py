"""BackgroundTasks alone: work that runs to its end whoever waits for it."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest

from broker.txn._tasks import BackgroundTasks
from tests.support.wait import wait_for_async


async def test_run_to_end_outlives_a_cancelled_caller() -> None:
    tasks = BackgroundTasks()
    release = asyncio.Event()
    done: list[str] = []

    async def work() -> str:
        await release.wait()
        done.append("work")
        return "result"

    caller = asyncio.create_task(tasks.run_to_end(work()))

    async def started() -> bool:
        return len(tasks) == 1

    await wait_for_async(started, "the work under way")
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    assert len(tasks) == 1  # the work goes on without its caller
    release.set()
    await tasks.wait()
    assert done == ["work"]
    assert len(tasks) == 0


async def test_the_caller_still_there_gets_the_result_or_the_error() -> None:
    tasks = BackgroundTasks()

    async def answer() -> int:
        return 7

    async def fail() -> None:
        raise ValueError("injected")

    assert await tasks.run_to_end(answer()) == 7
    with pytest.raises(ValueError, match="injected"):
        await tasks.run_to_end(fail())
    assert len(tasks) == 0


async def test_an_error_nobody_waits_for_is_not_reported_as_unretrieved() -> None:
    tasks = BackgroundTasks()
    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    try:
        async def fail() -> None:
            raise ValueError("injected")

        tasks.start_to_end(fail())  # nobody awaits it

        async def ended() -> bool:
            return len(tasks) == 0

        await wait_for_async(ended, "the failed work ended")
        gc.collect()
    finally:
        loop.set_exception_handler(previous)
    assert reported == []


async def test_cancel_stops_what_is_under_way_and_wait_returns() -> None:
    tasks = BackgroundTasks()
    forever = asyncio.Event()
    spawned = [tasks.spawn(forever.wait()) for _ in range(3)]
    assert len(tasks) == 3
    tasks.cancel()
    await tasks.wait()  # no error: the outcomes are gathered
    assert all(task.cancelled() for task in spawned)
    assert len(tasks) == 0
    await tasks.wait()  # nothing under way: returns at once
