"""RocksDB ledger storage: fencing, deletes, close, failed writes until a probe (real RocksDB)."""

from __future__ import annotations

import threading

import pytest

import ledger.bookie.storage as storage_module
from ledger.api import NO_ENTRY, LedgerTail
from ledger.config import Durability
from ledger.errors import LedgerDeletedError, LedgerFencedError, NoSuchLedgerError, StorageError
from tests.unit.ledger.bookie.conftest import (
    DEADLINE_S,
    LAST_POSSIBLE_ENTRY_ID,
    OpenStorage,
    add,
    gate,
    read_all,
    submit_add,
    submit_delete,
    submit_fence,
)


def test_fence_orders_adds_within_one_group_commit(open_storage: OpenStorage) -> None:
    storage = open_storage(Durability.SYNC)
    db = gate(storage, held=True)
    blocker = submit_add(storage, 99, [0], [b"other ledger"])
    assert db.entered.wait(DEADLINE_S)

    before = [submit_add(storage, 5, [0, 1], [b"a", b"b"]), submit_add(storage, 5, [2], [b"c"], 1)]
    fence = submit_fence(storage, 5)
    old_writer = submit_add(storage, 5, [3], [b"old writer"], 2)
    recovery = submit_add(storage, 5, [3], [b"recovered"], 2, recovery=True)
    db.release.set()

    assert blocker.wait() is None
    assert [done.wait() for done in before] == [None, None]
    # The tail is as of the fence's place in the queue: the recovery add queued
    # after it (even in the same batch) is not counted.
    assert fence.wait() == LedgerTail(1, 2, True)
    refused = old_writer.wait()
    assert isinstance(refused, LedgerFencedError)
    assert refused.ledger_id == 5
    assert recovery.wait() is None
    assert len(db.batch_lengths) == 2  # everything after the blocker went in one write
    assert storage.tail(5) == LedgerTail(2, 3, True)
    assert read_all(storage, 5) == ([0, 1, 2, 3], [b"a", b"b", b"c", b"recovered"])


def test_fence_orders_adds_across_group_commits(open_storage: OpenStorage) -> None:
    storage = open_storage(Durability.SYNC)
    assert add(storage, 5, [0], [b"a"]) is None
    assert submit_fence(storage, 5).wait() == LedgerTail(NO_ENTRY, 0, True)

    refused = add(storage, 5, [1], [b"old writer"], 0)
    assert isinstance(refused, LedgerFencedError)
    assert add(storage, 5, [1], [b"recovered"], 0, recovery=True) is None
    # Fencing again is harmless and reports the current tail.
    assert submit_fence(storage, 5).wait() == LedgerTail(0, 1, True)
    assert read_all(storage, 5) == ([0, 1], [b"a", b"recovered"])


def test_fencing_an_unknown_ledger_creates_it_fenced(open_storage: OpenStorage) -> None:
    storage = open_storage()
    assert submit_fence(storage, 12).wait() == LedgerTail(NO_ENTRY, NO_ENTRY, True)
    assert storage.tail(12) == LedgerTail(NO_ENTRY, NO_ENTRY, True)
    assert isinstance(add(storage, 12, [0], [b"a"]), LedgerFencedError)
    assert read_all(storage, 12) == ([], [])


# ---------------------------------------------------------------------- delete


def test_delete_removes_only_that_ledger(open_storage: OpenStorage) -> None:
    storage = open_storage(Durability.SYNC)
    # 255 and 256 differ in two key bytes: a range end built wrongly would show.
    edge_ids = [0, 1, 256, LAST_POSSIBLE_ENTRY_ID]
    for ledger_id in (254, 255, 256):
        assert add(storage, ledger_id, edge_ids, [b"%d" % ledger_id] * 4, 1) is None
    submit_fence(storage, 255).wait()

    assert submit_delete(storage, 255).wait() is None

    with pytest.raises(NoSuchLedgerError) as caught:
        storage.read(255, 0, 10, 0)
    assert caught.value.ledger_id == 255
    with pytest.raises(NoSuchLedgerError):
        storage.tail(255)
    assert storage.ledger_ids() == [254, 256]
    for neighbour in (254, 256):
        assert read_all(storage, neighbour) == (edge_ids, [b"%d" % neighbour] * 4)
        assert storage.tail(neighbour) == LedgerTail(1, LAST_POSSIBLE_ENTRY_ID, False)

    storage.close()
    reopened = open_storage(Durability.SYNC)
    assert reopened.ledger_ids() == [254, 256]
    with pytest.raises(NoSuchLedgerError):
        reopened.read(255, 0, 10, 0)
    # Adding again is refused for ever (its tombstone): the ledger is not re-created.
    assert isinstance(add(reopened, 255, [5], [b"new"]), LedgerDeletedError)
    assert reopened.ledger_ids() == [254, 256]
    for neighbour in (254, 256):
        assert read_all(reopened, neighbour) == (edge_ids, [b"%d" % neighbour] * 4)


def test_delete_of_an_unknown_ledger_succeeds(open_storage: OpenStorage) -> None:
    storage = open_storage()
    add(storage, 1, [0], [b"a"])
    assert submit_delete(storage, 2).wait() is None
    assert storage.ledger_ids() == [1]
    assert read_all(storage, 1) == ([0], [b"a"])


# ------------------------------------------------------------------- lifecycle


def test_close_finishes_queued_changes(open_storage: OpenStorage) -> None:
    storage = open_storage(Durability.SYNC)
    db = gate(storage, held=True)
    queued = [submit_add(storage, 1, [i], [b"%d" % i], i - 1) for i in range(3)]
    assert db.entered.wait(DEADLINE_S)
    queued.append(submit_fence(storage, 1))
    closer = threading.Thread(target=storage.close)
    closer.start()
    db.release.set()
    closer.join(DEADLINE_S)
    assert not closer.is_alive()

    assert [done.wait() for done in queued] == [None, None, None, LedgerTail(1, 2, True)]
    reopened = open_storage(Durability.SYNC)
    assert reopened.tail(1) == LedgerTail(1, 2, True)
    assert read_all(reopened, 1) == ([0, 1, 2], [b"0", b"1", b"2"])


def test_submit_after_close_fails_with_storage_error(open_storage: OpenStorage) -> None:
    storage = open_storage()
    add(storage, 1, [0], [b"a"])
    storage.close()
    storage.close()  # idempotent

    completions = [submit_add(storage, 1, [1], [b"b"]), submit_fence(storage, 1),
                   submit_delete(storage, 1)]

    for done in completions:
        # Answered at once, on the submitting thread.
        assert done.calls == 1
        assert isinstance(done.result, StorageError)
        assert done.result.retriable is True


def test_opening_a_directory_in_use_fails_with_storage_error(open_storage: OpenStorage) -> None:
    open_storage()
    with pytest.raises(StorageError):
        open_storage()


# --------------------------------------------------------------------- failure


def test_a_failed_write_fails_its_batch_and_later_changes_until_a_probe(
        open_storage: OpenStorage, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(storage_module, "PROBE_INTERVAL_S", 3600.0)  # no probe yet
    storage = open_storage(Durability.SYNC)
    assert add(storage, 1, [0], [b"kept"]) is None
    db = gate(storage, held=True, fail_writes=[2])
    blocker = submit_add(storage, 1, [1], [b"kept too"], 0)
    assert db.entered.wait(DEADLINE_S)
    failing_batch = [submit_add(storage, 1, [2], [b"lost"], 1), submit_add(storage, 2, [0], [b"x"]),
                     submit_fence(storage, 3)]
    db.release.set()

    assert blocker.wait() is None
    for done in failing_batch:
        assert isinstance(done.wait(), StorageError)
    later = [submit_add(storage, 1, [3], [b"later"]), submit_fence(storage, 1),
             submit_delete(storage, 1), submit_add(storage, 4, [0], [b"new ledger"])]
    for done in later:
        assert isinstance(done.wait(), StorageError)
        assert done.calls == 1
    assert len(db.batch_lengths) == 2  # nothing is written after the failure
    assert storage.failure is not None
    assert "injected I/O error" in str(storage.failure)
    # The in-memory states were read back from disk: the failed batch left no trace.
    assert storage.ledger_ids() == [1]
    assert storage.tail(1) == LedgerTail(0, 1, False)

    # The disk takes writes again: the next change probes first, then goes through.
    monkeypatch.setattr(storage_module, "PROBE_INTERVAL_S", 0.0)
    assert add(storage, 1, [2], [b"after"], 1) is None
    assert storage.failure is None
    assert read_all(storage, 1) == ([0, 1, 2], [b"kept", b"kept too", b"after"])

    # A restart recovers from what is on disk.
    storage.close()
    reopened = open_storage(Durability.SYNC)
    assert reopened.ledger_ids() == [1]
    assert reopened.tail(1) == LedgerTail(1, 2, False)
    assert read_all(reopened, 1) == ([0, 1, 2], [b"kept", b"kept too", b"after"])
    assert add(reopened, 1, [3], [b"again"], 2) is None


def test_a_failed_first_write_fails_everything_after_it(
        open_storage: OpenStorage, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(storage_module, "PROBE_INTERVAL_S", 3600.0)  # no probe
    storage = open_storage()
    db = gate(storage, fail_writes=[1])

    failed = submit_add(storage, 1, [0], [b"a"]).wait()

    assert isinstance(failed, StorageError)
    assert isinstance(add(storage, 1, [1], [b"b"]), StorageError)
    assert isinstance(submit_fence(storage, 1).wait(), StorageError)
    assert len(db.batch_lengths) == 1
