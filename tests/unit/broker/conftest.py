"""Fixtures for broker tests: a real in-process bookie, RocksDB metadata, ledger client.

``BrokerEnv`` can restart the whole stack on the same directories (a broker
restart), and managers can be abandoned without closing (a crash).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from broker.api import Block, ReadBlock, TopicConfig
from broker.segments.segment import LedgerSegment
from broker.system.snapshot_store import snapshot_store
from broker.topics.manager import TopicManager
from ledger.bookie.bookie import Bookie
from ledger.client.directory import BookieDirectory
from ledger.client.ledger_client import LedgerClient
from ledger.config import BookieConfig, Durability, LedgerConfig
from ledger.metadata.rocksdb_store import RocksDBMetadataStore

MAX_ENTRY_BYTES = 1024 * 1024


class FakeClock:
    """Seconds since the epoch, moved by the test."""

    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance_ms(self, ms: int) -> None:
        self.now += ms / 1000


class BrokerEnv:
    """The ledger stack of one broker on directories under ``root``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.clock = FakeClock()
        self._managers: list[TopicManager] = []
        self._start()

    def _start(self) -> None:
        self.store = RocksDBMetadataStore(str(self.root / "metadata"))
        self.bookie = Bookie(BookieConfig(data_dir=str(self.root / "bookie"),
                                          durability=Durability.ASYNC,
                                          max_entry_bytes=MAX_ENTRY_BYTES))
        self.ledgers = LedgerClient(self.store, BookieDirectory([self.bookie]),
                                    LedgerConfig(max_entry_bytes=MAX_ENTRY_BYTES))

    def manager(self, **kwargs: Any) -> TopicManager:
        """A TopicManager on this stack, closed at teardown unless abandoned."""
        kwargs.setdefault("clock", self.clock)
        manager = TopicManager(self.ledgers, self.store, txn_store_factory=snapshot_store,
                               **kwargs)
        self._managers.append(manager)
        return manager

    def abandon(self, manager: TopicManager) -> None:
        """Forget ``manager`` without closing it, as a crashed broker would."""
        self._managers.remove(manager)

    async def stop(self) -> None:
        for manager in self._managers:
            await manager.close()
        self._managers.clear()
        await self.ledgers.close()
        self.bookie.shutdown()
        await self.store.close()

    async def restart(self) -> None:
        """Stop everything (closing the managers still tracked) and start again."""
        await self.stop()
        self._start()


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[BrokerEnv]:
    broker_env = BrokerEnv(tmp_path)
    yield broker_env
    await broker_env.stop()


@pytest.fixture
async def topics(env: BrokerEnv) -> TopicManager:
    return env.manager()


SMALL = TopicConfig(ledger_rollover_bytes=1024)


def block(index: int, events: int = 1, size: int = 0) -> Block:
    """A block whose bytes name it (the broker never parses them)."""
    data = f"block-{index}-".encode()
    return Block(data + b"x" * max(size - len(data), 0), events)


async def read_all(segment: LedgerSegment, offset: int, max_bytes: int = 4096,
                   ) -> list[ReadBlock]:
    """Every block from ``offset`` to the segment's end, read in batches."""
    blocks: list[ReadBlock] = []
    while True:
        batch = await segment.read(offset, max_bytes)
        if not batch.blocks:
            if batch.next_offset > offset:  # only left-out entries (aborted, markers)
                offset = batch.next_offset
                continue
            return blocks
        blocks.extend(batch.blocks)
        offset = max(batch.blocks[-1].offset + batch.blocks[-1].event_count, batch.next_offset)
