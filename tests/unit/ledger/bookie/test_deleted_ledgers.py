"""A deleted ledger stays deleted: its tombstone refuses every later add and fence.

On a real RocksDB, with and without the journal, and across a restart (for the
journal: a crash copy, so the tombstone comes back from the journal's replay).
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
from rocksdict import Options, Rdict, WriteBatch

from ledger.bookie.journal import DELETE, FENCE, encode_ledger_op
from ledger.bookie.ops import TOMBSTONE_RETENTION_S, LedgerState, tombstone_key
from ledger.bookie.replay import apply_record
from ledger.bookie.storage import RocksDBLedgerStorage
from ledger.bookie.tombstones import load_tombstones
from ledger.config import BookieConfig, Durability, Journal
from ledger.errors import LedgerDeletedError, LedgerFencedError, NoSuchLedgerError
from tests.unit.ledger.bookie.conftest import (
    OpenStorage,
    add,
    submit_add,
    submit_delete,
    submit_fence,
)


def assert_refused(storage: RocksDBLedgerStorage, ledger_id: int) -> None:
    """Adds (recovery ones too) and fences of ``ledger_id`` fail; it is not re-created."""
    for recovery in (False, True):
        refused = add(storage, ledger_id, [3], [b"late"], 2, recovery=recovery)
        assert isinstance(refused, LedgerDeletedError)
        assert isinstance(refused, LedgerFencedError)  # what every writer already stops on
        assert refused.ledger_id == ledger_id
    assert isinstance(submit_fence(storage, ledger_id).wait(), LedgerDeletedError)
    assert ledger_id not in storage.ledger_ids()
    with pytest.raises(NoSuchLedgerError):
        storage.tail(ledger_id)
    with pytest.raises(NoSuchLedgerError):
        storage.read(ledger_id, 0, 10, 0)


@pytest.mark.parametrize("journal", [Journal.NONE, Journal.ON])
def test_an_add_after_fence_and_delete_is_refused_also_after_a_restart(
        open_storage: OpenStorage, journal: Journal) -> None:
    storage = open_storage(Durability.SYNC, journal=journal)
    assert add(storage, 5, [0, 1, 2], [b"a", b"b", b"c"], 1) is None
    assert add(storage, 6, [0], [b"other"]) is None
    assert submit_fence(storage, 5).wait().fenced  # type: ignore[attr-defined]
    assert submit_delete(storage, 5).wait() is None

    assert_refused(storage, 5)
    assert storage.ledger_ids() == [6]
    assert submit_delete(storage, 5).wait() is None  # a delete stays idempotent
    storage.close()

    restarted = open_storage(Durability.SYNC, journal=journal)
    assert_refused(restarted, 5)
    assert restarted.ledger_ids() == [6]
    assert add(restarted, 6, [1], [b"still taken"]) is None


def test_an_add_queued_right_behind_a_delete_is_refused(
        open_storage: OpenStorage) -> None:
    # No fence first: the delete alone fences, from its place in the queue on.
    storage = open_storage(Durability.SYNC, journal=Journal.ON)
    assert add(storage, 9, [0], [b"a"]) is None
    deleted = submit_delete(storage, 9)
    refused = submit_add(storage, 9, [1], [b"b"], 0)
    assert deleted.wait() is None
    assert isinstance(refused.wait(), LedgerDeletedError)
    assert 9 not in storage.ledger_ids()


def test_the_tombstone_survives_a_crash_through_the_journal_replay(
        tmp_path: Path, open_storage: OpenStorage) -> None:
    storage = open_storage(Durability.SYNC, journal=Journal.ON)
    assert add(storage, 2, [0, 1], [b"x", b"y"], 0) is None
    assert submit_delete(storage, 2).wait() is None
    # A crash right after the delete was acknowledged: RocksDB may not have it
    # yet (no WAL of its own), only the journal does.
    crashed = tmp_path / "crashed"
    shutil.copytree(tmp_path / "bookie", crashed, ignore=shutil.ignore_patterns("LOCK"))

    restarted = RocksDBLedgerStorage(BookieConfig(data_dir=str(crashed)))
    try:
        assert_refused(restarted, 2)
        assert restarted.ledger_ids() == []
    finally:
        restarted.close()


def test_tombstones_expire_after_the_retention(tmp_path: Path,
                                               open_storage: OpenStorage) -> None:
    storage = open_storage(Durability.SYNC)
    assert submit_delete(storage, 4).wait() is None
    assert submit_delete(storage, 8).wait() is None
    storage.close()

    db = Rdict(str(tmp_path / "bookie"), Options(raw_mode=True))
    try:
        assert load_tombstones(db) == {4, 8}
        # Ledger 8's tombstone is older than the retention, 4's is not.
        db.put(tombstone_key(8), int(time.time() - TOMBSTONE_RETENTION_S - 60).to_bytes(8, "big"))
        assert load_tombstones(db) == {4}
        assert db.get(tombstone_key(8)) is None  # dropped from disk too
        assert load_tombstones(db) == {4}
    finally:
        db.close()


def test_replaying_a_delete_record_puts_the_tombstone(tmp_path: Path) -> None:
    # Deterministic form of the crash above: RocksDB never got the delete, only
    # the journal has it; its replay alone must leave the ledger refused.
    db = Rdict(str(tmp_path / "db"), Options(raw_mode=True))
    try:
        states = {6: LedgerState(fenced=True, last_add_confirmed=1, last_entry_id=2)}
        write, dirty = WriteBatch(raw_mode=True), {6}
        for kind in (FENCE, DELETE):
            apply_record(b"".join(encode_ledger_op(kind, 6)), states, write, dirty)
        db.write(write)
        assert states == {} and dirty == set()
        assert load_tombstones(db) == {6}
    finally:
        db.close()
