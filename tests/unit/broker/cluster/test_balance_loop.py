"""``BalanceLoop`` alone, wired by hand to its parts on a real metadata store (RocksDB).

Brokers here are loops with their own identities on one store: alone one
claims every container before ``start`` returns; two share them; a failed
take-over is tried again; a loop told it ``left`` (the session expired)
joins again.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from broker.cluster.balance_loop import BalanceLoop
from broker.cluster.container_claims import ContainerClaims, OwnIdentity
from broker.cluster.containers import OwnerRecord, member_path
from broker.cluster.owner_cache import OwnerCache
from broker.cluster.ownership_session import OwnershipSession
from ledger.errors import NoNodeError
from ledger.metadata.rocksdb_store import RocksDBMetadataStore
from tests.support.wait import wait_for_async

COUNT = 4


class Handover:
    async def release(self, containers: frozenset[int]) -> None:
        pass

    def drop(self, containers: frozenset[int]) -> None:
        pass


class Broker:
    """One broker's parts, as ``ZooKeeperOwners`` wires them."""

    def __init__(self, store: RocksDBMetadataStore, broker_id: str,
                 fail_take_overs: int = 0) -> None:
        self.taken: list[int] = []
        self._failures = fail_take_overs
        self.identity = OwnIdentity(OwnerRecord(broker_id, f"{broker_id}:7070",
                                                uuid.uuid4().hex))
        wake = asyncio.Event()
        cache = OwnerCache(store, COUNT, wake.set)
        self.claims = ContainerClaims(store, self.identity, Handover(), cache, 10.0)
        session = OwnershipSession(self.identity, self.claims, cache, wake.set, 0.0)
        self.loop = BalanceLoop(store, self.identity, cache, self.claims, session, wake,
                                0.05, self._take_over)

    async def _take_over(self, container: int) -> None:
        if self._failures > 0:
            self._failures -= 1
            raise OSError("the coordinator's log could not be replayed")
        self.taken.append(container)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[RocksDBMetadataStore]:
    opened = RocksDBMetadataStore(tmp_path / "metadata")
    yield opened
    await opened.close()


async def test_a_broker_alone_claims_everything_before_start_returns(
        store: RocksDBMetadataStore) -> None:
    broker = Broker(store, "b1")
    assert not broker.loop.started
    await broker.loop.start()
    assert broker.loop.started
    assert broker.claims.served() == frozenset(range(COUNT))
    assert sorted(broker.taken) == list(range(COUNT))
    assert OwnerRecord.from_bytes((await store.get(member_path("b1"))).data) == (
        broker.identity.record)
    await broker.loop.stop()
    assert not broker.loop.started
    with pytest.raises(NoNodeError):  # left the balance
        await store.get(member_path("b1"))


async def test_two_brokers_share_the_containers(store: RocksDBMetadataStore) -> None:
    first, second = Broker(store, "b1"), Broker(store, "b2")
    await first.loop.start()
    await second.loop.start()

    async def shared() -> bool:
        mine, theirs = first.claims.served(), second.claims.served()
        return len(mine) == len(theirs) == COUNT // 2 and not mine & theirs

    try:
        await wait_for_async(shared, "the containers are shared half and half")
    finally:
        await second.loop.stop()
        await first.loop.stop()


async def test_a_failed_take_over_is_tried_again(store: RocksDBMetadataStore) -> None:
    broker = Broker(store, "b1", fail_take_overs=1)
    await broker.loop.start()

    async def all_taken() -> bool:
        return sorted(broker.taken) == list(range(COUNT))

    try:
        await wait_for_async(all_taken, "the failed take-over is run again")
    finally:
        await broker.loop.stop()


async def test_a_loop_that_left_joins_again(store: RocksDBMetadataStore) -> None:
    broker = Broker(store, "b1")
    await broker.loop.start()
    node = await store.get(member_path("b1"))
    await store.delete(member_path("b1"), node.version)  # as an expired session does
    broker.loop.left()

    async def member_again() -> bool:
        try:
            await store.get(member_path("b1"))
        except NoNodeError:
            return False
        return True

    try:
        await wait_for_async(member_again, "the member node is made again")
    finally:
        await broker.loop.stop()
