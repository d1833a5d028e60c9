"""``folio.aio`` single-routing-key transactions against a real standalone, on the test's loop.

Committed transactions are read whole, aborted ones never; a cancelled wait
for a commit leaves the commit to finish whole exactly once; the writer's
flow is released on close.
"""

from __future__ import annotations

import asyncio

import pytest

import folio
from folio.aio import AsyncClient
from tests.support.bookies import BookieProcess
from tests.support.wait import wait_for_async


async def test_commit_abort_and_async_with(server: BookieProcess) -> None:
    async with AsyncClient(server.address, timeout_s=30) as client:
        await client.create_topic("aio-txn", segments=2)
        async with await client.single_routing_key_txn_writer("aio-txn", "k") as writer:
            txn = writer.begin()
            txn.write(b"a1")
            txn.write(b"a2")
            result = await txn.commit()
            assert result.event_count == 2
            dropped = writer.begin()
            dropped.write(b"never")
            dropped.abort()
            with pytest.raises(folio.TxnStateError):
                dropped.commit_nowait()
            async with writer.begin() as third:
                third.write(b"b1")
            with pytest.raises(RuntimeError):
                async with writer.begin() as failed:
                    failed.write(b"never either")
                    raise RuntimeError("the body failed: aborted")
            last = writer.begin()
            last.write(b"c1")
            future = last.commit_nowait()
            await writer.flush()
            assert future.done() and future.result().event_count == 1
        reader = await client.reader("aio-txn")
        got: list[bytes] = []
        async with asyncio.timeout(30):
            async for event in reader:
                got.append(event.payload)
                if event.payload == b"c1":
                    break
        reader.close()
        assert got == [b"a1", b"a2", b"b1", b"c1"]


async def test_a_cancelled_commit_wait_still_commits_once(server: BookieProcess) -> None:
    async with AsyncClient(server.address, timeout_s=30) as client:
        await client.create_topic("aio-txn-cancel")
        writer = await client.single_routing_key_txn_writer("aio-txn-cancel", "k")
        txn = writer.begin()
        for i in range(100):
            txn.write(b"%d" % i)
        waiting = asyncio.ensure_future(txn.commit())
        await asyncio.sleep(0)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        await writer.flush()  # the commit itself went on
        sentinel = writer.begin()
        sentinel.write(b"sentinel")
        end = await sentinel.commit()
        await writer.close()
        info = await client.get_segment_info(end.segment)
        assert info.segment.end_offset == 101  # whole, once, then the sentinel

        async def released() -> bool:
            return client.pool_stats().flows == 0

        await wait_for_async(released, "the transaction writer's flow released")
