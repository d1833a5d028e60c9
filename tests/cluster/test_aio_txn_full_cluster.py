"""``folio.aio`` transactions across segments owned by different brokers of a 3-broker cluster.

Real processes (ZooKeeper, 3 bookies E=3/Qw=2/Qa=2, 3 brokers). One async
client on the test's loop writes each transaction to segments of several
brokers (a flow per segment to its owner) and decides it at the
coordinator; committed transactions are read whole and once, aborted ones
and a body that raised never, and a cancelled commit still commits. The
segments' end offsets, asked independently of any reader, hold every
transactional event written once.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import pytest

import folio
from folio.aio import AsyncClient
from tests.integration.test_aio_txn_full import committed_payloads
from tests.support.bookies import BookieProcesses
from tests.support.cluster_load import segment_owners
from tests.support.cluster_load import start_cluster as _cluster
from tests.support.wait import wait_for_async

SEGMENTS = 6
TOPIC = "aio-full-cluster"
KEYS = [f"key-{n}" for n in range(24)]  # over all six segments


def _events(name: str, count: int) -> list[bytes]:
    return [f"{name}|{n}".encode() for n in range(count)]


@pytest.mark.timeout(300)
async def test_transactions_across_three_brokers(
        zk_url: str, bookie_processes: BookieProcesses, tmp_path: Path) -> None:
    _, brokers = _cluster(bookie_processes, zk_url, tmp_path)
    endpoint = ",".join(b.address for b in brokers)
    async with AsyncClient(endpoint, timeout_s=30) as client:
        await client.create_topic(TOPIC, segments=SEGMENTS)
        owners = await asyncio.to_thread(segment_owners, [b.address for b in brokers],
                                         TOPIC, SEGMENTS)
        assert len(set(owners.values())) >= 2  # a transaction spans several brokers
        committed: list[bytes] = []
        written = 0
        async with await client.transactional_writer(TOPIC) as writer:
            for round_ in range(4):
                txn = await writer.begin()
                events = _events(f"r{round_}", 48)
                for n, payload in enumerate(events):
                    txn.write_event(payload, routing_key=KEYS[n % len(KEYS)])
                written += len(events)
                if round_ == 2:
                    await txn.flush()
                    await txn.abort()
                    assert (await txn.status()).aborted
                    continue
                await txn.commit()
                committed += events

            with pytest.raises(RuntimeError):
                async with await writer.begin() as failed:
                    for key in KEYS:
                        failed.write_event(b"never", routing_key=key)
                    await failed.flush()
                    written += len(KEYS)
                    raise RuntimeError("aborted")

            cancelled = await writer.begin()
            events = _events("cancelled", 48)
            for n, payload in enumerate(events):
                cancelled.write_event(payload, routing_key=KEYS[n % len(KEYS)])
            written += len(events)
            waiting = asyncio.ensure_future(cancelled.commit())
            await asyncio.sleep(0)
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting

            async def decided() -> bool:
                return (await cancelled.status()) is not folio.TxnStatus.OPEN
            await wait_for_async(decided, "the cancelled commit deciding", 60)
            assert (await cancelled.status()).committed
            committed += events

        # Independent of any reader: the segments hold every event written, once
        # (aborted ones too: read_committed leaves them out).
        ends = [(await client.get_segment_info(f"{TOPIC}/{n}")).segment.end_offset
                for n in range(SEGMENTS)]
        assert sum(ends) == written
        got = await committed_payloads(client, TOPIC, b"sentinel")
        assert Counter(got) == Counter(committed)
        used = {address for address, stats in client.broker_pool_stats().items()
                if stats.open_connections}
        assert len(used) >= 2
