"""JoinGroup, SyncGroup, Heartbeat and LeaveGroup: Kafka's classic rebalance protocol.

``GroupMembership`` answers the requests of the members: it checks them,
adds, replaces and removes members, and hands the group to its
``Rebalancer`` (``_rebalance``), which owns the rebalance and session timers,
completes the joins, records a generation and hands out the leader's
assignment (the protocol's steps are told there). The groups are in the
``GroupTable`` (``_table``) it is given (or makes, standing alone).

Errors are Kafka's, answered, never raised: UNKNOWN_MEMBER_ID,
ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS (the client rejoins),
INCONSISTENT_GROUP_PROTOCOL, INVALID_SESSION_TIMEOUT, INVALID_GROUP_ID,
MEMBER_ID_REQUIRED (KIP-394: v4+ joins without member id), and
COORDINATOR_NOT_AVAILABLE for a group being removed.

Static membership (KIP-345, ``group.instance.id``): a join without member
id and with a known instance id replaces that instance's old member id
(``_replace_static``, Kafka's ``updateStaticMemberThenRebalanceOrCompleteJoin``):
in a Stable group without a rebalance unless the protocol the group would
choose changes, otherwise (and always while the leader assigns) with one;
requests naming the instance with the old member id answer FENCED_INSTANCE_ID.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import TypeVar

from kio.schema.errors import ErrorCode

from broker.kafka.consumer_groups._rebalance import (
    Rebalancer,
    RecordGroup,
    join_result,
    sync_result,
)
from broker.kafka.consumer_groups._table import GroupTable
from broker.kafka.consumer_groups.members import (
    Group,
    GroupConfig,
    JoinRequest,
    JoinResult,
    Member,
    SyncResult,
)
from broker.kafka.consumer_groups.states import ConsumerGroupState

__all__ = ["GroupConfig", "GroupMembership", "JoinRequest", "RecordGroup"]

log = logging.getLogger(__name__)

_S = ConsumerGroupState
_T = TypeVar("_T")


class GroupMembership:
    """Members, generations and assignments of the groups in its table.

    Args:
        config: the limits (session timeouts, the initial rebalance delay).
        record_group: writes a group's record after a rebalance.
        table: the groups; None: a table of its own.
    """

    def __init__(self, config: GroupConfig, record_group: RecordGroup,
                 table: GroupTable | None = None) -> None:
        self.config = config
        self._table = table if table is not None else GroupTable(config.max_group_id_bytes)
        self._rebalancer = Rebalancer(config, record_group)

    def group(self, group_id: str) -> Group | None:
        """The group, None if it is not known."""
        return self._table.get(group_id)

    # ------------------------------------------------------------ JoinGroup

    async def join(self, request: JoinRequest) -> JoinResult:
        """Answer one JoinGroup (waits until the rebalance it belongs to completes)."""
        error = self._table.group_id_error(request.group_id)
        if error is not ErrorCode.none:
            return JoinResult(error, request.member_id)
        if not (self.config.min_session_timeout_ms <= request.session_timeout_ms
                <= self.config.max_session_timeout_ms):
            return JoinResult(ErrorCode.invalid_session_timeout, request.member_id)
        group = self._table.get(request.group_id)
        if group is None and request.member_id:
            return JoinResult(ErrorCode.unknown_member_id, request.member_id)
        group = self._table.get_or_add(request.group_id)
        if group.state is _S.DEAD:
            return JoinResult(ErrorCode.coordinator_not_available, request.member_id)
        if not group.supports(request.protocol_type, request.protocols):
            return JoinResult(ErrorCode.inconsistent_group_protocol, request.member_id)
        if not request.member_id:
            return await self._join_new(group, request)
        if request.member_id in group.pending:
            group.pending.pop(request.member_id).cancel()
            return await self._add_member(group, request, request.member_id)
        error = group.member_error(request.member_id, request.group_instance_id)
        if error is not ErrorCode.none:
            return JoinResult(error, request.member_id)
        return await self._rejoin(group, group.members[request.member_id], request)

    async def _join_new(self, group: Group, request: JoinRequest) -> JoinResult:
        # Kafka's ClassicGroup.generateMemberId: a static member's id starts with its
        # instance id, a dynamic one's with its client id.
        prefix = request.group_instance_id or request.client_id or "member"
        member_id = f"{prefix}-{uuid.uuid4()}"
        if request.group_instance_id is not None:
            old = group.member_by_instance(request.group_instance_id)
            if old is not None:
                return await self._replace_static(group, old, request, member_id)
        elif request.require_known_member:
            # KIP-394: the member learns its id first, so a join that times
            # out on the client side leaves no unknown member behind.
            loop = asyncio.get_running_loop()
            group.pending[member_id] = loop.call_later(request.session_timeout_ms / 1000,
                                                       self._rebalancer.expire_pending,
                                                       group, member_id)
            return JoinResult(ErrorCode.member_id_required, member_id)
        return await self._add_member(group, request, member_id)

    async def _replace_static(self, group: Group, old: Member, request: JoinRequest,
                              member_id: str) -> JoinResult:
        """KIP-345: a static member back under a new member id takes its old one's place.

        Kafka's ``updateStaticMemberThenRebalanceOrCompleteJoin``, rule for
        rule. The old member id is fenced (its waiting requests answer
        FENCED_INSTANCE_ID); the new one takes its assignment, its leadership
        and the protocols and timeouts of this request. Then, by the group's state:

        - Stable, and the protocol the group would choose now is still its
          protocol: no rebalance. The group's state is written with the new id
          before the answer (a restarted broker knows the members the state
          names: ``_classic_state``), which is the current generation; then
          SyncGroup hands out the old id's assignment. Changed metadata (a new
          subscription) with the same protocol does not rebalance, as in Kafka.
        - Stable, and the choice changes: a rebalance.
        - CompletingRebalance: a rebalance, whatever the protocols (the leader
          may be assigning to the old id, and the new one would get nothing).
        - PreparingRebalance: it joins the rebalance under way.

        A write that failed (Kafka: reverted, answered with its error and no
        member id) puts the old member id back and answers
        COORDINATOR_NOT_AVAILABLE; the client joins again without member id and
        replaces it again. Its outcome is unknown: if it landed and the broker
        restarts before the next write, the loaded state names the new id,
        which nobody holds; the client's next join replaces that one, or its
        session timer (started at the load) removes it.
        """
        log.info("kafka group %s: static member %s is back as %s (was %s)", group.group_id,
                 request.group_instance_id, member_id, old.member_id)
        previous_leader = group.leader
        was_leader = previous_leader == old.member_id
        self._rebalancer.drop(group, old, ErrorCode.fenced_instance_id)
        member = Member(member_id, request.client_id, request.client_host,
                        request.session_timeout_ms, request.rebalance_timeout_ms,
                        request.protocols, request.group_instance_id, old.assignment)
        group.members[member_id] = member
        if group.leader is None or was_leader:
            group.leader = member_id
        self._rebalancer.touch(group, member)
        waiter = member.join_waiter = asyncio.get_running_loop().create_future()
        if group.state is _S.STABLE and group.select_protocol() == group.protocol_name:
            # Counted as joined meanwhile, as in Kafka (its join future is set): a
            # rebalance that completes during the write answers it.
            written = await self._rebalancer.record(group)
            if not waiter.done():
                member.join_waiter = None
                if written:
                    waiter.set_result(self._static_result(group, member, request,
                                                          previous_leader))
                else:
                    self._restore(group, member, old)
                    waiter.set_result(JoinResult(
                        ErrorCode.coordinator_not_available, "", group.generation,
                        group.protocol_type, group.protocol_name, previous_leader or ""))
            return await _wait(waiter)
        if group.state is _S.STABLE:
            reason = (f"the protocol changes: static member {request.group_instance_id} "
                      "is back with other protocols")
        else:
            reason = f"static member {request.group_instance_id} is back"
        self._rebalancer.prepare(group, reason)
        self._rebalancer.maybe_complete_join(group)
        return await _wait(waiter)

    @staticmethod
    def _static_result(group: Group, member: Member, request: JoinRequest,
                       previous_leader: str | None) -> JoinResult:
        """The answer to a static member back with no rebalance (Kafka's, by version).

        v9+ (KIP-814): the leader gets the members and ``skip_assignment`` (it
        keeps the assignment and only watches the metadata). Before v9 no member
        is told it leads: the leader named is the one before the replacement
        (the old member id, if that was the leader), so the client syncs as a
        follower and gets its assignment back.
        """
        if member.member_id == group.leader and request.skip_assignment_supported:
            members = tuple((m.member_id, m.group_instance_id,
                             m.metadata_of(group.protocol_name))
                            for m in group.members.values())
            return JoinResult(ErrorCode.none, member.member_id, group.generation,
                              group.protocol_type, group.protocol_name, member.member_id,
                              members, skip_assignment=True)
        leader = group.leader if request.skip_assignment_supported else previous_leader
        return JoinResult(ErrorCode.none, member.member_id, group.generation,
                          group.protocol_type, group.protocol_name, leader or "")

    def _restore(self, group: Group, member: Member, old: Member) -> None:
        """Put the old member id back in ``member``'s place (its state was not written)."""
        if group.members.get(member.member_id) is not member:
            return  # gone meanwhile (left, expired, replaced again): nothing to restore
        log.warning("kafka group %s: the state naming static member %s as %s was not "
                    "written; back to %s", group.group_id, member.group_instance_id,
                    member.member_id, old.member_id)
        was_leader = group.leader == member.member_id
        self._rebalancer.drop(group, member, ErrorCode.coordinator_not_available)
        group.members[old.member_id] = old
        if was_leader or group.leader is None:
            group.leader = old.member_id
        self._rebalancer.touch(group, old)

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
        self._rebalancer.prepare(group, f"{member_id} joined")
        self._rebalancer.maybe_complete_join(group)
        return await _wait(waiter)

    async def _rejoin(self, group: Group, member: Member, request: JoinRequest) -> JoinResult:
        same = member.protocols == request.protocols
        member.protocols = request.protocols
        member.session_timeout_ms = request.session_timeout_ms
        member.rebalance_timeout_ms = request.rebalance_timeout_ms
        self._rebalancer.touch(group, member)
        if group.state is _S.COMPLETING_REBALANCE and same:
            # A join lost on the way back: answer the generation it belongs to.
            return join_result(group, member)
        if group.state is _S.STABLE and same and member.member_id != group.leader:
            return join_result(group, member)
        if member.join_waiter is not None and not member.join_waiter.done():
            member.join_waiter.set_result(JoinResult(ErrorCode.rebalance_in_progress,
                                                     member.member_id))
        waiter = member.join_waiter = asyncio.get_running_loop().create_future()
        self._rebalancer.prepare(group, f"{member.member_id} rejoined")
        self._rebalancer.maybe_complete_join(group)
        return await _wait(waiter)

    # ------------------------------------------------------------ SyncGroup

    async def sync(self, group_id: str, generation: int, member_id: str,
                   protocol_type: str | None, protocol_name: str | None,
                   assignments: dict[str, bytes],
                   group_instance_id: str | None = None) -> SyncResult:
        """Answer one SyncGroup: the member's assignment once the leader sent them."""
        if self._table.fenced(group_id, member_id, group_instance_id):
            return SyncResult(ErrorCode.fenced_instance_id)
        group = self._table.get(group_id)
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
        self._rebalancer.touch(group, member)
        if group.state is _S.PREPARING_REBALANCE:
            return SyncResult(ErrorCode.rebalance_in_progress)
        if group.state is _S.STABLE:
            return sync_result(group, member)
        waiter = member.sync_waiter = asyncio.get_running_loop().create_future()
        if member_id == group.leader:
            self._rebalancer.assign_later(group, assignments)
        return await _wait(waiter)

    # ------------------------------------------------------------ Heartbeat, LeaveGroup

    def heartbeat(self, group_id: str, generation: int, member_id: str,
                  group_instance_id: str | None = None) -> ErrorCode:
        """Answer one Heartbeat: NONE, or what the member must do."""
        if self._table.fenced(group_id, member_id, group_instance_id):
            return ErrorCode.fenced_instance_id
        group = self._table.get(group_id)
        if group is not None and group.state is _S.DEAD:
            return ErrorCode.coordinator_not_available
        member = group.members.get(member_id) if group is not None else None
        if group is None or member is None:
            return ErrorCode.unknown_member_id
        if generation != group.generation:
            return ErrorCode.illegal_generation
        self._rebalancer.touch(group, member)
        if group.state is _S.PREPARING_REBALANCE:
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def leave(self, group_id: str, members: list[tuple[str, str | None]],
              ) -> list[ErrorCode]:
        """Remove each (member id, group instance id); the error of each."""
        group = self._table.get(group_id)
        errors: list[ErrorCode] = []
        for member_id, instance_id in members:
            if group is None:
                errors.append(ErrorCode.unknown_member_id)
                continue
            if member_id in group.pending:
                group.pending.pop(member_id).cancel()
                errors.append(ErrorCode.none)
                self._rebalancer.maybe_complete_join(group)
                continue
            if member_id and self._table.fenced(group_id, member_id, instance_id):
                errors.append(ErrorCode.fenced_instance_id)
                continue
            member = group.members.get(member_id)
            if member is None and not member_id and instance_id is not None:
                member = group.member_by_instance(instance_id)
            if member is None:
                errors.append(ErrorCode.unknown_member_id)
                continue
            log.info("kafka group %s: member %s left", group_id, member.member_id)
            self._rebalancer.remove_member(group, member, ErrorCode.unknown_member_id)
            errors.append(ErrorCode.none)
        return errors

    def resume(self, group: Group) -> None:
        """A group loaded with its members (``_classic_state``): their sessions start now."""
        for member in group.members.values():
            self._rebalancer.touch(group, member)

    def forget(self, group_id: str, error: ErrorCode) -> None:
        """Forget the group (another broker coordinates it now): its timers stop and its
        waiting calls get ``error``."""
        group = self._table.pop(group_id)
        if group is not None:
            self._rebalancer.stop(group, error)

    def adopt(self, group: Group) -> None:
        """Coordinate ``group``, made from a consumer-protocol group whose last member of
        that protocol left (``mixed``): its members' sessions start, then a rebalance."""
        self._table.put(group)
        for member in group.members.values():
            self._rebalancer.touch(group, member)
        self._rebalancer.prepare(group, "downgraded from the consumer protocol")

    def close(self) -> None:
        """Cancel every timer and background task (the listener stops)."""
        for group in self._table.by_id().values():
            self._rebalancer.stop(group)
        self._rebalancer.close()

async def _wait(waiter: asyncio.Future[_T]) -> _T:
    """The waiter's result; a cancelled call (the connection closed) leaves the waiter be.

    The group goes on without the caller: a join it made counts, and if it
    never syncs or heartbeats its session (or the sync timeout) removes it.
    """
    return await asyncio.shield(waiter)
