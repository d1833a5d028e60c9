"""JoinGroup, SyncGroup, Heartbeat and LeaveGroup: Kafka's classic rebalance protocol.

A rebalance (``_prepare_rebalance``) starts when a member joins, changes its
protocols, leaves, or falls silent; the group goes to PreparingRebalance and
every member must send JoinGroup again. It completes (``_complete_join``)
once every known member (and every member id given out and not yet used)
has rejoined, or when the longest rebalance timeout of the members passes:
those that did not rejoin are removed, the generation goes up by one, the
protocol most members prefer among the common ones is chosen, the leader is
kept if it rejoined (else the first member), and every waiting JoinGroup is
answered (the leader's with every member's metadata). The group is then
CompletingRebalance until the leader's SyncGroup brings the assignment, which
is recorded (``ConsumerGroupRecord``), handed to every waiting SyncGroup, and the
group is Stable.

Each member has a timer (``Member.expiry``) reset by every request of it;
when it fires the member is removed, unless a JoinGroup or SyncGroup of it is
waiting (the member is plainly alive then). Timers are asyncio ``call_later``
handles, never a polling loop.

Errors are Kafka's, answered, never raised: UNKNOWN_MEMBER_ID,
ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS (the client rejoins),
INCONSISTENT_GROUP_PROTOCOL, INVALID_SESSION_TIMEOUT, INVALID_GROUP_ID,
MEMBER_ID_REQUIRED (KIP-394: v4+ joins without member id), and
COORDINATOR_NOT_AVAILABLE for a group being removed.

Static membership (KIP-345, ``group.instance.id``): a join with a known
instance id replaces that instance's old member id (``_replace_static``),
without a rebalance when its protocols are unchanged; requests naming the
instance with the old member id answer FENCED_INSTANCE_ID.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import TypeVar

from kio.schema.errors import ErrorCode

from broker.kafka.consumer_groups.members import (
    Group,
    GroupConfig,
    JoinRequest,
    JoinResult,
    Member,
    SyncResult,
)
from broker.kafka.consumer_groups.states import ConsumerGroupState

__all__ = ["GroupConfig", "GroupMembership", "JoinRequest"]

log = logging.getLogger(__name__)

_S = ConsumerGroupState
_T = TypeVar("_T")


#: Writes a group's record after a rebalance: (group) -> None; raises on failure.
RecordGroup = Callable[[Group], Awaitable[None]]


class GroupMembership:
    """Members, generations and assignments of the groups in ``groups``."""

    def __init__(self, config: GroupConfig, record_group: RecordGroup) -> None:
        self.config = config
        self._groups: dict[str, Group] = {}
        self._record_group = record_group
        self._background: set[asyncio.Task[None]] = set()

    # ------------------------------------------------------------ checks

    def group_id_error(self, group_id: str | None) -> ErrorCode:
        """INVALID_GROUP_ID for an empty or too long id, else NONE."""
        if not group_id or len(group_id.encode()) > self.config.max_group_id_bytes:
            return ErrorCode.invalid_group_id
        return ErrorCode.none

    def group(self, group_id: str) -> Group | None:
        """The group, None if it is not known."""
        return self._groups.get(group_id)

    def _get_or_add(self, group_id: str) -> Group:
        group = self._groups.get(group_id)
        if group is None:
            group = self._groups[group_id] = Group(group_id)
        return group

    # ------------------------------------------------------------ JoinGroup

    async def join(self, request: JoinRequest) -> JoinResult:
        """Answer one JoinGroup (waits until the rebalance it belongs to completes)."""
        error = self.group_id_error(request.group_id)
        if error is not ErrorCode.none:
            return JoinResult(error, request.member_id)
        if not (self.config.min_session_timeout_ms <= request.session_timeout_ms
                <= self.config.max_session_timeout_ms):
            return JoinResult(ErrorCode.invalid_session_timeout, request.member_id)
        group = self._groups.get(request.group_id)
        if group is None and request.member_id:
            return JoinResult(ErrorCode.unknown_member_id, request.member_id)
        group = self._get_or_add(request.group_id)
        if group.state is _S.DEAD:
            return JoinResult(ErrorCode.coordinator_not_available, request.member_id)
        if not group.supports(request.protocol_type, request.protocols):
            return JoinResult(ErrorCode.inconsistent_group_protocol, request.member_id)
        if not request.member_id:
            return await self._join_new(group, request)
        if request.member_id in group.pending:
            group.pending.pop(request.member_id).cancel()
            return await self._add_member(group, request, request.member_id)
        member = group.members.get(request.member_id)
        if member is None:
            return JoinResult(ErrorCode.unknown_member_id, request.member_id)
        return await self._rejoin(group, member, request)

    async def _join_new(self, group: Group, request: JoinRequest) -> JoinResult:
        member_id = f"{request.client_id or 'member'}-{uuid.uuid4()}"
        if request.group_instance_id is not None:
            old = group.member_by_instance(request.group_instance_id)
            if old is not None:
                return await self._replace_static(group, old, request, member_id)
        elif request.require_known_member:
            # KIP-394: the member learns its id first, so a join that times
            # out on the client side leaves no unknown member behind.
            loop = asyncio.get_running_loop()
            group.pending[member_id] = loop.call_later(
                request.session_timeout_ms / 1000, self._expire_pending, group, member_id)
            return JoinResult(ErrorCode.member_id_required, member_id)
        return await self._add_member(group, request, member_id)

    async def _replace_static(self, group: Group, old: Member, request: JoinRequest,
                              member_id: str) -> JoinResult:
        """KIP-345: a static member back under a new member id takes its old one's place.

        The old member id is fenced (its waiting request answers
        FENCED_INSTANCE_ID). With the same protocols and the group Stable or
        completing, no rebalance: the new id gets the current generation (and
        then, with SyncGroup, the old one's assignment). Otherwise it joins
        the rebalance (starting one if none is under way).
        """
        log.info("kafka group %s: static member %s is back as %s (was %s)", group.group_id,
                 request.group_instance_id, member_id, old.member_id)
        was_leader = group.leader == old.member_id
        self._drop(group, old, ErrorCode.fenced_instance_id)
        member = Member(member_id, request.client_id, request.client_host,
                        request.session_timeout_ms, request.rebalance_timeout_ms,
                        request.protocols, request.group_instance_id, old.assignment)
        group.members[member_id] = member
        if group.leader is None or was_leader:
            group.leader = member_id
        if (group.state in (_S.STABLE, _S.COMPLETING_REBALANCE)
                and old.protocols == request.protocols):
            self._touch(group, member)
            return self._join_result(group, member)
        waiter = member.join_waiter = asyncio.get_running_loop().create_future()
        self._prepare_rebalance(group, f"static member {request.group_instance_id} is back")
        self._maybe_complete_join(group)
        return await _wait(waiter)

    def fenced(self, group_id: str, member_id: str, group_instance_id: str | None) -> bool:
        """Whether a request of ``member_id`` as static ``group_instance_id`` is from a
        replaced member (FENCED_INSTANCE_ID): the instance is now another member id."""
        group = self._groups.get(group_id)
        if group is None or group_instance_id is None:
            return False
        current = group.member_by_instance(group_instance_id)
        return current is not None and current.member_id != member_id

    async def _add_member(self, group: Group, request: JoinRequest, member_id: str) -> JoinResult:
        member = Member(member_id, request.client_id, request.client_host,
                        request.session_timeout_ms, request.rebalance_timeout_ms,
                        request.protocols, request.group_instance_id)
        group.members[member_id] = member
        if group.leader is None:
            group.leader = member_id
        if group.protocol_type is None or len(group.members) == 1:
            group.protocol_type = request.protocol_type
        waiter = member.join_waiter = asyncio.get_running_loop().create_future()
        self._prepare_rebalance(group, f"{member_id} joined")
        self._maybe_complete_join(group)
        return await _wait(waiter)

    async def _rejoin(self, group: Group, member: Member, request: JoinRequest) -> JoinResult:
        same = member.protocols == request.protocols
        member.protocols = request.protocols
        member.session_timeout_ms = request.session_timeout_ms
        member.rebalance_timeout_ms = request.rebalance_timeout_ms
        self._touch(group, member)
        if group.state is _S.COMPLETING_REBALANCE and same:
            # A join lost on the way back: answer the generation it belongs to.
            return self._join_result(group, member)
        if group.state is _S.STABLE and same and member.member_id != group.leader:
            return self._join_result(group, member)
        if member.join_waiter is not None and not member.join_waiter.done():
            member.join_waiter.set_result(JoinResult(ErrorCode.rebalance_in_progress,
                                                     member.member_id))
        waiter = member.join_waiter = asyncio.get_running_loop().create_future()
        self._prepare_rebalance(group, f"{member.member_id} rejoined")
        self._maybe_complete_join(group)
        return await _wait(waiter)

    def _join_result(self, group: Group, member: Member) -> JoinResult:
        members: tuple[tuple[str, str | None, bytes], ...] = ()
        if member.member_id == group.leader:
            members = tuple((m.member_id, m.group_instance_id, m.metadata_of(group.protocol_name))
                            for m in group.members.values())
        return JoinResult(ErrorCode.none, member.member_id, group.generation,
                          group.protocol_type, group.protocol_name, group.leader or "", members)

    # ------------------------------------------------------------ rebalances

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        """Move to PreparingRebalance (if not there yet) and start the rebalance timeout."""
        if group.state is _S.PREPARING_REBALANCE:
            return
        if group.state is _S.COMPLETING_REBALANCE:
            # The generation being completed is dropped: its members rejoin.
            for member in group.members.values():
                member.assignment = b""
                if member.sync_waiter is not None and not member.sync_waiter.done():
                    member.sync_waiter.set_result(SyncResult(ErrorCode.rebalance_in_progress))
        delay_ms = group.max_rebalance_timeout_ms()
        # The first rebalance of an empty group waits its delay for more members.
        group.delaying = group.state is _S.EMPTY and self.config.initial_rebalance_delay_ms > 0
        if group.state is _S.EMPTY:
            delay_ms = self.config.initial_rebalance_delay_ms
        group.move(_S.PREPARING_REBALANCE)
        log.info("kafka group %s: rebalance of generation %d (%s)", group.group_id,
                 group.generation, reason)
        self._cancel_rebalance_timer(group)
        loop = asyncio.get_running_loop()
        group.rebalance_timer = loop.call_later(delay_ms / 1000, self._rebalance_timeout, group)

    def _rebalance_timeout(self, group: Group) -> None:
        group.rebalance_timer = None
        group.delaying = False
        if group.state is not _S.PREPARING_REBALANCE:
            return
        for pending in list(group.pending):
            group.pending.pop(pending).cancel()
        self._complete_join(group)

    def _maybe_complete_join(self, group: Group) -> None:
        if group.state is not _S.PREPARING_REBALANCE or group.pending or group.delaying:
            return
        if all(m.join_waiter is not None and not m.join_waiter.done()
               for m in group.members.values()):
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        """End the rebalance: drop who did not rejoin, next generation, answer the joins."""
        self._cancel_rebalance_timer(group)
        for member in list(group.members.values()):
            if member.join_waiter is None or member.join_waiter.done():
                log.info("kafka group %s: member %s did not rejoin in time; removed",
                         group.group_id, member.member_id)
                self._drop(group, member, ErrorCode.unknown_member_id)
        group.generation += 1
        if not group.members:
            group.move(_S.EMPTY)
            group.protocol_name = None
            group.leader = None
            log.info("kafka group %s: empty at generation %d", group.group_id, group.generation)
            self._record_later(group)
            return
        group.protocol_name = group.select_protocol()
        if group.leader not in group.members:
            group.leader = next(iter(group.members))
        group.move(_S.COMPLETING_REBALANCE)
        log.info("kafka group %s: generation %d, protocol %s, leader %s, %d members",
                 group.group_id, group.generation, group.protocol_name, group.leader,
                 len(group.members))
        for member in group.members.values():
            waiter, member.join_waiter = member.join_waiter, None
            self._touch(group, member)
            if waiter is not None and not waiter.done():
                waiter.set_result(self._join_result(group, member))
        # Members that never send SyncGroup are removed after the rebalance
        # timeout (as Kafka 3.2+ does), so a silent leader cannot stall the group.
        group.rebalance_timer = asyncio.get_running_loop().call_later(
            group.max_rebalance_timeout_ms() / 1000, self._sync_timeout, group, group.generation)

    def _sync_timeout(self, group: Group, generation: int) -> None:
        group.rebalance_timer = None
        if group.state is not _S.COMPLETING_REBALANCE or group.generation != generation:
            return
        late = [m for m in group.members.values()
                if m.sync_waiter is None or m.sync_waiter.done()]
        for member in late:
            log.info("kafka group %s: member %s sent no SyncGroup in time; removed",
                     group.group_id, member.member_id)
            self._drop(group, member, ErrorCode.unknown_member_id)
        if late:
            self._prepare_rebalance(group, "members did not sync")
            self._maybe_complete_join(group)

    def _cancel_rebalance_timer(self, group: Group) -> None:
        if group.rebalance_timer is not None:
            group.rebalance_timer.cancel()
            group.rebalance_timer = None

    # ------------------------------------------------------------ SyncGroup

    async def sync(self, group_id: str, generation: int, member_id: str,
                   protocol_type: str | None, protocol_name: str | None,
                   assignments: dict[str, bytes],
                   group_instance_id: str | None = None) -> SyncResult:
        """Answer one SyncGroup: the member's assignment once the leader sent them."""
        if self.fenced(group_id, member_id, group_instance_id):
            return SyncResult(ErrorCode.fenced_instance_id)
        group = self._groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if group is None or group.state is _S.DEAD:
            error = (ErrorCode.coordinator_not_available if group is not None
                     else ErrorCode.unknown_member_id)
            return SyncResult(error)
        if member is None:
            return SyncResult(ErrorCode.unknown_member_id)
        if generation != group.generation:
            return SyncResult(ErrorCode.illegal_generation)
        if ((protocol_type is not None and protocol_type != group.protocol_type)
                or (protocol_name is not None and protocol_name != group.protocol_name)):
            return SyncResult(ErrorCode.inconsistent_group_protocol)
        self._touch(group, member)
        if group.state is _S.PREPARING_REBALANCE:
            return SyncResult(ErrorCode.rebalance_in_progress)
        if group.state is _S.STABLE:
            return self._sync_result(group, member)
        waiter = member.sync_waiter = asyncio.get_running_loop().create_future()
        if member_id == group.leader:
            # A task: the leader's connection closing must not cut the
            # recording short and leave the group waiting.
            task = asyncio.get_running_loop().create_task(self._assign(group, assignments))
            self._background.add(task)
            task.add_done_callback(self._background.discard)
        return await _wait(waiter)

    async def _assign(self, group: Group, assignments: dict[str, bytes]) -> None:
        """The leader's assignment: record the group, then make it Stable and answer the syncs."""
        generation = group.generation
        try:
            await self._record_group(group)
        except Exception as error:
            log.warning("kafka group %s: recording generation %d failed (%s); rebalancing",
                        group.group_id, generation, error)
            if group.state is _S.COMPLETING_REBALANCE and group.generation == generation:
                for member in group.members.values():
                    if member.sync_waiter is not None and not member.sync_waiter.done():
                        member.sync_waiter.set_result(
                            SyncResult(ErrorCode.coordinator_not_available))
                self._prepare_rebalance(group, "its record could not be written")
            return
        if group.state is not _S.COMPLETING_REBALANCE or group.generation != generation:
            return  # a rebalance began meanwhile: the syncs were answered by it
        self._cancel_rebalance_timer(group)
        for member in group.members.values():
            member.assignment = assignments.get(member.member_id, b"")
        group.move(_S.STABLE)
        for member in group.members.values():
            if member.sync_waiter is not None and not member.sync_waiter.done():
                member.sync_waiter.set_result(self._sync_result(group, member))

    @staticmethod
    def _sync_result(group: Group, member: Member) -> SyncResult:
        return SyncResult(ErrorCode.none, group.protocol_type, group.protocol_name,
                          member.assignment)

    # ------------------------------------------------------------ Heartbeat, LeaveGroup

    def heartbeat(self, group_id: str, generation: int, member_id: str,
                  group_instance_id: str | None = None) -> ErrorCode:
        """Answer one Heartbeat: NONE, or what the member must do."""
        if self.fenced(group_id, member_id, group_instance_id):
            return ErrorCode.fenced_instance_id
        group = self._groups.get(group_id)
        if group is not None and group.state is _S.DEAD:
            return ErrorCode.coordinator_not_available
        member = group.members.get(member_id) if group is not None else None
        if group is None or member is None:
            return ErrorCode.unknown_member_id
        if generation != group.generation:
            return ErrorCode.illegal_generation
        self._touch(group, member)
        if group.state is _S.PREPARING_REBALANCE:
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def leave(self, group_id: str, members: list[tuple[str, str | None]],
              ) -> list[ErrorCode]:
        """Remove each (member id, group instance id); the error of each."""
        group = self._groups.get(group_id)
        errors: list[ErrorCode] = []
        for member_id, instance_id in members:
            if group is None:
                errors.append(ErrorCode.unknown_member_id)
                continue
            if member_id in group.pending:
                group.pending.pop(member_id).cancel()
                errors.append(ErrorCode.none)
                self._maybe_complete_join(group)
                continue
            if member_id and self.fenced(group_id, member_id, instance_id):
                errors.append(ErrorCode.fenced_instance_id)
                continue
            member = group.members.get(member_id)
            if member is None and not member_id and instance_id is not None:
                member = group.member_by_instance(instance_id)
            if member is None:
                errors.append(ErrorCode.unknown_member_id)
                continue
            log.info("kafka group %s: member %s left", group_id, member.member_id)
            self._remove_member(group, member, ErrorCode.unknown_member_id)
            errors.append(ErrorCode.none)
        return errors

    # ------------------------------------------------------------ sessions

    def _touch(self, group: Group, member: Member) -> None:
        """Restart the member's session timer."""
        if member.expiry is not None:
            member.expiry.cancel()
        member.expiry = asyncio.get_running_loop().call_later(
            member.session_timeout_ms / 1000, self._expire, group, member)

    def _expire(self, group: Group, member: Member) -> None:
        member.expiry = None
        if group.members.get(member.member_id) is not member:
            return
        if member.waiting:
            self._touch(group, member)  # waiting on the coordinator: alive
            return
        log.info("kafka group %s: member %s silent for %d ms; removed", group.group_id,
                 member.member_id, member.session_timeout_ms)
        self._remove_member(group, member, ErrorCode.unknown_member_id)

    def _expire_pending(self, group: Group, member_id: str) -> None:
        if group.pending.pop(member_id, None) is not None:
            self._maybe_complete_join(group)

    def _remove_member(self, group: Group, member: Member, error: ErrorCode) -> None:
        """Remove ``member``; the others rebalance (or the rebalance under way may end)."""
        self._drop(group, member, error)
        if group.state in (_S.STABLE, _S.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, f"{member.member_id} left")
        self._maybe_complete_join(group)

    def _drop(self, group: Group, member: Member, error: ErrorCode) -> None:
        group.members.pop(member.member_id, None)
        if member.expiry is not None:
            member.expiry.cancel()
            member.expiry = None
        if member.join_waiter is not None and not member.join_waiter.done():
            member.join_waiter.set_result(JoinResult(error, member.member_id))
        if member.sync_waiter is not None and not member.sync_waiter.done():
            member.sync_waiter.set_result(SyncResult(error))
        if group.leader == member.member_id:
            group.leader = next(iter(group.members), None)

    def _record_later(self, group: Group) -> None:
        """Record an emptied group's generation in the background (best effort)."""
        task = asyncio.get_running_loop().create_task(self._record_quietly(group))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _record_quietly(self, group: Group) -> None:
        try:
            await self._record_group(group)
        except Exception as error:
            log.warning("kafka group %s: recording generation %d failed: %s", group.group_id,
                        group.generation, error)

    def close(self) -> None:
        """Cancel every timer (the listener stops)."""
        for group in self._groups.values():
            self._cancel_rebalance_timer(group)
            for handle in group.pending.values():
                handle.cancel()
            for member in group.members.values():
                if member.expiry is not None:
                    member.expiry.cancel()
        for task in list(self._background):
            task.cancel()

    def groups(self) -> dict[str, Group]:
        """Every group known in memory, by id."""
        return self._groups


async def _wait(waiter: asyncio.Future[_T]) -> _T:
    """The waiter's result; a cancelled call (the connection closed) leaves the waiter be.

    The group goes on without the caller: a join it made counts, and if it
    never syncs or heartbeats its session (or the sync timeout) removes it.
    """
    return await asyncio.shield(waiter)
