"""Ensemble alone: a failed bookie replaced by ensemble change on real bookies and metadata.

Wired by hand with ``HandleMetadata``, ``AddConfirmations`` and an ``AddQueue``;
the test plays the handle's part (``send``, ``fail``) and records what it is asked.
"""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Callable, Sequence

from ledger.api import AddRequest, LedgerState
from ledger.client.add_queue import AddQueue, AddRun
from ledger.client.confirmations import AddConfirmations
from ledger.client.ensemble import Ensemble, WriterCalls
from ledger.client.handle_metadata import HandleMetadata
from ledger.client.ledger_client import LedgerClient
from ledger.errors import (
    BookieUnavailableError,
    LedgerError,
    LedgerFencedError,
    NotEnoughBookiesError,
)
from tests.unit.ledger.conftest import FaultyBookie

MakeBookies = Callable[[int], list[FaultyBookie]]
MakeClient = Callable[..., LedgerClient]


class Writer:
    """The handle's side: runs sent (to which positions) and the failure."""

    def __init__(self, client: LedgerClient, record: HandleMetadata) -> None:
        self.sent: list[tuple[AddRun, list[int]]] = []
        self.failures: list[LedgerError] = []
        self.acks = AddConfirmations(1, 1, 1)
        self.record = record
        self.ensemble = Ensemble(client, record, self.acks)
        self.calls = WriterCalls(self.send, self.failures.append, lambda: bool(self.failures))

    def send(self, run: AddRun, positions: Sequence[int]) -> None:
        run.sent = True
        self.sent.append((run, list(positions)))


async def _writer(client: LedgerClient) -> Writer:
    handle = await client.create(ensemble_size=1, write_quorum=1, ack_quorum=1)
    return Writer(client, HandleMetadata(client, *await client.read_metadata(handle.ledger_id)))


def _held_run(writer: Writer, count: int) -> tuple[AddRun, list[asyncio.Future[int]]]:
    """A run sent to the ensemble and awaiting its ack, as the handle leaves it."""
    queue = AddQueue(0)
    futures = [asyncio.get_running_loop().create_future() for _ in range(count)]
    for index, future in enumerate(futures):
        queue.put(b"entry-%d" % index, future)
    run = queue.take()
    assert run is not None
    run.sent = True
    writer.acks.hold(run)
    return run, futures


async def test_a_failed_bookie_is_replaced_and_the_run_sent_again(
        make_bookies: MakeBookies, make_client: MakeClient) -> None:
    client = make_client(make_bookies(2))
    writer = await _writer(client)
    run, futures = _held_run(writer, 2)
    old = writer.ensemble.bookies[0]
    drained = asyncio.ensure_future(writer.acks.drained())
    writer.ensemble.bookie_failed(0, old, BookieUnavailableError("down (test)"), writer.calls)
    assert writer.ensemble.changing
    await asyncio.wait_for(drained, 10)
    new = writer.ensemble.bookies[0]
    assert not writer.ensemble.changing and new.bookie_id != old.bookie_id
    stored, _ = await client.read_metadata(writer.record.current.ledger_id)
    assert stored.ensembles == ((0, (new.bookie_id,)),) == writer.record.current.ensembles
    assert writer.sent == [(run, [0])] and writer.failures == []
    # The handle sends the run to the replacement; its ack confirms the run.
    await new.add_entries(AddRequest(stored.ledger_id, range(2), run.lengths, run.datas, -1))
    run.acked.add(0)
    writer.acks.confirm()
    assert [future.result() for future in futures] == [0, 1]


async def test_with_no_bookie_to_take_its_place_the_writer_fails(
        make_bookies: MakeBookies, make_client: MakeClient) -> None:
    client = make_client(make_bookies(1))
    writer = await _writer(client)
    before = writer.record.current
    drained = asyncio.ensure_future(writer.acks.drained())
    writer.ensemble.bookie_failed(0, writer.ensemble.bookies[0],
                                  BookieUnavailableError("down (test)"), writer.calls)
    await asyncio.wait_for(drained, 10)
    assert [type(error) for error in writer.failures] == [NotEnoughBookiesError]
    assert writer.record.current == before and writer.sent == []


async def test_a_ledger_changed_by_someone_else_fences_the_writer(
        make_bookies: MakeBookies, make_client: MakeClient) -> None:
    client = make_client(make_bookies(2))
    writer = await _writer(client)
    mine = writer.record.current
    await client.write_metadata(mine.transition(LedgerState.IN_RECOVERY), writer.record.version)
    drained = asyncio.ensure_future(writer.acks.drained())
    writer.ensemble.bookie_failed(0, writer.ensemble.bookies[0],
                                  BookieUnavailableError("down (test)"), writer.calls)
    await asyncio.wait_for(drained, 10)
    assert [type(error) for error in writer.failures] == [LedgerFencedError]
    assert writer.ensemble.bookies[0].bookie_id == mine.ensembles[0][1][0]


async def test_a_departed_bookie_is_replaced_only_if_it_is_in_the_ensemble(
        make_bookies: MakeBookies, make_client: MakeClient) -> None:
    client = make_client(make_bookies(2))
    writer = await _writer(client)
    current = writer.ensemble.bookies[0].bookie_id
    writer.ensemble.replace_departed("bookie-7", writer.calls)
    assert not writer.ensemble.changing
    drained = asyncio.ensure_future(writer.acks.drained())
    writer.ensemble.replace_departed(current, writer.calls)
    assert writer.ensemble.changing
    await asyncio.wait_for(drained, 10)
    assert writer.ensemble.bookies[0].bookie_id != current and writer.failures == []


async def test_a_dropped_writer_is_freed_at_once(make_bookies: MakeBookies,
                                                 make_client: MakeClient) -> None:
    # The ensemble keeps no reference to its handle at rest: without a cycle a
    # dropped writer leaves the client's weak set (bookie departures) and the
    # open-ledgers gauge at once, not at the next garbage collection.
    client = make_client(make_bookies(2))
    handle = await client.create()
    await handle.add(b"x")
    gc.disable()
    try:
        dropped = weakref.ref(handle)
        del handle
        assert dropped() is None
    finally:
        gc.enable()
