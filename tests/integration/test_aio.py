"""Issue 28, item 2: ``folio.aio`` against a real standalone, on the test's own event loop.

Admin calls with the blocking face's errors and reconciliation, writes that
return when acknowledged, futures, a 1,000-coroutine fan-in, ``async for``
reads, and cancellation: a cancelled write is written once or never (never
twice), an acknowledged one always; a cancelled read loses nothing; closing
leaves no flow open on the client's channels.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from typing import Any

import pytest

import folio
from folio.aio import AsyncClient, AsyncEventReader
from folio.api.v1 import admin_pb2
from folio.models import WriteResult
from tests.support.bookies import BookieProcess
from tests.support.proxy import TcpProxy
from tests.support.wait import wait_for_async


async def _read_all(reader: AsyncEventReader[Any], count: int) -> list[bytes]:
    """``count`` events' payloads (within 30 s), in the order read."""
    got: list[bytes] = []
    async with asyncio.timeout(30):
        async for event in reader:
            got.append(event.payload)
            if len(got) == count:
                break
    return got


async def test_admin_calls_raise_the_blocking_faces_errors(server: BookieProcess) -> None:
    async with AsyncClient(server.address, timeout_s=30) as client:
        info = await client.create_topic("aio-admin", segments=3)
        assert [s.name for s in info.segments] == [s.name for s in
                                                    await client.get_segments("aio-admin")]
        assert "aio-admin" in [t.name for t in await client.list_topics()]
        with pytest.raises(folio.TopicExistsError):
            await client.create_topic("aio-admin")
        assert (await client.create_topic("aio-admin", exist_ok=True)).name == "aio-admin"
        updated = await client.update_topic_config("aio-admin", retention_ms=3_600_000)
        assert updated.config.retention_ms == 3_600_000
        await client.delete_topic("aio-admin")
        with pytest.raises(folio.TopicNotFoundError):
            await client.get_topic("aio-admin")
        with pytest.raises(folio.TopicNotFoundError):
            await client.writer("aio-admin")


async def test_a_create_whose_answer_is_lost_is_reconciled(server: BookieProcess) -> None:
    async with AsyncClient(server.address, timeout_s=30) as client:
        core = client._admin
        real = core._call
        lost: list[str] = []

        async def losing(method: Any, request: Any, *, retry: bool = False) -> Any:
            if isinstance(request, admin_pb2.CreateTopicRequest) and not lost:
                lost.append("create")
                await real(method, request, retry=retry)  # applied, its answer lost
                raise TimeoutError("no answer within 35.0 s")
            return await real(method, request, retry=retry)

        core._call = losing  # type: ignore[method-assign]
        info = await client.create_topic("aio-unknown", segments=2)
        assert lost == ["create"]
        assert len(info.segments) == 2


async def test_write_returns_when_acknowledged_and_reads_back(server: BookieProcess) -> None:
    async with AsyncClient(server.address, timeout_s=30) as client:
        await client.create_topic("aio-rw", segments=2)
        async with await client.writer("aio-rw", folio.StringSerializer()) as writer:
            first = await writer.write("a", routing_key="k")
            second = await writer.write("b", routing_key="k")
            assert isinstance(first, WriteResult)
            assert second.segment == first.segment and second.offset == first.offset + 1
            futures = [writer.write_nowait(f"n{i}", routing_key="k") for i in range(50)]
            sent = await writer.send("last", routing_key="k")
            await writer.flush()
            assert all(f.done() for f in futures) and sent.done()
            assert [f.result().offset for f in futures] == \
                list(range(first.offset + 2, first.offset + 52))
        assert writer.closed
        async with await client.reader("aio-rw", serializer=folio.StringSerializer()) as reader:
            values = [event.payload async for event in _take(reader, 53)]
        assert values == ["a", "b", *[f"n{i}" for i in range(50)], "last"]


async def _take(reader: AsyncEventReader[Any], count: int) -> Any:
    async with asyncio.timeout(30):
        async for event in reader:
            yield event
            count -= 1
            if not count:
                return


async def test_a_thousand_coroutines_fan_in(server: BookieProcess) -> None:
    async with AsyncClient(server.address, timeout_s=30) as client:
        await client.create_topic("aio-fanin", segments=4)
        writer = await client.writer("aio-fanin")
        results = await asyncio.gather(*(writer.write(b"%d" % i, routing_key=f"k{i % 16}")
                                         for i in range(1000)))
        positions = {(r.segment, r.offset) for r in results}
        assert len(positions) == 1000  # each acknowledged at its own place
        await writer.close()
        reader = await client.reader("aio-fanin")
        payloads = await _read_all(reader, 1000)
        assert sorted(payloads) == sorted(b"%d" % i for i in range(1000))


async def test_cancelled_writes_are_written_once_or_never(server: BookieProcess) -> None:
    async with AsyncClient(server.address, timeout_s=30) as client:
        await client.create_topic("aio-cancel-w")
        # A tiny pipe, so that most of the writes wait in the backlog when cancelled.
        writer = await client.writer("aio-cancel-w", max_in_flight=1, batch_size_bytes=1)
        tasks = [asyncio.ensure_future(writer.write(b"%d" % i)) for i in range(300)]
        await asyncio.sleep(0)  # (they start: some append, the rest wait for room)
        for task in tasks[::2]:
            task.cancel()
        outcomes = await asyncio.gather(*tasks, return_exceptions=True)
        acknowledged = {b"%d" % i for i, outcome in enumerate(outcomes)
                        if isinstance(outcome, WriteResult)}
        cancelled = {b"%d" % i for i, outcome in enumerate(outcomes)
                     if isinstance(outcome, asyncio.CancelledError)}
        assert len(acknowledged) + len(cancelled) == 300 and cancelled
        # The flow is not half-open: the writer goes on writing.
        sentinel = await writer.write(b"sentinel")
        await writer.close()
        reader = await client.reader("aio-cancel-w")
        read: list[bytes] = []
        async with asyncio.timeout(30):
            async for event in reader:
                read.append(event.payload)
                if event.offset == sentinel.offset:
                    break
        counts = Counter(read)
        assert all(n == 1 for n in counts.values()), "an event written twice"
        assert acknowledged <= set(counts), "an acknowledged event lost"
        assert set(counts) - {b"sentinel"} <= acknowledged | cancelled
        assert len(set(counts) & cancelled) < len(cancelled)  # some never sent at all
        reader.close()
        await _no_flows_left(client)


async def _no_flows_left(client: AsyncClient) -> None:
    async def none_left() -> bool:
        return client.pool_stats().flows == 0

    await wait_for_async(none_left, "every flow of the client released")


async def test_a_cancelled_read_loses_nothing(server: BookieProcess) -> None:
    async with AsyncClient(server.address, timeout_s=30) as client:
        await client.create_topic("aio-cancel-r")
        reader = await client.reader("aio-cancel-r")
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.2):
                await reader.read()  # nothing there yet: the wait is cancelled
        writer = await client.writer("aio-cancel-r")
        for i in range(3):
            await writer.write(b"%d" % i)
        pending = asyncio.ensure_future(reader.read())
        first = await pending
        assert first is not None and first.payload == b"0"
        assert await _read_all(reader, 2) == [b"1", b"2"]
        reader.close()
        assert await reader.read() is None
        await writer.close()
        await _no_flows_left(client)


async def test_read_many_hands_over_the_events_in_order(server: BookieProcess) -> None:
    async with AsyncClient(server.address, timeout_s=30) as client:
        await client.create_topic("aio-many")
        writer = await client.writer("aio-many")
        for i in range(300):
            writer.write_nowait(b"%d" % i)
        await writer.flush()
        reader = await client.reader("aio-many")
        got: list[bytes] = []
        async with asyncio.timeout(30):
            while len(got) < 300:
                events = await reader.read_many(max_events=64)
                assert 1 <= len(events) <= 64
                got += [event.payload for event in events]
        assert got == [b"%d" % i for i in range(300)]
        assert reader.positions == {"aio-many/0": 300}
        reader.close()
        assert await reader.read_many() == []
        await writer.close()


async def test_the_blocking_face_refuses_to_run_on_the_loop(server: BookieProcess) -> None:
    async with AsyncClient(server.address, timeout_s=30) as client:
        async def nothing() -> None:
            return None

        with pytest.raises(RuntimeError, match="await its coroutine"):
            client._io.run(nothing())


def test_an_async_client_needs_a_running_loop(server: BookieProcess) -> None:
    with pytest.raises(RuntimeError):
        AsyncClient(server.address)


async def test_both_faces_see_the_same_topic(server: BookieProcess) -> None:
    async with AsyncClient(server.address, timeout_s=30) as client:
        await client.create_topic("aio-faces")
        writer = await client.writer("aio-faces")
        written = await writer.write(b"async")
        await writer.close()
    got: list[bytes] = []

    def blocking() -> None:  # the blocking face, from a thread of its own
        with folio.Client(server.address, timeout_s=30) as blocking_client, \
                blocking_client.reader("aio-faces") as reader:
            event = reader.read_next(30)
            assert event is not None and event.offset == written.offset
            got.append(event.payload)

    thread = threading.Thread(target=blocking)
    thread.start()
    await asyncio.to_thread(thread.join, 60)
    assert got == [b"async"]


async def test_a_client_refuses_another_loop(server: BookieProcess) -> None:
    async with AsyncClient(server.address, timeout_s=30) as client:
        await client.create_topic("aio-loops", exist_ok=True)

        def elsewhere() -> None:  # another thread, another loop
            with pytest.raises(RuntimeError, match="event loop it was made on"):
                asyncio.run(client.get_topic("aio-loops"))
            with pytest.raises(RuntimeError, match="event loop it was made on"):
                asyncio.run(client.writer("aio-loops"))

        await asyncio.to_thread(elsewhere)
        assert (await client.get_topic("aio-loops")).name == "aio-loops"


async def test_writes_follow_a_split_in_key_order(server: BookieProcess) -> None:
    async with AsyncClient(server.address, timeout_s=30) as client:
        (segment,) = (await client.create_topic("aio-split")).segments
        writer = await client.writer("aio-split", max_in_flight=1)
        keys = [f"k{i}" for i in range(8)]
        before = [writer.write_nowait(b"%s-%d" % (k.encode(), 0), routing_key=k) for k in keys]
        await writer.flush()
        await client.scale_topic("aio-split", [segment.name], [(0.0, 0.5), (0.5, 1.0)])
        # Sent to the sealed segment first, then handed over to its successors.
        after = await asyncio.gather(*(writer.write(b"%s-%d" % (k.encode(), n), routing_key=k)
                                       for n in range(1, 4) for k in keys))
        assert all(f.result().segment == segment.name for f in before)
        assert {r.segment for r in after} <= {s.name for s in
                                               await client.get_segments("aio-split")}
        await writer.close()
        reader = await client.reader("aio-split")
        by_key: dict[str, list[int]] = {}
        async with asyncio.timeout(30):
            async for event in reader:
                key, number = event.payload.decode().split("-")
                by_key.setdefault(key, []).append(int(number))
                if sum(len(v) for v in by_key.values()) == 32:
                    break
        reader.close()
        assert by_key == {k: [0, 1, 2, 3] for k in keys}  # each once, in order per key


@pytest.mark.faults
async def test_answers_lost_to_a_cut_connection_double_nothing(server: BookieProcess,
                                                               proxy: TcpProxy) -> None:
    async with AsyncClient(server.address, timeout_s=30) as admin, \
            AsyncClient(proxy.address, timeout_s=30) as client:
        await admin.create_topic("aio-cuts", segments=2)

        async def stored() -> int:
            return sum([(await admin.get_segment_info(f"aio-cuts/{n}")).segment.end_offset
                        for n in range(2)])

        writer = await client.writer("aio-cuts", max_in_flight=2, batch_size_bytes=2048)
        first = await asyncio.gather(*(writer.write(b"%d" % i, routing_key=f"k{i % 8}")
                                       for i in range(100)))
        # The broker applies what comes next, but its answers are held, then the
        # connection is cut: every one of those writes' outcome is unknown to the client.
        await asyncio.to_thread(proxy.hold_answers, True)
        pending = [asyncio.ensure_future(writer.write(b"%d" % i, routing_key=f"k{i % 8}"))
                   for i in range(100, 400)]

        async def applied_unanswered() -> bool:
            return await stored() > 100 and not any(task.done() for task in pending)

        await wait_for_async(applied_unanswered, "writes applied with their answers held")
        assert await asyncio.to_thread(proxy.cut) >= 1
        await asyncio.to_thread(proxy.hold_answers, False)
        async with asyncio.timeout(60):
            results = [*first, *await asyncio.gather(*pending)]
        # Blocks applied before the cut were answered as duplicates when sent again
        # (offset -1, as WriteResult documents); the others each at their own place.
        placed = [(r.segment, r.offset) for r in results if r.offset >= 0]
        assert len(results) == 400 and len(set(placed)) == len(placed) < 400
        await writer.close()
        assert await stored() == 400  # resent after the cut, stored once: nothing doubled
        reader = await client.reader("aio-cuts")
        assert sorted(await _read_all(reader, 400)) == sorted(b"%d" % i for i in range(400))
        reader.close()
