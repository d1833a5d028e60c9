"""Fixtures for ledger tests: real in-process bookies on RocksDB in tmp dirs."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from ledger.api import AddRequest, LedgerTail, ReadResult
from ledger.bookie.bookie import Bookie
from ledger.client.directory import BookieDirectory
from ledger.client.ledger_client import LedgerClient
from ledger.config import BookieConfig, Durability, LedgerConfig
from ledger.errors import BookieUnavailableError
from ledger.metadata.rocksdb_store import RocksDBMetadataStore


class FaultyBookie:
    """A real bookie whose calls can be made to fail, as a dead bookie's would.

    Only for injecting faults; everything else goes to the real ``Bookie``.
    """

    def __init__(self, bookie: Bookie) -> None:
        self.bookie = bookie
        self.down = False
        self.adds = 0

    @property
    def bookie_id(self) -> str:
        return self.bookie.bookie_id

    def _check(self) -> None:
        if self.down:
            raise BookieUnavailableError(f"bookie {self.bookie_id} is down (injected)")

    async def add_entries(self, request: AddRequest) -> None:
        self._check()
        self.adds += 1
        await self.bookie.add_entries(request)
        self._check()

    async def read_entries(self, ledger_id: int, first_entry_id: int, last_entry_id: int,
                           *, fence: bool = False, max_bytes: int = 0) -> ReadResult:
        self._check()
        return await self.bookie.read_entries(ledger_id, first_entry_id, last_entry_id,
                                              fence=fence, max_bytes=max_bytes)

    async def read_last_add_confirmed(self, ledger_id: int) -> LedgerTail:
        self._check()
        return await self.bookie.read_last_add_confirmed(ledger_id)

    async def fence(self, ledger_id: int) -> LedgerTail:
        self._check()
        return await self.bookie.fence(ledger_id)

    async def delete_ledger(self, ledger_id: int) -> None:
        self._check()
        await self.bookie.delete_ledger(ledger_id)

    async def close(self) -> None:
        pass


@pytest.fixture
def make_bookies(tmp_path: Path) -> Iterator[Callable[[int], list[FaultyBookie]]]:
    made: list[Bookie] = []

    def make(count: int) -> list[FaultyBookie]:
        out = []
        for index in range(len(made), len(made) + count):
            config = BookieConfig(data_dir=str(tmp_path / f"bookie-{index}"),
                                  durability=Durability.ASYNC, max_entry_bytes=1024 * 1024)
            bookie = Bookie(config, bookie_id=f"bookie-{index}")
            made.append(bookie)
            out.append(FaultyBookie(bookie))
        return out

    yield make
    for bookie in made:
        bookie.shutdown()


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[RocksDBMetadataStore]:
    metadata = RocksDBMetadataStore(str(tmp_path / "metadata"))
    yield metadata
    await metadata.close()


@pytest.fixture
def make_client(
    store: RocksDBMetadataStore,
) -> Callable[[list[FaultyBookie]], LedgerClient]:
    def make(bookies: list[FaultyBookie], **config: int) -> LedgerClient:
        directory = BookieDirectory(bookies)
        return LedgerClient(store, directory, LedgerConfig(max_entry_bytes=1024 * 1024, **config))

    return make
