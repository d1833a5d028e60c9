"""The group state machine and the classic rebalance protocol, on the coordinator alone.

No storage: the group record is written by a function the test owns (which
can fail). Session and rebalance timeouts are short, and the tests wait for
their outcome (never for a time).
"""

from __future__ import annotations

import asyncio

import pytest
from kio.schema.errors import ErrorCode

from broker.kafka.consumer_groups.members import Group
from broker.kafka.consumer_groups.membership import GroupConfig, GroupMembership, JoinRequest
from broker.kafka.consumer_groups.states import (
    ConsumerGroupState,
    ConsumerGroupStateError,
    by_name,
    check_transition,
)
from broker.kafka.locator import LocalLocator, Node, container_of
from tests.support.wait import wait_for_async

S = ConsumerGroupState


class Records:
    """The group records written; ``fail`` makes the next writes fail."""

    def __init__(self) -> None:
        self.written: list[tuple[str, int]] = []
        self.fail = False

    async def __call__(self, group: Group) -> None:
        if self.fail:
            raise OSError("disk full")
        self.written.append((group.group_id, group.generation))


def join_request(member_id: str = "", session_ms: int = 10_000, rebalance_ms: int = 10_000,
                 protocols: tuple[str, ...] = ("range",), known: bool = False) -> JoinRequest:
    return JoinRequest("g", member_id, "client", "", session_ms, rebalance_ms, "consumer",
                       tuple((name, name.encode()) for name in protocols), None, known)


def membership(records: Records | None = None) -> GroupMembership:
    return GroupMembership(GroupConfig(min_session_timeout_ms=10), records or Records())


def test_the_transition_table_refuses_moves_kafka_does_not_make() -> None:
    assert check_transition("g", S.EMPTY, S.PREPARING_REBALANCE) is S.PREPARING_REBALANCE
    assert check_transition("g", S.COMPLETING_REBALANCE, S.STABLE) is S.STABLE
    for actual, target in [(S.EMPTY, S.STABLE), (S.STABLE, S.COMPLETING_REBALANCE),
                           (S.PREPARING_REBALANCE, S.STABLE), (S.DEAD, S.EMPTY)]:
        with pytest.raises(ConsumerGroupStateError):
            check_transition("g", actual, target)
    assert by_name("stable") is S.STABLE
    assert by_name("nothing") is None
    with pytest.raises(ValueError, match="min_session"):
        GroupConfig(min_session_timeout_ms=0)


def test_the_locator_hook() -> None:
    node = Node(0, "h", 9092)
    locator = LocalLocator(lambda: node)
    assert locator.coordinator_of(0, "g") == node
    assert locator.is_local(1, "t")
    # Spread over the containers (stable across processes:
    # tests/unit/broker/cluster/test_placement_across_processes.py).
    assert len({container_of(0, f"group-{i}", 16) for i in range(200)}) == 16
    with pytest.raises(ValueError, match="container_count"):
        container_of(0, "g", 0)


async def test_two_members_one_generation_then_a_leave_rebalances() -> None:
    records = Records()
    groups = membership(records)
    first = await groups.join(join_request())
    assert (first.error, first.generation, first.leader) == (ErrorCode.none, 1, first.member_id)
    assert [m[0] for m in first.members] == [first.member_id]
    synced = await groups.sync("g", 1, first.member_id, "consumer", "range",
                               {first.member_id: b"all"})
    assert (synced.error, synced.assignment) == (ErrorCode.none, b"all")
    assert groups.group("g").state is S.STABLE  # type: ignore[union-attr]
    # A second member starts a rebalance; the first learns it from its heartbeat.
    second_join = asyncio.ensure_future(groups.join(join_request()))
    await wait_for_async(lambda: _state(groups, S.PREPARING_REBALANCE), "rebalance begins")
    assert groups.heartbeat("g", 1, first.member_id) == ErrorCode.rebalance_in_progress
    rejoined = await groups.join(join_request(first.member_id))
    second = await second_join
    assert rejoined.generation == second.generation == 2
    assert rejoined.leader == first.member_id and len(rejoined.members) == 2
    assert second.members == ()  # only the leader gets the members
    follower = asyncio.ensure_future(groups.sync("g", 2, second.member_id, None, None, {}))
    leader = await groups.sync("g", 2, first.member_id, None, None,
                               {first.member_id: b"a", second.member_id: b"b"})
    assert (leader.assignment, (await follower).assignment) == (b"a", b"b")
    assert records.written == [("g", 1), ("g", 2)]
    assert groups.leave("g", [(second.member_id, None), ("nobody", None)]) == [
        ErrorCode.none, ErrorCode.unknown_member_id]
    again = await groups.join(join_request(first.member_id))
    assert (again.generation, [m[0] for m in again.members]) == (3, [first.member_id])
    groups.close()


async def test_a_silent_member_is_removed_after_its_session_timeout() -> None:
    groups = membership()
    first = await groups.join(join_request(session_ms=10_000))
    await groups.sync("g", 1, first.member_id, None, None, {})
    second_join = asyncio.ensure_future(groups.join(join_request(session_ms=50)))
    await wait_for_async(lambda: _state(groups, S.PREPARING_REBALANCE), "rebalance begins")
    rejoined = await groups.join(join_request(first.member_id))
    second = await second_join
    assert rejoined.generation == 2
    # The second member never syncs nor heartbeats: its session ends, a rebalance follows.
    await groups.sync("g", 2, first.member_id, None, None, {})
    await wait_for_async(lambda: _state(groups, S.PREPARING_REBALANCE), "the silent one expires")
    assert groups.heartbeat("g", 2, second.member_id) == ErrorCode.unknown_member_id
    alone = await groups.join(join_request(first.member_id))
    assert (alone.generation, len(alone.members)) == (3, 1)
    groups.close()


async def test_a_member_that_does_not_rejoin_is_dropped_at_the_rebalance_timeout() -> None:
    groups = membership()
    slow = await groups.join(join_request(rebalance_ms=100))
    await groups.sync("g", 1, slow.member_id, None, None, {})
    # A newcomer with a short rebalance timeout; the first member never rejoins.
    newcomer = await groups.join(join_request(session_ms=10_000, rebalance_ms=100))
    assert (newcomer.error, newcomer.generation, newcomer.leader) == (
        ErrorCode.none, 2, newcomer.member_id)
    assert groups.heartbeat("g", 1, slow.member_id) == ErrorCode.unknown_member_id
    groups.close()


async def test_member_id_required_then_the_pending_id_joins() -> None:
    groups = membership()
    first = await groups.join(join_request(known=True))
    assert first.error == ErrorCode.member_id_required
    assert (await groups.join(join_request("made-up", known=True))).error == (
        ErrorCode.unknown_member_id)
    joined = await groups.join(join_request(first.member_id, known=True))
    assert (joined.error, joined.member_id) == (ErrorCode.none, first.member_id)
    groups.close()


async def test_a_failed_record_makes_the_members_rejoin() -> None:
    records = Records()
    groups = membership(records)
    first = await groups.join(join_request())
    records.fail = True
    synced = await groups.sync("g", 1, first.member_id, None, None, {first.member_id: b"x"})
    assert synced.error == ErrorCode.coordinator_not_available
    assert _state_now(groups) is S.PREPARING_REBALANCE
    records.fail = False
    again = await groups.join(join_request(first.member_id))
    assert again.generation == 2
    synced = await groups.sync("g", 2, first.member_id, None, None, {first.member_id: b"x"})
    assert (synced.error, synced.assignment) == (ErrorCode.none, b"x")
    groups.close()


async def test_protocol_choice_is_the_most_preferred_common_one() -> None:
    groups = membership()
    first = await groups.join(join_request(protocols=("cooperative-sticky", "range")))
    await groups.sync("g", 1, first.member_id, None, None, {})
    second = asyncio.ensure_future(groups.join(join_request(protocols=("range",))))
    await wait_for_async(lambda: _state(groups, S.PREPARING_REBALANCE), "rebalance begins")
    rejoined = await groups.join(join_request(first.member_id,
                                              protocols=("cooperative-sticky", "range")))
    assert (rejoined.protocol_name, (await second).protocol_name) == ("range", "range")
    refused = await groups.join(join_request(protocols=("roundrobin",)))
    assert refused.error == ErrorCode.inconsistent_group_protocol
    groups.close()


async def _state(groups: GroupMembership, state: ConsumerGroupState) -> bool:
    return _state_now(groups) is state


def _state_now(groups: GroupMembership) -> ConsumerGroupState | None:
    group = groups.group("g")
    return None if group is None else group.state


async def test_an_initial_delay_gathers_the_first_members_in_one_generation() -> None:
    groups = GroupMembership(GroupConfig(min_session_timeout_ms=10,
                                         initial_rebalance_delay_ms=100), Records())
    first, second = await asyncio.gather(groups.join(join_request()),
                                         groups.join(join_request()))
    assert (first.generation, second.generation) == (1, 1)
    assert first.leader == second.leader
    groups.close()


async def test_a_static_member_back_under_a_new_id_takes_its_place_without_a_rebalance() -> None:
    groups = membership()

    def static(instance: str, member_id: str = "") -> JoinRequest:
        request = join_request(member_id)
        return JoinRequest(request.group_id, member_id, "client", "", 10_000, 10_000,
                           "consumer", request.protocols, instance, False)

    first = await groups.join(static("a"))
    second_join = asyncio.ensure_future(groups.join(static("b")))
    await wait_for_async(lambda: _state(groups, S.PREPARING_REBALANCE), "rebalance begins")
    rejoined = await groups.join(static("a", first.member_id))
    second = await second_join
    follower = asyncio.ensure_future(groups.sync("g", 2, second.member_id, None, None, {}))
    await groups.sync("g", 2, first.member_id, None, None,
                      {first.member_id: b"for-a", second.member_id: b"for-b"})
    assert (await follower).assignment == b"for-b"
    assert rejoined.leader == first.member_id
    # "a" restarts: a join without member id, same instance id and protocols. Before
    # v9 the answer names the leader before the replacement (Kafka's), so the new id
    # syncs as a follower and gets the old one's assignment.
    back = await groups.join(static("a"))
    assert (back.error, back.generation, back.leader) == (ErrorCode.none, 2, first.member_id)
    assert back.member_id.startswith("a-") and back.members == ()
    assert _state_now(groups) is S.STABLE  # no rebalance
    synced = await groups.sync("g", 2, back.member_id, None, None, {}, "a")
    assert synced.assignment == b"for-a"
    # The old member id is fenced when it names its instance, unknown otherwise.
    assert groups.heartbeat("g", 2, first.member_id, "a") == ErrorCode.fenced_instance_id
    assert groups.heartbeat("g", 2, first.member_id) == ErrorCode.unknown_member_id
    assert groups.heartbeat("g", 2, back.member_id, "a") == ErrorCode.none
    assert groups.heartbeat("g", 2, second.member_id, "b") == ErrorCode.none
    assert groups.leave("g", [(first.member_id, "a")]) == [ErrorCode.fenced_instance_id]
    groups.close()
