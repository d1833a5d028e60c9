"""A group changing kind: classic to consumer protocol and back (KIP-848's online upgrade).

Kafka 4.0's ``group.consumer.migration.policy`` (``MigrationPolicy``) says
which way a group with members may change kind:

- **upgrade**: a classic group of protocol type ``consumer`` with members
  becomes a consumer-protocol group when a member joins it with
  ConsumerGroupHeartbeat (``to_modern``): each classic member is kept, at
  the classic generation as its member epoch, with the partitions the
  leader last gave it (decoded from its assignment) as its assignment and
  target, and its subscription read from its JoinGroup metadata; the group
  epoch is the generation. The new member's join then bumps the epoch and
  the classic members are told to rejoin (``mixed``).
- **downgrade**: when the last member of the consumer protocol leaves (or
  is fenced) and classic members remain, the group becomes a classic group
  again (``to_classic``): Stable at the group epoch as its generation, the
  members with their JoinGroup protocols and their current partitions as
  their assignment, then a rebalance, so they rejoin and the leader assigns.

Pure functions over the groups (plain data); ``mixed.ClassicMembers`` calls
them and moves the group between the two coordinators.
"""

from __future__ import annotations

import enum

from broker.kafka.consumer_groups.embedded import (
    MalformedEmbeddedError,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    version_of,
)
from broker.kafka.consumer_groups.members import Group, Member
from broker.kafka.consumer_groups.modern_members import (
    ClassicMetadata,
    MemberState,
    ModernGroup,
    ModernMember,
)
from broker.kafka.consumer_groups.states import ConsumerGroupState

__all__ = ["CONSUMER_PROTOCOL_TYPE", "MigrationPolicy", "to_classic", "to_modern"]

#: The classic protocol type of Kafka consumers (the only one a consumer group takes).
CONSUMER_PROTOCOL_TYPE = "consumer"


class MigrationPolicy(enum.Enum):
    """``group.consumer.migration.policy``; the value is Kafka's name."""

    DISABLED = "disabled"
    UPGRADE = "upgrade"
    DOWNGRADE = "downgrade"
    BIDIRECTIONAL = "bidirectional"

    @property
    def upgrades(self) -> bool:
        return self in (MigrationPolicy.UPGRADE, MigrationPolicy.BIDIRECTIONAL)

    @property
    def downgrades(self) -> bool:
        return self in (MigrationPolicy.DOWNGRADE, MigrationPolicy.BIDIRECTIONAL)

    @classmethod
    def parse(cls, name: str) -> MigrationPolicy:
        """The policy named (any case); ``ValueError`` naming the choices otherwise."""
        for policy in cls:
            if policy.value == name.strip().lower():
                return policy
        raise ValueError(f"no migration policy {name!r}: one of "
                         f"{', '.join(p.value for p in cls)}")


def to_modern(classic: Group) -> ModernGroup:
    """The consumer-protocol group a classic group with members becomes (module docstring).

    Raises ``MalformedEmbeddedError`` if a member's subscription or
    assignment cannot be read, or the group is not of protocol type
    ``consumer`` (then it stays classic).
    """
    if classic.protocol_type != CONSUMER_PROTOCOL_TYPE:
        raise MalformedEmbeddedError(
            f"protocol type {classic.protocol_type!r} is not {CONSUMER_PROTOCOL_TYPE!r}")
    epoch = classic.generation
    group = ModernGroup(classic.group_id, group_epoch=epoch, assignment_epoch=epoch)
    for old in classic.members.values():
        metadata = old.metadata_of(classic.protocol_name) or (
            old.protocols[0][1] if old.protocols else b"")
        subscription = decode_subscription(metadata)
        assigned = decode_assignment(old.assignment)
        topics = frozenset(subscription.topics)
        member = ModernMember(
            old.member_id, client_id=old.client_id, client_host=old.client_host,
            instance_id=old.group_instance_id, rack_id=subscription.rack_id,
            rebalance_timeout_ms=old.rebalance_timeout_ms, subscribed=topics,
            topic_names=topics, member_epoch=epoch, previous_member_epoch=epoch,
            state=MemberState.STABLE, assigned={t: set(p) for t, p in assigned.items()},
            classic=ClassicMetadata(old.session_timeout_ms, old.protocols))
        group.members[member.member_id] = member
        group.target[member.member_id] = {t: set(p) for t, p in assigned.items()}
    return group


def to_classic(modern: ModernGroup, leaving: str) -> Group:
    """The classic group ``modern`` becomes once ``leaving`` (its last member of the
    consumer protocol) is gone: Stable at the group epoch (module docstring)."""
    group = Group(modern.group_id, ConsumerGroupState.STABLE, modern.group_epoch,
                  protocol_type=CONSUMER_PROTOCOL_TYPE)
    for old in modern.members.values():
        if old.member_id == leaving or old.classic is None:
            continue
        group.members[old.member_id] = Member(
            old.member_id, old.client_id, old.client_host, old.classic.session_timeout_ms,
            old.rebalance_timeout_ms, old.classic.protocols, old.instance_id)
    group.protocol_name = group.select_protocol()
    for member in group.members.values():
        version = version_of(member.metadata_of(group.protocol_name))
        member.assignment = encode_assignment(modern.members[member.member_id].assigned,
                                              version)
    group.leader = next(iter(group.members), None)
    return group
