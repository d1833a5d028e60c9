"""AddQueue alone: numbering, running lengths, one take per turn, failing what is queued.

The runs it makes are sent as they are to a real bookie, as the handle sends them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from ledger.api import AddRequest
from ledger.client.add_queue import AddQueue
from ledger.errors import LedgerFencedError
from tests.unit.ledger.conftest import FaultyBookie

MakeBookies = Callable[[int], list[FaultyBookie]]


def _future() -> asyncio.Future[int]:
    return asyncio.get_running_loop().create_future()


async def test_a_take_numbers_the_run_and_keeps_running_lengths(
        make_bookies: MakeBookies) -> None:
    queue = AddQueue(0)
    assert queue.take() is None
    assert [queue.put(data, _future()) for data in (b"ab", b"cde", b"f")] == [2, 5, 6]
    run = queue.take()
    assert run is not None
    assert (run.first_entry_id, run.datas, run.lengths) == (0, [b"ab", b"cde", b"f"], [2, 5, 6])
    assert queue.next_entry_id == 3 and queue.take() is None
    # Bytes queued count from the last take; lengths run on over the ledger.
    assert queue.put(b"gh", _future()) == 2
    second = queue.take()
    assert second is not None and (second.first_entry_id, second.lengths) == (3, [8])
    # The runs go to a bookie as they are: it holds entries 0..3.
    bookie = make_bookies(1)[0]
    for sent in (run, second):
        await bookie.add_entries(AddRequest(
            7, range(sent.first_entry_id, sent.first_entry_id + len(sent.datas)),
            sent.lengths, sent.datas, -1))
    assert (await bookie.read_entries(7, 0, 3)).datas == [b"ab", b"cde", b"f", b"gh"]


async def test_one_schedule_per_take() -> None:
    queue = AddQueue(10)
    assert queue.schedule() is True
    assert queue.schedule() is False
    queue.put(b"x", _future())
    run = queue.take()
    assert run is not None and run.first_entry_id == 10
    assert queue.schedule() is True


async def test_fail_fails_every_queued_future_and_drops_them() -> None:
    queue = AddQueue(0)
    futures = [_future() for _ in range(3)]
    for future in futures:
        queue.put(b"x", future)
    error = LedgerFencedError("fenced", ledger_id=1)
    queue.fail(error)
    for future in futures:
        with pytest.raises(LedgerFencedError):
            future.result()
    assert queue.take() is None
