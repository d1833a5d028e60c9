"""ZooKeeperMetadataStore beyond the shared contract: sessions, other clients, outages.

Real ZooKeeper servers (tests/support/zookeeper.py), a real TCP proxy to
partition a client from its server. The contract both stores share is in
tests/unit/ledger/metadata/test_store_contract.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from ledger.api import EventType, SessionState, Versioned
from ledger.errors import InvalidArgumentError, MetadataError, MetadataUnavailableError
from ledger.metadata.metadata_url import MetadataUrlError
from ledger.metadata.zookeeper_store import ChrootMissingError, ZooKeeperMetadataStore
from tests.support.proxy import TcpProxy
from tests.support.wait import wait_for_async
from tests.support.zookeeper import ZooKeeperServer, zk_client
from tests.unit.ledger.metadata.conftest import Recorder


class States:
    """A session listener that records the states it saw."""

    def __init__(self) -> None:
        self.seen: list[SessionState] = []

    def __call__(self, state: SessionState) -> None:
        self.seen.append(state)

    async def wait_for(self, state: SessionState, count: int = 1) -> None:
        async def seen() -> bool:
            return self.seen.count(state) >= count

        await wait_for_async(seen, f"session state {state.value} (saw {self.seen})", 60)


async def test_watch_fires_on_another_clients_change(zk_url: str) -> None:
    async with await ZooKeeperMetadataStore.connect(zk_url) as first, \
            await ZooKeeperMetadataStore.connect(zk_url) as second:
        await first.create("/shared", b"0")
        watch = Recorder()
        await first.get("/shared", watch=watch)
        children = Recorder()
        await first.children("/", watch=children)
        loop = asyncio.get_running_loop()
        delivered_on: list[asyncio.AbstractEventLoop] = []
        await first.get("/shared", watch=lambda event, path: delivered_on.append(
            asyncio.get_running_loop()))
        await second.set("/shared", b"1", 0)
        await second.create("/other")

        async def fired() -> bool:
            return bool(watch.events and children.events and delivered_on)

        await wait_for_async(fired, "watches fired by the other client's changes")
        assert watch.events == [(EventType.CHANGED, "/shared")]
        assert children.events == [(EventType.CHILDREN, "/")]
        assert delivered_on == [loop]  # on the store's loop, not a kazoo thread
        assert await first.get("/shared") == Versioned(data=b"1", version=1)


async def test_ephemeral_vanishes_for_other_clients(zk_url: str) -> None:
    async with await ZooKeeperMetadataStore.connect(zk_url) as watcher:
        owner = await ZooKeeperMetadataStore.connect(zk_url)
        await owner.create("/bookies/available/b1", b"x", ephemeral=True, make_parents=True)
        gone = Recorder()
        assert await watcher.children("/bookies/available", watch=gone) == ["b1"]
        await owner.close()
        await owner.close()  # idempotent

        async def vanished() -> bool:
            return bool(gone.events)

        await wait_for_async(vanished, "the ephemeral node's deletion seen by another client")
        assert await watcher.children("/bookies/available") == []
        with pytest.raises(MetadataError, match="closed"):
            await owner.get("/")


async def test_expired_session_is_reported_and_a_new_one_follows(
    make_zookeeper: Callable[[], ZooKeeperServer],
) -> None:
    server = make_zookeeper()
    client = zk_client(server.address)
    client.create("/c")
    client.stop()
    client.close()
    with TcpProxy(server.host, server.port) as proxy:
        store = await ZooKeeperMetadataStore.connect(
            f"zk://{proxy.address}/c", session_timeout_ms=2000, operation_timeout_ms=1000)
        states = States()
        store.add_session_listener(states)
        try:
            await store.create("/mine", ephemeral=True)
            pending = Recorder()
            await store.get("/mine", watch=pending)
            # A partition longer than the session timeout: the server expires the session.
            proxy.pause()
            await states.wait_for(SessionState.SUSPENDED)
            with pytest.raises(MetadataUnavailableError):
                await store.get("/")
            observer = zk_client(server.address + "/c")
            try:
                await wait_for_async(
                    lambda: asyncio.to_thread(lambda: observer.exists("/mine") is None),
                    "the partitioned session's ephemeral node expired", 60)
            finally:
                observer.stop()
                observer.close()
            proxy.cut()
            proxy.resume()
            await states.wait_for(SessionState.LOST)
            await states.wait_for(SessionState.CONNECTED)
            assert states.seen[:2] == [SessionState.SUSPENDED, SessionState.LOST]
            # The store goes on with a new session; the old watch never fires.
            assert not await store.exists("/mine")
            await store.create("/mine", ephemeral=True)
            assert pending.events == []
        finally:
            await store.close()


async def test_zookeeper_restart_suspends_then_reconnects(
    make_zookeeper: Callable[[], ZooKeeperServer],
) -> None:
    server = make_zookeeper()
    store = await ZooKeeperMetadataStore.connect(
        server.url("/r"), create_chroot=True, session_timeout_ms=10_000)
    states = States()
    store.add_session_listener(states)
    try:
        await store.create("/kept", b"v", make_parents=True)
        await store.create("/session-node", ephemeral=True)
        await asyncio.to_thread(server.restart)
        await states.wait_for(SessionState.SUSPENDED)
        await states.wait_for(SessionState.CONNECTED)
        assert await store.get("/kept") == Versioned(data=b"v", version=0)
        # The session outlives a restart shorter than its timeout, and its node with
        # it. (A reconnection attempt that lands while the new server is still starting
        # may wait out a whole timeout, as ZooKeeper's own client does, and then the
        # session expired: reported as LOST, its node gone. Both are consistent.)
        assert await store.exists("/session-node") is (SessionState.LOST not in states.seen)
    finally:
        await store.close()


async def test_connect_errors(zookeeper: ZooKeeperServer, make_zookeeper: Callable[
        [], ZooKeeperServer]) -> None:
    with pytest.raises(ChrootMissingError, match="folio cluster init"):
        await ZooKeeperMetadataStore.connect(zookeeper.url("/never-initialised"))
    with pytest.raises(MetadataUrlError, match="no chroot"):
        await ZooKeeperMetadataStore.connect(f"zk://{zookeeper.address}")
    stopped = make_zookeeper()
    stopped.stop()
    with pytest.raises(MetadataUnavailableError, match="answered within"):
        await ZooKeeperMetadataStore.connect(stopped.url("/x"), connect_timeout_ms=1500)


async def test_node_data_limit(zk_url: str) -> None:
    async with await ZooKeeperMetadataStore.connect(zk_url) as store:
        with pytest.raises(InvalidArgumentError, match="limit"):
            await store.create("/big", b"x" * 1_000_001)
        assert await store.create("/big", b"x" * 1_000_000) == "/big"
        assert len((await store.get("/big")).data) == 1_000_000
