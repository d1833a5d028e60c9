"""``folio.aio`` batch reads against a real standalone: ``AsyncClient.batch_client()``.

The same slices as the blocking face's ``BatchClient`` (sealed segments after
a split included, cut to a ``StreamCut``), every event of each read once with
``async for``, and a cancelled ``read`` that loses nothing.
"""

from __future__ import annotations

import asyncio

import folio
from folio.aio import AsyncClient
from folio.read.cuts import StreamCut
from tests.support.bookies import BookieProcess


async def test_slices_and_reads_match_the_blocking_face(server: BookieProcess) -> None:
    async with AsyncClient(server.address, timeout_s=30) as client:
        (first,) = (await client.create_topic("aio-batch")).segments
        async with await client.writer("aio-batch") as writer:
            for i in range(30):
                await writer.write(b"a%d" % i, routing_key=f"k{i % 6}")
        await client.scale_topic("aio-batch", [first.name], [(0.0, 0.5), (0.5, 1.0)])
        async with await client.writer("aio-batch") as writer:
            for i in range(30):
                await writer.write(b"b%d" % i, routing_key=f"k{i % 6}")
        batch = client.batch_client()
        slices = await batch.segments("aio-batch")

        def blocking_slices() -> list[folio.SegmentSlice]:
            with folio.Client(server.address) as blocking:
                return blocking.batch_client().segments("aio-batch")

        assert [s.to_dict() for s in slices] == \
            [s.to_dict() for s in await asyncio.to_thread(blocking_slices)]
        assert len(slices) == 3 and slices[0].segment.sealed
        read: list[bytes] = []
        async with asyncio.timeout(30):
            for piece in slices:
                async with await batch.read_segment(piece) as events:
                    offsets = []
                    async for event in events:
                        read.append(event.payload)
                        offsets.append(event.offset)
                    assert offsets == list(range(piece.start_offset, piece.end_offset))
        assert sorted(read) == sorted([b"a%d" % i for i in range(30)]
                                      + [b"b%d" % i for i in range(30)])
        # Up to a cut: the sealed segment's first 10 events only, nothing after it.
        cut = StreamCut({first.name: 10})
        (upto,) = await batch.segments("aio-batch", to_cut=cut)
        assert (upto.name, upto.start_offset, upto.end_offset) == (first.name, 0, 10)


async def test_a_cancelled_batch_read_loses_nothing(server: BookieProcess) -> None:
    async with AsyncClient(server.address, timeout_s=30) as client:
        await client.create_topic("aio-batch-cancel")
        async with await client.writer("aio-batch-cancel") as writer:
            for i in range(5):
                await writer.write(b"%d" % i)
        batch = client.batch_client()
        events = await batch.read_segment("aio-batch-cancel/0", end=6)  # one not written yet
        async with asyncio.timeout(30):
            got = [(await events.read()) for _ in range(5)]
        assert [e.payload for e in got if e is not None] == [b"%d" % i for i in range(5)]
        waiting = asyncio.ensure_future(events.read())  # offset 5: not there yet
        await asyncio.sleep(0)
        waiting.cancel()
        outcomes = await asyncio.gather(waiting, return_exceptions=True)
        assert isinstance(outcomes[0], asyncio.CancelledError)
        async with await client.writer("aio-batch-cancel") as writer:
            await writer.write(b"5")
        async with asyncio.timeout(30):
            last = await events.read()
            assert last is not None and (last.offset, last.payload) == (5, b"5")
            assert await events.read() is None  # the range's end
        assert events.position == 6
        events.close()
