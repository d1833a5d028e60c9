"""``LoopIo``: the caller's loop as the SDK's IO, and the protocol both IOs give."""

from __future__ import annotations

import asyncio
import threading

import pytest

from folio._transport.io_thread import IoThread
from folio._transport.loop_io import EventLoopIo, LoopIo


def test_the_io_thread_and_the_loop_are_both_event_loop_ios() -> None:
    io: EventLoopIo = IoThread("folio-io-test")  # (mypy checks that both conform)
    try:
        assert not io.in_io_thread
    finally:
        io.close()  # type: ignore[attr-defined]  # IoThread's own, not the protocol's


def test_a_loop_io_needs_a_running_loop() -> None:
    with pytest.raises(RuntimeError):
        LoopIo()


async def test_call_soon_keeps_order_and_submit_runs_a_task() -> None:
    io: EventLoopIo = LoopIo()
    assert io.in_io_thread and io.loop is asyncio.get_running_loop()
    seen: list[str] = []
    io.call_soon(seen.append, "first")

    async def second() -> str:
        seen.append("second")
        return "done"

    future = io.submit(second())
    io.call_soon(seen.append, "third")
    assert await asyncio.wrap_future(future) == "done"
    # call_soon keeps the order of the calls; a submitted coroutine's task
    # starts on a later turn (as on the IO thread).
    assert seen == ["first", "third", "second"]


async def test_call_soon_from_another_thread_reaches_the_loop() -> None:
    io = LoopIo()
    arrived = asyncio.Event()
    thread = threading.Thread(target=io.call_soon, args=(arrived.set,))
    thread.start()
    async with asyncio.timeout(10):
        await arrived.wait()
    thread.join()
    assert not await asyncio.to_thread(lambda: io.in_io_thread)


async def test_cancelling_a_submitted_coroutine_cancels_its_task() -> None:
    io = LoopIo()
    started = asyncio.Event()
    cancelled = asyncio.Event()

    async def forever() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    future = io.submit(forever())
    async with asyncio.timeout(10):
        await started.wait()
        future.cancel()
        await cancelled.wait()
    assert future.cancelled()


async def test_blocking_on_the_loop_is_refused() -> None:
    async def nothing() -> None:
        return None

    with pytest.raises(RuntimeError, match="await its coroutine"):
        LoopIo().run(nothing())
