"""The bookie's ledger garbage collector on real bookies and a real RocksDB metadata store.

A bookie that was down during a delete keeps its copy; the collector drops it on
its second pass. Unknown metadata answers (``FaultyMetadataStore``) delete nothing,
a ledger whose node was written after a listing (or that a lagging listing lacks)
survives, and a ledger being written is never collected.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from ledger.api import AddRequest, MetadataStore
from ledger.bookie.bookie import Bookie
from ledger.bookie.collector import GarbageCollectionConfig, LedgerCollector
from ledger.client.directory import BookieDirectory
from ledger.client.ledger_client import LedgerClient
from ledger.config import BookieConfig, Journal, LedgerConfig
from ledger.errors import LedgerDeletedError, StorageError
from ledger.metadata.ledger_metadata import ledger_path
from ledger.metadata.paths import LOCKS_PATH, UNDER_REPLICATED_PATH
from ledger.metadata.rocksdb_store import RocksDBMetadataStore
from tests.support.faulty_kv import FaultyKV
from tests.support.faulty_metadata import FaultyMetadataStore
from tests.support.wait import wait_for_async
from tests.unit.ledger.conftest import FaultyBookie

ENTRY = b"e" * 100


async def _no_wait(seconds: float) -> None:
    """The collector's pacing, skipped: the tests call its passes directly."""


def _collector(bookie: FaultyBookie, store: MetadataStore, **config: object) -> LedgerCollector:
    return LedgerCollector(bookie.bookie, bookie.bookie_id, store,
                           GarbageCollectionConfig(**config),  # type: ignore[arg-type]
                           sleep=_no_wait)


async def _ledger(client: LedgerClient, entries: int = 5, size: int = 3) -> int:
    handle = await client.create(ensemble_size=size, write_quorum=size,
                                 ack_quorum=min(size, 2))
    for _ in range(entries):
        await handle.add(ENTRY)
    await handle.close()
    return handle.ledger_id


async def _delete_missed_by(client: LedgerClient, bookie: FaultyBookie, ledger_id: int) -> None:
    """Delete the ledger while ``bookie`` is down: its copy is left behind."""
    bookie.down = True
    await client.delete(ledger_id)
    bookie.down = False
    assert ledger_id in bookie.bookie.ledger_ids()


def _sample(name: str, labels: dict[str, str] | None = None) -> float:
    return REGISTRY.get_sample_value(name, labels or {}) or 0.0


@pytest.fixture
def cluster(make_bookies: Callable[[int], list[FaultyBookie]],
            make_client: Callable[[list[FaultyBookie]], LedgerClient],
            ) -> tuple[list[FaultyBookie], LedgerClient]:
    bookies = make_bookies(3)
    return bookies, make_client(bookies)


async def test_a_missed_delete_is_collected_on_the_second_pass(
        cluster: tuple[list[FaultyBookie], LedgerClient], store: RocksDBMetadataStore) -> None:
    bookies, client = cluster
    gone, live = await _ledger(client), await _ledger(client)
    await _delete_missed_by(client, bookies[2], gone)
    collector = _collector(bookies[2], store)
    ledgers_before = _sample("folio_bookie_gc_ledgers_total", {"reason": "deleted"})
    bytes_before = _sample("folio_bookie_gc_bytes_total")

    first = await collector.collect_once()
    assert (first.collected, first.suspected, first.error) == ([], [gone], "")
    assert gone in bookies[2].bookie.ledger_ids()

    second = await collector.collect_once()
    assert [(c.ledger_id, c.reason, c.data_bytes) for c in second.collected] == [
        (gone, "deleted", 5 * len(ENTRY))]
    assert bookies[2].bookie.ledger_ids() == [live]
    assert _sample("folio_bookie_gc_ledgers_total", {"reason": "deleted"}) == ledgers_before + 1
    assert _sample("folio_bookie_gc_bytes_total") == bytes_before + 5 * len(ENTRY)
    # As a received delete: a tombstone refuses a late writer.
    with pytest.raises(LedgerDeletedError):
        await bookies[2].bookie.add_entries(AddRequest(gone, range(5, 6), [600], [ENTRY], 4))
    # The live ledger is whole on every bookie.
    handle = await client.open(live)
    assert await handle.read(0, 4) == [ENTRY] * 5
    for bookie in bookies:
        reply = await bookie.bookie.read_entries(live, 0, 4)
        assert reply.entry_ids == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("failing", ["children", "exists"])
async def test_an_unknown_metadata_answer_deletes_nothing(
        cluster: tuple[list[FaultyBookie], LedgerClient], store: RocksDBMetadataStore,
        failing: str) -> None:
    bookies, client = cluster
    gone = await _ledger(client)
    await _delete_missed_by(client, bookies[2], gone)
    faulty = FaultyMetadataStore(store)
    collector = _collector(bookies[2], faulty)
    assert (await collector.collect_once()).suspected == [gone]

    # The listing, or the read of the suspect's own node, gets no answer.
    faulty.fail_reads(1, (lambda path: path == "/ledgers") if failing == "children"
                      else (lambda path: path == ledger_path(gone)))
    failed = await collector.collect_once()
    assert faulty.failed_reads
    assert failed.collected == []
    assert "injected: no answer to a read" in failed.error
    assert gone in bookies[2].bookie.ledger_ids()

    # Answers again: collected once everything was read afresh.
    results = [await collector.collect_once() for _ in range(2)]
    assert [c.ledger_id for r in results for c in r.collected] == [gone]
    assert gone not in bookies[2].bookie.ledger_ids()


class _LaggingListing(FaultyMetadataStore):
    """Lists ``/ledgers`` as it was at the first listing, as a lagging follower could;
    ``during_listing`` runs inside that first listing (a ledger created mid-scan)."""

    def __init__(self, store: MetadataStore) -> None:
        super().__init__(store)
        self.frozen: list[str] | None = None
        self.during_listing: Callable[[], object] | None = None

    async def children(self, path: str, *, watch: object = None) -> list[str]:
        names = await self.inner.children(path)
        if path != "/ledgers":
            return names
        if self.frozen is None:
            self.frozen = names
            if self.during_listing is not None:
                await self.during_listing()  # type: ignore[misc]
        return list(self.frozen)


async def test_a_ledger_created_mid_scan_or_missing_from_a_stale_listing_survives(
        cluster: tuple[list[FaultyBookie], LedgerClient], store: RocksDBMetadataStore) -> None:
    bookies, client = cluster
    gone = await _ledger(client)
    await _delete_missed_by(client, bookies[2], gone)
    lagging = _LaggingListing(store)
    created: list[int] = []

    async def create() -> None:
        created.append(await _ledger(client))

    lagging.during_listing = create
    collector = _collector(bookies[2], lagging)
    results = [await collector.collect_once() for _ in range(4)]

    assert created and created[0] in bookies[2].bookie.ledger_ids()
    assert [c.ledger_id for r in results for c in r.collected] == [gone]
    handle = await client.open(created[0])
    assert await handle.read(0, 4) == [ENTRY] * 5


async def test_a_ledger_being_written_is_not_collected(
        cluster: tuple[list[FaultyBookie], LedgerClient], store: RocksDBMetadataStore) -> None:
    bookies, _ = cluster
    bookie = bookies[2].bookie
    orphan = 1000  # entries on the bookie, and no metadata node (a zombie writer's)
    collector = _collector(bookies[2], store)
    await store.create("/ledgers", b"")

    for entry_id in range(4):
        await bookie.add_entries(AddRequest(orphan, range(entry_id, entry_id + 1),
                                            [100 * (entry_id + 1)], [ENTRY], entry_id - 1))
        result = await collector.collect_once()
        assert (result.collected, result.suspected) == ([], [orphan])

    # Writes stopped: collected on the pass after the one that saw its tail settle.
    assert (await collector.collect_once()).collected[0].ledger_id == orphan
    assert orphan not in bookie.ledger_ids()


async def test_no_ledgers_node_deletes_nothing(
        cluster: tuple[list[FaultyBookie], LedgerClient], store: RocksDBMetadataStore) -> None:
    bookies, _ = cluster
    bookie = bookies[0].bookie
    await bookie.add_entries(AddRequest(7, range(1), [100], [ENTRY], -1))
    collector = _collector(bookies[0], store)
    for _ in range(3):
        result = await collector.collect_once()
        assert (result.collected, result.suspected, result.error) == ([], [], "")
    assert bookie.ledger_ids() == [7]


async def test_over_replicated_ledgers_go_only_when_asked_and_unlocked(
        cluster: tuple[list[FaultyBookie], LedgerClient], store: RocksDBMetadataStore) -> None:
    bookies, client = cluster
    # Closed on bookies 0 and 1; bookie 2 holds a stray copy (an abandoned re-replication).
    ledger_id = await _ledger(client, entries=3, size=2)
    metadata, _ = await client.read_metadata(ledger_id)
    stray = next(b for b in bookies if b.bookie_id not in metadata.ensembles[0][1])
    for entry_id in range(3):
        await stray.bookie.add_entries(AddRequest(ledger_id, range(entry_id, entry_id + 1),
                                                  [100 * (entry_id + 1)], [ENTRY], 2,
                                                  recovery=True))
    keeper = next(b for b in bookies if b.bookie_id in metadata.ensembles[0][1])

    off = _collector(stray, store)
    assert [await off.collect_once() for _ in range(3)][-1].collected == []
    assert ledger_id in stray.bookie.ledger_ids()

    on = _collector(stray, store, gc_over_replicated=True)
    name = ledger_path(ledger_id).rsplit("/", 1)[1]
    await store.create(f"{LOCKS_PATH}/{name}", b"worker-1", make_parents=True)
    assert [await on.collect_once() for _ in range(3)][-1].collected == []  # locked
    await store.delete(f"{LOCKS_PATH}/{name}")
    await store.create(f"{UNDER_REPLICATED_PATH}/{name}", b"", make_parents=True)
    assert [await on.collect_once() for _ in range(3)][-1].collected == []  # marked
    await store.delete(f"{UNDER_REPLICATED_PATH}/{name}")

    collected = [c for r in [await on.collect_once() for _ in range(2)] for c in r.collected]
    assert [(c.ledger_id, c.reason) for c in collected] == [(ledger_id, "over_replicated")]
    assert ledger_id not in stray.bookie.ledger_ids()
    assert not await store.exists(f"{LOCKS_PATH}/{name}")  # the collector's lock released
    # The ensemble's own copies are never over-replicated.
    keeper_collector = _collector(keeper, store, gc_over_replicated=True)
    assert [await keeper_collector.collect_once() for _ in range(3)][-1].collected == []
    assert await (await client.open(ledger_id)).read(0, 2) == [ENTRY] * 3


def test_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="gc_interval_ms must be positive"):
        GarbageCollectionConfig(gc_interval_ms=0)
    with pytest.raises(ValueError, match="gc_rate_per_s must be positive"):
        GarbageCollectionConfig(gc_rate_per_s=0.0)


async def test_a_delete_the_bookie_failed_is_collected_once_its_storage_heals(
        tmp_path: Path, store: RocksDBMetadataStore) -> None:
    # folio standalone's case: one bookie in process, whose disk fails during a delete.
    faults = FaultyKV()
    bookie = Bookie(BookieConfig(data_dir=str(tmp_path / "bookie"), journal=Journal.NONE),
                    bookie_id="local", open_kv=faults.open)
    try:
        client = LedgerClient(store, BookieDirectory([bookie]),
                              LedgerConfig(ensemble_size=1, write_quorum=1, ack_quorum=1))
        gone, live = await _ledger(client, size=1), await _ledger(client, size=1)
        faults.fail_now()
        await client.delete(gone)  # the bookie's delete fails; the metadata goes
        assert not await store.exists(ledger_path(gone))
        faults.heal()

        async def healed() -> bool:  # a probe runs at most every 0.5 s
            with contextlib.suppress(StorageError):
                await bookie.probe_storage()
            return bookie.storage_failure is None

        await wait_for_async(healed, "the bookie's storage takes writes again", 10)
        assert gone in bookie.ledger_ids()

        collector = LedgerCollector(bookie, "local", store, GarbageCollectionConfig(),
                                    sleep=_no_wait)
        results = [await collector.collect_once() for _ in range(2)]
        assert [c.ledger_id for r in results for c in r.collected] == [gone]
        assert bookie.ledger_ids() == [live]
        assert await (await client.open(live)).read(0, 4) == [ENTRY] * 5
    finally:
        bookie.shutdown()
