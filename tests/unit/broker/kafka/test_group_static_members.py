"""Static members (KIP-345) back under a new member id, on the classic coordinator alone.

Kafka's rules (``GroupMetadataManager.updateStaticMemberThenRebalanceOrCompleteJoin``
and ``ClassicGroup.validateMember``), one test each: in a Stable group no
rebalance unless the chosen protocol changes (new metadata alone does not),
the answer by version (KIP-814's ``skip_assignment`` for a v9+ leader, the
previous leader named before v9); while the leader assigns, a rebalance; during
a rebalance, it joins it; a failed write puts the old member id back; the old
member id is fenced. No storage: the group record is written by a function the
test owns (``Records``, which can fail).
"""

from __future__ import annotations

import asyncio

from kio.schema.errors import ErrorCode

from broker.kafka.consumer_groups.members import Group
from broker.kafka.consumer_groups.membership import GroupConfig, GroupMembership, JoinRequest
from broker.kafka.consumer_groups.states import ConsumerGroupState
from tests.support.wait import wait_for_async

S = ConsumerGroupState
Protocols = tuple[tuple[str, bytes], ...]
RANGE: Protocols = (("range", b"topic-1"),)


class Records:
    """The group records written; ``fail`` makes the next writes fail; while ``held`` is
    set, a write (its image taken when called, as the store's) waits for it to clear."""

    def __init__(self) -> None:
        self.written: list[tuple[str, int, tuple[str, ...]]] = []
        self.fail = False
        self.held: asyncio.Event | None = None

    async def __call__(self, group: Group) -> None:
        if self.fail:
            raise OSError("disk full")
        self.written.append((group.group_id, group.generation, tuple(group.members)))
        if self.held is not None:
            await self.held.wait()


def static(instance: str, member_id: str = "", protocols: Protocols = RANGE,
           v9: bool = False) -> JoinRequest:
    return JoinRequest("g", member_id, "client", "", 10_000, 10_000, "consumer", protocols,
                       instance, False, v9)


def group_of(groups: GroupMembership) -> Group:
    group = groups.group("g")
    assert group is not None
    return group


async def is_in(groups: GroupMembership, state: ConsumerGroupState) -> bool:
    return group_of(groups).state is state


async def stable_pair(groups: GroupMembership, a: Protocols = RANGE,
                      b: Protocols = RANGE) -> tuple[str, str]:
    """Static members "a" (the leader) and "b", Stable at generation 2; their ids."""
    first = await groups.join(static("a", protocols=a))
    await groups.sync("g", 1, first.member_id, None, None, {first.member_id: b"all"})
    second_join = asyncio.ensure_future(groups.join(static("b", protocols=b)))
    await wait_for_async(lambda: is_in(groups, S.PREPARING_REBALANCE), "rebalance begins")
    await groups.join(static("a", first.member_id, a))
    second = await second_join
    follower = asyncio.ensure_future(groups.sync("g", 2, second.member_id, None, None, {}))
    await groups.sync("g", 2, first.member_id, None, None,
                      {first.member_id: b"for-a", second.member_id: b"for-b"})
    assert (await follower).assignment == b"for-b"
    assert group_of(groups).state is S.STABLE
    return first.member_id, second.member_id


def membership(records: Records | None = None) -> GroupMembership:
    return GroupMembership(GroupConfig(min_session_timeout_ms=10), records or Records())


async def test_back_with_the_same_protocols_no_rebalance_and_the_answer_by_version() -> None:
    records = Records()
    groups = membership(records)
    a, b = await stable_pair(groups)
    # The follower restarts (JoinGroup before v9): the current generation, no members,
    # its state written with the new id before the answer.
    back_b = await groups.join(static("b"))
    assert (back_b.error, back_b.generation, back_b.leader, back_b.members,
            back_b.skip_assignment) == (ErrorCode.none, 2, a, (), False)
    assert back_b.member_id.startswith("b-") and back_b.member_id != b
    assert records.written[-1] == ("g", 2, (a, back_b.member_id))
    assert group_of(groups).state is S.STABLE
    assert groups.heartbeat("g", 2, a, "a") == ErrorCode.none  # "a" is not asked to rejoin
    assert (await groups.sync("g", 2, back_b.member_id, None, None, {}, "b")).assignment == (
        b"for-b")
    # The leader restarts with v9 (KIP-814): it leads on, gets the members, skips assigning.
    back_a = await groups.join(static("a", v9=True))
    assert (back_a.error, back_a.generation, back_a.leader, back_a.skip_assignment) == (
        ErrorCode.none, 2, back_a.member_id, True)
    assert sorted(m[0] for m in back_a.members) == sorted([back_a.member_id, back_b.member_id])
    assert (await groups.sync("g", 2, back_a.member_id, None, None, {}, "a")).assignment == (
        b"for-a")
    assert groups.heartbeat("g", 2, back_b.member_id, "b") == ErrorCode.none
    # A follower back with v9 is told the leader, no members.
    again_b = await groups.join(static("b", v9=True))
    assert (again_b.leader, again_b.members, again_b.skip_assignment) == (
        back_a.member_id, (), False)
    assert group_of(groups).generation == 2
    groups.close()


async def test_the_old_member_id_is_fenced_and_an_unknown_instance_is_unknown() -> None:
    groups = membership()
    a, b = await stable_pair(groups)
    back_b = await groups.join(static("b"))
    assert (await groups.join(static("b", b))).error == ErrorCode.fenced_instance_id
    assert groups.heartbeat("g", 2, b, "b") == ErrorCode.fenced_instance_id
    assert (await groups.sync("g", 2, b, None, None, {}, "b")).error == (
        ErrorCode.fenced_instance_id)
    # Kafka's validateMember: an instance the group does not know is an unknown member,
    # a member id joined under another member's instance is fenced.
    assert (await groups.join(static("c", back_b.member_id))).error == (
        ErrorCode.unknown_member_id)
    assert (await groups.join(static("a", back_b.member_id))).error == (
        ErrorCode.fenced_instance_id)
    assert group_of(groups).state is S.STABLE
    assert groups.heartbeat("g", 2, a, "a") == ErrorCode.none
    groups.close()


async def test_new_metadata_with_the_same_chosen_protocol_does_not_rebalance() -> None:
    groups = membership()
    a, _ = await stable_pair(groups)
    # "b" is back subscribed to another topic: Kafka checks only the protocol the
    # group would choose; the new metadata is kept for the next rebalance.
    wider: Protocols = (("range", b"topic-1,topic-2"),)
    back_b = await groups.join(static("b", protocols=wider))
    assert (back_b.error, back_b.generation) == (ErrorCode.none, 2)
    group = group_of(groups)
    assert group.state is S.STABLE
    assert group.members[back_b.member_id].protocols == wider
    assert groups.heartbeat("g", 2, a, "a") == ErrorCode.none
    groups.close()


async def test_a_change_of_the_chosen_protocol_rebalances() -> None:
    groups = membership()
    a_protocols: Protocols = (("roundrobin", b"t"), ("range", b"t"))
    b_protocols: Protocols = (("range", b"t"), ("roundrobin", b"t"))
    a, _ = await stable_pair(groups, a_protocols, b_protocols)
    assert group_of(groups).protocol_name == "range"  # one vote each: the first name
    # "b" is back preferring roundrobin: both vote for it now, the choice changes.
    back_b_join = asyncio.ensure_future(groups.join(static("b", protocols=a_protocols)))
    await wait_for_async(lambda: is_in(groups, S.PREPARING_REBALANCE), "rebalance begins")
    assert groups.heartbeat("g", 2, a, "a") == ErrorCode.rebalance_in_progress
    rejoined = await groups.join(static("a", a, a_protocols))
    back_b = await back_b_join
    assert (rejoined.generation, back_b.generation) == (3, 3)
    assert (rejoined.protocol_name, back_b.protocol_name) == ("roundrobin", "roundrobin")
    assert rejoined.leader == a and len(rejoined.members) == 2
    groups.close()


async def test_back_while_the_leader_assigns_rebalances() -> None:
    groups = membership()
    first = await groups.join(static("a"))
    await groups.sync("g", 1, first.member_id, None, None, {})
    second_join = asyncio.ensure_future(groups.join(static("b")))
    await wait_for_async(lambda: is_in(groups, S.PREPARING_REBALANCE), "rebalance begins")
    await groups.join(static("a", first.member_id))
    second = await second_join
    assert group_of(groups).state is S.COMPLETING_REBALANCE
    old_sync = asyncio.ensure_future(groups.sync("g", 2, second.member_id, None, None, {},
                                                 "b"))
    await wait_for_async(lambda: _waiting_sync(groups, second.member_id), "b syncs")
    # "b" restarts before the leader's assignment, same protocols: the leader may be
    # assigning to the old id, so Kafka rebalances.
    back_join = asyncio.ensure_future(groups.join(static("b")))
    assert (await old_sync).error == ErrorCode.fenced_instance_id
    await wait_for_async(lambda: is_in(groups, S.PREPARING_REBALANCE), "rebalance begins")
    assert groups.heartbeat("g", 2, first.member_id, "a") == ErrorCode.rebalance_in_progress
    rejoined = await groups.join(static("a", first.member_id))
    back = await back_join
    assert (rejoined.generation, back.generation) == (3, 3)
    assert sorted(m[0] for m in rejoined.members) == sorted([first.member_id, back.member_id])
    groups.close()


async def _waiting_sync(groups: GroupMembership, member_id: str) -> bool:
    member = group_of(groups).members.get(member_id)
    return member is not None and member.sync_waiter is not None


async def test_back_during_a_rebalance_joins_it_and_fences_the_old_join() -> None:
    groups = membership()
    a, b = await stable_pair(groups)
    newcomer_join = asyncio.ensure_future(groups.join(static("c")))
    await wait_for_async(lambda: is_in(groups, S.PREPARING_REBALANCE), "rebalance begins")
    old_join = asyncio.ensure_future(groups.join(static("b", b)))
    await wait_for_async(lambda: _waiting_join(groups, b), "the old b rejoins")
    back_join = asyncio.ensure_future(groups.join(static("b")))
    assert (await old_join).error == ErrorCode.fenced_instance_id
    rejoined = await groups.join(static("a", a))
    back, newcomer = await back_join, await newcomer_join
    assert rejoined.generation == back.generation == newcomer.generation == 3
    assert len(rejoined.members) == 3 and b not in {m[0] for m in rejoined.members}
    groups.close()


async def _waiting_join(groups: GroupMembership, member_id: str) -> bool:
    member = group_of(groups).members.get(member_id)
    return member is not None and member.join_waiter is not None


async def test_a_failed_write_puts_the_old_member_id_back() -> None:
    records = Records()
    groups = membership(records)
    a, b = await stable_pair(groups)
    records.fail = True
    refused = await groups.join(static("b"))
    # Kafka's revert: its error (COORDINATOR_NOT_AVAILABLE), no member id, the old
    # leader named; the old member id is a member again.
    assert (refused.error, refused.member_id, refused.generation, refused.leader) == (
        ErrorCode.coordinator_not_available, "", 2, a)
    group = group_of(groups)
    assert set(group.members) == {a, b} and group.state is S.STABLE
    assert groups.heartbeat("g", 2, b, "b") == ErrorCode.none
    records.fail = False
    back = await groups.join(static("b"))
    assert (back.error, back.generation) == (ErrorCode.none, 2)
    assert groups.heartbeat("g", 2, b, "b") == ErrorCode.fenced_instance_id
    # The leader's failed replacement keeps the old leader.
    records.fail = True
    assert (await groups.join(static("a"))).error == ErrorCode.coordinator_not_available
    assert group.leader == a
    groups.close()


async def test_a_rebalance_that_completes_during_the_write_answers_its_generation() -> None:
    records = Records()
    groups = membership(records)
    a, _ = await stable_pair(groups)
    records.held = asyncio.Event()
    back_join = asyncio.ensure_future(groups.join(static("b")))
    await wait_for_async(lambda: _written(records, 3), "the new id's state is being written")
    # Meanwhile a newcomer starts a rebalance; "b" counts as joined (Kafka: its join
    # future is set), so "a" rejoining completes it.
    newcomer_join = asyncio.ensure_future(groups.join(static("c")))
    await wait_for_async(lambda: is_in(groups, S.PREPARING_REBALANCE), "rebalance begins")
    rejoined = await groups.join(static("a", a))
    newcomer = await newcomer_join
    records.held.set()
    back = await back_join
    assert rejoined.generation == newcomer.generation == back.generation == 3
    assert back.member_id in {m[0] for m in rejoined.members}
    groups.close()


async def _written(records: Records, count: int) -> bool:
    return len(records.written) >= count
