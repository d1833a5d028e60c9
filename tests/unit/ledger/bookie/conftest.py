"""Helpers and fixtures shared by the tests of this folder (moved from test_storage.py)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from ledger.api import NO_ENTRY, AddRequest
from ledger.bookie.storage import AddOp, DeleteOp, FenceOp, RocksDBLedgerStorage
from ledger.config import BookieConfig, Durability, Journal

DEADLINE_S = 5.0
LAST_POSSIBLE_ENTRY_ID = (1 << 63) - 1


class Completion:
    """A storage ``done`` callback that records its result and can be waited on."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self.calls = 0
        self.result: object = None

    def __call__(self, result: object) -> None:
        self.calls += 1
        self.result = result
        self._event.set()

    def wait(self) -> object:
        assert self._event.wait(DEADLINE_S), "operation did not complete in time"
        return self.result


class GatedDB:
    """Wraps the storage's Rdict to count writes, hold them at a gate, or fail some.

    Every attribute but ``write`` goes to the real database; ``write`` writes for
    real unless its (1-based) number is in ``fail_writes``.
    """

    def __init__(self, db: Any, *, held: bool = False, fail_writes: Sequence[int] = ()) -> None:
        self._db = db
        self.batch_lengths: list[int] = []
        self.entered = threading.Event()
        self.release = threading.Event()
        if not held:
            self.release.set()
        self._fail_writes = set(fail_writes)

    def write(self, batch: Any, options: Any) -> None:
        self.batch_lengths.append(batch.len())
        self.entered.set()
        assert self.release.wait(DEADLINE_S), "the test never released the writer"
        if len(self.batch_lengths) in self._fail_writes:
            raise Exception("injected I/O error")  # as rocksdict raises them
        self._db.write(batch, options)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._db, name)


def gate(storage: RocksDBLedgerStorage, **kwargs: Any) -> GatedDB:
    gated = GatedDB(storage._db, **kwargs)
    storage._db = gated  # type: ignore[assignment]  # observe and inject, see GatedDB
    return gated


def lengths_of(datas: Sequence[bytes], start: int = 0) -> list[int]:
    """Cumulative ledger lengths, as a writer computes them."""
    lengths = []
    total = start
    for data in datas:
        total += len(data)
        lengths.append(total)
    return lengths


def submit_add(storage: RocksDBLedgerStorage, ledger_id: int, entry_ids: Sequence[int],
               datas: Sequence[bytes], last_add_confirmed: int = NO_ENTRY, *,
               recovery: bool = False) -> Completion:
    done = Completion()
    request = AddRequest(ledger_id, entry_ids, lengths_of(datas), list(datas),
                         last_add_confirmed, recovery)
    storage.submit(AddOp(request, done))
    return done


def add(storage: RocksDBLedgerStorage, ledger_id: int, entry_ids: Sequence[int],
        datas: Sequence[bytes], last_add_confirmed: int = NO_ENTRY, *,
        recovery: bool = False) -> object:
    return submit_add(storage, ledger_id, entry_ids, datas, last_add_confirmed,
                      recovery=recovery).wait()


def submit_fence(storage: RocksDBLedgerStorage, ledger_id: int) -> Completion:
    done = Completion()
    storage.submit(FenceOp(ledger_id, done))
    return done


def submit_delete(storage: RocksDBLedgerStorage, ledger_id: int) -> Completion:
    done = Completion()
    storage.submit(DeleteOp(ledger_id, done))
    return done


def read_all(storage: RocksDBLedgerStorage, ledger_id: int) -> tuple[list[int], list[bytes]]:
    result = storage.read(ledger_id, 0, LAST_POSSIBLE_ENTRY_ID, 0)
    return result.entry_ids, result.datas


OpenStorage = Callable[..., RocksDBLedgerStorage]


@pytest.fixture
def open_storage(tmp_path: Path) -> Iterator[OpenStorage]:
    """Opens storages on ``tmp_path/bookie`` (the same directory each time); closes them all."""
    opened: list[RocksDBLedgerStorage] = []

    # RocksDB's own WAL by default: these tests gate and fail its writes
    # (``GatedDB``); the journal's own tests pass ``journal=Journal.ON``.
    def open_(durability: Durability = Durability.ASYNC, journal: Journal = Journal.NONE,
              **config: Any) -> RocksDBLedgerStorage:
        storage = RocksDBLedgerStorage(
            BookieConfig(data_dir=str(tmp_path / "bookie"), durability=durability,
                         journal=journal, **config)
        )
        opened.append(storage)
        return storage

    yield open_
    for storage in opened:
        storage.close()


# ------------------------------------------------------------------ entries
