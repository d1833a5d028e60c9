"""LedgerClient.peek_last_entry: the last entry handed to any bookie, without fencing."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from ledger.api import LedgerService
from ledger.client.ledger_client import LedgerClient
from ledger.errors import NoSuchLedgerError
from tests.unit.ledger.conftest import FaultyBookie

MakeBookies = Callable[[int], list[FaultyBookie]]
MakeClient = Callable[..., LedgerClient]


async def test_peek_of_an_empty_ledger_is_none_open_or_closed(
        make_bookies: MakeBookies, make_client: MakeClient) -> None:
    client: LedgerService = make_client(make_bookies(1))
    handle = await client.create()
    assert await client.peek_last_entry(handle.ledger_id) is None
    await handle.close()
    assert await client.peek_last_entry(handle.ledger_id) is None


async def test_peek_of_an_open_ledger_sees_the_last_entry_and_fences_nothing(
        make_bookies: MakeBookies, make_client: MakeClient) -> None:
    client = make_client(make_bookies(3))
    handle = await client.create(ensemble_size=3, write_quorum=2, ack_quorum=2)
    for i in range(10):
        await handle.add(f"entry-{i}".encode())
    # The writer's LAC lags its last entry on the bookies; the peek reads the entry itself.
    assert await client.peek_last_entry(handle.ledger_id) == b"entry-9"
    assert await handle.add(b"entry-10") == 10  # still the writer: nothing was fenced
    assert await client.peek_last_entry(handle.ledger_id) == b"entry-10"


async def test_peek_of_a_closed_ledger_reads_its_last_entry(
        make_bookies: MakeBookies, make_client: MakeClient) -> None:
    client = make_client(make_bookies(1))
    handle = await client.create()
    for i in range(3):
        await handle.add(bytes([i]))
    await handle.close()
    assert await client.peek_last_entry(handle.ledger_id) == bytes([2])


async def test_peek_of_a_missing_ledger_raises_no_such_ledger(
        make_bookies: MakeBookies, make_client: MakeClient) -> None:
    client = make_client(make_bookies(1))
    with pytest.raises(NoSuchLedgerError):
        await client.peek_last_entry(12345)
