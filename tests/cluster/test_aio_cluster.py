"""``folio.aio`` against a 3-broker cluster: segments owned by different brokers, one loop.

Real processes (ZooKeeper, 3 bookies E=3/Qw=2/Qa=2, 3 brokers). The async
client bootstraps from the brokers' list, routes each segment's flow and Read
stream to the broker that owns it (pools to several brokers, all on the
test's loop), and every acknowledged event is read back exactly once.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import pytest

from folio.aio import AsyncClient
from tests.support.bookies import BookieProcesses
from tests.support.cluster_load import segment_owners
from tests.support.cluster_load import start_cluster as _cluster

SEGMENTS = 6
EVENTS = 600


@pytest.mark.timeout(300)
async def test_async_writes_and_reads_across_three_brokers(
        zk_url: str, bookie_processes: BookieProcesses, tmp_path: Path) -> None:
    _, brokers = _cluster(bookie_processes, zk_url, tmp_path)
    endpoint = ",".join(b.address for b in brokers)
    async with AsyncClient(endpoint, timeout_s=30) as client:
        await client.create_topic("aio-cluster", segments=SEGMENTS)
        owners = await asyncio.to_thread(segment_owners, [b.address for b in brokers],
                                         "aio-cluster", SEGMENTS)
        assert len(set(owners.values())) >= 2  # the flows go to several brokers
        writer = await client.writer("aio-cluster")
        results = await asyncio.gather(*(
            writer.write(b"%d" % i, routing_key=f"key-{i % 24}") for i in range(EVENTS)))
        assert len({(r.segment, r.offset) for r in results}) == EVENTS
        await writer.close()
        # Independent of any reader: the segments hold exactly the events acknowledged.
        ends = [(await client.get_segment_info(f"aio-cluster/{n}")).segment.end_offset
                for n in range(SEGMENTS)]
        assert sum(ends) == EVENTS
        used = {address for address, stats in client.broker_pool_stats().items()
                if stats.open_connections}
        assert len(used) >= 2

        reader = await client.reader("aio-cluster")
        read: Counter[bytes] = Counter()
        async with asyncio.timeout(60):
            async for event in reader:
                read[event.payload] += 1
                if sum(read.values()) == EVENTS:
                    break
        reader.close()
        assert read == Counter(b"%d" % i for i in range(EVENTS))
