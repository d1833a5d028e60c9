"""Share groups' membership (KIP-932): ShareGroupHeartbeat, epochs, the simple assignor.

A member joins with epoch 0 and the topics it subscribes to, heartbeats
with the epoch it was given, and leaves with epoch -1. Every change of the
group's members, of their subscriptions or of a subscribed topic's
partition count (looked at again at a heartbeat every ``metadata_refresh_ms``,
10 s, as the consumer protocol's groups do: not per heartbeat) bumps the
group epoch and recomputes the assignment with
Kafka's share "simple" assignor (``assign``): every subscribed partition
goes to a member, and when a topic has more subscribers than partitions each
partition is shared by several of them. There is no revocation: a partition
may be read by several members at once, records are handed out one member at
a time by the share partitions (``partitions``). A member's next heartbeat
gets the new epoch and its assignment.

A member is removed when it leaves (epoch -1) or when its session ends
(``session_timeout_ms`` without a heartbeat, an asyncio timer); either way
``on_member_gone`` is called so the records it holds are released
(``coordinator`` says when).
Nothing of the membership is durable (as in Kafka, members rejoin after a
coordinator change): after a restart, or on a cluster broker that became the
group's coordinator (``forget_where`` drops the groups of one that stopped
being it), a heartbeat at a non-zero epoch gets UNKNOWN_MEMBER_ID and the
client joins again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from broker.errors import BrokerError
from broker.kafka.share_groups.config import ShareConfig
from ledger.errors import LedgerError

__all__ = ["LEAVE_EPOCH", "Partitions", "ShareGroup", "ShareGroups", "ShareHeartbeat",
           "ShareMember", "assign"]

log = logging.getLogger(__name__)

LEAVE_EPOCH = -1
#: Partitions by topic name.
Partitions = dict[str, tuple[int, ...]]
#: A topic's partition count, 0 for a topic that does not exist.
PartitionCount = Callable[[str], Awaitable[int]]


@dataclass
class ShareMember:
    """One member of a share group."""

    member_id: str
    member_epoch: int
    client_id: str
    client_host: str
    rack_id: str | None
    topics: tuple[str, ...]
    assigned: Partitions = field(default_factory=dict)
    session: asyncio.TimerHandle | None = field(default=None, repr=False)


@dataclass
class ShareGroup:
    """A share group: its epochs, members and the partition counts assigned over."""

    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    #: When ``counts`` were read (the event loop's clock; -inf: never).
    counts_read_at: float = float("-inf")

    @property
    def state(self) -> str:
        """Kafka's share group states: Empty or Stable (no reconciling: nothing to revoke)."""
        return "Stable" if self.members else "Empty"


@dataclass(frozen=True, slots=True)
class ShareHeartbeat:
    """What a heartbeat answers: an error, or the member's epoch and (if new) assignment."""

    error: ErrorCode = ErrorCode.none
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = LEAVE_EPOCH
    heartbeat_interval_ms: int = 0
    assignment: Partitions | None = None


def assign(members: Iterable[ShareMember], counts: dict[str, int]) -> dict[str, Partitions]:
    """Kafka's share "simple" assignor: every subscribed partition to at least one member.

    Per topic, its subscribers in member-id order: with no more subscribers
    than partitions, partition ``p`` goes to subscriber ``p mod n``; with more,
    subscriber ``i`` gets partition ``i mod partitions`` (a partition shared).
    """
    assignment: dict[str, Partitions] = {}
    ordered = sorted(members, key=lambda member: member.member_id)
    for member in ordered:
        assignment[member.member_id] = {}
    for topic, count in sorted(counts.items()):
        subscribers = [m.member_id for m in ordered if topic in m.topics]
        if count <= 0 or not subscribers:
            continue
        taken: dict[str, list[int]] = {}
        if len(subscribers) <= count:
            for number in range(count):
                taken.setdefault(subscribers[number % len(subscribers)], []).append(number)
        else:
            for index, member_id in enumerate(subscribers):
                taken.setdefault(member_id, []).append(index % count)
        for member_id, numbers in taken.items():
            assignment[member_id][topic] = tuple(sorted(numbers))
    return assignment


class ShareGroups:
    """Every share group this broker coordinates (module docstring).

    Args:
        partitions: a topic's partition count.
        config: the broker's share settings; ``group_config`` a group's.
        on_member_gone: called with (group id, member id, whether it left) when a
            member is removed.
        in_use_elsewhere: whether a group id is a classic or consumer group's.
    """

    def __init__(self, partitions: PartitionCount, config: ShareConfig,
                 group_config: Callable[[str], ShareConfig],
                 on_member_gone: Callable[[str, str, bool], None],
                 in_use_elsewhere: Callable[[str], bool]) -> None:
        self._partitions = partitions
        self.config = config
        self._group_config = group_config
        self._on_member_gone = on_member_gone
        self._in_use_elsewhere = in_use_elsewhere
        self._groups: dict[str, ShareGroup] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    def group(self, group_id: str) -> ShareGroup | None:
        """The group, None if not known here."""
        return self._groups.get(group_id)

    def groups(self) -> dict[str, ShareGroup]:
        """Every share group known, by id."""
        return self._groups

    def in_use_elsewhere(self, group_id: str) -> bool:
        """Whether ``group_id`` is a classic or consumer group's."""
        return self._in_use_elsewhere(group_id)

    def is_member(self, group_id: str, member_id: str) -> bool:
        """Whether ``member_id`` is a member of the group now."""
        group = self._groups.get(group_id)
        return group is not None and member_id in group.members

    def delete(self, group_id: str) -> ErrorCode:
        """Forget an empty group (DeleteGroups): NON_EMPTY_GROUP if it has members."""
        group = self._groups.get(group_id)
        if group is not None and group.members:
            return ErrorCode.non_empty_group
        self._groups.pop(group_id, None)
        return ErrorCode.none

    def forget_where(self, moved: Callable[[str], bool]) -> None:
        """Forget, without calling ``on_member_gone``, every group ``moved`` (a cluster
        broker no longer coordinates them: their members join the next coordinator)."""
        for group_id in [group_id for group_id in self._groups if moved(group_id)]:
            group = self._groups.pop(group_id)
            self._locks.pop(group_id, None)
            for member in group.members.values():
                if member.session is not None:
                    member.session.cancel()

    def close(self) -> None:
        """Cancel every session timer (the listener stops)."""
        for group in self._groups.values():
            for member in group.members.values():
                if member.session is not None:
                    member.session.cancel()

    async def heartbeat(self, group_id: str, member_id: str, member_epoch: int,
                        client_id: str, client_host: str, rack_id: str | None,
                        subscribed: tuple[str, ...] | None) -> ShareHeartbeat:
        """Join (epoch 0), heartbeat, or leave (epoch -1); one at a time per group."""
        refused = _refused(group_id, member_id, member_epoch, subscribed)
        if refused is not None:
            return refused
        if group_id not in self._groups and self._in_use_elsewhere(group_id):
            return ShareHeartbeat(ErrorCode.group_id_not_found,
                                  f"Group {group_id} is not a share group.")
        if member_epoch == LEAVE_EPOCH:
            return self._leave(group_id, member_id)
        async with self._locks.setdefault(group_id, asyncio.Lock()):
            group = self._groups.setdefault(group_id, ShareGroup(group_id))
            member = group.members.get(member_id)
            if member_epoch != 0:
                if member is None:
                    return ShareHeartbeat(ErrorCode.unknown_member_id,
                                          f"Member {member_id} is not a member of group "
                                          f"{group_id}.")
                if member_epoch != member.member_epoch:
                    return ShareHeartbeat(ErrorCode.fenced_member_epoch,
                                          f"The share group member has a smaller member epoch "
                                          f"({member_epoch}) than the one known by the group "
                                          f"coordinator ({member.member_epoch}).")
            changed = False
            if member is None:
                member = group.members[member_id] = ShareMember(
                    member_id, 0, client_id, client_host, rack_id, tuple(subscribed or ()))
                changed = True
            elif subscribed is not None and tuple(sorted(subscribed)) != \
                    tuple(sorted(member.topics)):
                member.topics = tuple(subscribed)
                changed = True
            if rack_id is not None:
                member.rack_id = rack_id
            config = self._group_config(group_id)
            self._arm(group, member, config.session_timeout_ms)
            now = asyncio.get_running_loop().time()
            if changed or now >= group.counts_read_at + self.config.metadata_refresh_ms / 1000:
                try:
                    counts = await self._counts(group)
                except (BrokerError, LedgerError) as error:
                    return ShareHeartbeat(ErrorCode.coordinator_not_available, str(error))
                group.counts_read_at = now
                if changed or counts != group.counts:
                    self._bump(group, counts)
            answer = None
            if member_epoch == 0 or member.member_epoch != group.group_epoch:
                member.member_epoch = group.group_epoch
                answer = member.assigned
            return ShareHeartbeat(member_id=member_id, member_epoch=member.member_epoch,
                                  heartbeat_interval_ms=config.heartbeat_interval_ms,
                                  assignment=answer)

    def _leave(self, group_id: str, member_id: str) -> ShareHeartbeat:
        """Epoch -1: the member goes (GROUP_ID_NOT_FOUND / UNKNOWN_MEMBER_ID if unknown;
        no group is made)."""
        group = self._groups.get(group_id)
        if group is None:
            return ShareHeartbeat(ErrorCode.group_id_not_found, f"Group {group_id} not found.")
        if member_id not in group.members:
            return ShareHeartbeat(ErrorCode.unknown_member_id,
                                  f"Member {member_id} is not a member of group {group_id}.")
        self._remove(group, member_id, "left")
        return ShareHeartbeat(member_id=member_id, member_epoch=LEAVE_EPOCH)

    async def _counts(self, group: ShareGroup) -> dict[str, int]:
        topics = sorted({topic for m in group.members.values() for topic in m.topics})
        return {topic: await self._partitions(topic) for topic in topics}

    def _bump(self, group: ShareGroup, counts: dict[str, int]) -> None:
        group.group_epoch += 1
        group.counts = counts
        for member_id, partitions in assign(group.members.values(), counts).items():
            group.members[member_id].assigned = partitions
        group.assignment_epoch = group.group_epoch

    def _arm(self, group: ShareGroup, member: ShareMember, timeout_ms: int) -> None:
        if member.session is not None:
            member.session.cancel()
        member.session = asyncio.get_running_loop().call_later(
            timeout_ms / 1000, self._expire, group.group_id, member.member_id)

    def _expire(self, group_id: str, member_id: str) -> None:
        group = self._groups.get(group_id)
        if group is not None and member_id in group.members:
            self._remove(group, member_id, "timed out (no heartbeat in its session timeout)")
            self._bump(group, group.counts)

    def _remove(self, group: ShareGroup, member_id: str, why: str) -> None:
        member = group.members.pop(member_id)
        if member.session is not None:
            member.session.cancel()
        log.info("share group %s: member %s %s", group.group_id, member_id, why)
        if why == "left":
            self._bump(group, group.counts)
        self._on_member_gone(group.group_id, member_id, why == "left")


def _refused(group_id: str, member_id: str, member_epoch: int,
             subscribed: tuple[str, ...] | None) -> ShareHeartbeat | None:
    """INVALID_REQUEST for a heartbeat Kafka refuses as malformed (its messages)."""
    if not group_id:
        return ShareHeartbeat(ErrorCode.invalid_request, "GroupId can't be empty.")
    if not member_id:
        return ShareHeartbeat(ErrorCode.invalid_request, "MemberId can't be empty.")
    if member_epoch == 0 and not subscribed:
        return ShareHeartbeat(ErrorCode.invalid_request,
                              "SubscribedTopicNames must be set in first request.")
    if member_epoch < LEAVE_EPOCH:
        return ShareHeartbeat(ErrorCode.invalid_request,
                              f"MemberEpoch {member_epoch} is not valid.")
    return None
