"""LedgerHandle and LedgerClient against real in-process bookies."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from ledger.api import AddRequest, LedgerState
from ledger.client.ledger_client import LedgerClient
from ledger.errors import (
    EntryTooLargeError,
    InvalidArgumentError,
    LedgerClosedError,
    LedgerFencedError,
    NoSuchEntryError,
    NoSuchLedgerError,
    NotEnoughBookiesError,
)
from tests.unit.ledger.conftest import FaultyBookie

MakeBookies = Callable[[int], list[FaultyBookie]]
MakeClient = Callable[..., LedgerClient]


async def test_add_read_round_trip_in_order(make_bookies: MakeBookies,
                                            make_client: MakeClient) -> None:
    client = make_client(make_bookies(1))
    handle = await client.create()
    futures = [handle.add_async(f"entry-{i}".encode()) for i in range(500)]
    assert [await f for f in futures] == list(range(500))
    assert handle.last_add_confirmed == 499
    assert await handle.read(0, 499) == [f"entry-{i}".encode() for i in range(500)]
    assert await handle.read(10, 12) == [b"entry-10", b"entry-11", b"entry-12"]


async def test_acks_resolve_in_entry_order(make_bookies: MakeBookies,
                                           make_client: MakeClient) -> None:
    client = make_client(make_bookies(3))
    handle = await client.create(ensemble_size=3, write_quorum=2, ack_quorum=2)
    order: list[int] = []
    futures = []
    for i in range(300):
        future = handle.add_async(b"x" * (i % 7))
        future.add_done_callback(lambda f: order.append(f.result()))
        futures.append(future)
        if i % 50 == 0:
            await future  # its run is confirmed; the next adds form a run of their own
    await asyncio.gather(*futures)
    assert order == list(range(300))


async def test_striped_ledger_reads_every_entry(make_bookies: MakeBookies,
                                                make_client: MakeClient) -> None:
    bookies = make_bookies(3)
    client = make_client(bookies)
    handle = await client.create(ensemble_size=3, write_quorum=2, ack_quorum=2)
    for i in range(100):
        handle.add_async(i.to_bytes(4, "big"))
    await handle.add(b"last")
    assert await handle.read(0, 100) == [i.to_bytes(4, "big") for i in range(100)] + [b"last"]
    # Each bookie holds two thirds of the entries (write quorum 2 of 3).
    held = [len((await b.bookie.read_entries(handle.ledger_id, 0, 100)).entry_ids)
            for b in bookies]
    assert sorted(held) == [67, 67, 68]


async def test_reader_never_reads_past_lac(make_bookies: MakeBookies,
                                           make_client: MakeClient) -> None:
    client = make_client(make_bookies(1))
    writer = await client.create()
    for i in range(10):
        await writer.add(b"%d" % i)
    reader = await client.open(writer.ledger_id, recovery=False)
    # The LAC travels on adds: the bookie knows entry 8 is confirmed (piggybacked
    # on the add of entry 9), not yet entry 9.
    assert reader.last_add_confirmed == 8
    with pytest.raises(NoSuchEntryError):
        await reader.read(0, 9)
    assert await reader.read(0, 8) == [b"%d" % i for i in range(9)]
    assert (await client.read_metadata(writer.ledger_id))[0].state is LedgerState.OPEN


async def test_close_records_end_and_length(make_bookies: MakeBookies,
                                            make_client: MakeClient) -> None:
    client = make_client(make_bookies(1))
    handle = await client.create()
    for data in (b"a", b"bb", b"ccc"):
        handle.add_async(data)
    await handle.close()
    metadata, _ = await client.read_metadata(handle.ledger_id)
    assert (metadata.state, metadata.last_entry_id, metadata.length) == (LedgerState.CLOSED, 2, 6)
    with pytest.raises(LedgerClosedError):
        handle.add_async(b"late")
    reader = await client.open(handle.ledger_id)
    assert await reader.read(0, 2) == [b"a", b"bb", b"ccc"]
    await handle.close()  # idempotent


async def test_empty_ledger_closes_at_minus_one(make_bookies: MakeBookies,
                                                make_client: MakeClient) -> None:
    client = make_client(make_bookies(1))
    handle = await client.create()
    await handle.close()
    reader = await client.open(handle.ledger_id)
    assert (reader.last_add_confirmed, reader.length) == (-1, 0)


async def test_fencing_stops_the_old_writer(make_bookies: MakeBookies,
                                            make_client: MakeClient) -> None:
    bookies = make_bookies(3)
    writer_a = make_client(bookies)
    handle = await writer_a.create(ensemble_size=3, write_quorum=2, ack_quorum=2)
    acknowledged = [await handle.add(b"a-%d" % i) for i in range(20)]
    # Some adds still in flight when B recovers.
    in_flight = [handle.add_async(b"a-%d" % i) for i in range(20, 40)]
    writer_b = make_client(bookies)
    recovered = await writer_b.open(handle.ledger_id)
    results = await asyncio.gather(*in_flight, return_exceptions=True)
    confirmed = acknowledged + [r for r in results if isinstance(r, int)]
    assert recovered.last_add_confirmed >= max(confirmed)
    assert await recovered.read(0, recovered.last_add_confirmed) == [
        b"a-%d" % i for i in range(recovered.last_add_confirmed + 1)
    ]
    with pytest.raises(LedgerFencedError):
        await handle.add(b"after fence")
    with pytest.raises(LedgerFencedError):
        await handle.close()


async def test_recovery_finds_and_rereplicates_a_partial_tail(
    make_bookies: MakeBookies, make_client: MakeClient
) -> None:
    bookies = make_bookies(3)
    writer = make_client(bookies)
    handle = await writer.create(ensemble_size=3, write_quorum=3, ack_quorum=2)
    for i in range(30):
        await handle.add(b"%d" % i)
    # The writer dies mid-send: entry 30 reached two bookies (confirmable),
    # entry 31 only one (never confirmed, but it exists and is kept).
    length_30 = handle.length + 2
    await bookies[0].bookie.add_entries(AddRequest(handle.ledger_id, [30, 31],
                                                   [length_30, length_30 + 2], [b"30", b"31"], 29))
    await bookies[1].bookie.add_entries(AddRequest(handle.ledger_id, [30], [length_30],
                                                   [b"30"], 29))
    other = make_client(bookies)
    recovered = await other.open(handle.ledger_id)
    assert recovered.last_add_confirmed == 31
    metadata, _ = await other.read_metadata(handle.ledger_id)
    assert (metadata.state, metadata.length) == (LedgerState.CLOSED, length_30 + 2)
    assert await recovered.read(28, 31) == [b"28", b"29", b"30", b"31"]
    # Re-replicated to every bookie of the write set.
    for bookie in bookies:
        held = await bookie.bookie.read_entries(handle.ledger_id, 30, 31)
        assert held.entry_ids == [30, 31]
    # A second recovery agrees.
    again = await make_client(bookies).open(handle.ledger_id)
    assert again.last_add_confirmed == 31


async def test_ensemble_change_when_a_bookie_fails(make_bookies: MakeBookies,
                                                   make_client: MakeClient) -> None:
    bookies = make_bookies(4)
    client = make_client(bookies[:3])
    client.directory.add(bookies[3])
    handle = await client.create(ensemble_size=3, write_quorum=2, ack_quorum=2)
    first = [await handle.add(b"%d" % i) for i in range(10)]
    victim = next(b for b in bookies if b.bookie_id in handle.metadata.ensembles[0][1])
    victim.down = True
    rest = await asyncio.gather(*(handle.add_async(b"%d" % i) for i in range(10, 50)))
    assert first + list(rest) == list(range(50))
    ensembles = handle.metadata.ensembles
    assert len(ensembles) == 2
    assert victim.bookie_id not in ensembles[1][1]
    assert ensembles[1][0] == 10
    stored, _ = await client.read_metadata(handle.ledger_id)
    assert stored.ensembles == ensembles
    await handle.close()
    reader = await make_client(bookies).open(handle.ledger_id)
    assert await reader.read(0, 49) == [b"%d" % i for i in range(50)]


async def test_no_replacement_fails_the_writer(make_bookies: MakeBookies,
                                               make_client: MakeClient) -> None:
    bookies = make_bookies(1)
    handle = await make_client(bookies).create()
    await handle.add(b"kept")
    bookies[0].down = True
    with pytest.raises(NotEnoughBookiesError):
        await handle.add(b"lost")
    with pytest.raises(NotEnoughBookiesError):
        handle.add_async(b"later")  # a ledger has no holes: every later add fails


async def test_bad_input(make_bookies: MakeBookies, make_client: MakeClient) -> None:
    client = make_client(make_bookies(2))
    with pytest.raises(InvalidArgumentError):
        await client.create(ensemble_size=2, write_quorum=3, ack_quorum=1)
    with pytest.raises(NotEnoughBookiesError):
        await client.create(ensemble_size=3, write_quorum=3, ack_quorum=2)
    with pytest.raises(NoSuchLedgerError):
        await client.open(12345)
    with pytest.raises(InvalidArgumentError):
        await client.open(-1)
    handle = await client.create()
    with pytest.raises(EntryTooLargeError) as too_large:
        handle.add_async(b"x" * (1024 * 1024 + 1))
    assert too_large.value.limit == 1024 * 1024
    await handle.add(b"fine")
    with pytest.raises(InvalidArgumentError):
        await handle.read(-1, 0)
    reader = await client.open(handle.ledger_id, recovery=False)
    with pytest.raises(InvalidArgumentError):
        reader.add_async(b"read-only")
    recovered = await client.open(handle.ledger_id)
    with pytest.raises(LedgerClosedError):
        recovered.add_async(b"closed")


async def test_delete_removes_entries_and_metadata(make_bookies: MakeBookies,
                                                   make_client: MakeClient) -> None:
    bookies = make_bookies(1)
    client = make_client(bookies)
    handle = await client.create()
    await handle.add(b"gone")
    await handle.close()
    await client.delete(handle.ledger_id)
    with pytest.raises(NoSuchLedgerError):
        await client.open(handle.ledger_id)
    assert handle.ledger_id not in bookies[0].bookie.ledger_ids()
    await client.delete(handle.ledger_id)  # idempotent
