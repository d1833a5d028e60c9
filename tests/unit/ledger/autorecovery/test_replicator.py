"""Re-replication against real in-process bookies: closed ledgers, open ones, the worker."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import REGISTRY

from ledger.api import LedgerState
from ledger.autorecovery.config import AutoRecoveryConfig
from ledger.autorecovery.marks import UnderReplicationMarks
from ledger.autorecovery.replicator import replicate_ledger
from ledger.autorecovery.worker import AutoRecoveryWorker
from ledger.client.directory import BookieDirectory
from ledger.client.ledger_client import LedgerClient
from ledger.client.write_sets import write_set
from ledger.errors import NoSuchLedgerError
from ledger.metadata.cluster_layout import bookie_all_path, bookie_available_path
from ledger.metadata.ledger_metadata import LedgerMetadata
from ledger.metadata.rocksdb_store import RocksDBMetadataStore
from tests.unit.ledger.conftest import FaultyBookie

MakeBookies = Callable[[int], list[FaultyBookie]]
MakeClient = Callable[..., LedgerClient]


def _entry(number: int) -> bytes:
    return b"entry-%04d" % number


async def _holders(bookies: list[FaultyBookie], ledger_id: int, entry_id: int) -> set[str]:
    """The live bookies that hold the entry (asked directly, not through metadata)."""
    held = set()
    for bookie in bookies:
        if bookie.down:
            continue
        try:
            reply = await bookie.read_entries(ledger_id, entry_id, entry_id)
        except NoSuchLedgerError:  # a bookie never given the ledger holds none of it
            continue
        if reply.entry_ids[:1] == [entry_id]:
            held.add(bookie.bookie_id)
    return held


async def test_closed_ledger_gets_its_write_quorum_back(
        make_bookies: MakeBookies, make_client: MakeClient,
        store: RocksDBMetadataStore) -> None:
    bookies = make_bookies(4)
    by_id = {bookie.bookie_id: bookie for bookie in bookies}
    writer = make_client(bookies[:3])
    handle = await writer.create(ensemble_size=3, write_quorum=2, ack_quorum=2)
    for number in range(100):
        handle.add_async(_entry(number))
    await handle.close()
    reader = await make_client(bookies).open(handle.ledger_id)  # before the recovery
    lost_id = handle.metadata.ensembles[0][1][1]
    by_id[lost_id].down = True
    live = [bookie_id for bookie_id in by_id if bookie_id != lost_id]

    result = await replicate_ledger(store, BookieDirectory(bookies), handle.ledger_id,
                                    {lost_id}, live)

    # Position 1 holds entries e with e % 3 in (0, 1): 34 + 33 of them.
    assert (result.done, result.entries, result.left) == (True, 67, "")
    metadata, _ = await writer.read_metadata(handle.ledger_id)
    _, bookie_ids = metadata.ensembles[0]
    assert bookie_ids[1] == "bookie-3" and lost_id not in bookie_ids
    assert metadata.state is LedgerState.CLOSED and metadata.last_entry_id == 99
    for entry_id in range(100):
        expected = {bookie_ids[p] for p in write_set(entry_id, 3, 2)}
        assert await _holders(bookies, handle.ledger_id, entry_id) == expected
    # Again: nothing left to do, nothing copied.
    again = await replicate_ledger(store, BookieDirectory(bookies), handle.ledger_id,
                                   {lost_id}, live)
    assert (again.done, again.entries) == (True, 0)
    # A second bookie of the ensemble goes: every entry is still readable, also
    # through the handle opened before the recovery (it reads the new metadata).
    by_id[bookie_ids[0]].down = True
    expected_entries = [_entry(number) for number in range(100)]
    assert await reader.read(0, 99) == expected_entries
    fresh = await make_client(bookies).open(handle.ledger_id)
    assert await fresh.read(0, 99) == expected_entries


async def test_open_ledger_closed_fragments_only_and_the_writer_goes_on(
        make_bookies: MakeBookies, make_client: MakeClient,
        store: RocksDBMetadataStore) -> None:
    bookies = make_bookies(5)
    by_id = {bookie.bookie_id: bookie for bookie in bookies}
    writer = make_client(bookies[:3])
    handle = await writer.create(ensemble_size=3, write_quorum=2, ack_quorum=2)
    for number in range(30):
        await handle.add(_entry(number))
    lost_id = handle.metadata.ensembles[0][1][2]
    by_id[lost_id].down = True
    everyone = BookieDirectory(bookies)
    live = [bookie_id for bookie_id in by_id if bookie_id != lost_id]

    # The lost bookie is in the open ensemble: that is the writer's to change.
    result = await replicate_ledger(store, everyone, handle.ledger_id, {lost_id}, live)
    assert not result.done and "writer's to change" in result.left
    assert (await writer.read_metadata(handle.ledger_id))[0] == handle.metadata

    # The writer's next adds replace it from entry 30 on (bookie-3 is its spare).
    writer.directory.add(bookies[3])
    for number in range(30, 60):
        await handle.add(_entry(number))
    # From the first entry whose write set holds the lost bookie's position 2 (30 or 31).
    change_at = handle.metadata.ensembles[1][0]
    assert change_at in (30, 31) and len(handle.metadata.ensembles) == 2

    # Now the entries before it are a closed fragment: a live bookie outside it
    # (bookie-3, also in the open fragment, or bookie-4) takes the lost one's place.
    result = await replicate_ledger(store, everyone, handle.ledger_id, {lost_id}, live)
    assert result.done
    assert result.entries == sum(1 for e in range(change_at) if 2 in write_set(e, 3, 2))
    metadata, _ = await writer.read_metadata(handle.ledger_id)
    assert metadata.state is LedgerState.OPEN
    replacement = metadata.ensembles[0][1][2]
    assert replacement in {"bookie-3", "bookie-4"}

    # The writer goes on and closes on top of that change (no fencing).
    for number in range(60, 70):
        await handle.add(_entry(number))
    await handle.close()
    closed, _ = await writer.read_metadata(handle.ledger_id)
    assert closed.state is LedgerState.CLOSED and closed.last_entry_id == 69
    assert closed.ensembles[0][1][2] == replacement
    assert closed.ensembles[1] == handle.metadata.ensembles[1]
    reopened = await make_client(bookies).open(handle.ledger_id)
    assert await reopened.read(0, 69) == [_entry(number) for number in range(70)]


def _sample(name: str) -> float:
    value = REGISTRY.get_sample_value(name)
    return 0.0 if value is None else value


async def test_worker_audits_marks_and_restores(
        make_bookies: MakeBookies, make_client: MakeClient,
        store: RocksDBMetadataStore) -> None:
    bookies = make_bookies(4)
    by_id = {bookie.bookie_id: bookie for bookie in bookies}
    writer = make_client(bookies[:3])
    ledger_ids = []
    for _ in range(3):
        handle = await writer.create(ensemble_size=3, write_quorum=2, ack_quorum=2)
        for number in range(10):
            handle.add_async(_entry(number))
        await handle.close()
        ledger_ids.append(handle.ledger_id)
    lost_id = "bookie-1"
    by_id[lost_id].down = True
    for bookie_id in by_id:
        await store.create(bookie_all_path(bookie_id), make_parents=True)
        if bookie_id != lost_id:
            await store.create(bookie_available_path(bookie_id), ephemeral=True,
                               make_parents=True)
    copied_before = _sample("folio_ledger_rereplicated_entries_total")
    positions = []
    for ledger_id in ledger_ids:
        metadata, _ = await writer.read_metadata(ledger_id)
        positions.append(metadata.ensembles[0][1].index(lost_id))
    worker = AutoRecoveryWorker(store, "bookie-0", connect=by_id.__getitem__,
                                config=AutoRecoveryConfig(auto_recovery_grace_ms=0))

    assert await worker.run_once() == 0
    assert worker.is_auditor
    assert await UnderReplicationMarks(store).ledger_ids() == []
    assert _sample("folio_ledger_under_replicated_ledgers") == 0
    # Each ledger had bookie-1 at one position, holding 7 or 6 of its 10 entries.
    expected = sum(1 for p in positions for e in range(10) if p in write_set(e, 3, 2))
    assert _sample("folio_ledger_rereplicated_entries_total") - copied_before == expected
    for ledger_id, position in zip(ledger_ids, positions, strict=True):
        node = await store.get(f"/ledgers/L{ledger_id:020d}")
        bookie_ids = LedgerMetadata.from_bytes(node.data).ensembles[0][1]
        assert set(bookie_ids) == {"bookie-0", "bookie-2", "bookie-3"}
        assert bookie_ids[position] == "bookie-3"
