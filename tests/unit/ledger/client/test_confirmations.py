"""AddConfirmations alone: runs confirmed in entry order once their quorum acknowledged.

Wired by hand with an ``AddQueue`` and real bookies: each run is sent to the
bookies of its write sets, and the test records their acknowledgements as the
handle does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from ledger.api import AddRequest
from ledger.client.add_queue import AddQueue, AddRun
from ledger.client.confirmations import AddConfirmations
from ledger.client.write_sets import entries_for_position
from ledger.errors import LedgerFencedError
from tests.unit.ledger.conftest import FaultyBookie

MakeBookies = Callable[[int], list[FaultyBookie]]

LEDGER_ID = 3


async def _send(bookie: FaultyBookie, position: int, run: AddRun, ensemble_size: int,
                write_quorum: int) -> None:
    """What the handle does for one bookie: its part of the run, then the ack."""
    run.sent = True
    indices = entries_for_position(position, run.first_entry_id, len(run.datas),
                                   ensemble_size, write_quorum)
    if indices:
        await bookie.add_entries(AddRequest(
            LEDGER_ID, [run.first_entry_id + i for i in indices],
            [run.lengths[i] for i in indices], [run.datas[i] for i in indices], -1))
    run.acked.add(position)


def _run(queue: AddQueue, *datas: bytes) -> tuple[AddRun, list[asyncio.Future[int]]]:
    loop = asyncio.get_running_loop()
    futures = [loop.create_future() for _ in datas]
    for data, future in zip(datas, futures, strict=True):
        queue.put(data, future)
    run = queue.take()
    assert run is not None
    return run, futures


async def test_a_later_run_waits_for_the_first(make_bookies: MakeBookies) -> None:
    bookies = make_bookies(3)
    queue, acks = AddQueue(0), AddConfirmations(3, 2, 2)
    first, first_futures = _run(queue, b"a", b"bb")
    second, second_futures = _run(queue, b"ccc")
    acks.hold(first)
    acks.hold(second)
    for position, bookie in enumerate(bookies):
        await _send(bookie, position, second, 3, 2)
    acks.confirm()
    assert acks.last_add_confirmed == -1 and not second_futures[0].done() and acks
    for position in (0, 1):
        await _send(bookies[position], position, first, 3, 2)
        acks.confirm()  # entry 1 is on positions 1 and 2: at most one ack of two
        assert acks.last_add_confirmed == -1 and not first_futures[0].done()
    await _send(bookies[2], 2, first, 3, 2)
    acks.confirm()
    assert [f.result() for f in first_futures + second_futures] == [0, 1, 2]
    assert (acks.last_add_confirmed, acks.confirmed_length) == (2, 6)
    assert not acks


async def test_drained_is_signalled_when_the_last_run_is_confirmed(
        make_bookies: MakeBookies) -> None:
    bookie = make_bookies(1)[0]
    queue, acks = AddQueue(0), AddConfirmations(1, 1, 1)
    run, futures = _run(queue, b"x")
    acks.hold(run)
    waiter = asyncio.ensure_future(acks.drained())
    await asyncio.sleep(0)
    assert not waiter.done()
    await _send(bookie, 0, run, 1, 1)
    acks.confirm()
    await asyncio.wait_for(waiter, 10)
    assert futures[0].result() == 0
    assert (await bookie.read_entries(LEDGER_ID, 0, 0)).datas == [b"x"]


async def test_fail_fails_every_run_held() -> None:
    queue, acks = AddQueue(0), AddConfirmations(1, 1, 1)
    runs = [_run(queue, b"a"), _run(queue, b"b", b"c")]
    for run, _ in runs:
        acks.hold(run)
    acks.fail(LedgerFencedError("fenced", ledger_id=LEDGER_ID))
    for _, futures in runs:
        for future in futures:
            with pytest.raises(LedgerFencedError):
                future.result()
    assert not acks and list(acks) == []


def test_learn_keeps_the_greatest_lac() -> None:
    acks = AddConfirmations(1, 1, 1, last_add_confirmed=4, confirmed_length=40)
    acks.learn(2)
    assert acks.last_add_confirmed == 4
    acks.learn(9)
    assert (acks.last_add_confirmed, acks.confirmed_length) == (9, 40)
