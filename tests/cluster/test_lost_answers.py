"""Lost ZooKeeper answers on a real ZooKeeper (issue 22): nothing acknowledged is lost.

``test_rollover_whose_answer_a_reset_lost`` is the issue's own case, made
deterministic with a real TCP proxy: the segment record's write reaches
ZooKeeper and is applied (an observer sees it), its answer is held by the
proxy, then the connection is reset. The session survives, the store raises
``MetadataUnavailableError``; the segment must read the record back and go on
with the ledger it names, never delete it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import pytest
from kazoo.exceptions import NoNodeError

from broker.cluster.containers import owner_path
from broker.cluster.zookeeper_owners import ZooKeeperOwners
from broker.segments.names import segment_path
from broker.segments.records import SegmentRecord
from broker.system.snapshot_store import snapshot_store
from broker.topics.manager import TopicManager
from ledger.api import Versioned, WatchCallback
from ledger.bookie.bookie import Bookie
from ledger.client.directory import BookieDirectory
from ledger.client.ledger_client import LedgerClient
from ledger.config import BookieConfig, Durability, LedgerConfig
from ledger.metadata.cluster_layout import Registration
from ledger.metadata.registration import EphemeralRegistration
from ledger.metadata.zookeeper_store import ZooKeeperMetadataStore
from tests.support.faulty_metadata import Fault, FaultyMetadataStore
from tests.support.proxy import TcpProxy
from tests.support.wait import wait_for_async
from tests.support.zookeeper import ZooKeeperServer, zk_client
from tests.unit.broker.conftest import SMALL, block, read_all

pytestmark = pytest.mark.faults

RECORD = segment_path("t", 0)


class ResetAfterApplied:
    """A ZooKeeper store whose next ``set`` of ``path`` loses its answer to a real reset."""

    def __init__(self, store: ZooKeeperMetadataStore, proxy: TcpProxy, observer_address: str,
                 path: str) -> None:
        self.inner = store
        self._proxy = proxy
        self._observer_address = observer_address
        self._path = path
        self.armed = False
        self.fired = 0

    async def set(self, path: str, data: bytes, expected_version: int) -> int:
        if not (self.armed and path == self._path):
            return await self.inner.set(path, data, expected_version)
        result: int = await self._lose_answer(
            path, data, self.inner.set(path, data, expected_version))
        return result

    async def create(self, path: str, data: bytes = b"", *, make_parents: bool = False,
                     sequential: bool = False, ephemeral: bool = False) -> str:
        call = self.inner.create(path, data, make_parents=make_parents,
                                 sequential=sequential, ephemeral=ephemeral)
        if not (self.armed and path == self._path):
            return await call
        result: str = await self._lose_answer(path, data, call)
        return result

    async def _lose_answer(self, path: str, data: bytes,
                           call: Coroutine[Any, Any, Any]) -> Any:
        self.armed = False
        self.fired += 1
        await asyncio.to_thread(self._proxy.hold_answers)
        write = asyncio.ensure_future(call)
        observer = await asyncio.to_thread(zk_client, self._observer_address)
        try:
            async def applied() -> bool:
                try:
                    found, _stat = await asyncio.to_thread(observer.get, path)
                except NoNodeError:
                    return False  # not created yet
                return bool(found == data)

            await wait_for_async(applied, "the write applied in ZooKeeper", 30)
        except BaseException:
            write.cancel()
            raise
        finally:
            await asyncio.to_thread(observer.stop)
            observer.close()
        await asyncio.to_thread(self._proxy.cut)  # the answer dies with the connection
        await asyncio.to_thread(self._proxy.hold_answers, False)
        return await write  # MetadataUnavailableError: connection lost

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    async def get(self, path: str, *, watch: WatchCallback | None = None) -> Versioned:
        return await self.inner.get(path, watch=watch)


async def test_rollover_whose_answer_a_reset_lost(zookeeper: ZooKeeperServer, zk_url: str,
                                                  tmp_path: Path) -> None:
    chroot = zk_url.removeprefix(f"zk://{zookeeper.address}")
    bookie = Bookie(BookieConfig(data_dir=str(tmp_path / "bookie"),
                                 durability=Durability.ASYNC, max_entry_bytes=1 << 20))
    with TcpProxy(zookeeper.host, zookeeper.port) as proxy:
        inner = await ZooKeeperMetadataStore.connect(
            f"zk://{proxy.address}{chroot}", session_timeout_ms=20_000,
            operation_timeout_ms=15_000)
        store = ResetAfterApplied(inner, proxy, zookeeper.address + chroot, RECORD)
        ledgers = LedgerClient(store, BookieDirectory([bookie]),  # type: ignore[arg-type]
                               LedgerConfig(max_entry_bytes=1 << 20))
        topics = TopicManager(ledgers, store,  # type: ignore[arg-type]
                              txn_store_factory=snapshot_store)
        try:
            await topics.create_topic("t", 1, SMALL)
            segment = await topics.segment("t/0")
            for number in range(5):
                await segment.append([block(number, size=64)], "w", number)
            store.armed = True
            await segment.roll_over()
            assert store.fired == 1 and proxy.cut_count >= 1
            for number in range(5, 10):
                await segment.append([block(number, size=64)], "w", number)
            node = await inner.get(RECORD)
            for entry in SegmentRecord.from_bytes(node.data).ledgers:
                await ledgers.read_metadata(entry.ledger_id)  # every named ledger exists
            await topics.close()
            # A fresh load from the record reads every acknowledged event.
            fresh = TopicManager(ledgers, store,  # type: ignore[arg-type]
                                 txn_store_factory=snapshot_store)
            try:
                reloaded = await fresh.segment("t/0")
                data = [b.data for b in await read_all(reloaded, 0)]
                assert data == [block(i, size=64).data for i in range(10)]
            finally:
                await fresh.close()
        finally:
            await topics.close()
            await ledgers.close()
            await inner.close()
            bookie.shutdown()


async def test_registration_whose_answer_was_lost(zk_url: str) -> None:
    inner = await ZooKeeperMetadataStore.connect(zk_url)
    store = FaultyMetadataStore(inner)
    await inner.create("/brokers")
    record = Registration(address="127.0.0.1:7070", started_at_ms=1).encode()
    fired = store.fail("create", "/brokers/127.0.0.1:7070".__eq__, Fault.LOST_ANSWER)
    # Before: the lost answer failed start, or a retry waited out the takeover
    # timeout for its own node and failed RegistrationConflictError.
    registration = EphemeralRegistration(store, "/brokers/127.0.0.1:7070", record,
                                         takeover_timeout_ms=60_000)
    try:
        await asyncio.wait_for(registration.start(), 20)
        assert fired == ["/brokers/127.0.0.1:7070"]
        assert (await inner.get("/brokers/127.0.0.1:7070")).data == record
    finally:
        await registration.close()
        await inner.close()


class _Handover:
    async def release(self, containers: frozenset[int]) -> None:
        pass

    def drop(self, containers: frozenset[int]) -> None:
        pass


async def test_claim_whose_answer_a_reset_lost(zookeeper: ZooKeeperServer, zk_url: str) -> None:
    # The ownership node's create is applied, its answer lost to a reset: the
    # container is this broker's, and it must serve it (before: counted as
    # held by plan, served by no one until the session changed).
    chroot = zk_url.removeprefix(f"zk://{zookeeper.address}")
    with TcpProxy(zookeeper.host, zookeeper.port) as proxy:
        inner = await ZooKeeperMetadataStore.connect(
            f"zk://{proxy.address}{chroot}", session_timeout_ms=20_000,
            operation_timeout_ms=15_000)
        # The parent first: a create that makes its parents needs their answers.
        await inner.create(owner_path(2).rpartition("/")[0], make_parents=True)
        store = ResetAfterApplied(inner, proxy, zookeeper.address + chroot, owner_path(2))
        store.armed = True
        owners = ZooKeeperOwners(store, 4, "b1", "b1:7070",  # type: ignore[arg-type]
                                 _Handover(), tick_s=0.2, suspended_grace_s=20)
        try:
            await owners.start()

            async def all_served() -> bool:
                return owners.served_containers() == frozenset(range(4))

            await wait_for_async(
                all_served, f"every container served (now {owners.served_containers()})", 30)
            assert store.fired == 1 and proxy.cut_count >= 1
            assert (await inner.get(owner_path(2))).data == owners.record.to_bytes()
        finally:
            await asyncio.wait_for(owners.stop(), 30)
            await inner.close()
