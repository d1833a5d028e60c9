"""Issue 28, item 2: ``folio.aio`` reader groups against a real standalone.

Two async members share a topic's segments, one leaves and the other gets
them all, every event is read exactly once with checkpoints and positions
committed; a cancelled ``read`` loses nothing.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

import folio
from folio.aio import AsyncClient, AsyncGroupReader, AsyncReaderGroup
from tests.support.bookies import BookieProcess
from tests.support.wait import wait_for_async


async def _write(client: AsyncClient, topic: str, first: int, count: int) -> None:
    writer = await client.writer(topic)
    for n in range(first, first + count):
        await writer.write(b"%d" % n, routing_key=f"k{n}")
    await writer.close()


async def _take(reader: AsyncGroupReader[Any], got: list[bytes], count: int,
                segments: int = 0) -> None:
    """Reads (checkpoint events too) until ``got`` holds ``count`` payloads and the
    reader holds ``segments`` segments."""
    while len(got) < count or len(reader.segments) < segments:
        try:
            async with asyncio.timeout(0.2):
                read = await reader.read()
        except TimeoutError:
            continue
        assert read is not None
        if read.event is not None:
            got.append(read.event.payload)


async def test_two_members_share_then_one_takes_all(server: BookieProcess) -> None:
    async with AsyncClient(server.address, timeout_s=30) as client:
        await client.create_topic("aio-grp", segments=4)
        await _write(client, "aio-grp", 0, 200)
        group = await client.reader_group("aio-g", topics=["aio-grp"], sync_interval_ms=100)
        got: list[bytes] = []
        async with await group.reader("a") as a, await group.reader("b") as b:
            async def shared() -> bool:
                held = await group.assignment()
                return len(held.get("a", [])) == 2 and len(held.get("b", [])) == 2

            async def read_both() -> None:
                # Reading until each holds two segments and a checkpoint passed.
                async with asyncio.timeout(60):
                    checkpoint = asyncio.ensure_future(group.initiate_checkpoint("c1"))
                    while not (checkpoint.done() and await shared()):
                        for reader in (a, b):
                            try:
                                async with asyncio.timeout(0.2):
                                    read = await reader.read()
                            except TimeoutError:
                                continue
                            if read is not None and read.event is not None:
                                got.append(read.event.payload)
                    cut = await checkpoint
                    assert cut.name == "c1" and cut.positions

            await read_both()
            assert {len(a.segments), len(b.segments)} == {2}
            position_b = b.position
            await b.close()  # hands its segments back at its position
            assert position_b.reader_id == "b" and len(position_b.positions) == 2
            await wait_for_async(lambda: _only_a(group), "b's segments free")
            await _write(client, "aio-grp", 200, 100)  # on b's former segments too
            async with asyncio.timeout(60):
                await _take(a, got, 300, segments=4)
            assert sorted(a.segments) == [f"aio-grp/{n}" for n in range(4)]
        counted = Counter(got)
        assert sorted(counted) == sorted(b"%d" % n for n in range(300))
        assert set(counted.values()) == {1}, "an event read twice"
        assert [c.name for c in await group.checkpoints()] == ["c1"]
        assert await group.online_readers() == []
        await group.delete()
        with pytest.raises(folio.ReaderGroupNotFoundError):
            await client.reader_group("aio-g")


async def _only_a(group: AsyncReaderGroup) -> bool:
    return await group.online_readers() == ["a"]


async def test_a_cancelled_read_loses_nothing(server: BookieProcess) -> None:
    async with AsyncClient(server.address, timeout_s=30) as client:
        await client.create_topic("aio-grp-c", segments=2)
        group = await client.reader_group("aio-gc", topics=["aio-grp-c"], sync_interval_ms=100)
        got: list[bytes] = []
        async with await group.reader("r") as reader:
            for round_ in range(5):
                # A read waiting for events that are not there yet, cancelled.
                pending = asyncio.ensure_future(reader.read())
                for _ in range(3):
                    await asyncio.sleep(0)  # (it starts, and waits)
                pending.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await pending
                await _write(client, "aio-grp-c", round_ * 20, 20)
                async with asyncio.timeout(60):
                    await _take(reader, got, (round_ + 1) * 20)
            position = reader.position
        assert sorted(got) == sorted(b"%d" % n for n in range(100))
        assert len(got) == 100
        assert sum(position.positions.values()) == 100
        # Closing handed the segments back at its position: a new member starts there.
        await _write(client, "aio-grp-c", 100, 1)
        async with await group.reader("r2") as again:
            after: list[bytes] = []
            async with asyncio.timeout(60):
                await _take(again, after, 1)
            assert after == [b"100"]
        await group.delete()


async def test_read_many_lists_reads_with_their_positions(server: BookieProcess) -> None:
    async with AsyncClient(server.address, timeout_s=30) as client:
        await client.create_topic("aio-grp-m", segments=2)
        await _write(client, "aio-grp-m", 0, 150)
        group = await client.reader_group("aio-gm", topics=["aio-grp-m"], sync_interval_ms=100)
        got: list[bytes] = []
        expected = {"aio-grp-m/0": 0, "aio-grp-m/1": 0}
        async with await group.reader("m") as reader, asyncio.timeout(60):
            while len(got) < 150:
                reads = await reader.read_many(max_events=16)
                assert 1 <= len(reads) <= 16
                for read in reads:
                    assert read.event is not None or len(reads) == 1
                    if read.event is not None:
                        got.append(read.event.payload)
                        expected[read.event.segment] = read.event.offset + 1
                    assert dict(read.position.positions) == expected
            assert dict(reader.position.positions) == expected
        assert sorted(got) == sorted(b"%d" % n for n in range(150))
        await group.delete()


async def test_offline_reset_and_the_group_calls(server: BookieProcess) -> None:
    async with AsyncClient(server.address, timeout_s=30) as client:
        await client.create_topic("aio-grp-r", segments=2)
        await _write(client, "aio-grp-r", 0, 40)
        group = await client.reader_group("aio-gr", topics=["aio-grp-r"], sync_interval_ms=100,
                                          session_timeout_ms=5000)
        assert await group.session_timeout_ms() == 5000
        assert await group.waiting_segments() == {}
        first: list[bytes] = []
        r1 = await group.reader("r1")
        async with asyncio.timeout(60):
            await _take(r1, first, 10, segments=2)
        with pytest.raises(folio.ReaderIdInUseError, match="last heard from"):
            await group.reader("r1")
        described = await group.describe()
        assert described.name == "aio-gr" and described.session_timeout_ms == 5000
        assert [m.reader_id for m in described.members] == ["r1"]
        assert sorted(lag.segment for lag in described.members[0].segments) == \
            ["aio-grp-r/0", "aio-grp-r/1"]
        with pytest.raises(folio.ReaderGroupNotEmptyError):
            await group.reset("earliest", only_if_empty=True)
        # Declared offline at the position of its last event: nothing after it read twice.
        await group.reader_offline("r1", r1.position)
        await r1.close()  # (out of the group already: nothing to hand back)
        assert await group.online_readers() == []
        rest: list[bytes] = []
        async with await group.reader("r2") as r2:
            async with asyncio.timeout(60):
                await _take(r2, rest, 30)
        assert sorted(first + rest) == sorted(b"%d" % n for n in range(40))
        await group.reset("earliest", only_if_empty=True)  # empty now: from the start again
        again: list[bytes] = []
        async with await group.reader("r3") as r3:
            async with asyncio.timeout(60):
                await _take(r3, again, 40)
        assert sorted(again) == sorted(b"%d" % n for n in range(40))
        # Kafka-style moves of the (empty) group's positions: at the ends now.
        ends = {lag.segment: lag.position for lag in (await group.describe()).unassigned}
        assert sum(ends.values()) == 40
        assert await group.move_positions("offset", 0, dry_run=True) == dict.fromkeys(ends, 0)
        assert await group.reset("earliest", dry_run=True) == dict.fromkeys(ends, 0)
        moved = await group.move_positions("shift", -5)
        assert moved == {segment: max(0, end - 5) for segment, end in ends.items()}
        assert {lag.segment: lag.position
                for lag in (await group.describe()).unassigned} == moved
        await client.delete_reader_group("aio-gr")


async def test_closing_the_client_closes_its_members(server: BookieProcess) -> None:
    async with AsyncClient(server.address, timeout_s=30) as client:
        await client.create_topic("aio-grp-x")
        group = await client.reader_group("aio-gx", topics=["aio-grp-x"])
        assert "aio-gx" in await client.list_reader_groups()
        member = await group.reader("left-open")
        assert await group.online_readers() == ["left-open"]
    assert member.closed
    async with AsyncClient(server.address, timeout_s=30) as other:
        again = await other.reader_group("aio-gx")
        assert await again.online_readers() == []  # it left at close, no session timeout
        await again.delete()
        assert "aio-gx" not in await other.list_reader_groups()
