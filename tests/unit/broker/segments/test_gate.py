"""RolloverGate alone: appends queue in call order and fail with a rollover that failed."""

from __future__ import annotations

import asyncio

import pytest

from broker.segments.gate import RolloverGate
from ledger.errors import NotEnoughBookiesError


async def test_queued_appends_take_their_turns_in_call_order() -> None:
    gate = RolloverGate()
    holding = asyncio.Event()
    release = asyncio.Event()
    order: list[int] = []

    async def append(number: int) -> None:
        async with gate.turn():
            if number == 0:
                holding.set()
                await release.wait()  # the first holds its turn: the rest queue
            order.append(number)

    tasks = [asyncio.create_task(append(0))]
    await holding.wait()
    tasks += [asyncio.create_task(append(number)) for number in range(1, 4)]
    await asyncio.sleep(0)  # (a yield, not a wait) each queues behind the first
    assert gate.busy and order == []
    release.set()
    await asyncio.gather(*tasks)
    assert order == [0, 1, 2, 3]
    assert not gate.busy


async def test_a_failed_rollover_fails_the_appends_queued_before_it_not_later_ones() -> None:
    gate = RolloverGate()
    error = NotEnoughBookiesError("a ledger of ensemble size 3 needs 3 bookies, 2 available")
    holding = asyncio.Event()
    release = asyncio.Event()

    async def first() -> None:
        async with gate.turn():
            holding.set()
            await release.wait()
            gate.failed(error)  # its rollover failed
            raise error

    async def queued() -> None:
        async with gate.turn():
            pytest.fail("an append queued behind a failed rollover must not go on")

    head = asyncio.create_task(first())
    await holding.wait()
    behind = asyncio.create_task(queued())
    await asyncio.sleep(0)  # it queues behind the first
    release.set()
    results = await asyncio.gather(head, behind, return_exceptions=True)
    assert list(results) == [error, error]
    async with gate.turn():  # a later append, queued after the failure, goes on
        pass
    assert not gate.busy


async def test_a_switch_makes_appends_queue_and_wakes_them_when_done() -> None:
    gate = RolloverGate()
    assert not await gate.wait_switch()
    with gate.switch():
        assert gate.switching and gate.busy
        waiter = asyncio.create_task(gate.wait_switch())
        await asyncio.sleep(0)
        assert not waiter.done()
    assert await waiter
    assert not gate.switching and not gate.busy


async def test_a_switch_that_raises_still_ends() -> None:
    gate = RolloverGate()
    with pytest.raises(RuntimeError), gate.switch():
        raise RuntimeError("no writer")
    assert not gate.switching
