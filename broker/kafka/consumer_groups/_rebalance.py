"""Rebalances and sessions of classic groups: the timers, completing a join, recording.

``Rebalancer`` drives a group through Kafka's classic rebalance once the
membership part (``membership.GroupMembership``, which answers the requests)
has changed its members. A rebalance (``prepare``) starts when a member
joins, changes its protocols, leaves, or falls silent; the group goes to
PreparingRebalance and every member must send JoinGroup again. It completes
(``_complete_join``) once every known member (and every member id given out
and not yet used) has rejoined, or when the longest rebalance timeout of the
members passes: those that did not rejoin are removed, the generation goes
up by one, the protocol most members prefer among the common ones is chosen,
the leader is kept if it rejoined (else the first member), and every waiting
JoinGroup is answered (the leader's with every member's metadata). The group
is then CompletingRebalance until the leader's SyncGroup brings the
assignment (``assign_later``), which is recorded (``ConsumerGroupRecord``,
through the ``RecordGroup`` it is given), handed to every waiting SyncGroup,
and the group is Stable.

Each member has a timer (``Member.expiry``, restarted by ``touch``) reset by
every request of it; when it fires the member is removed, unless a JoinGroup
or SyncGroup of it is waiting (the member is plainly alive then). Timers are
asyncio ``call_later`` handles on the groups and members (plain data), never
a polling loop. The part owns the background tasks it starts (the leader's
assignment, an emptied group's record): ``close`` cancels them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from kio.schema.errors import ErrorCode

from broker.kafka.consumer_groups.members import (
    Group,
    GroupConfig,
    JoinResult,
    Member,
    SyncResult,
)
from broker.kafka.consumer_groups.states import ConsumerGroupState

__all__ = ["Rebalancer", "RecordGroup", "join_result", "sync_result"]

log = logging.getLogger(__name__)

_S = ConsumerGroupState

#: Writes a group's record after a rebalance: (group) -> None; raises on failure.
RecordGroup = Callable[[Group], Awaitable[None]]


def join_result(group: Group, member: Member) -> JoinResult:
    """The answer to ``member``'s JoinGroup in the group's current generation."""
    members: tuple[tuple[str, str | None, bytes], ...] = ()
    if member.member_id == group.leader:
        members = tuple((m.member_id, m.group_instance_id, m.metadata_of(group.protocol_name))
                        for m in group.members.values())
    return JoinResult(ErrorCode.none, member.member_id, group.generation,
                      group.protocol_type, group.protocol_name, group.leader or "", members)


def sync_result(group: Group, member: Member) -> SyncResult:
    """The answer to ``member``'s SyncGroup: its assignment of this generation."""
    return SyncResult(ErrorCode.none, group.protocol_type, group.protocol_name,
                      member.assignment)


class Rebalancer:
    """Rebalance and session timers of the groups, and the group records they cause."""

    def __init__(self, config: GroupConfig, record_group: RecordGroup) -> None:
        self._initial_delay_ms = config.initial_rebalance_delay_ms
        self._record_group = record_group
        self._background: set[asyncio.Task[None]] = set()

    # ------------------------------------------------------------ rebalances

    def prepare(self, group: Group, reason: str) -> None:
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
        group.delaying = group.state is _S.EMPTY and self._initial_delay_ms > 0
        if group.state is _S.EMPTY:
            delay_ms = self._initial_delay_ms
        group.move(_S.PREPARING_REBALANCE)
        log.info("kafka group %s: rebalance of generation %d (%s)", group.group_id,
                 group.generation, reason)
        self.cancel_timer(group)
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

    def maybe_complete_join(self, group: Group) -> None:
        """Complete the rebalance under way if every member (and pending id) has rejoined."""
        if group.state is not _S.PREPARING_REBALANCE or group.pending or group.delaying:
            return
        if all(m.join_waiter is not None and not m.join_waiter.done()
               for m in group.members.values()):
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        """End the rebalance: drop who did not rejoin, next generation, answer the joins."""
        self.cancel_timer(group)
        for member in list(group.members.values()):
            if member.join_waiter is None or member.join_waiter.done():
                log.info("kafka group %s: member %s did not rejoin in time; removed",
                         group.group_id, member.member_id)
                self.drop(group, member, ErrorCode.unknown_member_id)
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
            self.touch(group, member)
            if waiter is not None and not waiter.done():
                waiter.set_result(join_result(group, member))
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
            self.drop(group, member, ErrorCode.unknown_member_id)
        if late:
            self.prepare(group, "members did not sync")
            self.maybe_complete_join(group)

    def cancel_timer(self, group: Group) -> None:
        """Cancel the group's rebalance (or sync) timeout, if it has one."""
        if group.rebalance_timer is not None:
            group.rebalance_timer.cancel()
            group.rebalance_timer = None

    # ------------------------------------------------------------ the leader's assignment

    def assign_later(self, group: Group, assignments: dict[str, bytes]) -> None:
        """Record and hand out the leader's assignment in a task of this part.

        A task: the leader's connection closing must not cut the recording
        short and leave the group waiting.
        """
        self._spawn(self._assign(group, assignments))

    async def _assign(self, group: Group, assignments: dict[str, bytes]) -> None:
        """The leader's assignment: record the group, then make it Stable and answer the syncs."""
        generation = group.generation
        # The assignments go on the members first, so the record carries them
        # (``_classic_state``): durable before any SyncGroup is answered. A
        # failed write or a rebalance meanwhile clears them (``prepare``).
        for member in group.members.values():
            member.assignment = assignments.get(member.member_id, b"")
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
                self.prepare(group, "its record could not be written")
            return
        if group.state is not _S.COMPLETING_REBALANCE or group.generation != generation:
            return  # a rebalance began meanwhile: the syncs were answered by it
        self.cancel_timer(group)
        group.move(_S.STABLE)
        for member in group.members.values():
            if member.sync_waiter is not None and not member.sync_waiter.done():
                member.sync_waiter.set_result(sync_result(group, member))

    # ------------------------------------------------------------ sessions

    def touch(self, group: Group, member: Member) -> None:
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
            self.touch(group, member)  # waiting on the coordinator: alive
            return
        log.info("kafka group %s: member %s silent for %d ms; removed", group.group_id,
                 member.member_id, member.session_timeout_ms)
        self.remove_member(group, member, ErrorCode.unknown_member_id)

    def expire_pending(self, group: Group, member_id: str) -> None:
        """A member id given out (KIP-394) was not used in time: forget it."""
        if group.pending.pop(member_id, None) is not None:
            self.maybe_complete_join(group)

    def remove_member(self, group: Group, member: Member, error: ErrorCode) -> None:
        """Remove ``member``; the others rebalance (or the rebalance under way may end)."""
        self.drop(group, member, error)
        if group.state in (_S.STABLE, _S.COMPLETING_REBALANCE):
            self.prepare(group, f"{member.member_id} left")
        self.maybe_complete_join(group)

    def drop(self, group: Group, member: Member, error: ErrorCode) -> None:
        """Take ``member`` out of the group: its timer stops, its waiting calls get ``error``."""
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

    def stop(self, group: Group, error: ErrorCode | None = None) -> None:
        """Cancel every timer of ``group``; with ``error``, answer its waiting calls with it."""
        self.cancel_timer(group)
        for handle in group.pending.values():
            handle.cancel()
        for member in group.members.values():
            if member.expiry is not None:
                member.expiry.cancel()
            if error is None:
                continue
            if member.join_waiter is not None and not member.join_waiter.done():
                member.join_waiter.set_result(JoinResult(error, member.member_id))
            if member.sync_waiter is not None and not member.sync_waiter.done():
                member.sync_waiter.set_result(SyncResult(error))

    # ------------------------------------------------------------ group records

    async def record(self, group: Group) -> bool:
        """Write the group's record and state now (a static member's new id); whether
        it was written (a failure is logged: its outcome is unknown)."""
        try:
            await self._record_group(group)
        except Exception as error:
            log.warning("kafka group %s: recording generation %d failed: %s", group.group_id,
                        group.generation, error)
            return False
        return True

    def _record_later(self, group: Group) -> None:
        """Record an emptied group's generation in the background (best effort)."""
        self._spawn(self._record_quietly(group))

    async def _record_quietly(self, group: Group) -> None:
        try:
            await self._record_group(group)
        except Exception as error:
            log.warning("kafka group %s: recording generation %d failed: %s", group.group_id,
                        group.generation, error)

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def close(self) -> None:
        """Cancel the background tasks (the groups' timers: ``stop``)."""
        for task in list(self._background):
            task.cancel()
