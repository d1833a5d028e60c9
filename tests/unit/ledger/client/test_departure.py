"""A writer replaces a bookie that left the cluster without waiting for an add to fail."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from ledger.client.directory import BookieDirectory
from ledger.client.ledger_client import LedgerClient
from ledger.config import LedgerConfig
from ledger.metadata.rocksdb_store import RocksDBMetadataStore
from tests.support.wait import wait_for_async
from tests.unit.ledger.conftest import FaultyBookie

MakeBookies = Callable[[int], list[FaultyBookie]]


async def test_idle_writer_replaces_a_departed_bookie(
        make_bookies: MakeBookies, store: RocksDBMetadataStore) -> None:
    bookies = make_bookies(4)
    directory = BookieDirectory(bookies[:3], connect={b.bookie_id: b for b in bookies}.__getitem__)
    client = LedgerClient(store, directory, LedgerConfig(max_entry_bytes=1024 * 1024))
    handle = await client.create(ensemble_size=3, write_quorum=2, ack_quorum=2)
    for number in range(5):
        await handle.add(b"%d" % number)
    departed = handle.metadata.ensembles[0][1][1]

    # No spare bookie: the writer keeps its ensemble (it would have nowhere to go).
    directory.set_available(b.bookie_id for b in bookies[:3] if b.bookie_id != departed)
    await asyncio.sleep(0)
    assert len((await client.read_metadata(handle.ledger_id))[0].ensembles) == 1

    directory.add(bookies[3])  # a spare joins; the departed bookie leaves again
    directory.set_available([*(b.bookie_id for b in bookies[:3]), bookies[3].bookie_id])
    directory.set_available(b.bookie_id for b in bookies if b.bookie_id != departed)

    async def changed() -> bool:
        return len((await client.read_metadata(handle.ledger_id))[0].ensembles) == 2

    await wait_for_async(changed, "the writer's ensemble change")
    metadata, _ = await client.read_metadata(handle.ledger_id)
    assert metadata.ensembles[1][0] == 5  # from LAC + 1: entries 0..4 are a closed fragment
    assert metadata.ensembles[1][1][1] == bookies[3].bookie_id
    gone = next(b for b in bookies if b.bookie_id == departed)
    adds_before = gone.adds
    assert await handle.add(b"5") == 5
    await handle.close()
    assert gone.adds == adds_before  # nothing more went to the departed bookie
