"""A mixed group (classic members inside a KIP-848 group) kept over a restart, and a group
that changed kind coming back as the kind last written, in a real ``OffsetStore``.

A "restart" is a new ``OffsetStore`` and new coordinators (the classic
``GroupCoordinator`` and ``ModernGroups``, wired as ``start_coordinators``
wires them) on the same topics: what they load is what the segment holds. A
failed write comes from ``FailingStates``, the fault wrapper at the store's
seam (``write_state`` raises, after writing when ``land``).
"""

from __future__ import annotations

import json
from dataclasses import replace

from kio.schema.errors import ErrorCode

from broker.kafka.consumer_groups._modern_state import modern_image, restore_modern
from broker.kafka.consumer_groups.coordinator import GroupCoordinator
from broker.kafka.consumer_groups.embedded import decode_assignment, encode_assignment
from broker.kafka.consumer_groups.members import JoinRequest
from broker.kafka.consumer_groups.modern import HeartbeatRequest, ModernGroups
from broker.kafka.consumer_groups.modern_members import (
    ClassicMetadata,
    MemberState,
    ModernGroup,
    ModernMember,
)
from broker.kafka.consumer_groups.offsets import ConsumerGroupRecord, OffsetStore
from broker.kafka.consumer_groups.states import ConsumerGroupState
from broker.kafka.coordinators import ClassicView
from broker.topics.manager import TopicManager
from ledger.records import dump_record
from tests.unit.broker.kafka.test_consumer_protocol import TOPIC, _four
from tests.unit.broker.kafka.test_group_migration import subscription
from tests.unit.broker.kafka.test_group_state_kept import FailingStates

EVERY = {0, 1, 2, 3}
#: The classic member's JoinGroup protocols (metadata bytes that are not UTF-8 too).
PROTOCOLS = (("range", subscription()), ("roundrobin", b"\xff\x00\xfe"))
SESSION_MS = 12_000


async def _broker(topics: TopicManager, store: OffsetStore | None = None,
                  ) -> tuple[GroupCoordinator, ModernGroups, OffsetStore]:
    """The two coordinators on one store, as ``start_coordinators`` builds them."""
    store = store or OffsetStore(topics)
    classic = GroupCoordinator(topics, store)
    await classic.start()
    modern = ModernGroups(_four, store, ClassicView(classic), states=store,
                          side=ClassicView(classic))
    modern.start()
    return classic, modern, store


def _close(classic: GroupCoordinator, modern: ModernGroups) -> None:
    modern.close()
    classic.close()


def _join(member_id: str = "", owned: dict[str, set[int]] | None = None) -> JoinRequest:
    protocols = ((PROTOCOLS[0][0], subscription(owned)), PROTOCOLS[1])
    return JoinRequest("g", member_id, "classic", "/1.2.3.4", SESSION_MS, 30_000, "consumer",
                       protocols, None, False)


def _modern_beat(epoch: int, owned: set[int] | None = None) -> HeartbeatRequest:
    fields: dict[str, object] = {"rebalance_timeout_ms": 30_000, "subscribed": (TOPIC,)} \
        if epoch == 0 else {}
    return HeartbeatRequest(group_id="g", member_id="m-1", member_epoch=epoch,
                            owned=None if owned is None else {TOPIC: owned},
                            **fields)  # type: ignore[arg-type]


async def _classic_group(classic: GroupCoordinator) -> str:
    """A classic group at generation 1 whose one member holds every partition."""
    joined = await classic.join(_join())
    assert (joined.error, joined.generation) == (ErrorCode.none, 1)
    member = joined.member_id
    synced = await classic.sync("g", 1, member, "consumer", "range",
                                {member: encode_assignment({TOPIC: EVERY}, 3)})
    assert synced.error is ErrorCode.none
    return member


async def _mixed(classic: GroupCoordinator, modern: ModernGroups) -> tuple[str, set[int]]:
    """Upgrade the classic group (a KIP-848 member joins), the classic member rejoins
    (eager: owning nothing) and takes its half; (its member id, its partitions)."""
    member = await _classic_group(classic)
    joined = await modern.heartbeat(_modern_beat(0))
    assert (joined.error, joined.member_epoch) == (ErrorCode.none, 2)
    rejoined = await modern.classic_members.join(_join(member, owned={}))
    assert (rejoined.error, rejoined.generation) == (ErrorCode.none, 2)
    synced = modern.classic_members.sync("g", 2, member, "consumer", "range")
    held = decode_assignment(synced.assignment)[TOPIC]
    assert len(held) == 2
    beat = await modern.heartbeat(_modern_beat(2, set()))
    assert beat.assignment == {TOPIC: EVERY - held}
    return member, held


def test_a_mixed_group_image_round_trip() -> None:
    classic = ModernMember("c-1", client_id="classic", client_host="/1.2.3.4",
                           rebalance_timeout_ms=30_000, subscribed=frozenset({TOPIC}),
                           topic_names=frozenset({TOPIC}), member_epoch=3,
                           previous_member_epoch=2, state=MemberState.UNREVOKED_PARTITIONS,
                           assigned={TOPIC: {0}}, pending_revocation={TOPIC: {1}},
                           classic=ClassicMetadata(SESSION_MS, PROTOCOLS))
    modern = ModernMember("m-1", subscribed=frozenset({TOPIC}), topic_names=frozenset({TOPIC}),
                          member_epoch=3, previous_member_epoch=2, assigned={TOPIC: {2, 3}})
    group = ModernGroup("g", group_epoch=3, assignment_epoch=3, assignor="uniform",
                        partition_counts={TOPIC: 4},
                        target={"c-1": {TOPIC: {0, 1}}, "m-1": {TOPIC: {2, 3}}},
                        members={"c-1": classic, "m-1": modern})
    image = modern_image(group)
    assert image is not None and json.loads(image)["format_version"] == 2  # a classic member
    record = ConsumerGroupRecord(3, "consumer", "uniform", "consumer")
    back = restore_modern("g", record, image)
    assert back is not None and set(back.members) == {"c-1", "m-1"}
    again = back.members["c-1"]
    assert again.classic == ClassicMetadata(SESSION_MS, PROTOCOLS)
    assert (again.member_epoch, again.state, again.assigned, again.pending_revocation) == (
        3, MemberState.UNREVOKED_PARTITIONS, {TOPIC: {0}}, {TOPIC: {1}})
    assert back.members["m-1"].classic is None and back.target == group.target
    assert modern_image(back) == image
    # Without a classic member the image is as earlier builds wrote it (version 1, no
    # field), and an earlier build's image still loads: every member of the protocol.
    del group.members["c-1"]
    plain = modern_image(group)
    assert plain is not None and json.loads(plain)["format_version"] == 1
    assert "classic" not in json.loads(plain)["members"][0]
    old = json.loads(plain)
    old.pop("format_version")
    loaded = restore_modern("g", record, dump_record(1, old))
    assert loaded is not None and loaded.members["m-1"].classic is None
    # A classic member's metadata that is not base64 is an unreadable image (logged).
    broken = json.loads(image)
    broken["members"][0]["classic"]["protocols"][0][1] = "not base64!"
    broken.pop("format_version")
    assert restore_modern("g", record, dump_record(2, broken)) is None


async def test_upgrade_then_restart_loads_a_consumer_group_with_its_classic_members(
        topics: TopicManager) -> None:
    classic, modern, store = await _broker(topics)
    member = await _classic_group(classic)
    joined = await modern.heartbeat(_modern_beat(0))  # the upgrade
    assert (joined.error, joined.member_epoch) == (ErrorCode.none, 2)
    # The kind changed in the answer's write: the consumer record with the image.
    record = store.group_record("g")
    assert record is not None and record.modern and record.generation == 2
    _close(classic, modern)

    classic, modern, _ = await _broker(topics)  # restarted right after the upgrade
    assert classic.group("g") is None  # one kind: the consumer group
    group = modern.group("g")
    assert group is not None and set(group.members) == {member, "m-1"}
    kept = group.members[member]
    assert kept.classic == ClassicMetadata(SESSION_MS, ((PROTOCOLS[0][0], subscription()),
                                                        PROTOCOLS[1]))
    assert (kept.member_epoch, kept.assigned) == (1, {TOPIC: EVERY})
    # Its classic requests are served (not refused as of a KIP-848 member): it rejoins.
    members = modern.classic_members
    assert members.heartbeat("g", 1, member) is ErrorCode.rebalance_in_progress
    rejoined = await members.join(_join(member, owned={}))
    assert (rejoined.error, rejoined.generation) == (ErrorCode.none, 2)
    held = decode_assignment(members.sync("g", 2, member, "consumer", "range").assignment)
    _close(classic, modern)

    classic, modern, _ = await _broker(topics)  # restarted again, the group mixed
    assert classic.group("g") is None
    group = modern.group("g")
    assert group is not None and group.group_epoch == 2
    # Both go on at epoch 2 with their partitions: no rebalance.
    assert modern.classic_members.heartbeat("g", 2, member) is ErrorCode.none
    synced = modern.classic_members.sync("g", 2, member, "consumer", "range")
    assert decode_assignment(synced.assignment) == held
    assert modern.commit_error("g", member, 2, version=7) is ErrorCode.none
    assert group.members[member].session is not None  # its own session timer, started
    beat = await modern.heartbeat(_modern_beat(2, set()))
    assert (beat.error, beat.member_epoch, beat.assignment) == (
        ErrorCode.none, 2, {TOPIC: EVERY - held[TOPIC]})
    _close(classic, modern)


async def test_downgrade_then_restart_loads_a_classic_group(topics: TopicManager) -> None:
    classic, modern, store = await _broker(topics)
    member, held = await _mixed(classic, modern)
    left = await modern.heartbeat(_modern_beat(-1))  # the last KIP-848 member leaves
    assert left.error is ErrorCode.none
    assert modern.group("g") is None and classic.group("g") is not None
    # Written before that answer, as the classic coordinator writes a generation.
    record = store.group_record("g")
    assert record is not None and not record.modern and record.generation == 2
    _close(classic, modern)

    classic, modern, _ = await _broker(topics)  # restarted
    assert modern.group("g") is None  # one kind: the classic group
    group = classic.group("g")
    assert group is not None and (group.state, group.generation) == (
        ConsumerGroupState.STABLE, 2)
    assert set(group.members) == {member} and group.protocol_name == "range"
    assert group.members[member].session_timeout_ms == SESSION_MS
    assert classic.heartbeat("g", 2, member) is ErrorCode.none
    synced = await classic.sync("g", 2, member, "consumer", "range", {})
    assert decode_assignment(synced.assignment) == {TOPIC: held}  # what it holds
    assert classic.commit_error("g", 2, member) is ErrorCode.none
    _close(classic, modern)


async def test_classic_changes_are_written_before_their_answers(topics: TopicManager) -> None:
    store = FailingStates(topics)
    classic, modern, _ = await _broker(topics, store)
    member, _ = await _mixed(classic, modern)
    members = modern.classic_members
    # A classic JoinGroup whose image is not written: COORDINATOR_NOT_AVAILABLE.
    store.fail = True
    refused = await members.join(_join("", owned={}))
    assert refused.error is ErrorCode.coordinator_not_available
    # A LeaveGroup whose image is not written: the member is told to leave again.
    assert await members.leave("g", [(member, None)]) == [ErrorCode.coordinator_not_available]
    store.fail = False
    assert await members.leave("g", [(member, None)]) == [ErrorCode.unknown_member_id]
    _close(classic, modern)
    # What was last written holds the member that joined and not the one that left.
    classic, modern, _ = await _broker(topics)
    group = modern.group("g")
    assert group is not None and member not in group.members
    joined = [m for m in group.members.values() if m.classic is not None]
    assert len(joined) == 1 and joined[0].member_id == refused.member_id
    _close(classic, modern)


async def test_a_failed_downgrade_write_keeps_the_consumer_group(topics: TopicManager) -> None:
    store = FailingStates(topics)
    classic, modern, _ = await _broker(topics, store)
    member, _ = await _mixed(classic, modern)
    store.fail = True
    left = await modern.heartbeat(_modern_beat(-1))
    assert left.error is ErrorCode.coordinator_not_available
    _close(classic, modern)
    # Not written, and the broker died before the classic group's next generation: the
    # last kind written is the consumer group, with both members (the downgrade happens
    # again when the KIP-848 member's session ends).
    classic, modern, _ = await _broker(topics)
    assert classic.group("g") is None
    group = modern.group("g")
    assert group is not None and set(group.members) == {member, "m-1"}
    _close(classic, modern)
    # The same failure whose write landed (an unknown outcome): the classic group.
    store = FailingStates(topics)
    classic, modern, _ = await _broker(topics, store)
    store.fail = store.land = True
    left = await modern.heartbeat(_modern_beat(-1))
    assert left.error is ErrorCode.coordinator_not_available
    _close(classic, modern)
    classic, modern, _ = await _broker(topics)
    assert modern.group("g") is None
    group_back = classic.group("g")
    assert group_back is not None and set(group_back.members) == {member}
    _close(classic, modern)


async def test_a_static_classic_members_new_id_is_kept(topics: TopicManager) -> None:
    classic, modern, _ = await _broker(topics)
    first = await classic.join(replace(_join(), group_instance_id="box"))
    await classic.sync("g", 1, first.member_id, "consumer", "range",
                       {first.member_id: encode_assignment({TOPIC: EVERY}, 3)}, "box")
    assert (await modern.heartbeat(_modern_beat(0))).member_epoch == 2  # the upgrade
    # The classic client restarts: a join without member id takes the old one's place.
    back = await modern.classic_members.join(replace(_join(owned={}),
                                                     group_instance_id="box"))
    assert (back.error, back.generation) == (ErrorCode.none, 2)
    assert back.member_id != first.member_id
    _close(classic, modern)

    classic, modern, _ = await _broker(topics)  # restarted
    group = modern.group("g")
    assert group is not None and set(group.members) == {back.member_id, "m-1"}
    members = modern.classic_members
    assert members.heartbeat("g", 2, first.member_id, "box") is ErrorCode.fenced_instance_id
    assert members.heartbeat("g", 2, back.member_id, "box") is ErrorCode.none
    _close(classic, modern)
