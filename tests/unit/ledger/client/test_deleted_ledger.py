"""A writer's handle on a ledger that was fenced and deleted: every add refused, nothing leaked.

Real in-process bookies on RocksDB; the second part restarts them on the same
directories (with the journal: the tombstone comes back from the replay).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger.api import AddRequest
from ledger.bookie.bookie import Bookie
from ledger.client.directory import BookieDirectory
from ledger.client.ledger_client import LedgerClient
from ledger.config import BookieConfig, Durability, Journal, LedgerConfig
from ledger.errors import LedgerDeletedError, LedgerFencedError
from ledger.metadata.rocksdb_store import RocksDBMetadataStore


def _bookies(root: Path, count: int) -> list[Bookie]:
    return [Bookie(BookieConfig(data_dir=str(root / f"bookie-{index}"),
                                durability=Durability.SYNC, journal=Journal.ON),
                   bookie_id=f"bookie-{index}") for index in range(count)]


@pytest.mark.parametrize("recover_first", [True, False], ids=["fenced", "not-fenced"])
async def test_an_add_through_the_old_handle_after_delete_is_refused_also_after_a_restart(
        tmp_path: Path, recover_first: bool) -> None:
    store = RocksDBMetadataStore(str(tmp_path / "metadata"))
    bookies = _bookies(tmp_path, 3)
    writer_client = LedgerClient(store, BookieDirectory(bookies), LedgerConfig())
    deleter = LedgerClient(store, BookieDirectory(bookies), LedgerConfig())
    try:
        handle = await writer_client.create(ensemble_size=3, write_quorum=2, ack_quorum=2)
        assert [await handle.add(f"e{i}".encode()) for i in range(4)] == [0, 1, 2, 3]
        ledger_id = handle.ledger_id
        if recover_first:
            await deleter.open(ledger_id)  # fences the writer's ledger, as a deleting broker does
        await deleter.delete(ledger_id)
        assert all(ledger_id not in bookie.ledger_ids() for bookie in bookies)

        with pytest.raises(LedgerFencedError) as refused:
            await handle.add(b"late")
        assert isinstance(refused.value, LedgerDeletedError)
        assert all(ledger_id not in bookie.ledger_ids() for bookie in bookies)
    finally:
        await writer_client.close()
        await deleter.close()
        for bookie in bookies:
            bookie.shutdown()

    restarted = _bookies(tmp_path, 3)
    client = LedgerClient(store, BookieDirectory(restarted), LedgerConfig())
    try:
        assert all(ledger_id not in bookie.ledger_ids() for bookie in restarted)
        stale = await client.create(ensemble_size=3, write_quorum=3, ack_quorum=3)
        assert stale.ledger_id != ledger_id  # ids come from a counter: never reused
        late = AddRequest(ledger_id, range(4, 5), [12], [b"late"], 3)
        for bookie in restarted:  # the old writer's next add, straight to each bookie
            with pytest.raises(LedgerDeletedError):
                await bookie.add_entries(late)
            with pytest.raises(LedgerDeletedError):
                await bookie.fence(ledger_id)
        assert all(ledger_id not in bookie.ledger_ids() for bookie in restarted)
    finally:
        await client.close()
        for bookie in restarted:
            bookie.shutdown()
        await store.close()
