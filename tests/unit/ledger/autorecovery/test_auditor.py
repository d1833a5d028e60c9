"""The auditor: grace period, lost bookies, marking their ledgers; election and marks."""

from __future__ import annotations

from ledger.api import LedgerState
from ledger.autorecovery.auditor import Auditor
from ledger.autorecovery.marks import UnderReplicationMarks
from ledger.metadata.cluster_layout import bookie_all_path, bookie_available_path
from ledger.metadata.ledger_metadata import LedgerMetadata
from ledger.metadata.rocksdb_store import RocksDBMetadataStore


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def _ledger(store: RocksDBMetadataStore, ledger_id: int,
                  *ensembles: tuple[int, tuple[str, ...]]) -> None:
    metadata = LedgerMetadata(ledger_id=ledger_id, ensemble_size=3, write_quorum=2,
                              ack_quorum=2, state=LedgerState.CLOSED, last_entry_id=99,
                              length=1, ensembles=ensembles, created_ms=1)
    await store.create(metadata.path, metadata.to_bytes(), make_parents=True)


async def _bookies(store: RocksDBMetadataStore, registered: str, live: str) -> None:
    for bookie in registered:
        await store.create(bookie_all_path(bookie), make_parents=True)
    for bookie in live:
        await store.create(bookie_available_path(bookie), ephemeral=True, make_parents=True)


async def test_a_bookie_missing_past_the_grace_period_gets_its_ledgers_marked(
        store: RocksDBMetadataStore) -> None:
    await _bookies(store, "abcde", "abce")  # d is gone
    await store.create("/ledgers/idgen", b"3", make_parents=True)  # not a ledger: skipped
    await _ledger(store, 1, (0, ("a", "b", "c")))
    await _ledger(store, 2, (0, ("a", "b", "c")), (50, ("a", "d", "c")))  # d in a later one
    await _ledger(store, 3, (0, ("d", "e", "c")))
    clock = Clock()
    auditor = Auditor(store, grace_ms=30_000, clock=clock)
    marks = UnderReplicationMarks(store)

    assert await auditor.check() == (frozenset(), 0)  # missing, within the grace period
    clock.now += 29.9
    assert await auditor.check() == (frozenset(), 0)
    assert await marks.ledger_ids() == []
    clock.now += 0.2
    assert await auditor.check() == (frozenset({"d"}), 2)
    assert await marks.ledger_ids() == [2, 3]
    mark = await marks.get(3)
    assert mark is not None and mark.lost_bookies == {"d"}
    # Nothing new: no rescan, nothing marked again.
    assert await auditor.check() == (frozenset({"d"}), 0)

    # e goes too: its ledger's mark gains it.
    await store.delete(bookie_available_path("e"))
    await auditor.check()
    clock.now += 31
    assert await auditor.check() == (frozenset({"d", "e"}), 1)
    mark = await marks.get(3)
    assert mark is not None and mark.lost_bookies == {"d", "e"}


async def test_a_bookie_back_within_the_grace_period_is_forgotten(
        store: RocksDBMetadataStore) -> None:
    await _bookies(store, "abcd", "abc")
    await _ledger(store, 1, (0, ("a", "b", "d")))
    clock = Clock()
    auditor = Auditor(store, grace_ms=10_000, clock=clock)
    await auditor.check()
    clock.now += 9
    await store.create(bookie_available_path("d"), ephemeral=True)  # restarted
    assert await auditor.check() == (frozenset(), 0)
    await store.delete(bookie_available_path("d"))
    clock.now += 9  # its clock starts again from now
    assert await auditor.check() == (frozenset(), 0)
    assert await UnderReplicationMarks(store).ledger_ids() == []


async def test_one_auditor_and_one_lock_holder_at_a_time(store: RocksDBMetadataStore) -> None:
    marks = UnderReplicationMarks(store)
    assert await marks.elect_auditor("bookie-1")
    assert await marks.elect_auditor("bookie-1")  # still it
    assert not await marks.elect_auditor("bookie-2")
    assert await marks.mark(5, {"x"})
    assert not await marks.mark(5, {"x"})  # nothing new
    assert await marks.claim(5, "bookie-1")
    assert not await marks.claim(5, "bookie-2")
    await marks.release(5)
    assert await marks.claim(5, "bookie-2")
    mark = await marks.get(5)
    assert mark is not None
    assert await marks.mark(5, {"y"})  # the mark changed since it was read...
    assert not await marks.clear(mark)  # ...so it is not cleared
    fresh = await marks.get(5)
    assert fresh is not None and fresh.lost_bookies == {"x", "y"}
    assert await marks.clear(fresh)
    assert await marks.ledger_ids() == []
