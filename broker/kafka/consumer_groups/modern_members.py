"""A consumer-protocol group (KIP-848) and its members, and how a member reconciles.

Pure data and pure steps (``reconcile``; ``take_over`` by a static member's
new incarnation; ``assignor_of``): ``ModernGroups`` (``modern``) changes them
on one asyncio loop. The words are Kafka's (its ``ConsumerGroup``,
``ConsumerGroupMember`` and ``CurrentAssignmentBuilder``):

- the **group epoch** goes up whenever the members or their subscriptions
  change (or a subscribed topic's partition count); the **target assignment**
  is what the assignor computed for the latest epoch (its **assignment epoch**);
- each member has a **member epoch**, its **assigned partitions** (what it may
  consume now) and its **partitions pending revocation** (what it must give up
  before it moves to the next epoch);
- ``reconcile`` moves one member towards its target: partitions it must give
  up are revoked first (it keeps its epoch until its heartbeat no longer
  reports them), and a partition another member still holds (assigned or
  pending revocation) is given only once released, so no partition is ever
  held by two members.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from broker.kafka.consumer_groups.assignors import DEFAULT_ASSIGNOR, Assignment

__all__ = [
    "LEAVE_EPOCH",
    "STATIC_LEAVE_EPOCH",
    "ClassicMetadata",
    "MemberState",
    "ModernGroup",
    "ModernGroupState",
    "ModernMember",
    "Partitions",
    "assignor_of",
    "epoch_error",
    "reconcile",
    "take_over",
]

log = logging.getLogger(__name__)

#: topic -> partitions.
Partitions = dict[str, set[int]]
#: The member epoch of a heartbeat that leaves the group.
LEAVE_EPOCH = -1
#: The member epoch of a static member that leaves and will come back (KIP-345 in KIP-848).
STATIC_LEAVE_EPOCH = -2


class MemberState(enum.Enum):
    """Where a member is in its reconciliation (Kafka's ``MemberState``)."""

    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    UNRELEASED_PARTITIONS = "unreleased_partitions"


class ModernGroupState(enum.Enum):
    """A group's state; the value is the name ConsumerGroupDescribe and ListGroups give."""

    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class ClassicMetadata:
    """What a member of the classic protocol inside a consumer group joined with (``mixed``).

    Attributes:
        session_timeout_ms: its JoinGroup's session timeout (its own, not the
            group's ``group.consumer.session.timeout.ms``).
        protocols: (name, metadata) of its JoinGroup, in its order of preference.
    """

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]


@dataclass(slots=True)
class ModernMember:
    """One member: who it is, what it subscribes to, what it holds."""

    member_id: str
    client_id: str = ""
    client_host: str = ""
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = 300_000
    #: What the assignor reads: ``topic_names`` and the topics ``regex`` matches.
    subscribed: frozenset[str] = frozenset()
    #: ``SubscribedTopicNames``, as last sent.
    topic_names: frozenset[str] = frozenset()
    #: ``SubscribedTopicRegex``, as last sent (None: none).
    regex: str | None = None
    #: Whether the member may see a topic its regex matches (None: every topic).
    topic_allowed: Callable[[str], bool] | None = None
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Partitions = field(default_factory=dict)
    pending_revocation: Partitions = field(default_factory=dict)
    #: Removes the member when its session ends (reset by each heartbeat).
    session: asyncio.TimerHandle | None = None
    #: Removes the member if it has not revoked in its rebalance timeout (a
    #: classic member: if it has not rejoined in it once told to).
    revocation: asyncio.TimerHandle | None = None
    #: Set for a member of the classic protocol (JoinGroup, SyncGroup, Heartbeat).
    classic: ClassicMetadata | None = None

    def cancel_timers(self) -> None:
        for handle in (self.session, self.revocation):
            if handle is not None:
                handle.cancel()
        self.session = self.revocation = None


@dataclass(slots=True)
class ModernGroup:
    """A group of the consumer protocol, as this coordinator holds it."""

    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    target: Assignment = field(default_factory=dict)
    members: dict[str, ModernMember] = field(default_factory=dict)
    #: The subscribed topics' partition counts the target was computed from.
    partition_counts: dict[str, int] = field(default_factory=dict)
    #: When (loop time) the partition counts are looked at again.
    refresh_at: float = 0.0
    assignor: str = ""
    dead: bool = False
    #: One heartbeat of the group at a time (each may wait on topics or a write).
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    @property
    def state(self) -> ModernGroupState:
        if self.dead:
            return ModernGroupState.DEAD
        if not self.members:
            return ModernGroupState.EMPTY
        if self.assignment_epoch < self.group_epoch:
            return ModernGroupState.ASSIGNING
        if any(m.member_epoch != self.assignment_epoch or m.state is not MemberState.STABLE
               for m in self.members.values()):
            return ModernGroupState.RECONCILING
        return ModernGroupState.STABLE

    def member_by_instance(self, instance_id: str) -> ModernMember | None:
        return next((m for m in self.members.values() if m.instance_id == instance_id), None)

    def holder_epochs(self, but: str) -> dict[tuple[str, int], int]:
        """Each partition another member than ``but`` holds (assigned or being revoked)."""
        held: dict[tuple[str, int], int] = {}
        for member in self.members.values():
            if member.member_id == but:
                continue
            for partitions in (member.assigned, member.pending_revocation):
                for topic, numbers in partitions.items():
                    for number in numbers:
                        held[(topic, number)] = member.member_epoch
        return held


def epoch_error(member: ModernMember, epoch: int) -> ErrorCode:
    """NONE if ``epoch`` is the member's; else STALE_MEMBER_EPOCH, or ILLEGAL_GENERATION
    for a classic member (its generation is its member epoch: Kafka's rule)."""
    if epoch == member.member_epoch:
        return ErrorCode.none
    return ErrorCode.stale_member_epoch if member.classic is None else ErrorCode.illegal_generation


def _owns_any(owned: Partitions | None, partitions: Partitions) -> bool:
    """Whether the member still reports any of ``partitions`` (None: it did not say: yes)."""
    if owned is None:
        return True
    return any(numbers & partitions.get(topic, set()) for topic, numbers in owned.items())


def reconcile(group: ModernGroup, member: ModernMember, owned: Partitions | None) -> None:
    """Move ``member`` towards its target assignment (Kafka's ``CurrentAssignmentBuilder``).

    ``owned``: the partitions the heartbeat reports (None: not reported).
    """
    if member.state is MemberState.STABLE:
        if member.member_epoch == group.assignment_epoch:
            return
        _next_assignment(group, member, member.member_epoch, owned)
    elif member.state is MemberState.UNREVOKED_PARTITIONS:
        if _owns_any(owned, member.pending_revocation):
            return
        _next_assignment(group, member, member.member_epoch + 1, owned)
    else:
        _next_assignment(group, member, member.member_epoch, owned)


def _set_epoch(member: ModernMember, epoch: int) -> None:
    if epoch != member.member_epoch:
        member.previous_member_epoch = member.member_epoch
        member.member_epoch = epoch


def _next_assignment(group: ModernGroup, member: ModernMember, epoch: int,
                     owned: Partitions | None) -> None:
    target = group.target.get(member.member_id, {})
    held = group.holder_epochs(member.member_id)
    assigned: Partitions = {}
    revoking: Partitions = {}
    adding: Partitions = {}
    unreleased = False
    for topic in set(target) | set(member.assigned):
        wanted = target.get(topic, set())
        current = member.assigned.get(topic, set())
        keep = current & wanted
        give_up = current - keep
        free = {p for p in wanted - keep if (topic, p) not in held}
        unreleased = unreleased or bool(wanted - keep - free)
        if keep:
            assigned[topic] = set(keep)
        if give_up:
            revoking[topic] = give_up
        if free:
            adding[topic] = free
    if revoking and _owns_any(owned, revoking):
        # Revoke first: the member stays at its epoch until it reports them gone.
        _set_epoch(member, epoch)
        member.state = MemberState.UNREVOKED_PARTITIONS
        member.assigned = assigned
        member.pending_revocation = revoking
        return
    for topic, numbers in adding.items():
        assigned.setdefault(topic, set()).update(numbers)
    _set_epoch(member, group.assignment_epoch)
    member.state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    member.assigned = assigned
    member.pending_revocation = {}


def take_over(group: ModernGroup, member: ModernMember, old: ModernMember) -> None:
    """A static member back under a new id takes its old incarnation's place."""
    del group.members[old.member_id]
    old.cancel_timers()
    member.member_epoch = old.previous_member_epoch
    member.previous_member_epoch = old.previous_member_epoch
    member.state, member.assigned = old.state, old.assigned
    member.pending_revocation = old.pending_revocation
    member.subscribed, member.server_assignor = old.subscribed, old.server_assignor
    member.topic_names, member.regex = old.topic_names, old.regex
    member.rebalance_timeout_ms = old.rebalance_timeout_ms
    if old.member_id in group.target:
        group.target[member.member_id] = group.target.pop(old.member_id)
    log.info("kafka consumer group %s: static member %s is back as %s (was %s)",
             group.group_id, member.instance_id, member.member_id, old.member_id)


def assignor_of(group: ModernGroup, member: ModernMember, replaced: ModernMember | None,
                assignor: str | None) -> str:
    """The assignor most members ask for (this one's new choice counted), else uniform."""
    votes = Counter(m.server_assignor for m in group.members.values()
                    if m is not member and m is not replaced and m.server_assignor)
    if assignor:
        votes[assignor] += 1
    return votes.most_common(1)[0][0] if votes else DEFAULT_ASSIGNOR
