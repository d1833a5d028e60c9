"""``Rebalancer`` alone, on groups and members made by hand (no membership part, no storage).

The group record is written by a function the test owns (which can fail).
Timeouts are short and the tests wait for their outcome, never for a time.
"""

from __future__ import annotations

import asyncio

from kio.schema.errors import ErrorCode

from broker.kafka.consumer_groups._rebalance import Rebalancer, join_result, sync_result
from broker.kafka.consumer_groups.members import (
    Group,
    GroupConfig,
    JoinResult,
    Member,
    SyncResult,
)
from broker.kafka.consumer_groups.states import ConsumerGroupState
from tests.support.wait import wait_for_async

S = ConsumerGroupState


class Records:
    """The group records written; ``fail`` makes the next writes fail."""

    def __init__(self) -> None:
        self.written: list[tuple[str, int, S]] = []
        self.fail = False

    async def __call__(self, group: Group) -> None:
        if self.fail:
            raise OSError("disk full")
        self.written.append((group.group_id, group.generation, group.state))


def _joining(group: Group, member_id: str, session_ms: int = 10_000,
             rebalance_ms: int = 10_000) -> asyncio.Future[JoinResult]:
    """Add a member whose JoinGroup waits, as the membership part does."""
    member = Member(member_id, "client", "", session_ms, rebalance_ms,
                    (("range", member_id.encode()),))
    group.members[member_id] = member
    group.leader = group.leader or member_id
    group.protocol_type = "consumer"
    waiter = member.join_waiter = asyncio.get_running_loop().create_future()
    return waiter


def _state(group: Group) -> S:
    """The group's state now (a call, so mypy does not narrow it across awaits)."""
    return group.state


async def _is(group: Group, state: S) -> bool:
    return group.state is state


async def test_a_join_completes_once_every_member_rejoined_then_the_assignment_is_recorded(
        ) -> None:
    records = Records()
    rebalancer = Rebalancer(GroupConfig(), records)
    group = Group("g")
    first, second = _joining(group, "a"), _joining(group, "b")
    rebalancer.prepare(group, "test")
    assert _state(group) is S.PREPARING_REBALANCE
    rebalancer.maybe_complete_join(group)
    leader, follower = await first, await second
    assert _state(group) is S.COMPLETING_REBALANCE
    assert leader == join_result(group, group.members["a"])
    assert (leader.generation, leader.leader, leader.protocol_name) == (1, "a", "range")
    assert [m[0] for m in leader.members] == ["a", "b"]
    assert follower.members == ()  # only the leader gets the members
    syncs = [asyncio.get_running_loop().create_future() for _ in range(2)]
    group.members["a"].sync_waiter, group.members["b"].sync_waiter = syncs
    rebalancer.assign_later(group, {"a": b"for-a", "b": b"for-b"})
    answers: list[SyncResult] = list(await asyncio.gather(*syncs))
    assert [answer.assignment for answer in answers] == [b"for-a", b"for-b"]
    assert answers[1] == sync_result(group, group.members["b"])
    assert _state(group) is S.STABLE
    assert records.written == [("g", 1, S.COMPLETING_REBALANCE)]
    rebalancer.stop(group)


async def test_a_failed_record_answers_the_syncs_and_rebalances() -> None:
    records = Records()
    rebalancer = Rebalancer(GroupConfig(), records)
    group = Group("g")
    joined = _joining(group, "a")
    rebalancer.prepare(group, "test")
    rebalancer.maybe_complete_join(group)
    await joined
    sync = group.members["a"].sync_waiter = asyncio.get_running_loop().create_future()
    records.fail = True
    rebalancer.assign_later(group, {"a": b"x"})
    assert (await sync).error is ErrorCode.coordinator_not_available
    assert _state(group) is S.PREPARING_REBALANCE
    assert group.members["a"].assignment == b""
    rebalancer.stop(group)


async def test_a_member_that_does_not_rejoin_is_dropped_at_the_rebalance_timeout() -> None:
    records = Records()
    rebalancer = Rebalancer(GroupConfig(), records)
    group = Group("g", S.STABLE, 1, "consumer", "range", "a")
    group.members["a"] = Member("a", "client", "", 10_000, 50, (("range", b""),))
    rejoined = _joining(group, "b", rebalance_ms=50)
    rebalancer.prepare(group, "b joined")
    rebalancer.maybe_complete_join(group)  # "a" has not rejoined: the timeout decides
    answer = await rejoined
    assert (answer.generation, answer.leader, group.leader) == (2, "b", "b")
    assert list(group.members) == ["b"]
    rebalancer.stop(group)


async def test_a_silent_member_expires_and_an_emptied_group_is_recorded() -> None:
    records = Records()
    rebalancer = Rebalancer(GroupConfig(), records)
    group = Group("g", S.STABLE, 4, "consumer", "range", "a")
    member = group.members["a"] = Member("a", "client", "", 20, 20, (("range", b""),))
    rebalancer.touch(group, member)
    await wait_for_async(lambda: _is(group, S.EMPTY), "the silent member is removed")
    assert group.members == {}
    assert (group.generation, group.leader, group.protocol_name) == (5, None, None)

    async def recorded() -> bool:
        return records.written == [("g", 5, S.EMPTY)]

    await wait_for_async(recorded, "the emptied group is recorded")


async def test_a_pending_member_id_not_used_in_time_is_forgotten() -> None:
    rebalancer = Rebalancer(GroupConfig(), Records())
    group = Group("g")
    joined = _joining(group, "a")
    group.pending["p"] = asyncio.get_running_loop().call_later(3600, lambda: None)
    rebalancer.prepare(group, "test")
    rebalancer.maybe_complete_join(group)
    assert _state(group) is S.PREPARING_REBALANCE  # waits for "p"
    rebalancer.expire_pending(group, "p")
    assert (await joined).generation == 1
    rebalancer.expire_pending(group, "p")  # a second time: nothing
    rebalancer.stop(group)


async def test_stop_answers_the_waiting_calls_and_cancels_the_timers() -> None:
    rebalancer = Rebalancer(GroupConfig(), Records())
    group = Group("g")
    joined = _joining(group, "a")
    pending = group.pending["p"] = asyncio.get_running_loop().call_later(3600, lambda: None)
    rebalancer.prepare(group, "test")
    timer = group.rebalance_timer
    rebalancer.touch(group, group.members["a"])
    expiry = group.members["a"].expiry
    rebalancer.stop(group, ErrorCode.not_coordinator)
    assert (await joined) == JoinResult(ErrorCode.not_coordinator, "a")
    assert timer is not None and timer.cancelled()
    assert expiry is not None and expiry.cancelled()
    assert pending.cancelled()


async def test_close_cancels_the_background_recording() -> None:
    started, cancelled = asyncio.Event(), asyncio.Event()

    async def never(group: Group) -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    rebalancer = Rebalancer(GroupConfig(), never)
    group = Group("g")
    joined = _joining(group, "a")
    rebalancer.prepare(group, "test")
    rebalancer.maybe_complete_join(group)
    await joined
    sync = group.members["a"].sync_waiter = asyncio.get_running_loop().create_future()
    rebalancer.assign_later(group, {"a": b"x"})
    await asyncio.wait_for(started.wait(), 30)
    rebalancer.close()
    rebalancer.stop(group)
    await asyncio.wait_for(cancelled.wait(), 30)
    assert not sync.done()  # nobody answers after close: the listener is stopping
    assert _state(group) is S.COMPLETING_REBALANCE
