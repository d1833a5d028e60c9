"""Bookie: the checks every request passes before storage, and asyncio over the writer thread."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path

import pytest

from ledger.api import NO_ENTRY, AddRequest, LedgerTail, ReadResult
from ledger.bookie.bookie import Bookie
from ledger.config import BookieConfig, Durability, Journal
from ledger.errors import (
    EntryTooLargeError,
    InvalidArgumentError,
    LedgerFencedError,
    NoSuchLedgerError,
    StorageError,
)
from tests.unit.ledger.bookie.conftest import DEADLINE_S, GatedDB, lengths_of

MAX_ENTRY_BYTES = 1024


def make_bookie(path: Path, journal: Journal = Journal.ON) -> Bookie:
    return Bookie(
        BookieConfig(data_dir=str(path), durability=Durability.ASYNC,
                     max_entry_bytes=MAX_ENTRY_BYTES, journal=journal),
        bookie_id="bookie-under-test",
    )


@pytest.fixture
def bookie(tmp_path: Path) -> Iterator[Bookie]:
    made = make_bookie(tmp_path / "bookie")
    yield made
    made.shutdown()


def request(ledger_id: int, entry_ids: Sequence[int], datas: Sequence[bytes],
            last_add_confirmed: int = NO_ENTRY, *, recovery: bool = False) -> AddRequest:
    return AddRequest(ledger_id, entry_ids, lengths_of(datas), list(datas), last_add_confirmed,
                      recovery)


async def test_add_and_read_round_trip(bookie: Bookie) -> None:
    await bookie.add_entries(request(1, range(3), [b"a", b"bb", b"ccc"], 1))
    await bookie.add_entries(request(1, [5, 8], [b"f", b"i"], 2))

    result = await bookie.read_entries(1, 0, 8)

    assert result == ReadResult([0, 1, 2, 5, 8], [1, 3, 6, 1, 2],
                                [b"a", b"bb", b"ccc", b"f", b"i"], 2, 8)
    assert await bookie.read_last_add_confirmed(1) == LedgerTail(2, 8, False)
    assert bookie.ledger_ids() == [1]
    assert bookie.bookie_id == "bookie-under-test"
    assert bookie.config.max_entry_bytes == MAX_ENTRY_BYTES


# ------------------------------------------------------------------ validation


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda b: b.add_entries(request(-1, [0], [b"a"])), id="add"),
        pytest.param(lambda b: b.read_entries(-1, 0, 0), id="read"),
        pytest.param(lambda b: b.read_entries(-1, 0, 0, fence=True), id="fencing-read"),
        pytest.param(lambda b: b.read_last_add_confirmed(-1), id="read_last_add_confirmed"),
        pytest.param(lambda b: b.fence(-1), id="fence"),
        pytest.param(lambda b: b.delete_ledger(-1), id="delete"),
    ],
)
async def test_a_negative_ledger_id_is_invalid(
    bookie: Bookie, call: Callable[[Bookie], Awaitable[object]]
) -> None:
    with pytest.raises(InvalidArgumentError, match="ledger_id must be >= 0, got -1"):
        await call(bookie)
    assert bookie.ledger_ids() == []


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param(AddRequest(4, [], [], [], NO_ENTRY), id="empty-list"),
        pytest.param(AddRequest(4, range(0), [], [], NO_ENTRY), id="empty-range"),
        pytest.param(AddRequest(4, [0, 1], [1, 2], [b"a"], NO_ENTRY), id="fewer-datas"),
        pytest.param(AddRequest(4, [0, 1], [1], [b"a", b"b"], NO_ENTRY), id="fewer-lengths"),
        pytest.param(AddRequest(4, range(2), [1, 2, 3], [b"a", b"b", b"c"], NO_ENTRY),
                     id="fewer-ids"),
        pytest.param(request(4, [0, 2, 2], [b"a", b"b", b"c"]), id="repeated-id"),
        pytest.param(request(4, [3, 1], [b"a", b"b"]), id="decreasing-ids"),
        pytest.param(request(4, [-1, 0], [b"a", b"b"]), id="negative-id-list"),
        pytest.param(request(4, range(-1, 1), [b"a", b"b"]), id="negative-id-range"),
        pytest.param(request(4, range(5, 3, -1), [b"a", b"b"]), id="decreasing-range"),
    ],
)
async def test_a_malformed_add_is_invalid_and_stores_nothing(bookie: Bookie,
                                                             bad: AddRequest) -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        await bookie.add_entries(bad)
    assert type(caught.value) is InvalidArgumentError
    assert caught.value.ledger_id == 4
    assert caught.value.retriable is False
    with pytest.raises(NoSuchLedgerError):
        await bookie.read_last_add_confirmed(4)


async def test_an_oversize_entry_is_refused_with_its_size_and_the_limit(bookie: Bookie) -> None:
    datas = [b"a", b"x" * (MAX_ENTRY_BYTES + 1), b"y" * (MAX_ENTRY_BYTES + 5), b"c"]
    with pytest.raises(EntryTooLargeError) as caught:
        await bookie.add_entries(request(6, range(4), datas))
    assert (caught.value.size, caught.value.limit) == (MAX_ENTRY_BYTES + 5, MAX_ENTRY_BYTES)
    assert caught.value.ledger_id == 6
    assert bookie.ledger_ids() == []

    # Exactly the limit is fine.
    await bookie.add_entries(request(6, [0], [b"z" * MAX_ENTRY_BYTES]))
    assert (await bookie.read_entries(6, 0, 0)).datas == [b"z" * MAX_ENTRY_BYTES]


@pytest.mark.parametrize(("first", "last"), [(-1, 0), (-5, -1), (5, 4)])
@pytest.mark.parametrize("fence", [False, True])
async def test_a_bad_read_range_is_invalid(bookie: Bookie, first: int, last: int,
                                           fence: bool) -> None:
    await bookie.add_entries(request(2, [0], [b"a"]))
    with pytest.raises(InvalidArgumentError, match="bad entry range") as caught:
        await bookie.read_entries(2, first, last, fence=fence)
    assert caught.value.ledger_id == 2
    # Refused before fencing.
    assert await bookie.read_last_add_confirmed(2) == LedgerTail(NO_ENTRY, 0, False)


async def test_reading_an_unknown_ledger_is_no_such_ledger(bookie: Bookie) -> None:
    await bookie.add_entries(request(2, [0], [b"a"]))
    with pytest.raises(NoSuchLedgerError) as caught:
        await bookie.read_entries(3, 0, 10)
    assert caught.value.ledger_id == 3
    with pytest.raises(NoSuchLedgerError) as caught:
        await bookie.read_last_add_confirmed(3)
    assert caught.value.ledger_id == 3


async def test_fencing_an_unknown_ledger_creates_it_fenced(bookie: Bookie) -> None:
    assert await bookie.fence(8) == LedgerTail(NO_ENTRY, NO_ENTRY, True)

    assert await bookie.read_last_add_confirmed(8) == LedgerTail(NO_ENTRY, NO_ENTRY, True)
    assert bookie.ledger_ids() == [8]
    with pytest.raises(LedgerFencedError) as caught:
        await bookie.add_entries(request(8, [0], [b"old writer"]))
    assert caught.value.ledger_id == 8
    await bookie.add_entries(request(8, [0], [b"recovered"], recovery=True))
    assert (await bookie.read_entries(8, 0, 0)).datas == [b"recovered"]


async def test_a_fencing_read_fences_after_earlier_adds(bookie: Bookie) -> None:
    await bookie.add_entries(request(9, range(2), [b"a", b"b"], 0))

    result = await bookie.read_entries(9, 0, 5, fence=True)

    assert result == ReadResult([0, 1], [1, 2], [b"a", b"b"], 0, 1)
    assert await bookie.read_last_add_confirmed(9) == LedgerTail(0, 1, True)
    assert (await bookie.read_entries(10, 0, 0, fence=True)) == ReadResult([], [], [], -1, -1)
    assert bookie.ledger_ids() == [9, 10]


async def test_delete_then_read_is_no_such_ledger(bookie: Bookie) -> None:
    await bookie.add_entries(request(3, [0], [b"a"]))
    await bookie.delete_ledger(3)
    await bookie.delete_ledger(3)  # idempotent
    with pytest.raises(NoSuchLedgerError):
        await bookie.read_entries(3, 0, 0)
    assert bookie.ledger_ids() == []


async def test_after_shutdown_every_change_fails_with_storage_error(bookie: Bookie) -> None:
    await bookie.add_entries(request(1, [0], [b"a"]))
    bookie.shutdown()

    with pytest.raises(StorageError) as caught:
        await bookie.add_entries(request(1, [1], [b"b"]))
    assert caught.value.retriable is True
    with pytest.raises(StorageError):
        await bookie.fence(1)
    with pytest.raises(StorageError):
        await bookie.delete_ledger(1)
    await bookie.close()  # a client's close; harmless


def test_a_caller_loop_closed_under_a_pending_add_does_not_break_the_bookie(
    tmp_path: Path,
) -> None:
    """The writer thread answers into a loop that is gone; later callers must not notice."""
    bookie = make_bookie(tmp_path / "bookie", Journal.NONE)  # gates RocksDB's synced write
    try:
        db = GatedDB(bookie._storage._db, held=True)
        bookie._storage._db = db  # type: ignore[assignment]
        abandoned = asyncio.new_event_loop()
        task = abandoned.create_task(bookie.add_entries(request(1, [0], [b"a"])))
        abandoned.run_until_complete(asyncio.sleep(0))  # one step: the add is submitted
        assert db.entered.wait(DEADLINE_S)
        task.cancel()
        abandoned.run_until_complete(asyncio.gather(task, return_exceptions=True))
        abandoned.close()
        db.release.set()  # the writer now completes the add into the closed loop

        async def later() -> LedgerTail:
            await asyncio.wait_for(bookie.add_entries(request(1, [1], [b"b"], 0)), DEADLINE_S)
            return await bookie.read_last_add_confirmed(1)

        assert asyncio.run(later()) == LedgerTail(0, 1, False)
    finally:
        bookie.shutdown()
