"""RocksDBLedgerStorage on a real RocksDB: entries, ledger state, group commit, fencing, failure.

Completion callbacks run on the writer thread; each test waits for them with a
deadline. Where a test needs several operations in one group commit, it holds
the writer inside a RocksDB write (``GatedDB``) while it queues them: the
write itself is real, only its timing (or, for the failure tests, its
outcome) is controlled.
"""

from __future__ import annotations

import threading

import pytest

from ledger.api import NO_ENTRY, LedgerTail
from ledger.config import Durability
from ledger.errors import InvalidArgumentError, LedgerFencedError, NoSuchLedgerError
from tests.unit.ledger.bookie.conftest import (
    DEADLINE_S,
    LAST_POSSIBLE_ENTRY_ID,
    Completion,
    OpenStorage,
    add,
    gate,
    lengths_of,
    read_all,
    submit_add,
    submit_fence,
)


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
