"""RocksDBLedgerStorage on a real RocksDB: entries, ledger state, group commit, fencing, failure.

Completion callbacks run on the writer thread; each test waits for them with a
deadline. Where a test needs several operations in one group commit, it holds
the writer inside a RocksDB write (``GatedDB``) while it queues them: the
write itself is real, only its timing (or, for the failure tests, its
outcome) is controlled.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

import ledger.bookie.storage as storage_module
from ledger.api import NO_ENTRY, AddRequest, LedgerTail
from ledger.bookie.storage import AddOp, DeleteOp, FenceOp, RocksDBLedgerStorage
from ledger.config import BookieConfig, Durability
from ledger.errors import InvalidArgumentError, LedgerFencedError, NoSuchLedgerError, StorageError

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

    def open_(durability: Durability = Durability.ASYNC, **config: int) -> RocksDBLedgerStorage:
        storage = RocksDBLedgerStorage(
            BookieConfig(data_dir=str(tmp_path / "bookie"), durability=durability, **config)
        )
        opened.append(storage)
        return storage

    yield open_
    for storage in opened:
        storage.close()


# ------------------------------------------------------------------ entries


def test_entries_round_trip_with_exact_bytes_and_lengths(open_storage: OpenStorage) -> None:
    storage = open_storage(Durability.SYNC)
    datas = [b"", b"\x00", b"\xff\x00\xfe", bytes(range(256)), b"x" * 100_000, b"last"]
    assert add(storage, 7, range(len(datas)), datas, 3) is None

    result = storage.read(7, 0, len(datas) - 1, 0)

    assert result.entry_ids == [0, 1, 2, 3, 4, 5]
    assert result.datas == datas
    assert result.lengths == [0, 1, 4, 260, 100_260, 100_264]
    assert (result.last_add_confirmed, result.last_entry_id) == (3, 5)


def test_read_honours_range_bounds_and_skips_ids_not_held(open_storage: OpenStorage) -> None:
    storage = open_storage()
    held = [0, 1, 2, 5, 9, 10]
    assert add(storage, 3, held, [f"e{i}".encode() for i in held], 2) is None

    def ids(first: int, last: int) -> list[int]:
        return storage.read(3, first, last, 0).entry_ids

    assert ids(0, 0) == [0]
    assert ids(1, 5) == [1, 2, 5]
    assert ids(3, 4) == []
    assert ids(6, 8) == []
    assert ids(5, 9) == [5, 9]
    assert ids(10, 1000) == [10]
    assert ids(11, LAST_POSSIBLE_ENTRY_ID) == []
    assert storage.read(3, 2, 9, 0).datas == [b"e2", b"e5", b"e9"]
    empty = storage.read(3, 3, 4, 0)
    assert (empty.lengths, empty.datas, empty.last_add_confirmed, empty.last_entry_id) == (
        [], [], 2, 10
    )


@pytest.mark.parametrize(("first", "last"), [(-1, 0), (5, 4)])
def test_read_rejects_a_bad_range(open_storage: OpenStorage, first: int, last: int) -> None:
    storage = open_storage()
    add(storage, 3, [0], [b"a"])
    with pytest.raises(InvalidArgumentError) as caught:
        storage.read(3, first, last, 0)
    assert caught.value.ledger_id == 3


@pytest.mark.parametrize(
    ("max_bytes", "expected_ids"),
    [
        (1, [0]),  # at least one entry, even over budget
        (10, [0]),
        (11, [0, 1]),
        (20, [0, 1]),
        (25, [0, 1, 2]),  # the entry that crosses the budget is included, then it stops
        (1000, list(range(10))),
        (0, [0, 1, 2]),  # 0: the configured read_max_bytes (30)
    ],
)
def test_read_stops_after_the_byte_budget(open_storage: OpenStorage, max_bytes: int,
                                          expected_ids: list[int]) -> None:
    storage = open_storage(read_max_bytes=30)
    datas = [bytes([i]) * 10 for i in range(10)]
    add(storage, 1, range(10), datas)

    result = storage.read(1, 0, 9, max_bytes)

    assert result.entry_ids == expected_ids
    assert result.datas == [datas[i] for i in expected_ids]
    assert result.lengths == [10 * (i + 1) for i in expected_ids]


def test_keys_are_big_endian_so_entries_read_in_numeric_order(open_storage: OpenStorage) -> None:
    storage = open_storage()
    # Submitted out of order, in separate batches; little-endian keys would put
    # 256 (0x0100) before 255 (0x00ff).
    for entry_id in [256, 65536, 255, 1, 1 << 32, 257]:
        assert add(storage, 1, [entry_id], [str(entry_id).encode()]) is None

    entry_ids, datas = read_all(storage, 1)

    assert entry_ids == [1, 255, 256, 257, 65536, 1 << 32]
    assert datas == [str(i).encode() for i in entry_ids]
    assert storage.read(1, 255, 256, 0).entry_ids == [255, 256]
    assert storage.read(1, 256, 65535, 0).entry_ids == [256, 257]


# ------------------------------------------------------------- ledger state


def test_lac_and_last_entry_id_are_the_max_ever_added(open_storage: OpenStorage) -> None:
    storage = open_storage()
    with pytest.raises(NoSuchLedgerError) as caught:
        storage.tail(4)
    assert caught.value.ledger_id == 4

    add(storage, 4, [0, 1], [b"a", b"b"])
    assert storage.tail(4) == LedgerTail(NO_ENTRY, 1, False)
    add(storage, 4, [2], [b"c"], 1)
    assert storage.tail(4) == LedgerTail(1, 2, False)
    add(storage, 4, [10], [b"k"], 5)
    assert storage.tail(4) == LedgerTail(5, 10, False)
    # An older run arriving late (another writer, a re-replication) moves neither back.
    add(storage, 4, [7], [b"h"], 3)
    assert storage.tail(4) == LedgerTail(5, 10, False)

    result = storage.read(4, 0, 10, 0)
    assert (result.last_add_confirmed, result.last_entry_id) == (5, 10)
    assert result.entry_ids == [0, 1, 2, 7, 10]
    assert storage.ledger_ids() == [4]


def test_state_survives_close_and_reopen(open_storage: OpenStorage) -> None:
    storage = open_storage(Durability.SYNC)
    datas = [f"entry-{i}".encode() for i in range(5)]
    add(storage, 9, range(5), datas, 3)
    assert submit_fence(storage, 9).wait() == LedgerTail(3, 4, True)
    add(storage, 10, [0, 2], [b"x", b"y"], 0)
    storage.close()

    reopened = open_storage(Durability.SYNC)

    assert reopened.ledger_ids() == [9, 10]
    assert reopened.tail(9) == LedgerTail(3, 4, True)
    assert reopened.tail(10) == LedgerTail(0, 2, False)
    assert read_all(reopened, 9) == (list(range(5)), datas)
    assert reopened.read(9, 0, 4, 0).lengths == lengths_of(datas)
    refused = add(reopened, 9, [5], [b"late"], 4)
    assert isinstance(refused, LedgerFencedError)
    assert refused.ledger_id == 9
    assert add(reopened, 10, [3], [b"z"], 2) is None
    assert reopened.tail(10) == LedgerTail(2, 3, False)


# ----------------------------------------------------------------- group commit


def test_group_commit_writes_many_adds_from_many_threads_in_one_batch(
    open_storage: OpenStorage,
) -> None:
    storage = open_storage(Durability.SYNC)
    db = gate(storage, held=True)
    first = submit_add(storage, 100, [0], [b"first"])
    assert db.entered.wait(DEADLINE_S)  # the writer is inside the first write

    threads_count, adds_per_thread = 4, 50
    completions: list[list[Completion]] = [[] for _ in range(threads_count)]
    start = threading.Barrier(threads_count)

    def writer(index: int) -> None:
        start.wait(DEADLINE_S)
        for entry_id in range(adds_per_thread):
            completions[index].append(
                submit_add(storage, index, [entry_id], [f"{index}/{entry_id}".encode()],
                           entry_id - 1)
            )

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(threads_count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(DEADLINE_S)
        assert not thread.is_alive()
    db.release.set()

    assert first.wait() is None
    for per_thread in completions:
        assert [done.wait() for done in per_thread] == [None] * adds_per_thread
        assert [done.calls for done in per_thread] == [1] * adds_per_thread
    # One write for the first add, one for all 200 queued behind it: each of the
    # 200 entries plus one state record per ledger.
    assert db.batch_lengths == [2, threads_count * adds_per_thread + threads_count]
    for index in range(threads_count):
        assert read_all(storage, index) == (
            list(range(adds_per_thread)),
            [f"{index}/{entry_id}".encode() for entry_id in range(adds_per_thread)],
        )
        assert storage.tail(index) == LedgerTail(adds_per_thread - 2, adds_per_thread - 1, False)


# --------------------------------------------------------------------- fencing


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
    # Adding again starts an empty, unfenced ledger: the old entries are gone from disk.
    assert add(reopened, 255, [5], [b"new"]) is None
    assert read_all(reopened, 255) == ([5], [b"new"])
    assert reopened.tail(255) == LedgerTail(NO_ENTRY, 5, False)
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
