"""Group members kept over a restart: classic and KIP-848 images in a real ``OffsetStore``.

A "restart" is a new ``OffsetStore`` and new coordinators on the same topics
(``BrokerEnv``): what they load is what the segment holds. A failed write comes
from a fault wrapper at the store's seam (``write_state`` raises, after writing
when ``land``: the unknown outcome).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.errors import BrokerShuttingDownError
from broker.kafka.consumer_groups.coordinator import GroupCoordinator
from broker.kafka.consumer_groups.members import JoinRequest
from broker.kafka.consumer_groups.modern import ModernGroups
from broker.kafka.consumer_groups.modern_members import ModernGroupState
from broker.kafka.consumer_groups.offsets import ConsumerGroupRecord, OffsetStore
from broker.kafka.consumer_groups.states import ConsumerGroupState
from broker.topics.manager import TopicManager
from tests.support.wait import wait_for_async
from tests.unit.broker.kafka.test_consumer_protocol import TOPIC, Classic, _beat, _four, _held

S = ConsumerGroupState


class FailingStates(OffsetStore):
    """``write_state`` raises once ``fail`` is set, after writing when ``land``."""

    fail = False
    land = False

    async def write_state(self, group_id: str, state: bytes | None,
                          record: ConsumerGroupRecord | None = None) -> None:
        if self.fail and self.land:
            await super().write_state(group_id, state, record)
        if self.fail:
            raise BrokerShuttingDownError("injected")
        await super().write_state(group_id, state, record)


async def _modern(topics: TopicManager, store: OffsetStore | None = None,
                  ) -> tuple[ModernGroups, OffsetStore]:
    store = store or OffsetStore(topics)
    await store.load()
    groups = ModernGroups(_four, store, Classic(), states=store)
    groups.start()
    return groups, store


async def test_kip848_members_keep_their_epochs_and_partitions(topics: TopicManager) -> None:
    groups, _ = await _modern(topics)
    await groups.heartbeat(_beat("a", 0, {}))
    await groups.heartbeat(_beat("b", 0, {}))
    a = await groups.heartbeat(_beat("a", 1, {TOPIC: {0, 1, 2, 3}}))
    kept = _held(a)
    a = await groups.heartbeat(_beat("a", 1, {TOPIC: kept}))
    b = await groups.heartbeat(_beat("b", 2, {}))
    assert (a.member_epoch, b.member_epoch) == (2, 2)
    b_held = _held(b)
    groups.close()

    again, store = await _modern(topics)  # the broker restarted
    group = again.group("g")
    assert group is not None and group.state is ModernGroupState.STABLE
    assert (group.group_epoch, set(group.members)) == (2, {"a", "b"})
    assert group.members["a"].assigned == {TOPIC: kept}
    assert again.commit_error("g", "b", 2, 9) is ErrorCode.none
    # Their heartbeats go on at their epochs: no new epoch, nothing moves.
    a = await again.heartbeat(_beat("a", 2, {TOPIC: kept}))
    b = await again.heartbeat(_beat("b", 2, {TOPIC: b_held}))
    assert (a.error, a.member_epoch, b.error, b.member_epoch) == (
        ErrorCode.none, 2, ErrorCode.none, 2)
    # A full heartbeat (as after a reconnect) is answered with the same partitions.
    full = await again.heartbeat(_beat("a", 2, {TOPIC: kept}, subscribed=(TOPIC,),
                                       rebalance_timeout_ms=30_000))
    assert _held(full) == kept and full.member_epoch == 2
    # Both leave: the image is a tombstone, the record keeps the epoch.
    await again.heartbeat(_beat("a", -1))
    await again.heartbeat(_beat("b", -1))
    assert store.group_state("g") is None
    again.close()
    last, store = await _modern(topics)
    group = last.group("g")
    assert group is not None and not group.members and group.group_epoch == 4
    assert await last.delete_group("g") is ErrorCode.none
    last.close()


async def test_kip848_a_lost_answer_or_a_failed_write_over_a_restart(
        topics: TopicManager) -> None:
    store = FailingStates(topics)
    groups, _ = await _modern(topics, store)
    first = await groups.heartbeat(_beat("a", 0, {}))
    assert (first.member_epoch, _held(first)) == (1, {0, 1, 2, 3})
    # b joins, but the image's write fails (and landed): b is told to retry.
    store.fail = store.land = True
    refused = await groups.heartbeat(_beat("b", 0, {}))
    assert refused.error is ErrorCode.coordinator_not_available
    groups.close()
    store.fail = False
    # The broker dies: the landed image has b at epoch 2, which b never heard of.
    again, _ = await _modern(topics)
    group = again.group("g")
    assert group is not None and set(group.members) == {"a", "b"}
    # a goes on at epoch 1 (as it knows) and must revoke two partitions first; b,
    # which never heard of its epoch 2, joins again (epoch 0) and gets them after that.
    a = await again.heartbeat(_beat("a", 1, {TOPIC: {0, 1, 2, 3}}))
    kept = _held(a)
    assert a.error is ErrorCode.none and len(kept) == 2
    a = await again.heartbeat(_beat("a", 1, {TOPIC: kept}))
    assert a.member_epoch == 2
    b = await again.heartbeat(_beat("b", 0, {}))
    assert b.member_epoch == 2 and _held(b) == {0, 1, 2, 3} - kept
    again.close()


async def test_kip848_a_newer_record_than_the_image_gets_a_new_target(
        topics: TopicManager) -> None:
    groups, store = await _modern(topics)
    await groups.heartbeat(_beat("a", 0, {}))
    groups.close()
    # A bump's record landed, its image did not (the broker died between the two).
    await store.write_group("g", ConsumerGroupRecord(5, "consumer", "uniform", "consumer"))
    again, _ = await _modern(topics)
    group = again.group("g")
    assert group is not None and group.group_epoch == 5 and group.assignment_epoch == 5
    a = await again.heartbeat(_beat("a", 1, {TOPIC: {0, 1, 2, 3}}))
    assert (a.error, a.member_epoch) == (ErrorCode.none, 5)
    again.close()


def _join(member_id: str = "") -> JoinRequest:
    return JoinRequest("cg", member_id, "client", "host", 10_000, 10_000, "consumer",
                       (("range", b"meta"),), None, False)


async def test_classic_members_keep_their_generation_and_assignment(
        topics: TopicManager) -> None:
    coordinator = GroupCoordinator(topics, OffsetStore(topics))
    await coordinator.start()
    joined = await coordinator.join(_join())
    assert joined.error is ErrorCode.none and joined.generation == 1
    member = joined.member_id
    synced = await coordinator.sync("cg", 1, member, "consumer", "range", {member: b"mine"})
    assert synced.assignment == b"mine"
    coordinator.close()

    again = GroupCoordinator(topics, OffsetStore(topics))  # the broker restarted
    await again.start()
    group = again.group("cg")
    assert group is not None and (group.state, group.generation) == (S.STABLE, 1)
    assert group.leader == member and group.members[member].metadata_of("range") == b"meta"
    assert again.heartbeat("cg", 1, member) is ErrorCode.none
    assert again.commit_error("cg", 1, member) is ErrorCode.none
    assert again.heartbeat("cg", 2, member) is ErrorCode.illegal_generation
    resynced = await again.sync("cg", 1, member, "consumer", "range", {})
    assert resynced.assignment == b"mine"  # a SyncGroup resent after the crash
    # It leaves: the group empties at generation 2 and the image is a tombstone.
    assert again.leave("cg", [(member, None)]) == [ErrorCode.none]
    store = again.store

    async def emptied() -> bool:  # the emptied group's record is written in the background
        record = store.group_record("cg")
        return record is not None and record.generation == 2

    await wait_for_async(emptied, "the empty generation's record")
    assert store.group_state("cg") is None
    again.close()
    last = GroupCoordinator(topics, OffsetStore(topics))
    await last.start()
    group = last.group("cg")
    assert group is not None and (group.state, group.generation) == (S.EMPTY, 2)
    last.close()


async def test_classic_a_stale_image_is_not_used(topics: TopicManager) -> None:
    coordinator = GroupCoordinator(topics, OffsetStore(topics))
    await coordinator.start()
    joined = await coordinator.join(_join())
    await coordinator.sync("cg", 1, joined.member_id, "consumer", "range",
                           {joined.member_id: b"x"})
    coordinator.close()
    # A later generation's record landed without its image.
    await coordinator.store.write_group("cg", ConsumerGroupRecord(3, "consumer", "range"))
    again = GroupCoordinator(topics, OffsetStore(topics))
    await again.start()
    group = again.group("cg")
    assert group is not None and (group.state, group.generation) == (S.EMPTY, 3)
    assert not group.members
    assert again.heartbeat("cg", 1, joined.member_id) is ErrorCode.unknown_member_id
    again.close()


async def test_classic_a_static_members_new_id_is_kept(topics: TopicManager) -> None:
    def static(member_id: str = "") -> JoinRequest:
        return JoinRequest("cg", member_id, "client", "host", 10_000, 10_000, "consumer",
                           (("range", b"meta"),), "box", False)

    store = FailingStates(topics)
    coordinator = GroupCoordinator(topics, store)
    await coordinator.start()
    first = await coordinator.join(static())
    await coordinator.sync("cg", 1, first.member_id, "consumer", "range",
                           {first.member_id: b"mine"})
    # The client restarts: a join without member id takes its place, no rebalance; the
    # new id is written before the answer (a failed write: it joins again).
    store.fail = True
    refused = await coordinator.join(static())
    assert refused.error is ErrorCode.coordinator_not_available
    store.fail = False
    back = await coordinator.join(static())
    assert (back.error, back.generation) == (ErrorCode.none, 1)
    coordinator.close()

    again = GroupCoordinator(topics, OffsetStore(topics))  # the broker restarted
    await again.start()
    assert again.heartbeat("cg", 1, back.member_id, "box") is ErrorCode.none
    assert again.heartbeat("cg", 1, first.member_id, "box") is ErrorCode.fenced_instance_id
    synced = await again.sync("cg", 1, back.member_id, "consumer", "range", {}, "box")
    assert synced.assignment == b"mine"
    again.close()
