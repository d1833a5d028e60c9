"""ZooKeeperOwners on a real ZooKeeper: brokers (one store session each) share containers.

Each "broker" here is a ``ZooKeeperOwners`` on its own ZooKeeper session in
this process, with a handover that records what it was asked to do; the
process-level tests (tests/cluster/test_failover.py) run real brokers.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from broker.cluster.containers import container_of
from broker.cluster.session_gate import OwnershipPhase
from broker.cluster.zookeeper_owners import ZooKeeperOwners
from broker.errors import WrongHostError
from ledger.api import SessionState
from ledger.metadata.zookeeper_store import ZooKeeperMetadataStore
from tests.support.wait import wait_for_async

COUNT = 16


class Handover:
    """Records releases and drops."""

    def __init__(self) -> None:
        self.released: list[int] = []
        self.dropped: list[int] = []

    async def release(self, containers: frozenset[int]) -> None:
        self.released.extend(sorted(containers))

    def drop(self, containers: frozenset[int]) -> None:
        self.dropped.extend(sorted(containers))


class Broker:
    def __init__(self, store: ZooKeeperMetadataStore, name: str) -> None:
        self.store = store
        self.handover = Handover()
        self.owners = ZooKeeperOwners(store, COUNT, name, f"{name}:7070", self.handover,
                                      tick_s=0.2)


@asynccontextmanager
async def brokers(zk_url: str, *names: str) -> AsyncIterator[list[Broker]]:
    started: list[Broker] = []
    try:
        for name in names:
            store = await ZooKeeperMetadataStore.connect(zk_url)
            broker = Broker(store, name)
            await broker.owners.start()
            started.append(broker)
        yield started
    finally:
        for broker in started:
            # Bounded: a stop that hangs must fail the test, not stall the suite.
            await asyncio.wait_for(broker.owners.stop(), 30)
            await asyncio.wait_for(broker.store.close(), 30)


def served(group: list[Broker]) -> list[int]:
    return sorted(len(b.owners.served_containers()) for b in group)


async def settled(group: list[Broker], expected: list[int]) -> None:
    def views() -> str:
        return "; ".join(f"{b.owners.broker_id} serves {sorted(b.owners.served_containers())}"
                         f" sees {[(i.id, i.containers) for i in b.owners.brokers()]}"
                         for b in group)

    async def check() -> bool:
        if served(group) != expected:
            return False
        union = [c for b in group for c in b.owners.served_containers()]
        # Every broker's cache agrees with who serves what.
        truth = sorted((b.owners.broker_id, tuple(sorted(b.owners.served_containers())))
                       for b in group)
        return sorted(union) == list(range(COUNT)) and all(
            [(i.id, i.containers) for i in b.owners.brokers()] == truth for b in group)

    try:
        await wait_for_async(check, f"containers spread {expected}")
    except AssertionError as error:
        raise AssertionError(f"{error}: {views()}") from None


async def test_three_brokers_share_sixteen_containers_and_agree_on_owners(zk_url: str) -> None:
    async with brokers(zk_url, "b1", "b2", "b3") as group:
        await settled(group, [5, 5, 6])
        for segment in ("orders/0", "orders/1", "payments/7", "_txnlog/0"):
            owner = next(b for b in group if b.owners.owns(segment))
            for broker in group:
                assert broker.owners.owner_of(segment) == owner.owners.address
                if broker is not owner:
                    try:
                        broker.owners.check(segment)
                    except WrongHostError as error:
                        assert error.owner == owner.owners.address
                    else:
                        raise AssertionError("a non-owner served the segment")
        listed = group[0].owners.brokers()
        assert [b.id for b in listed] == ["b1", "b2", "b3"]
        assert sorted(c for b in listed for c in b.containers) == list(range(COUNT))


async def test_join_and_graceful_leave_move_containers_with_a_handover(zk_url: str) -> None:
    async with brokers(zk_url, "b1", "b2", "b3") as group:
        await settled(group, [5, 5, 6])
        before = {b.owners.broker_id: b.owners.served_containers() for b in group}
        store = await ZooKeeperMetadataStore.connect(zk_url)
        fourth = Broker(store, "b4")
        await fourth.owners.start()
        try:
            await settled([*group, fourth], [4, 4, 4, 4])
            # What the newcomer serves was handed over by its owner first.
            released = {c for b in group for c in b.handover.released}
            assert fourth.owners.served_containers() <= released
            for broker in group:  # the others kept what they did not release
                assert broker.owners.served_containers() <= before[broker.owners.broker_id]
            # b1 stops (SIGTERM): it hands all of its containers over first.
            leaving = group[0]
            mine = leaving.owners.served_containers()
            await leaving.owners.stop()
            assert set(leaving.handover.released) >= mine
            await settled([*group[1:], fourth], [5, 5, 6])
        finally:
            await fourth.owners.stop()
            await store.close()


async def test_a_dead_session_s_containers_are_taken_by_the_others(zk_url: str) -> None:
    async with brokers(zk_url, "b1", "b2") as group:
        await settled(group, [8, 8])
        store = await ZooKeeperMetadataStore.connect(zk_url, session_timeout_ms=2000)
        third = Broker(store, "b3")
        await third.owners.start()
        await settled([*group, third], [5, 5, 6])
        # The session ends without a handover (as a crash ends it, only sooner).
        await store.close()
        await settled(group, [8, 8])
        await third.owners.stop()


async def test_session_trouble_without_grace_stops_serving_at_once_and_resumes(
        zk_url: str) -> None:
    async with brokers(zk_url, "b1") as group:
        (broker,) = group
        await settled(group, [16])
        segment = "orders/0"
        broker.handover.dropped.clear()
        broker.owners.session_changed(SessionState.SUSPENDED)
        assert not broker.owners.owns(segment)
        assert broker.owners.owner_of(segment) == ""
        assert sorted(broker.handover.dropped) == list(range(COUNT))
        # Reconnected within the session: its nodes are still there; it serves again.
        broker.owners.session_changed(SessionState.CONNECTED)
        await settled(group, [16])
        assert broker.owners.owns(segment)
        assert container_of(segment, COUNT) in broker.owners.served_containers()


async def test_suspended_pauses_writes_keeps_containers_and_resumes(zk_url: str) -> None:
    store = await ZooKeeperMetadataStore.connect(zk_url)
    broker = Broker(store, "b1")
    broker.owners = ZooKeeperOwners(store, COUNT, "b1", "b1:7070", broker.handover,
                                    tick_s=0.2, suspended_grace_s=0.5)
    owners, segment = broker.owners, "orders/0"
    await owners.start()
    try:
        await settled([broker], [16])
        broker.handover.dropped.clear()  # (each claim drops stale copies)
        owners.session_changed(SessionState.SUSPENDED)
        # Paused: writes refused, retriable, no owner named; nothing given up.
        assert owners.phase is OwnershipPhase.PAUSED
        try:
            owners.check_writable(segment)
        except WrongHostError as error:
            assert error.owner == "" and error.retriable
            assert "lost its metadata-store connection" in str(error)
        else:
            raise AssertionError("a paused broker took a write")
        assert owners.owns(segment) and owners.owner_of(segment) == "b1:7070"
        assert len(owners.served_containers()) == COUNT
        assert broker.handover.dropped == [] and broker.handover.released == []
        # Reconnected within the session: writes resume at once, nothing reloaded.
        owners.session_changed(SessionState.CONNECTED)
        phase: OwnershipPhase = owners.phase  # not the PAUSED mypy narrowed it to above
        assert phase is OwnershipPhase.SERVING
        owners.check_writable(segment)
        await settled([broker], [16])
        assert broker.handover.dropped == [] and broker.handover.released == []
        # Suspended past the grace (the session timeout in a broker): given up as for LOST.
        owners.session_changed(SessionState.SUSPENDED)

        async def stopped() -> bool:
            return owners.phase is OwnershipPhase.STOPPED

        await wait_for_async(stopped, "the containers given up after the grace")
        assert not owners.owns(segment)
        assert sorted(broker.handover.dropped) == list(range(COUNT))
        owners.session_changed(SessionState.CONNECTED)  # the same session after all
        await settled([broker], [16])
    finally:
        await asyncio.wait_for(owners.stop(), 30)
        await asyncio.wait_for(store.close(), 30)
