"""EphemeralRegistration: created, kept across an expired session, deleted on close."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from kazoo.client import KazooClient

from ledger.metadata.cluster_layout import Registration
from ledger.metadata.registration import EphemeralRegistration, live_registrations
from ledger.metadata.zookeeper_store import ZooKeeperMetadataStore
from tests.support.proxy import TcpProxy
from tests.support.wait import wait_for_async
from tests.support.zookeeper import ZooKeeperServer, make_chroot, zk_client


async def _registered_is(observer: KazooClient, expected: bool) -> bool:
    # In a thread: the store's loop must run meanwhile (its session listener re-registers).
    stat = await asyncio.to_thread(observer.exists, "/brokers/127.0.0.1:7070")
    return (stat is not None) == expected


async def test_registration_comes_back_after_the_session_expired(
    make_zookeeper: Callable[[], ZooKeeperServer],
) -> None:
    server = make_zookeeper()
    url = make_chroot(server)
    chroot = url.removeprefix(f"zk://{server.address}")
    observer = zk_client(server.address + chroot)
    observer.create("/brokers")
    record = Registration(address="127.0.0.1:7070", started_at_ms=1).encode()
    with TcpProxy(server.host, server.port) as proxy:
        store = await ZooKeeperMetadataStore.connect(
            f"zk://{proxy.address}{chroot}", session_timeout_ms=2000,
            operation_timeout_ms=1000)
        registration = EphemeralRegistration(store, "/brokers/127.0.0.1:7070", record)
        try:
            await registration.start()
            assert observer.get("/brokers/127.0.0.1:7070")[0] == record
            # Cut from ZooKeeper past the session timeout: the node expires with the session.
            proxy.pause()
            await wait_for_async(lambda: _registered_is(observer, False),
                                 "the registration expired with the partitioned session", 60)
            proxy.cut()
            proxy.resume()
            # Reconnected with a new session, the registration is made again.
            await wait_for_async(lambda: _registered_is(observer, True),
                                 "the registration created again in the new session", 60)
            assert (await live_registrations(store, "/brokers")) == {
                "127.0.0.1:7070": Registration.decode("/brokers/x", record)}
        finally:
            await registration.close()
            await registration.close()  # idempotent
            await store.close()
    assert observer.get_children("/brokers") == []
    observer.stop()
    observer.close()
