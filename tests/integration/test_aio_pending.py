"""``folio.aio``'s ``PendingWrite`` against a real standalone.

What ``send`` and ``write_nowait`` return: awaitable (once or more, or made
a task), answering without waiting once done, and withdrawable while its
event waits in the writer's backlog (then never sent, the others written
exactly once). And keyless events spread over the topic's segments from one
loop, as from the blocking face (they move on once a segment's batch was cut).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

from folio.aio import AsyncClient, AsyncEventReader, PendingWrite
from folio.errors import WriterClosedError
from folio.models import WriteResult
from tests.support.bookies import BookieProcess


async def _read_until(reader: AsyncEventReader[Any], last: bytes) -> list[bytes]:
    """Payloads read (within 30 s) up to and with ``last``."""
    got: list[bytes] = []
    async with asyncio.timeout(30):
        async for event in reader:
            got.append(event.payload)
            if event.payload == last:
                return got
    raise AssertionError("the reader ended")


async def test_a_pending_write_awaited_twice_or_as_a_task(server: BookieProcess) -> None:
    async with AsyncClient(server.address, timeout_s=30) as client:
        await client.create_topic("aio-pending", segments=2)
        writer = await client.writer("aio-pending")
        pending = writer.write_nowait(b"a", routing_key="k")
        sent = await writer.send(b"b", routing_key="k")
        assert isinstance(pending, PendingWrite) and isinstance(sent, PendingWrite)
        first = await pending
        assert await pending == first  # again: at once, the same answer
        assert pending.done() and pending.result() == first and pending.exception() is None
        second = await asyncio.ensure_future(sent)  # a task, for gather/wait
        assert isinstance(second, WriteResult)
        assert (second.segment, second.offset) == (first.segment, first.offset + 1)
        # Never awaited: done all the same once flushed, and answers without waiting.
        quiet = [writer.write_nowait(b"%d" % i, routing_key="k") for i in range(20)]
        with pytest.raises(asyncio.InvalidStateError):
            quiet[-1].result()
        await writer.flush()
        assert [p.result().offset for p in quiet] == \
            list(range(first.offset + 2, first.offset + 22))
        assert not quiet[0].cancel()  # written: nothing to withdraw
        await writer.close()
        with pytest.raises(WriterClosedError):
            writer.write_nowait(b"late")


async def test_withdrawn_writes_are_never_sent(server: BookieProcess) -> None:
    async with AsyncClient(server.address, timeout_s=30) as client:
        await client.create_topic("aio-withdraw")
        # A tiny pipe: one block of one event at a time, the rest wait in the backlog.
        writer = await client.writer("aio-withdraw", max_in_flight=1, batch_size_bytes=1)
        pending = [writer.write_nowait(b"%d" % i) for i in range(200)]
        withdrawn = {b"%d" % i for i, p in enumerate(pending) if i % 2 and p.cancel()}
        assert withdrawn  # most were still waiting
        last = await writer.write(b"last")
        await writer.flush()
        for i, p in enumerate(pending):
            assert p.done()
            if b"%d" % i in withdrawn:
                assert p.cancelled()
                with pytest.raises(asyncio.CancelledError):
                    p.result()
            else:
                assert not p.cancelled() and p.result().offset < last.offset
        await writer.close()
        reader = await client.reader("aio-withdraw")
        counts = Counter(await _read_until(reader, b"last"))
        reader.close()
        assert all(n == 1 for n in counts.values()), "an event written twice"
        assert not withdrawn & set(counts), "a withdrawn event was sent"
        assert set(counts) == {b"%d" % i for i in range(200)} - withdrawn | {b"last"}


async def test_keyless_events_spread_over_the_segments(server: BookieProcess) -> None:
    async with AsyncClient(server.address, timeout_s=30) as client:
        await client.create_topic("aio-spread", segments=4)
        async with await client.writer("aio-spread") as writer:
            # Each write waits for its acknowledgement: its batch is cut on the loop
            # (nothing else in flight), not by the writer filling it; the next keyless
            # event moves on to the next segment all the same ("after each block").
            for i in range(40):
                await writer.write(b"%d" % i)
        ends = [(await client.get_segment_info(f"aio-spread/{n}")).segment.end_offset
                for n in range(4)]
        assert sum(ends) == 40
        assert all(ends), ends
