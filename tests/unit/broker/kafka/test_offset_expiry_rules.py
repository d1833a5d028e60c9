"""``OffsetExpiry`` on a real ledger stack with a clock of its own: Kafka's retention rules.

Which offsets expire when (an empty group from when it became empty, a
Stable consumer group only its unsubscribed topics, nothing while it
rebalances, never a partition with transactional offsets pending), a topic
made again after the commit, and a commit that races a sweep: what is read
back by a fresh ``OffsetStore`` is what memory says.
"""

from __future__ import annotations

import asyncio
import time

from kio.schema.errors import ErrorCode

from broker.api import TopicConfig
from broker.kafka.consumer_groups.coordinator import GroupCoordinator, OffsetCommitItem
from broker.kafka.consumer_groups.expiry import OffsetExpiry
from broker.kafka.consumer_groups.members import Group, GroupConfig, Member
from broker.kafka.consumer_groups.offsets import CommittedOffset, OffsetStore, TopicPartition
from broker.kafka.consumer_groups.states import ConsumerGroupState
from broker.topics.manager import TopicManager
from tests.unit.broker.kafka.test_group_commits import _subscription

S = ConsumerGroupState
RETENTION_MS = 1_000


class Clock:
    def __init__(self, now_ms: int) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms


async def _setup(topics: TopicManager) -> tuple[GroupCoordinator, OffsetExpiry, Clock]:
    for name in ("t", "u"):
        await topics.create_topic(name, 1, TopicConfig())
    groups = GroupCoordinator(topics, OffsetStore(topics),
                              GroupConfig(offsets_retention_ms=RETENTION_MS))
    await groups.start()
    clock = Clock(int(time.time() * 1000))
    return groups, OffsetExpiry(groups, None, topics, clock), clock


async def _commit(groups: GroupCoordinator, group_id: str, at_ms: int,
                  *partitions: TopicPartition) -> None:
    await groups.store.commit(group_id, [(tp, CommittedOffset(7, commit_time_ms=at_ms))
                                         for tp in partitions])


async def _reloaded(topics: TopicManager, group_id: str) -> set[TopicPartition]:
    store = OffsetStore(topics)
    await store.load()
    return set(store.offsets(group_id))


async def test_a_stable_consumer_group_keeps_its_subscribed_topics(
        topics: TopicManager) -> None:
    groups, expiry, clock = await _setup(topics)
    group = Group("g", S.STABLE, 3, "consumer", "range", "m")
    group.members["m"] = Member("m", "c", "", 10_000, 10_000, (("range", _subscription("t")),))
    groups.groups()["g"] = group
    await _commit(groups, "g", clock.now_ms, ("t", 0), ("u", 0))
    clock.now_ms += RETENTION_MS - 1
    assert await expiry.sweep() == 0
    clock.now_ms += 1
    assert await expiry.sweep() == 1
    assert set(groups.store.offsets("g")) == {("t", 0)} == await _reloaded(topics, "g")
    # Rebalancing: nothing expires, however old.
    group.state = S.PREPARING_REBALANCE
    clock.now_ms += 100 * RETENTION_MS
    assert await expiry.sweep() == 0
    # Empty: from when it became so, not from the commit.
    group.members.clear()
    group.move(S.EMPTY)
    group.empty_since_ms = clock.now_ms
    clock.now_ms += RETENTION_MS - 1
    assert await expiry.sweep() == 0
    clock.now_ms += 1
    assert await expiry.sweep() == 1
    assert groups.group("g") is None, "an empty group without offsets is deleted"
    assert await _reloaded(topics, "g") == set()
    assert "g" not in OffsetStore(topics).group_ids()


async def test_pending_transactional_offsets_and_a_recreated_topic(
        topics: TopicManager) -> None:
    groups, expiry, clock = await _setup(topics)
    groups.pending_txn_offsets = lambda group_id: {("t", 0)} if group_id == "g" else set()
    await _commit(groups, "g", clock.now_ms - 10 * RETENTION_MS, ("t", 0), ("u", 0))
    assert await expiry.sweep() == 1
    assert set(groups.store.offsets("g")) == {("t", 0)}
    # "u" made again after the commit of an offset: it is not the same topic.
    groups.pending_txn_offsets = lambda group_id: set()
    # (The fixture's topics have a clock of their own: every topic is made at one time.)
    await _commit(groups, "h", (await topics.get_topic("u")).created_ms - 1, ("u", 0))
    await topics.delete_topic("u")
    await topics.create_topic("u", 1, TopicConfig())
    assert (await topics.get_topic("u")).created_ms > groups.store.offsets("h")[
        ("u", 0)].commit_time_ms
    assert await expiry.sweep() == 2  # "g"'s expired "t" and "h"'s "u" of the old topic
    assert groups.store.offsets("h") == {}


async def test_a_commit_racing_a_sweep_wins(topics: TopicManager) -> None:
    groups, expiry, clock = await _setup(topics)
    await _commit(groups, "g", clock.now_ms - 10 * RETENTION_MS, ("t", 0), ("u", 0))
    # A commit under way when the sweep looks: its partition is left alone.
    commit = asyncio.ensure_future(groups.commit("g", -1, "", [OffsetCommitItem(
        "t", 0, CommittedOffset(9))]))
    await asyncio.sleep(0)
    sweep = asyncio.ensure_future(expiry.sweep())
    # And one that starts while the sweep's tombstones are written: it lands after them.
    await asyncio.sleep(0)
    late = asyncio.ensure_future(groups.commit("g", -1, "", [OffsetCommitItem(
        "u", 0, CommittedOffset(11))]))
    await asyncio.gather(commit, sweep, late)
    offsets = groups.store.offsets("g")
    assert {tp: value.offset for tp, value in offsets.items()} == {("t", 0): 9, ("u", 0): 11}
    assert await _reloaded(topics, "g") == {("t", 0), ("u", 0)}


async def test_a_group_whose_first_commit_is_being_written_is_not_deleted(
        topics: TopicManager) -> None:
    groups, expiry, _ = await _setup(topics)
    errors = {("t", 0): ErrorCode.none}
    first = asyncio.ensure_future(groups.write_offsets(
        "new", [OffsetCommitItem("t", 0, CommittedOffset(3))], errors))
    await asyncio.sleep(0)  # the group is made, its commit is being written
    assert groups.group("new") is not None and not groups.store.offsets("new")
    await expiry.sweep()  # an Empty group with no offsets, but one is on its way
    assert await first == errors
    assert groups.group("new") is not None
    assert await _reloaded(topics, "new") == {("t", 0)}
