"""Ledger metadata writes whose answer is lost (issue 22): read back, then go on or fail.

``tests.support.faulty_metadata`` applies the write and raises
``MetadataUnavailableError`` (the answer lost), or raises before applying.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from ledger.api import LedgerState
from ledger.client.directory import BookieDirectory
from ledger.client.ledger_client import LedgerClient
from ledger.client.ledger_ids import IDGEN_PATH
from ledger.config import LedgerConfig
from ledger.errors import MetadataUnavailableError, NoSuchLedgerError
from ledger.metadata.rocksdb_store import RocksDBMetadataStore
from tests.support.faulty_metadata import Fault, FaultyMetadataStore
from tests.unit.ledger.conftest import FaultyBookie

pytestmark = pytest.mark.faults


def _is_ledger(path: str) -> bool:
    return path.startswith("/ledgers/L")


def _client(store: FaultyMetadataStore, bookies: list[FaultyBookie]) -> LedgerClient:
    return LedgerClient(store, BookieDirectory(bookies),
                        LedgerConfig(ensemble_size=2, write_quorum=2, ack_quorum=2))


async def test_create_whose_answer_was_lost_goes_on(
        store: RocksDBMetadataStore, make_bookies: Callable[[int], list[FaultyBookie]]) -> None:
    faulty = FaultyMetadataStore(store)
    client = _client(faulty, make_bookies(2))
    fired = faulty.fail("create", _is_ledger, Fault.LOST_ANSWER)
    handle = await client.create()
    assert len(fired) == 1
    await handle.add(b"entry")
    await handle.close()
    reader = await client.open(handle.ledger_id)
    assert await reader.read(0, 0) == [b"entry"]


async def test_create_not_applied_fails(
        store: RocksDBMetadataStore, make_bookies: Callable[[int], list[FaultyBookie]]) -> None:
    faulty = FaultyMetadataStore(store)
    client = _client(faulty, make_bookies(2))
    fired = faulty.fail("create", _is_ledger, Fault.BEFORE)
    with pytest.raises(MetadataUnavailableError):
        await client.create()
    ledger_id = int(fired[0].rpartition("L")[2])
    with pytest.raises(NoSuchLedgerError):
        await client.read_metadata(ledger_id)


@pytest.mark.parametrize("fault", list(Fault))
async def test_close_whose_answer_was_lost(
        store: RocksDBMetadataStore, make_bookies: Callable[[int], list[FaultyBookie]],
        fault: Fault) -> None:
    faulty = FaultyMetadataStore(store)
    client = _client(faulty, make_bookies(2))
    handle = await client.create()
    for index in range(3):
        await handle.add(b"%d" % index)
    faulty.fail("set", _is_ledger, fault)
    if fault is Fault.LOST_ANSWER:
        await handle.close()  # applied: the read-back finds our CLOSED metadata
    else:
        with pytest.raises(MetadataUnavailableError):
            await handle.close()
        await handle.close()  # not applied: closing again works
    metadata, _version = await client.read_metadata(handle.ledger_id)
    assert (metadata.state, metadata.last_entry_id) == (LedgerState.CLOSED, 2)


async def test_concurrent_creates_share_one_id_reservation(
        store: RocksDBMetadataStore, make_bookies: Callable[[int], list[FaultyBookie]]) -> None:
    # Issue 22, item 5: a broker creating many ledgers at once (loading its
    # segments) raced itself for each id ("ledger id N taken concurrently").
    sets: list[str] = []
    faulty = FaultyMetadataStore(store)
    inner_set = faulty.set

    async def counting(path: str, data: bytes, expected_version: int) -> int:
        if path == IDGEN_PATH:
            sets.append(path)
        return await inner_set(path, data, expected_version)

    faulty.set = counting  # type: ignore[method-assign]
    client = _client(faulty, make_bookies(2))
    await client.create()  # the counter exists
    sets.clear()
    handles = await asyncio.gather(*(client.create() for _ in range(30)))
    ids = [handle.ledger_id for handle in handles]
    assert ids == list(range(2, 32))  # in the order asked, none skipped
    assert len(sets) == 1  # one compare-and-set for all of them
    faulty.fail("set", IDGEN_PATH.__eq__, Fault.LOST_ANSWER)
    with pytest.raises(MetadataUnavailableError):
        await client.create()
    assert (await client.create()).ledger_id == 33  # 32 was reserved: skipped, never reused
