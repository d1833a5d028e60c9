"""HandleReads alone, on ledgers written by a real client to real bookies."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from ledger.client.handle_metadata import HandleMetadata
from ledger.client.handle_reads import HandleReads
from ledger.client.ledger_client import LedgerClient
from ledger.errors import BookieUnavailableError, InvalidArgumentError, NoSuchEntryError
from tests.unit.ledger.conftest import FaultyBookie

MakeBookies = Callable[[int], list[FaultyBookie]]
MakeClient = Callable[..., LedgerClient]


async def _written(client: LedgerClient, count: int, ensemble_size: int,
                   write_quorum: int) -> HandleMetadata:
    handle = await client.create(ensemble_size=ensemble_size, write_quorum=write_quorum,
                                 ack_quorum=write_quorum)
    for index in range(count):
        handle.add_async(b"entry-%d" % index)
    await handle.close()
    return HandleMetadata(client, *await client.read_metadata(handle.ledger_id))


async def test_reads_in_order_up_to_the_bound(make_bookies: MakeBookies,
                                              make_client: MakeClient) -> None:
    client = make_client(make_bookies(3))
    metadata = await _written(client, 20, 3, 2)
    reads = HandleReads(client, metadata)
    assert await reads.read(0, 19, 19, adopt_latest=True) == [
        b"entry-%d" % index for index in range(20)]
    assert await reads.read(5, 6, 10, adopt_latest=True) == [b"entry-5", b"entry-6"]
    with pytest.raises(NoSuchEntryError):
        await reads.read(5, 11, 10, adopt_latest=True)
    with pytest.raises(InvalidArgumentError):
        await reads.read(4, 3, 19, adopt_latest=True)


async def test_a_down_bookie_is_read_around(make_bookies: MakeBookies,
                                            make_client: MakeClient) -> None:
    bookies = make_bookies(2)
    client = make_client(bookies)
    metadata = await _written(client, 10, 2, 2)
    reads = HandleReads(client, metadata)
    bookies[0].down = True
    for _ in range(3):  # whichever bookie the rotation starts at
        assert await reads.read(0, 9, 9, adopt_latest=False) == [
            b"entry-%d" % index for index in range(10)]
    bookies[1].down = True
    with pytest.raises(BookieUnavailableError):
        await reads.read(0, 0, 9, adopt_latest=False)
