"""A bookie process SIGKILLed under continuous adds: the writer replaces it and loses nothing.

Three bookie processes form the ensemble (E=3, Qw=2, Qa=2); a fourth stands by,
because an ensemble change needs a bookie outside the ensemble to take the dead
one's place (with only three, no ledger of E=3 could go on writing).
"""

from __future__ import annotations

import asyncio
from collections import deque
from pathlib import Path

import pytest

from ledger.api import LedgerState
from ledger.bookie.remote import GrpcBookieClient
from ledger.client.directory import BookieDirectory
from ledger.client.ledger_client import LedgerClient
from ledger.errors import LedgerFencedError
from ledger.metadata.rocksdb_store import RocksDBMetadataStore
from tests.support.bookies import BookieProcesses

DEADLINE_S = 60


def _client(store: RocksDBMetadataStore, addresses: list[str]) -> LedgerClient:
    directory = BookieDirectory(
        [GrpcBookieClient(address) for address in addresses], connect=GrpcBookieClient
    )
    return LedgerClient(store, directory)


async def test_kill_one_bookie_under_continuous_adds(
    tmp_path: Path, bookie_processes: BookieProcesses
) -> None:
    bookies = [
        bookie_processes.start(tmp_path / f"bookie-{i}", "--durability", "sync")
        for i in range(4)
    ]
    by_address = {bookie.address: bookie for bookie in bookies}
    store = RocksDBMetadataStore(str(tmp_path / "metadata"))
    writer = _client(store, list(by_address))
    handle = await writer.create(ensemble_size=3, write_quorum=2, ack_quorum=2)
    victim_address = handle.metadata.ensembles[0][1][1]

    acknowledged: dict[int, bytes] = {}
    window: deque[tuple[bytes, asyncio.Future[int]]] = deque()
    killed_after: int | None = None

    async def settle_oldest() -> None:
        data, future = window.popleft()
        acknowledged[await asyncio.wait_for(future, DEADLINE_S)] = data

    for number in range(3000):
        data = b"event-%06d" % number
        window.append((data, handle.add_async(data)))
        if len(window) >= 32:
            await settle_oldest()
        if killed_after is None and len(acknowledged) >= 500:
            by_address[victim_address].kill()  # SIGKILL with adds in flight
            killed_after = len(acknowledged)
    while window:
        await settle_oldest()

    assert killed_after is not None
    assert sorted(acknowledged) == list(range(3000))
    ensembles = handle.metadata.ensembles
    assert len(ensembles) == 2, ensembles
    assert victim_address not in ensembles[1][1]
    assert killed_after <= ensembles[1][0] <= 3000
    await handle.close()

    # A new client (another broker, say) reads every acknowledged entry back.
    reader_client = _client(store, [a for a in by_address if a != victim_address])
    reader = await reader_client.open(handle.ledger_id)
    metadata, _ = await reader_client.read_metadata(handle.ledger_id)
    assert (metadata.state, metadata.last_entry_id) == (LedgerState.CLOSED, 2999)
    assert await reader.read(0, 2999) == [acknowledged[i] for i in range(3000)]
    await writer.close()
    await reader_client.close()
    await store.close()


async def test_recovery_fences_a_writer_in_another_process(
    tmp_path: Path, bookie_processes: BookieProcesses
) -> None:
    bookies = [bookie_processes.start(tmp_path / f"bookie-{i}") for i in range(3)]
    addresses = [bookie.address for bookie in bookies]
    store = RocksDBMetadataStore(str(tmp_path / "metadata"))
    writer_a = _client(store, addresses)
    handle = await writer_a.create(ensemble_size=3, write_quorum=2, ack_quorum=2)
    acked = [await handle.add(b"a-%d" % i) for i in range(100)]
    writer_b = _client(store, addresses)
    recovered = await writer_b.open(handle.ledger_id)
    assert recovered.last_add_confirmed >= acked[-1]
    assert await recovered.read(0, 99) == [b"a-%d" % i for i in range(100)]
    with pytest.raises(LedgerFencedError):
        await handle.add(b"too late")
    await writer_a.close()
    await writer_b.close()
    await store.close()
