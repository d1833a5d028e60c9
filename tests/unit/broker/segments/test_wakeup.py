"""ReadWakeup alone: a wake-up wakes the waiters of the moment, once."""

from __future__ import annotations

import asyncio

from broker.segments.wakeup import ReadWakeup


async def test_a_wake_up_wakes_every_waiter_of_the_moment() -> None:
    wakeup = ReadWakeup()
    waiters = [asyncio.create_task(wakeup.wait(60)) for _ in range(3)]
    await asyncio.sleep(0)  # they wait now
    wakeup.wake()
    assert await asyncio.gather(*waiters) == [True, True, True]


async def test_a_wake_up_before_the_wait_is_not_seen() -> None:
    wakeup = ReadWakeup()
    wakeup.wake()
    assert await wakeup.wait(0.01) is False  # the caller checks its condition first


async def test_a_waiter_after_a_wake_up_waits_for_the_next() -> None:
    wakeup = ReadWakeup()
    first = asyncio.create_task(wakeup.wait(60))
    await asyncio.sleep(0)
    wakeup.wake()
    assert await first
    second = asyncio.create_task(wakeup.wait(60))
    await asyncio.sleep(0)
    assert not second.done()
    wakeup.wake()
    assert await second
