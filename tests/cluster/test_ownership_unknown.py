"""Claiming a container when ZooKeeper's answer is lost (issue 22): the node may be ours.

A real ZooKeeper under a ``FaultyMetadataStore`` that applies the ownership
node's create and then raises ``MetadataUnavailableError``, as a connection
reset right after it would. ``plan`` counts a node of this broker's
incarnation as held, so a claim that took it for a failure left the container
served by no one until the session changed.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from broker.app.cluster_ownership import ClusterOwnership
from broker.cluster.containers import owner_path
from broker.cluster.zookeeper_owners import ZooKeeperOwners
from broker.errors import TxnNotFoundError
from broker.txn.commit_keys import CommitKeys
from broker.txn.coordinator import TxnCoordinator
from ledger.api import SessionState
from ledger.errors import MetadataUnavailableError
from ledger.metadata.zookeeper_store import ZooKeeperMetadataStore
from tests.support.faulty_metadata import Fault, FaultyMetadataStore
from tests.support.wait import wait_for_async
from tests.unit.broker.conftest import BrokerEnv

pytestmark = pytest.mark.faults

COUNT = 4


class Handover:
    async def release(self, containers: frozenset[int]) -> None:
        pass

    def drop(self, containers: frozenset[int]) -> None:
        pass


async def _serves_all(owners: ZooKeeperOwners) -> None:
    async def all_served() -> bool:
        return owners.served_containers() == frozenset(range(COUNT))

    await wait_for_async(all_served, "every container served", timeout_s=20)


@pytest.mark.parametrize("read_back_fails", [False, True])
async def test_a_claim_whose_answer_was_lost_is_served(zk_url: str,
                                                       read_back_fails: bool) -> None:
    inner = await ZooKeeperMetadataStore.connect(zk_url)
    store = FaultyMetadataStore(inner)
    path = owner_path(2)
    fired = store.fail("create", path.__eq__, Fault.LOST_ANSWER)
    if read_back_fails:  # the step fails; the next one finds the node ours
        store.fail_reads(1, path.__eq__)
    owners = ZooKeeperOwners(store, COUNT, "b1", "b1:7070", Handover(), tick_s=0.2)
    try:
        await owners.start()
        await _serves_all(owners)
        assert fired == [path]
        node = await inner.get(path)
        assert owners.record.to_bytes() == node.data
    finally:
        await asyncio.wait_for(owners.stop(), 30)
        await inner.close()


async def test_node_exists_on_a_retried_claim_is_ours(zk_url: str) -> None:
    # The create of an earlier attempt landed (its answer lost): the retried
    # create finds the node and must tell ours from another broker's.
    store = await ZooKeeperMetadataStore.connect(zk_url)
    other = await ZooKeeperMetadataStore.connect(zk_url)
    owners = ZooKeeperOwners(store, COUNT, "b1", "b1:7070", Handover(), tick_s=0.2)
    rival = ZooKeeperOwners(other, COUNT, "b2", "b2:7070", Handover(), tick_s=0.2)
    try:
        await store.create(owner_path(1), owners.record.to_bytes(), make_parents=True,
                           ephemeral=True)
        await other.create(owner_path(3), rival.record.to_bytes(), make_parents=True,
                           ephemeral=True)
        await owners._claim(1)
        await owners._claim(3)
        assert owners.served_containers() == frozenset({1})
    finally:
        await owners.stop()
        await store.close()
        await other.close()


async def test_a_take_over_that_failed_is_tried_again_while_the_container_is_held(
        zk_url: str, caplog: pytest.LogCaptureFixture) -> None:
    # The nemesis (seed 4): the transaction coordinator's take-over replays its
    # log, which a bookie outage failed; it was logged and never tried again, so
    # the container stayed held with no coordinator seated, and every
    # transaction call failed until the session changed.
    store = await ZooKeeperMetadataStore.connect(zk_url)
    seated: list[int] = []
    failures = {1: 2}  # container 1's take-over fails twice

    async def on_claimed(container: int) -> None:
        if failures.get(container, 0) > 0:
            failures[container] -= 1
            raise MetadataUnavailableError("injected: the log cannot be replayed now")
        seated.append(container)

    # Made before its id is known and bound later, as a cluster broker does
    # (``ClusterOwnership``): the failures' log lines named the broker "".
    owners = ZooKeeperOwners(store, COUNT, "", "", Handover(), tick_s=0.2,
                             on_claimed=on_claimed)
    owners.bind("b1", "b1:7070")
    caplog.set_level(logging.INFO, logger="broker.cluster.takeovers")
    try:
        await owners.start()
        await _serves_all(owners)

        async def all_seated() -> bool:
            return sorted(seated) == list(range(COUNT))

        await wait_for_async(all_seated, "every container taken over", timeout_s=20)
        assert failures == {1: 0} and seated.count(1) == 1
        told = [r.getMessage() for r in caplog.records if r.name == "broker.cluster.takeovers"]
        assert told.count("broker b1: taking over container 1 failed (MetadataUnavailableError: "
                          "injected: the log cannot be replayed now); trying again") == 2
        assert told.count("broker b1: taking over container 1 again") == 2
    finally:
        await asyncio.wait_for(owners.stop(), 30)
        await store.close()


@pytest.mark.parametrize("replay_fails", [True, False], ids=["replay-failed", "replay-done"])
async def test_a_coordinator_taken_over_while_its_container_went_does_not_run(
        zk_url: str, tmp_path: Path, replay_fails: bool) -> None:
    # Issue 22 (the nemesis, seed 25: a take-over of the coordinator's container
    # failed on a ZooKeeper connection loss). The coordinator's log replayed,
    # then the container went (the session lost) while the commit keys' log
    # replayed, which then failed or ended. The coordinator was left running
    # unseated, with its timers, and no drop stood it down (only a seated one):
    # its log writes would load _txnlog/0 here and fence the coordinator that
    # runs where the container went.
    env = BrokerEnv(tmp_path)
    topics = env.manager()
    coordinator = TxnCoordinator(topics)
    commit_keys = CommitKeys(topics, coordinator)
    await coordinator.start()
    txn_id = await coordinator.begin(60_000)  # OPEN in the log: a replay brings it back
    store = await ZooKeeperMetadataStore.connect(zk_url)
    ownership = ClusterOwnership(store, COUNT, session_timeout_ms=4_000)
    await ownership.attach(topics, coordinator, commit_keys)
    replay = commit_keys.take_over
    replayed: list[dict[str, int]] = []

    async def container_lost_meanwhile() -> None:
        replayed.append(coordinator.count_by_state())  # the coordinator's log replayed
        ownership.owners.session_changed(SessionState.LOST)  # drops every container
        if replay_fails:
            raise MetadataUnavailableError("injected: ZooKeeper's connection lost")
        await replay()

    commit_keys.take_over = container_lost_meanwhile  # type: ignore[method-assign]
    try:
        await ownership.start("b1:7070")  # its first step claims and takes over
        assert replayed == [{"open": 1}]
        assert not ownership.seated
        assert ownership.owners.served_containers() == frozenset()
        assert coordinator.count_by_state() == {}  # stood down: nothing runs here
        with pytest.raises(TxnNotFoundError):
            coordinator.status(txn_id)
    finally:
        await asyncio.wait_for(ownership.leave(), 30)
        await ownership.close()
        await env.stop()
        await store.close()
