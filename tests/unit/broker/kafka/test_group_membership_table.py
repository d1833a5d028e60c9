"""``GroupMembership`` over a table it is given (as the coordinator wires it): the groups
it makes are in that table, and ``forget`` (a container given up) answers the waiting calls.

The rebalance protocol itself: ``test_group_membership.py`` (a membership alone).
"""

from __future__ import annotations

import asyncio

from kio.schema.errors import ErrorCode

from broker.kafka.consumer_groups._table import GroupTable
from broker.kafka.consumer_groups.members import Group, JoinResult
from broker.kafka.consumer_groups.membership import GroupConfig, GroupMembership, JoinRequest
from broker.kafka.consumer_groups.states import ConsumerGroupState
from tests.support.wait import wait_for_async


async def _nothing(group: Group) -> None:
    return None


def _join(member_id: str = "") -> JoinRequest:
    return JoinRequest("g", member_id, "client", "", 10_000, 10_000, "consumer",
                       (("range", b""),), None, False)


async def test_the_groups_are_in_the_given_table_and_forget_answers_their_calls() -> None:
    table = GroupTable(512)
    membership = GroupMembership(GroupConfig(min_session_timeout_ms=10), _nothing, table)
    first = await membership.join(_join())
    assert table.get("g") is membership.group("g")
    second = asyncio.ensure_future(membership.join(_join()))

    async def rebalancing() -> bool:
        group = table.get("g")
        return group is not None and group.state is ConsumerGroupState.PREPARING_REBALANCE

    await wait_for_async(rebalancing, "the second join starts a rebalance")
    membership.forget("g", ErrorCode.not_coordinator)
    answer = await second
    assert answer == JoinResult(ErrorCode.not_coordinator, answer.member_id)
    assert table.get("g") is None
    assert membership.heartbeat("g", 1, first.member_id) is ErrorCode.unknown_member_id
    membership.forget("g", ErrorCode.not_coordinator)  # a second time: nothing to forget
    membership.close()


async def test_a_bad_group_id_is_refused_by_the_table_rule() -> None:
    membership = GroupMembership(GroupConfig(max_group_id_bytes=3), _nothing, GroupTable(3))
    request = JoinRequest("long", "", "client", "", 10_000, 10_000, "consumer",
                          (("range", b""),), None, False)
    assert (await membership.join(request)).error is ErrorCode.invalid_group_id
    membership.close()
