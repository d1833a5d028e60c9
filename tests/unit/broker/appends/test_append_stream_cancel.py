"""A cancelled Append stream ends cancelled, and its abandoned command read ends with it.

When the broker stops, the stream stops reading commands: the read is
cancelled and awaited. A cancellation of the stream's own task in that
moment (the call going away as the broker stops) must end the stream, not
be taken for the read's end and swallowed; the read is cancelled either way.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from broker.appends.held import HeldBudget
from broker.appends.stream import AppendEngine, Command, SetupCommand


async def test_the_stream_task_cancelled_while_its_read_winds_down_ends_cancelled() -> None:
    reading = asyncio.Event()
    read_cancelled = asyncio.Event()
    read_may_end = asyncio.Event()

    async def commands() -> AsyncIterator[Command]:
        reading.set()
        try:
            await asyncio.Event().wait()  # the client sends nothing, until cancelled
        finally:
            read_cancelled.set()
            await read_may_end.wait()  # the transport takes a while to let go
        yield SetupCommand(1 << 32, "t/0", "w", None)  # pragma: no cover (never reached)

    stopping = asyncio.Event()
    topics: Any = None
    stream = AppendEngine(topics, stopping, HeldBudget())
    pump = asyncio.ensure_future(stream.pump(commands()))
    await asyncio.wait_for(reading.wait(), 30)
    stopping.set()  # the broker stops: the read is abandoned
    await asyncio.wait_for(read_cancelled.wait(), 30)
    pump.cancel()  # and the stream's own task is cancelled meanwhile
    read_may_end.set()
    await asyncio.wait((pump,), timeout=30)
    assert pump.cancelled()


async def test_a_stop_ends_the_stream_with_true() -> None:
    async def commands() -> AsyncIterator[Command]:
        await asyncio.Event().wait()
        yield SetupCommand(1 << 32, "t/0", "w", None)  # pragma: no cover (never reached)

    stopping = asyncio.Event()
    topics: Any = None
    stream = AppendEngine(topics, stopping, HeldBudget())
    pump = asyncio.ensure_future(stream.pump(commands()))
    stopping.set()
    assert await asyncio.wait_for(pump, 30) is True
    assert await stream.next_outcome() is None
