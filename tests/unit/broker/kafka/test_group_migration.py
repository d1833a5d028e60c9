"""Classic members inside a KIP-848 group, and a group changing kind, without a broker.

``ModernGroups`` with its ``classic_members`` part (``mixed``) over an
in-memory classic side: the embedded consumer protocol's bytes; a classic
group upgraded by a joining heartbeat (or refused, by the policy or its
protocol type); its member told to rejoin, reconciled, given its partitions;
fenced by its own session timeout; its commits checked by generation; the
group downgraded when the last KIP-848 member leaves (or kept, by the policy).
"""

from __future__ import annotations

import struct

import pytest
from kio.schema.errors import ErrorCode

from broker.kafka.consumer_groups.embedded import (
    MalformedEmbeddedError,
    decode_assignment,
    decode_subscription,
    encode_assignment,
)
from broker.kafka.consumer_groups.members import Group, JoinRequest, Member
from broker.kafka.consumer_groups.migration import MigrationPolicy
from broker.kafka.consumer_groups.modern import HeartbeatRequest, ModernConfig, ModernGroups
from broker.kafka.consumer_groups.states import ConsumerGroupState
from tests.support.wait import wait_for_async
from tests.unit.broker.kafka.test_consumer_protocol import TOPIC, Records, _four


def _string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def _partitions(partitions: dict[str, set[int]]) -> bytes:
    out = struct.pack(">i", len(partitions))
    for topic, numbers in partitions.items():
        out += _string(topic) + struct.pack(f">i{len(numbers)}i", len(numbers), *sorted(numbers))
    return out


def subscription(owned: dict[str, set[int]] | None = None, version: int = 3,
                 topics: tuple[str, ...] = (TOPIC,)) -> bytes:
    """A ConsumerProtocolSubscription as librdkafka writes it."""
    out = struct.pack(">hi", version, len(topics)) + b"".join(map(_string, topics))
    out += struct.pack(">i", -1)  # no user data
    if version >= 1:
        out += _partitions(owned or {})
    if version >= 2:
        out += struct.pack(">i", 7)
    if version >= 3:
        out += _string("rack-a")
    return out


class Side:
    """The classic coordinator: groups by id, what was handed over and adopted."""

    def __init__(self) -> None:
        self.groups: dict[str, Group] = {}
        self.adopted: list[Group] = []

    def in_use(self, group_id: str) -> bool:
        return bool(group_id in self.groups and self.groups[group_id].members)

    def forget_empty(self, group_id: str) -> None:
        if group_id in self.groups and not self.groups[group_id].members:
            del self.groups[group_id]

    def group(self, group_id: str) -> Group | None:
        return self.groups.get(group_id)

    def hand_over(self, group_id: str) -> None:
        del self.groups[group_id]

    def adopt(self, group: Group) -> None:
        self.groups[group.group_id] = group
        self.adopted.append(group)

    def session_timeout_ok(self, session_timeout_ms: int) -> bool:
        return session_timeout_ms >= 10


def _classic_group(protocol_type: str = "consumer") -> Group:
    """A Stable classic group at generation 5 whose one member holds all 4 partitions."""
    member = Member("c-1", "classic", "/1.2.3.4", 30_000, 30_000,
                    (("range", subscription()),),
                    assignment=encode_assignment({TOPIC: {0, 1, 2, 3}}, 3))
    return Group("g", ConsumerGroupState.STABLE, 5, protocol_type, "range", "c-1",
                 {"c-1": member})


def _groups(side: Side, policy: MigrationPolicy = MigrationPolicy.BIDIRECTIONAL,
            ) -> ModernGroups:
    return ModernGroups(_four, Records(), side, ModernConfig(migration_policy=policy),
                        side=side)


def _join(member_id: str, owned: dict[str, set[int]] | None = None,
          protocol_type: str = "consumer", session_ms: int = 30_000) -> JoinRequest:
    return JoinRequest("g", member_id, "classic", "/1.2.3.4", session_ms, 30_000,
                       protocol_type, (("range", subscription(owned)),), None,
                       require_known_member=True)


def _modern_join(member_id: str = "m-1") -> HeartbeatRequest:
    return HeartbeatRequest(group_id="g", member_id=member_id, member_epoch=0,
                            rebalance_timeout_ms=30_000, subscribed=(TOPIC,))


def test_the_embedded_consumer_protocol_reads_and_writes() -> None:
    for version in range(4):
        read = decode_subscription(subscription({TOPIC: {1, 2}}, version))
        assert (read.version, read.topics) == (version, (TOPIC,))
        assert read.owned == ({TOPIC: {1, 2}} if version >= 1 else {})
        assert read.rack_id == ("rack-a" if version >= 3 else None)
    assert decode_assignment(encode_assignment({TOPIC: {3, 1}, "other": set()}, 1)) == {
        TOPIC: {1, 3}}
    assert decode_assignment(b"") == {}
    for bad in (b"", b"\x00", subscription()[:9], struct.pack(">hi", 0, 2**30)):
        with pytest.raises(MalformedEmbeddedError):
            decode_subscription(bad)


async def test_a_joining_heartbeat_upgrades_and_the_classic_member_rejoins() -> None:
    side = Side()
    side.groups["g"] = _classic_group()
    groups = _groups(side)
    joined = await groups.heartbeat(_modern_join())
    assert joined.error is ErrorCode.none and joined.assignment == {}  # all held by c-1
    assert "g" not in side.groups  # handed over
    group = groups.group("g")
    assert group is not None and group.group_epoch == 6
    members = groups.classic_members
    # Its heartbeat at generation 5: the epoch moved on, rejoin.
    assert members.heartbeat("g", 5, "c-1") is ErrorCode.rebalance_in_progress
    assert members.heartbeat("g", 4, "c-1") is ErrorCode.illegal_generation
    assert members.sync("g", 5, "c-1", "consumer", "range").error is \
        ErrorCode.rebalance_in_progress
    # An eager member rejoins owning nothing: it moves to epoch 6 with its share.
    rejoined = await members.join(_join("c-1", owned={}))
    assert (rejoined.error, rejoined.generation, rejoined.protocol_name, rejoined.leader) == (
        ErrorCode.none, 6, "range", "")
    synced = members.sync("g", 6, "c-1", "consumer", "range")
    assert synced.error is ErrorCode.none
    kept = decode_assignment(synced.assignment)[TOPIC]
    assert len(kept) == 2
    assert members.heartbeat("g", 6, "c-1") is ErrorCode.none
    # The KIP-848 member gets the two released ones at its next heartbeat.
    beat = await groups.heartbeat(HeartbeatRequest(group_id="g", member_id="m-1",
                                                   member_epoch=6, owned={}))
    assert beat.assignment == {TOPIC: {0, 1, 2, 3} - kept}
    # A classic member's commit: any version, its generation checked.
    assert groups.commit_error("g", "c-1", 6, version=7) is ErrorCode.none
    assert groups.commit_error("g", "c-1", 5, version=7) is ErrorCode.illegal_generation
    groups.close()


async def test_a_cooperative_member_revokes_before_its_partitions_move() -> None:
    side = Side()
    side.groups["g"] = _classic_group()
    groups = _groups(side)
    await groups.heartbeat(_modern_join())
    members = groups.classic_members
    every = {TOPIC: {0, 1, 2, 3}}
    rejoined = await members.join(_join("c-1", owned=every))
    assert rejoined.generation == 5  # it must revoke first: it stays at its epoch
    kept = decode_assignment(members.sync("g", 5, "c-1", "consumer", "range").assignment)
    assert len(kept[TOPIC]) == 2
    assert members.heartbeat("g", 5, "c-1") is ErrorCode.rebalance_in_progress
    beat = await groups.heartbeat(HeartbeatRequest(group_id="g", member_id="m-1",
                                                   member_epoch=6, owned={}))
    assert beat.assignment in (None, {})  # not released yet
    again = await members.join(_join("c-1", owned=kept))
    assert again.generation == 6
    beat = await groups.heartbeat(HeartbeatRequest(group_id="g", member_id="m-1",
                                                   member_epoch=6, owned={}))
    assert beat.assignment == {TOPIC: every[TOPIC] - kept[TOPIC]}
    groups.close()


@pytest.mark.parametrize("policy", [MigrationPolicy.DISABLED, MigrationPolicy.DOWNGRADE])
async def test_a_policy_without_upgrade_refuses_the_joining_member(
        policy: MigrationPolicy) -> None:
    side = Side()
    side.groups["g"] = _classic_group()
    groups = _groups(side, policy)
    refused = await groups.heartbeat(_modern_join())
    assert refused.error is ErrorCode.group_id_not_found
    assert "g" in side.groups and groups.group("g") is None
    groups.close()


async def test_another_protocol_type_is_not_upgraded_nor_joins() -> None:
    side = Side()
    side.groups["g"] = _classic_group("connect")
    groups = _groups(side)
    assert (await groups.heartbeat(_modern_join())).error is ErrorCode.group_id_not_found
    del side.groups["g"]
    assert (await groups.heartbeat(_modern_join())).error is ErrorCode.none
    members = groups.classic_members
    assert (await members.join(_join("", protocol_type="connect"))).error is \
        ErrorCode.inconsistent_group_protocol
    assert (await members.join(_join("", session_ms=1))).error is \
        ErrorCode.invalid_session_timeout
    required = await members.join(_join(""))
    assert required.error is ErrorCode.member_id_required and required.member_id
    assert (await members.join(_join("m-1"))).error is ErrorCode.unknown_member_id
    groups.close()


@pytest.mark.parametrize("policy", [MigrationPolicy.BIDIRECTIONAL, MigrationPolicy.UPGRADE])
async def test_the_last_kip848_member_leaving_downgrades_if_allowed(
        policy: MigrationPolicy) -> None:
    side = Side()
    side.groups["g"] = _classic_group()
    groups = _groups(side, policy)
    await groups.heartbeat(_modern_join())
    members = groups.classic_members
    await members.join(_join("c-1", owned={}))
    await groups.heartbeat(HeartbeatRequest(group_id="g", member_id="m-1", member_epoch=-1))
    if policy is MigrationPolicy.UPGRADE:
        assert side.adopted == []
        assert members.heartbeat("g", 7, "c-1") is ErrorCode.illegal_generation
        assert members.heartbeat("g", 6, "c-1") is ErrorCode.rebalance_in_progress
    else:
        [classic] = side.adopted
        assert groups.group("g") is None
        assert (classic.generation, classic.protocol_type, classic.protocol_name,
                classic.leader, list(classic.members)) == (6, "consumer", "range", "c-1",
                                                           ["c-1"])
        assert len(decode_assignment(classic.members["c-1"].assignment)[TOPIC]) == 2
    groups.close()


async def test_a_classic_member_is_fenced_by_its_own_session_timeout() -> None:
    side = Side()
    groups = _groups(side)
    await groups.heartbeat(_modern_join())
    members = groups.classic_members
    joined = await members.join(_join("c-1", session_ms=50))
    assert joined.error is ErrorCode.none
    group = groups.group("g")
    assert group is not None

    async def gone() -> bool:
        return "c-1" not in group.members

    await wait_for_async(gone, "the silent classic member removed", timeout_s=10)
    assert members.heartbeat("g", joined.generation, "c-1") is ErrorCode.unknown_member_id
    assert groups.group("g") is group  # the KIP-848 member keeps the group as it is
    groups.close()


async def test_a_static_classic_member_back_under_a_new_id_takes_its_place() -> None:
    side = Side()
    groups = _groups(side)
    await groups.heartbeat(_modern_join())
    members = groups.classic_members

    def static(member_id: str) -> JoinRequest:
        return JoinRequest("g", member_id, "classic", "/1.2.3.4", 30_000, 30_000, "consumer",
                           (("range", subscription({})),), "box-1", require_known_member=True)

    first = await members.join(static(""))
    assert first.error is ErrorCode.none
    group = groups.group("g")
    assert group is not None
    # It waits for partitions the KIP-848 member holds; once released, it rejoins for them.
    assert members.heartbeat("g", first.generation, first.member_id) is ErrorCode.none
    await groups.heartbeat(HeartbeatRequest(group_id="g", member_id="m-1",
                                            member_epoch=group.members["m-1"].member_epoch,
                                            owned={}))
    assert members.heartbeat("g", first.generation, first.member_id) is \
        ErrorCode.rebalance_in_progress
    first = await members.join(static(first.member_id))
    assert members.heartbeat("g", first.generation, first.member_id) is ErrorCode.none
    assert group.members[first.member_id].assigned  # it holds some
    held = group.members[first.member_id].assigned
    epoch = group.group_epoch
    second = await members.join(static(""))
    assert second.error is ErrorCode.none and second.member_id != first.member_id
    assert (second.generation, group.group_epoch) == (first.generation, epoch)
    assert group.members[second.member_id].assigned == held
    assert first.member_id not in group.members
    assert members.heartbeat("g", first.generation, first.member_id, "box-1") is \
        ErrorCode.fenced_instance_id
    groups.close()


async def test_a_classic_incarnation_of_the_last_kip848_static_member_downgrades() -> None:
    side = Side()
    groups = _groups(side)
    await groups.heartbeat(HeartbeatRequest(group_id="g", member_id="m-1", member_epoch=0,
                                            rebalance_timeout_ms=30_000, subscribed=(TOPIC,),
                                            instance_id="box-1"))
    members = groups.classic_members
    assert (await members.join(_join("c-1"))).error is ErrorCode.none
    joined = await members.join(JoinRequest(
        "g", "", "classic", "/1.2.3.4", 30_000, 30_000, "consumer",
        (("range", subscription({})),), "box-1", require_known_member=False))
    # The KIP-848 incarnation left; the group is classic now: join there again.
    assert joined.error is ErrorCode.rebalance_in_progress
    [classic] = side.adopted
    assert list(classic.members) == ["c-1"] and groups.group("g") is None
    groups.close()
