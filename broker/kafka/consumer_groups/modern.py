"""The consumer protocol's coordinator (KIP-848): ConsumerGroupHeartbeat and its groups.

``ModernGroups`` serves Kafka's ``consumer`` group type beside the classic
``GroupCoordinator``. A group changes kind (an empty one, offsets kept, at
its first request of the other kind; one with members too: classic members
live inside a consumer group) as ``mixed`` (the part ``classic_members``) says.

A heartbeat (``heartbeat``; one at a time per group, under the group's lock)
creates or finds the member, checks its epoch (FENCED_MEMBER_EPOCH unless it
is the member's epoch, or its previous one with nothing it does not own
any more: the answer that bumped it was lost), bumps the group epoch when the
members, their subscriptions or assignors, the topics a regex subscription
matches or the subscribed topics' partition counts changed (both looked at
again every ``metadata_refresh_ms``: ``modern_topics``), computes the
new target with the group's assignor (``assignors``: the one most members ask
for, else ``uniform``) and reconciles the member (``modern_members.reconcile``:
revocation before assignment to another member). A member is removed when
it leaves (epoch -1), when its session ends (``session_timeout_ms`` without a
heartbeat, an asyncio timer), or when it keeps partitions it must revoke for
longer than its rebalance timeout; each removal bumps the epoch. A static
member (``group.instance.id``) leaving with epoch -2 keeps its partitions until
its session ends; back under a new member id within it, it takes them over
without a new epoch (UNRELEASED_INSTANCE_ID while the old one is still there).

**What survives a restart or failover**: the group record in ``_kafka_offsets``
(``ConsumerGroupRecord``, ``group_protocol`` ``consumer``: the group epoch and
assignor, written when the epoch goes up), the committed offsets and the image
of the members and assignments (``_modern_state``, with its crash windows):
the members go on at their epochs with their partitions.

The record's write has three outcomes. Written or not, the group goes on:
the record only says "a consumer group, at least this epoch", and the next
bump writes it again; an unknown outcome may leave a record with an epoch the
group never reached in memory, which is harmless (epochs only grow: a loaded
group takes the greater one). A write refused because another broker owns the
group's container now (``WrongHostError``) answers NOT_COORDINATOR and
changes nothing here.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Iterable

from kio.schema.errors import ErrorCode

from broker.errors import (
    BrokerError,
    ReaderGroupNotEmptyError,
    ReaderGroupNotFoundError,
    WrongHostError,
)
from broker.groups.kafka_view import kafka_group_not_found
from broker.kafka.consumer_groups._modern_state import GroupStates, KeptModernGroups
from broker.kafka.consumer_groups.assignors import ASSIGNORS, DEFAULT_ASSIGNOR
from broker.kafka.consumer_groups.mixed import ClassicMembers, ClassicSide
from broker.kafka.consumer_groups.modern_members import (
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    MemberState,
    ModernGroup,
    ModernMember,
    assignor_of,
    epoch_error,
    reconcile,
    take_over,
)
from broker.kafka.consumer_groups.modern_requests import (
    ClassicGroups,
    GroupRecords,
    HeartbeatRequest,
    HeartbeatResult,
    ModernConfig,
    PartitionCount,
    TopicNames,
    check_request,
    refused,
    subset,
    topic_partitions,
)
from broker.kafka.consumer_groups.modern_topics import Subscription, refresh
from broker.kafka.consumer_groups.offsets import ConsumerGroupRecord
from ledger.errors import LedgerError

__all__ = ["ClassicGroups", "GroupRecords", "HeartbeatRequest", "HeartbeatResult",
           "ModernConfig", "ModernGroups", "PartitionCount", "topic_partitions"]

log = logging.getLogger(__name__)


class ModernGroups:
    """Every consumer-protocol group this broker coordinates (module docstring)."""

    def __init__(self, partitions: PartitionCount, store: GroupRecords, classic: ClassicGroups,
                 config: ModernConfig | None = None, names: TopicNames | None = None,
                 states: GroupStates | None = None,
                 side: ClassicSide | None = None) -> None:
        self.config = config or ModernConfig()
        self._kept = KeptModernGroups(states)  # the members over restarts
        self._partitions = partitions
        self._names = names  # None: regex subscriptions match nothing
        self._store = store
        self._classic = classic
        self._groups: dict[str, ModernGroup] = {}
        self._background: set[asyncio.Task[None]] = set()
        self.classic_members = ClassicMembers(
            self._groups, side, self.config.migration_policy, self.heartbeat, self._touch,
            self._later, self._remove_locked, self._kept)

    # ------------------------------------------------------------ lookups

    def group(self, group_id: str) -> ModernGroup | None:
        """The group, None unless it is a consumer-protocol group coordinated here."""
        group = self._groups.get(group_id)
        return None if group is None or group.dead else group

    def groups(self) -> list[ModernGroup]:
        """Every live group, by id."""
        return [self._groups[g] for g in sorted(self._groups) if not self._groups[g].dead]

    def in_use(self, group_id: str) -> bool:
        """Whether ``group_id`` is a consumer group with members (JoinGroup is refused)."""
        group = self.group(group_id)
        return group is not None and bool(group.members)

    def forget_empty(self, group_id: str) -> None:
        """Hand an empty consumer group back to the classic protocol (a JoinGroup came)."""
        group = self.group(group_id)
        if group is not None and not group.members:
            del self._groups[group_id]

    # ------------------------------------------------------------ loading

    def start(self) -> None:
        """Take the consumer groups of the records loaded (one broker: all of them)."""
        self._add_stored(self._store.group_ids())

    def load_container(self, container: int) -> None:
        """Take the consumer groups of ``container`` (its records were just loaded)."""
        self.drop_container(container)
        self._add_stored(g for g in self._store.group_ids()
                         if self._store.container_of(g) == container)

    def _add_stored(self, group_ids: Iterable[str]) -> None:
        for group_id in group_ids:
            record = self._store.group_record(group_id)
            if record is None or not record.modern:
                continue
            self._classic.forget_empty(group_id)  # the classic side loaded it as Empty
            kept = self._kept.restore(group_id, record)
            if kept is not None:
                self._groups[group_id] = kept
                self._resume(kept)
                continue
            self._groups[group_id] = ModernGroup(group_id, group_epoch=record.generation,
                                                 assignment_epoch=record.generation,
                                                 assignor=record.protocol_name or "")

    def _resume(self, group: ModernGroup) -> None:
        """A group loaded with its members: a target for a newer recorded epoch, timers
        started, topics looked at after a refresh (heartbeats bring their permissions)."""
        if group.assignment_epoch < group.group_epoch:
            self._assign(group)
        for member in group.members.values():
            self._touch(group, member)
            self._watch_revocation(group, member)
        group.refresh_at = (asyncio.get_running_loop().time()
                            + self.config.metadata_refresh_ms / 1000)

    def drop_container(self, container: int) -> None:
        """Stop coordinating ``container``'s groups: members go (they rejoin elsewhere)."""
        for group_id in [g for g in self._groups if self._store.container_of(g) == container]:
            self._drop(self._groups.pop(group_id))

    def _drop(self, group: ModernGroup) -> None:
        group.dead = True
        self._kept.forget(group.group_id)
        for member in group.members.values():
            member.cancel_timers()

    def close(self) -> None:
        """Cancel every timer and background removal (the listener stops)."""
        for group in self._groups.values():
            for member in group.members.values():
                member.cancel_timers()
        for task in self._background:
            task.cancel()

    # ------------------------------------------------------------ heartbeat

    async def heartbeat(self, r: HeartbeatRequest) -> HeartbeatResult:
        """Answer one ConsumerGroupHeartbeat (module docstring)."""
        invalid = check_request(r, self.config)
        if invalid is not None:
            return invalid
        if self._classic.in_use(r.group_id) and not self.classic_members.upgrade(r):
            return refused(ErrorCode.group_id_not_found,
                            f"Group {r.group_id} is not a consumer group.")
        group = self.group(r.group_id)
        if group is None:
            if r.member_epoch != 0:
                return refused(ErrorCode.group_id_not_found,
                                f"Consumer group {r.group_id} not found.")
            self._classic.forget_empty(r.group_id)  # its offsets stay: now a consumer group's
            group = self._groups[r.group_id] = ModernGroup(r.group_id)
        async with group.lock:
            if self._groups.get(r.group_id) is not group:  # deleted or moved meanwhile
                return refused(ErrorCode.coordinator_not_available,
                                f"Consumer group {r.group_id} is being removed.")
            if r.member_epoch == LEAVE_EPOCH:
                result = await self._leave(group, r)
            elif r.member_epoch == STATIC_LEAVE_EPOCH:
                result = self._static_leave(group, r)
            else:
                result = await self._heartbeat(group, r)
            return await self._kept.answer(group, result)  # once its image is written

    async def _leave(self, group: ModernGroup, r: HeartbeatRequest) -> HeartbeatResult:
        member = group.members.get(r.member_id)
        if member is None:
            return refused(ErrorCode.unknown_member_id,
                            f"Member {r.member_id} is not a member of group {group.group_id}.")
        await self._remove(group, member, "left the group")
        return HeartbeatResult(ErrorCode.none, member_id=r.member_id, member_epoch=LEAVE_EPOCH,
                               heartbeat_interval_ms=self.config.heartbeat_interval_ms)

    def _static_leave(self, group: ModernGroup, r: HeartbeatRequest) -> HeartbeatResult:
        member = group.members.get(r.member_id)
        if member is None:
            return refused(ErrorCode.unknown_member_id,
                            f"Member {r.member_id} is not a member of group {group.group_id}.")
        if member.instance_id != r.instance_id:
            return refused(ErrorCode.fenced_instance_id,
                            f"Instance {r.instance_id} is another member's.")
        # It keeps its partitions until its session ends, for its next incarnation.
        if member.member_epoch != STATIC_LEAVE_EPOCH:
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = STATIC_LEAVE_EPOCH
        self._touch(group, member)
        log.info("kafka consumer group %s: static member %s (%s) left for now", group.group_id,
                 member.instance_id, member.member_id)
        return HeartbeatResult(ErrorCode.none, member_id=r.member_id,
                               member_epoch=STATIC_LEAVE_EPOCH,
                               heartbeat_interval_ms=self.config.heartbeat_interval_ms)

    def _find_member(self, group: ModernGroup, r: HeartbeatRequest,
                     ) -> tuple[ModernMember, ModernMember | None] | HeartbeatResult:
        """(the member, the static member it replaces or None), or the refusal.

        A new member is not in the group yet: ``_heartbeat`` adds it once its
        epoch is decided.
        """
        if r.member_epoch == 0:
            member_id = r.member_id or str(uuid.uuid4())  # v0 lets the coordinator choose
            if r.instance_id is not None:
                old = group.member_by_instance(r.instance_id)
                if old is not None and old.member_id != member_id:
                    if old.member_epoch != STATIC_LEAVE_EPOCH:
                        return refused(ErrorCode.unreleased_instance_id,
                                        f"Static member {r.instance_id} is still in the group "
                                        f"as {old.member_id}.")
                    return ModernMember(member_id, instance_id=r.instance_id), old
            member = group.members.get(member_id)
            if member is None:
                return ModernMember(member_id, instance_id=r.instance_id), None
            # Back with epoch 0 (it was fenced, or restarted): it holds nothing now.
            if member.member_epoch == STATIC_LEAVE_EPOCH:
                member.member_epoch = member.previous_member_epoch
            else:
                member.assigned, member.pending_revocation = {}, {}
                member.state = MemberState.STABLE
                member.previous_member_epoch, member.member_epoch = member.member_epoch, 0
            return member, None
        member = group.members.get(r.member_id)
        if member is None:
            return refused(ErrorCode.unknown_member_id,
                            f"Member {r.member_id} is not a member of group {group.group_id}.")
        if r.member_epoch > member.member_epoch:
            return refused(ErrorCode.fenced_member_epoch,
                            f"The member epoch {r.member_epoch} is ahead of the coordinator's "
                            f"{member.member_epoch}: abandon all partitions and rejoin.")
        if r.member_epoch < member.member_epoch and not (
                r.member_epoch == member.previous_member_epoch
                and subset(r.owned, member.assigned)):
            return refused(ErrorCode.fenced_member_epoch,
                            f"The member epoch {r.member_epoch} is behind the coordinator's "
                            f"{member.member_epoch}: abandon all partitions and rejoin.")
        return member, None

    async def _heartbeat(self, group: ModernGroup, r: HeartbeatRequest) -> HeartbeatResult:
        found = self._find_member(group, r)
        if isinstance(found, HeartbeatResult):
            return found
        member, replaced = found
        new = member.member_id not in group.members
        source = member if replaced is None else replaced
        names = frozenset(r.subscribed) if r.subscribed is not None else source.topic_names
        regex = source.regex if r.regex is None else (r.regex or None)
        allowed = r.topic_allowed or source.topic_allowed
        assignor = r.server_assignor if r.server_assignor is not None else source.server_assignor
        bump = (new and replaced is None) or names != source.topic_names \
            or regex != source.regex or assignor != source.server_assignor
        now = asyncio.get_running_loop().time()
        counts, subscribed = group.partition_counts, {member.member_id: source.subscribed}
        refreshed = bump or now >= group.refresh_at
        if refreshed:
            others = [m for m in group.members.values() if m is not member and m is not replaced]
            wanted = {m.member_id: Subscription(m.topic_names, m.regex, m.topic_allowed,
                                                m.subscribed) for m in others}
            wanted[member.member_id] = Subscription(
                names, regex, allowed, source.subscribed if regex == source.regex else names)
            subscribed, counts = await refresh(group, wanted, self._partitions, self._names)
            had = {m.member_id: m.subscribed for m in others} | {
                member.member_id: source.subscribed}
            bump = bump or counts != group.partition_counts or subscribed != had
        epoch = group.group_epoch + 1 if bump else group.group_epoch
        if bump:
            name = assignor_of(group, member, replaced, assignor)
            moved = await self._record(group, epoch, name)
            if moved is not None:
                return moved
        # Decided: apply (no await from here to the answer).
        if replaced is not None:
            take_over(group, member, replaced)
        before = {t: set(p) for t, p in member.assigned.items()}
        member.client_id, member.client_host, member.classic = r.client_id, r.client_host, r.classic
        for other in group.members.values():
            other.subscribed = subscribed.get(other.member_id, other.subscribed)
        member.subscribed, member.server_assignor = subscribed[member.member_id], assignor
        member.topic_names, member.regex, member.topic_allowed = names, regex, allowed
        if r.rack_id is not None:
            member.rack_id = r.rack_id
        if r.rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = r.rebalance_timeout_ms
        group.members[member.member_id] = member
        if refreshed:
            group.refresh_at = now + self.config.metadata_refresh_ms / 1000
        if bump:
            group.group_epoch = epoch
            group.partition_counts = counts
            self._assign(group)
            log.info("kafka consumer group %s: epoch %d (%s)", group.group_id, epoch,
                     f"{member.member_id} joined" if new else f"{member.member_id} changed")
        reconcile(group, member, r.owned)
        self._touch(group, member)
        self._watch_revocation(group, member)
        full = r.member_epoch == 0 or (r.rebalance_timeout_ms != -1 and r.subscribed is not None
                                        and r.owned is not None)
        changed = before != member.assigned
        return HeartbeatResult(ErrorCode.none, member_id=member.member_id,
                               member_epoch=member.member_epoch,
                               heartbeat_interval_ms=self.config.heartbeat_interval_ms,
                               assignment=member.assigned if full or changed else None)

    def _assign(self, group: ModernGroup) -> None:
        """A new target for the group's epoch (members with epoch -2 keep their place)."""
        group.assignor = assignor_of(group, ModernMember(""), None, None)
        subscriptions = {m.member_id: m.subscribed for m in group.members.values()}
        group.target = ASSIGNORS[group.assignor](subscriptions, group.partition_counts,
                                                 group.target)
        group.assignment_epoch = group.group_epoch

    async def _record(self, group: ModernGroup, epoch: int, assignor: str,
                      ) -> HeartbeatResult | None:
        """Write the group record of ``epoch``; NOT_COORDINATOR if the container moved.

        Any other failure is logged and the group goes on (module docstring).
        """
        try:
            await self._store.write_group(group.group_id, ConsumerGroupRecord(
                epoch, "consumer", assignor, "consumer"))
        except WrongHostError:
            return refused(ErrorCode.not_coordinator,
                            f"Group {group.group_id} is coordinated by another broker now.")
        except (BrokerError, LedgerError) as error:
            log.warning("kafka consumer group %s: record of epoch %d not written (%s); "
                        "going on", group.group_id, epoch, error)
        return None

    # ------------------------------------------------------------ removals and timers

    async def _remove(self, group: ModernGroup, member: ModernMember, why: str) -> None:
        """Remove ``member`` and bump the epoch, or make the group classic (``mixed``)."""
        if self.classic_members.downgrade(group, member):
            return
        epoch = group.group_epoch + 1
        await self._record(group, epoch, group.assignor or DEFAULT_ASSIGNOR)
        if group.members.get(member.member_id) is not member:
            return  # gone meanwhile
        member.cancel_timers()
        del group.members[member.member_id]
        group.target.pop(member.member_id, None)
        group.group_epoch = epoch
        self._assign(group)
        log.info("kafka consumer group %s: member %s %s; epoch %d", group.group_id,
                 member.member_id, why, epoch)

    def _touch(self, group: ModernGroup, member: ModernMember) -> None:
        """Restart the member's session timer."""
        if member.session is not None:
            member.session.cancel()
        timeout_ms = (self.config.session_timeout_ms if member.classic is None
                      else member.classic.session_timeout_ms)
        member.session = asyncio.get_running_loop().call_later(
            timeout_ms / 1000, self._later, group, member,
            "timed out (no heartbeat in its session timeout)")

    def _watch_revocation(self, group: ModernGroup, member: ModernMember) -> None:
        """A member must revoke within its rebalance timeout, or it is removed."""
        if member.state is not MemberState.UNREVOKED_PARTITIONS:
            if member.revocation is not None:
                member.revocation.cancel()
                member.revocation = None
        elif member.revocation is None:
            member.revocation = asyncio.get_running_loop().call_later(
                member.rebalance_timeout_ms / 1000, self._later, group, member,
                "did not revoke its partitions in its rebalance timeout")

    def _later(self, group: ModernGroup, member: ModernMember, why: str) -> None:
        task = asyncio.get_running_loop().create_task(self._remove_locked(group, member, why))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _remove_locked(self, group: ModernGroup, member: ModernMember, why: str) -> None:
        async with group.lock:
            if self._groups.get(group.group_id) is group:
                await self._remove(group, member, why)
                await self._kept.answer(group, HeartbeatResult(ErrorCode.none))  # (logged)

    # ------------------------------------------------------------ offsets, deletion

    def commit_error(self, group_id: str, member_id: str, member_epoch: int, version: int,
                     transactional: bool = False) -> ErrorCode:
        """Whether an OffsetCommit (or TxnOffsetCommit: ``transactional``) may go ahead
        (Kafka's ``validateOffsetCommit``)."""
        group = self.group(group_id)
        if group is None:
            return ErrorCode.none
        if member_epoch < 0 and not group.members:
            return ErrorCode.none  # an admin client or a consumer that assigns itself
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.unknown_member_id
        if version < 9 and not transactional and member.classic is None:
            return ErrorCode.unsupported_version  # a KIP-848 member commits with v9+
        return epoch_error(member, member_epoch)

    def fetch_error(self, group_id: str, member_id: str | None, member_epoch: int) -> ErrorCode:
        """Whether an OffsetFetch may be answered (Kafka's ``validateOffsetFetch``)."""
        group = self.group(group_id)
        if group is None or (member_id is None and member_epoch < 0):
            return ErrorCode.none
        member = group.members.get(member_id or "")
        if member is None:
            return ErrorCode.unknown_member_id
        return epoch_error(member, member_epoch)

    async def delete_group(self, group_id: str) -> ErrorCode:
        """DeleteGroups of a consumer group: only an empty one (NON_EMPTY_GROUP), with its
        offsets; a failed write COORDINATOR_NOT_AVAILABLE (the client asks again)."""
        try:
            await self.delete_empty(group_id)
        except ReaderGroupNotEmptyError:
            return ErrorCode.non_empty_group
        except ReaderGroupNotFoundError:
            return ErrorCode.group_id_not_found
        except (BrokerError, LedgerError) as failure:
            log.warning("kafka consumer group %s: deletion failed: %s", group_id, failure)
            return ErrorCode.coordinator_not_available
        return ErrorCode.none

    async def delete_empty(self, group_id: str) -> None:
        """Delete the group and its offsets if it has no member.

        Raises ``ReaderGroupNotFoundError`` (kind ``kafka``),
        ``ReaderGroupNotEmptyError``, or what the offsets' write raises: then
        the group stays, some of its tombstones maybe written (the outcome is
        unknown; deleting again is harmless).
        """
        group = self.group(group_id)
        if group is None:
            raise kafka_group_not_found(group_id)
        async with group.lock:
            if group.members:
                raise ReaderGroupNotEmptyError(group_id, sorted(group.members))
            group.dead = True
            try:
                await self._store.delete_group(group_id)
            except BaseException:
                group.dead = False
                raise
            if self._groups.get(group_id) is group:
                del self._groups[group_id]
            self._kept.forget(group_id)
        log.info("kafka consumer group %s: deleted", group_id)
