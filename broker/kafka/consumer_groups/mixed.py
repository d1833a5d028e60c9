"""Classic members inside a consumer-protocol group (Kafka 4.0's online upgrade, KIP-848).

``ClassicMembers`` is the part of ``ModernGroups`` that serves members of
the classic protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup with
protocol type ``consumer``) in a group of the consumer protocol, and moves a
group between the two kinds (``migration``, as ``group.consumer.migration.policy``
allows; Kafka's default, ``bidirectional``, is Folio's):

- **upgrade** (``upgrade``): a ConsumerGroupHeartbeat joining (epoch 0) a
  classic group with members converts it; the classic coordinator hands the
  group over, its waiting JoinGroup and SyncGroup calls answered
  REBALANCE_IN_PROGRESS. Refused (the heartbeat answers GROUP_ID_NOT_FOUND,
  as Kafka) when the policy does not upgrade, the group's protocol type is
  not ``consumer``, or a member's embedded subscription or assignment cannot
  be read.
- a classic member **joins** (``join``) as a heartbeat of the consumer
  protocol would: its subscription is read from its first protocol's
  metadata, its owned partitions from the same (empty for an eager
  assignor, which revoked everything before rejoining). The group epoch,
  the server-side assignor's target and the member's reconciliation are the
  consumer protocol's (``ModernGroups.heartbeat``); the JoinGroup answers at
  once with the member epoch as generation, its first protocol, and no
  leader (the member is a follower: the broker assigns). A member that must
  still revoke keeps its epoch: its SyncGroup gives what it may keep, it
  revokes the rest and rejoins, as a cooperative consumer does.
- its **SyncGroup** (``sync``) gives its assigned partitions, encoded as a
  ConsumerProtocolAssignment (``embedded``) of its subscription's version;
  REBALANCE_IN_PROGRESS if the group epoch moved past it meanwhile.
- its **Heartbeat** (``heartbeat``) restarts its session (its JoinGroup's
  ``session.timeout.ms``) and answers REBALANCE_IN_PROGRESS when it must
  rejoin: the group epoch moved past its epoch, it must revoke, or the
  partitions it waited for are free now. From then it must rejoin within its
  rebalance timeout or it is removed.
- its **LeaveGroup** (``leave``) removes it and bumps the epoch.
- a **static** classic member (``group.instance.id``) back under a new member
  id takes its old incarnation's place (epoch, partitions, target) with no
  new epoch, the old id fenced (FENCED_INSTANCE_ID), as Kafka's
  ``replaceStaticMember``; replacing a consumer-protocol member of that
  instance id removes it first (a new epoch; Kafka would downgrade the group
  if it was the last of its protocol).
- **downgrade** (``downgrade``): when the last consumer-protocol member
  leaves or is fenced and classic members remain, the group goes back to
  the classic coordinator (Stable, then a rebalance: they rejoin there).

Errors are Kafka's for a classic member: UNKNOWN_MEMBER_ID (no such member,
or one of the consumer protocol), ILLEGAL_GENERATION (not its epoch: also
for its commits, ``ModernGroups.commit_error``), FENCED_INSTANCE_ID,
INCONSISTENT_GROUP_PROTOCOL (a protocol type other than ``consumer``, no
protocol every classic member supports, an unreadable subscription),
INVALID_SESSION_TIMEOUT, MEMBER_ID_REQUIRED (KIP-394).

**What survives a restart or failover** is what the consumer protocol keeps
(``modern``, ``_modern_state``): the group record, the offsets and the image
of the members, the classic ones with what they joined with (session
timeout, protocols), so they go on at their epochs with their partitions. A
change made here is written before it is answered (COORDINATOR_NOT_AVAILABLE
when the write fails): a classic JoinGroup is a heartbeat (the member's
classic metadata set before the image is written), a LeaveGroup writes
before its answer, a timer's removal writes as any removal. A change of kind
writes the group record and the image in one append (``_modern_state``: its
crash windows), so a group comes back as the kind last written.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Protocol

from kio.schema.errors import ErrorCode

from broker.kafka.consumer_groups._modern_state import KeptModernGroups
from broker.kafka.consumer_groups.embedded import (
    MalformedEmbeddedError,
    decode_subscription,
    encode_assignment,
    version_of,
)
from broker.kafka.consumer_groups.members import Group, JoinRequest, JoinResult, SyncResult
from broker.kafka.consumer_groups.migration import (
    CONSUMER_PROTOCOL_TYPE,
    MigrationPolicy,
    to_classic,
    to_modern,
)
from broker.kafka.consumer_groups.modern_members import (
    ClassicMetadata,
    MemberState,
    ModernGroup,
    ModernMember,
)
from broker.kafka.consumer_groups.modern_requests import HeartbeatRequest, HeartbeatResult

__all__ = ["ClassicMembers", "ClassicSide"]

log = logging.getLogger(__name__)

#: One member, found: (its group, it); or the error to answer.
_Found = tuple[ModernGroup, ModernMember] | ErrorCode
#: The heartbeat errors a classic member is told differently (its join raced a change).
_JOIN_ERRORS = {
    ErrorCode.fenced_member_epoch: ErrorCode.rebalance_in_progress,
    ErrorCode.group_id_not_found: ErrorCode.coordinator_not_available,
    ErrorCode.invalid_request: ErrorCode.inconsistent_group_protocol,
}


class ClassicSide(Protocol):
    """What the conversions need of the classic coordinator (``coordinators.ClassicView``)."""

    def group(self, group_id: str) -> Group | None:
        """The classic group, None if there is none."""

    def hand_over(self, group_id: str) -> None:
        """Forget the classic group: its timers stop, its waiting calls get
        REBALANCE_IN_PROGRESS (it is a consumer-protocol group now)."""

    def adopt(self, group: Group) -> None:
        """Coordinate ``group`` (a downgraded one) and start a rebalance of it."""

    def session_timeout_ok(self, session_timeout_ms: int) -> bool:
        """Whether a JoinGroup's session timeout is within the broker's limits."""


class ClassicMembers:
    """The classic members of consumer-protocol groups, and the groups' change of kind.

    Args:
        groups: ``ModernGroups``' groups by id (shared: this part adds a
            group on an upgrade and removes it on a downgrade).
        side: the classic coordinator; None: no group ever changes kind.
        policy: ``group.consumer.migration.policy``.
        heartbeat: ``ModernGroups.heartbeat`` (a classic join is one).
        touch: restarts a member's session timer.
        later: removes a member in the background (its timer fired).
        remove: removes a member now (under the group's lock; its image written,
            a failure logged).
        kept: the images (``ModernGroups``'); None: nothing is kept.
    """

    def __init__(self, groups: dict[str, ModernGroup], side: ClassicSide | None,
                 policy: MigrationPolicy,
                 heartbeat: Callable[[HeartbeatRequest], Awaitable[HeartbeatResult]],
                 touch: Callable[[ModernGroup, ModernMember], None],
                 later: Callable[[ModernGroup, ModernMember, str], None],
                 remove: Callable[[ModernGroup, ModernMember, str], Awaitable[None]],
                 kept: KeptModernGroups | None = None) -> None:
        self.policy = policy
        self._groups = groups
        self._side = side
        self._heartbeat = heartbeat
        self._touch = touch
        self._later = later
        self._remove = remove
        self._kept = kept or KeptModernGroups(None)

    # ------------------------------------------------------------ changes of kind

    def upgrade(self, joining: HeartbeatRequest) -> bool:
        """Make the classic group ``joining`` names a consumer-protocol group, if it joins
        (epoch 0, as Kafka's ``createIfNotExists``); whether the group was converted."""
        group_id = joining.group_id
        if self._side is None or joining.member_epoch != 0:
            return False
        if not self.policy.upgrades:
            log.info("kafka group %s: not upgraded to the consumer protocol (migration "
                     "policy %s)", group_id, self.policy.value)
            return False
        classic = self._side.group(group_id)
        if classic is None:
            return False
        try:
            modern = to_modern(classic)
        except MalformedEmbeddedError as error:
            log.info("kafka group %s: not upgraded to the consumer protocol (%s)", group_id,
                     error)
            return False
        self._side.hand_over(group_id)
        self._groups[group_id] = modern
        for member in modern.members.values():
            self._touch(modern, member)
        log.info("kafka group %s: upgraded to the consumer protocol at epoch %d with %d "
                 "classic members", group_id, modern.group_epoch, len(modern.members))
        return True

    def downgrade(self, group: ModernGroup, leaving: ModernMember) -> bool:
        """If ``leaving`` is the last consumer-protocol member and classic ones remain,
        hand the group back to the classic coordinator; whether it was."""
        if self._side is None or leaving.classic is not None:
            return False
        others = [m for m in group.members.values() if m is not leaving]
        if not others or any(m.classic is None for m in others):
            return False
        if not self.policy.downgrades:
            log.info("kafka consumer group %s: only classic members left, kept (migration "
                     "policy %s)", group.group_id, self.policy.value)
            return False
        classic = to_classic(group, leaving.member_id)
        # Its record and image are written by the answer's ``keep`` (the leaving
        # member's heartbeat, or the timer's removal), as they are now: the classic
        # coordinator's rebalance clears the assignments.
        self._kept.downgraded(group, classic)
        group.dead = True
        for member in group.members.values():
            member.cancel_timers()
        if self._groups.get(group.group_id) is group:
            del self._groups[group.group_id]
        self._side.adopt(classic)
        log.info("kafka consumer group %s: %s left; downgraded to a classic group of %d "
                 "members at generation %d", group.group_id, leaving.member_id,
                 len(classic.members), classic.generation)
        return True

    # ------------------------------------------------------------ the classic requests

    async def join(self, request: JoinRequest) -> JoinResult:
        """A classic member's JoinGroup into a consumer-protocol group (module docstring)."""
        group = self._live(request.group_id)
        if group is None:
            return JoinResult(ErrorCode.coordinator_not_available, request.member_id)
        if self._side is not None and not self._side.session_timeout_ok(
                request.session_timeout_ms):
            return JoinResult(ErrorCode.invalid_session_timeout, request.member_id)
        if not _supports(group, request.protocol_type, request.protocols):
            return JoinResult(ErrorCode.inconsistent_group_protocol, request.member_id)
        member_id = request.member_id
        if not member_id:
            member_id = f"{request.client_id or 'member'}-{uuid.uuid4()}"
            if request.require_known_member and request.group_instance_id is None:
                return JoinResult(ErrorCode.member_id_required, member_id)  # KIP-394
        try:
            subscription = decode_subscription(request.protocols[0][1])
        except MalformedEmbeddedError:
            return JoinResult(ErrorCode.inconsistent_group_protocol, member_id)
        if request.group_instance_id is not None:
            old = group.member_by_instance(request.group_instance_id)
            if old is not None and old.member_id != member_id and old.classic is None:
                # A consumer-protocol member's instance id: it goes first.
                await self._remove(group, old, f"replaced by {member_id} (same instance id)")
            elif old is not None and old.member_id != member_id:
                async with group.lock:
                    _replace_static(group, old, member_id)
        if self._live(request.group_id) is not group:
            # Downgraded meanwhile (the removal above may have): the client joins again,
            # the classic coordinator's now. Never a heartbeat here, which might upgrade.
            return JoinResult(ErrorCode.rebalance_in_progress, member_id)
        existing = group.members.get(member_id)
        if existing is not None and existing.classic is None:
            return JoinResult(ErrorCode.unknown_member_id, member_id)
        result = await self._heartbeat(HeartbeatRequest(
            group_id=request.group_id, member_id=member_id,
            member_epoch=0 if existing is None else existing.member_epoch,
            client_id=request.client_id, client_host=request.client_host,
            instance_id=request.group_instance_id, rack_id=subscription.rack_id,
            rebalance_timeout_ms=request.rebalance_timeout_ms, subscribed=subscription.topics,
            owned=None if existing is None else subscription.owned,
            classic=ClassicMetadata(request.session_timeout_ms, request.protocols)))
        if result.error is not ErrorCode.none:
            return JoinResult(_JOIN_ERRORS.get(result.error, result.error), member_id)
        member = group.members.get(member_id)
        if member is None or self._live(request.group_id) is not group:
            return JoinResult(ErrorCode.rebalance_in_progress, member_id)  # gone meanwhile
        return JoinResult(ErrorCode.none, member_id, member.member_epoch,
                          CONSUMER_PROTOCOL_TYPE, request.protocols[0][0], "", ())

    def sync(self, group_id: str, generation: int, member_id: str,
             protocol_type: str | None, protocol_name: str | None,
             group_instance_id: str | None = None) -> SyncResult:
        """A classic member's SyncGroup: its assigned partitions (module docstring)."""
        found = self._member(group_id, member_id, group_instance_id)
        if isinstance(found, ErrorCode):
            return SyncResult(found)
        group, member = found
        assert member.classic is not None
        if generation != member.member_epoch:
            return SyncResult(ErrorCode.illegal_generation)
        first_name, first_metadata = member.classic.protocols[0]
        if (protocol_type is not None and protocol_type != CONSUMER_PROTOCOL_TYPE) or (
                protocol_name is not None and protocol_name != first_name):
            return SyncResult(ErrorCode.inconsistent_group_protocol)
        if group.group_epoch > member.member_epoch \
                and member.state is not MemberState.UNREVOKED_PARTITIONS:
            self._rejoin_within_timeout(group, member)
            return SyncResult(ErrorCode.rebalance_in_progress)
        self._touch(group, member)
        return SyncResult(ErrorCode.none, protocol_type, protocol_name,
                          encode_assignment(member.assigned, version_of(first_metadata)))

    def heartbeat(self, group_id: str, generation: int, member_id: str,
                  group_instance_id: str | None = None) -> ErrorCode:
        """A classic member's Heartbeat: NONE, or REBALANCE_IN_PROGRESS to rejoin."""
        found = self._member(group_id, member_id, group_instance_id)
        if isinstance(found, ErrorCode):
            return found
        group, member = found
        if generation != member.member_epoch:
            return ErrorCode.illegal_generation
        self._touch(group, member)
        if (member.member_epoch < group.group_epoch
                or member.state is MemberState.UNREVOKED_PARTITIONS
                or (member.state is MemberState.UNRELEASED_PARTITIONS
                    and not _waiting_on_unreleased(group, member))):
            self._rejoin_within_timeout(group, member)
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    async def leave(self, group_id: str, members: list[tuple[str, str | None]],
                    ) -> list[ErrorCode]:
        """Remove each classic (member id, group instance id); the error of each."""
        errors: list[ErrorCode] = []
        for member_id, instance_id in members:
            found = self._member(group_id, member_id, instance_id, by_instance_only=True)
            if isinstance(found, ErrorCode):
                # Maybe a retry of a leave whose write failed: the group as it is now
                # (without it) is written before the answer, as a refused heartbeat's.
                live = self._live(group_id)
                written = ErrorCode.none if live is None else await self._image_written(live)
                errors.append(found if written is ErrorCode.none else written)
                continue
            group, member = found
            await self._remove(group, member, "left the group (LeaveGroup)")
            errors.append(await self._image_written(group))
        return errors

    # ------------------------------------------------------------ helpers

    async def _image_written(self, group: ModernGroup) -> ErrorCode:
        """NONE once the group's image is written: ``remove`` wrote it (then this writes
        nothing) or failed, logged (then this writes it again, under the group's lock,
        and a failure answers COORDINATOR_NOT_AVAILABLE: the member leaves again)."""
        async with group.lock:
            return (await self._kept.answer(group, HeartbeatResult(ErrorCode.none))).error

    def _live(self, group_id: str) -> ModernGroup | None:
        group = self._groups.get(group_id)
        return None if group is None or group.dead else group

    def _member(self, group_id: str, member_id: str, instance_id: str | None,
                by_instance_only: bool = False) -> _Found:
        """The classic member a request names (Kafka's ``validateConsumerGroupMember``).

        ``by_instance_only``: a LeaveGroup may name a static member by its
        instance id alone (an empty member id: an administrator's removal).
        """
        group = self._live(group_id)
        if group is None:
            return ErrorCode.unknown_member_id
        if instance_id is None:
            member = group.members.get(member_id)
        else:
            member = group.member_by_instance(instance_id)
            if member is not None and member.member_id != member_id \
                    and (member_id or not by_instance_only):
                return ErrorCode.fenced_instance_id
        if member is None or member.classic is None:
            return ErrorCode.unknown_member_id
        return group, member

    def _rejoin_within_timeout(self, group: ModernGroup, member: ModernMember) -> None:
        """Told to rejoin: it must within its rebalance timeout, or it is removed."""
        if member.revocation is None:
            member.revocation = asyncio.get_running_loop().call_later(
                member.rebalance_timeout_ms / 1000, self._later, group, member,
                "did not rejoin in its rebalance timeout")


def _replace_static(group: ModernGroup, old: ModernMember, member_id: str) -> None:
    """A classic static member back under a new member id takes its old incarnation's
    place: epoch, partitions and target, with no new group epoch (KIP-345, as Kafka's
    ``replaceStaticMember``); the old id is fenced from now on."""
    if group.members.get(old.member_id) is not old:
        return  # removed meanwhile: the new one joins as a new member
    old.cancel_timers()
    del group.members[old.member_id]
    group.members[member_id] = replace(old, member_id=member_id, session=None,
                                       revocation=None)
    if old.member_id in group.target:
        group.target[member_id] = group.target.pop(old.member_id)
    log.info("kafka consumer group %s: static classic member %s is back as %s (was %s)",
             group.group_id, old.instance_id, member_id, old.member_id)


def _supports(group: ModernGroup, protocol_type: str,
              protocols: tuple[tuple[str, bytes], ...]) -> bool:
    """Kafka's ``supportsClassicProtocols``: type ``consumer`` and a protocol every
    classic member of the group supports (any, if there is none yet)."""
    if protocol_type != CONSUMER_PROTOCOL_TYPE or not protocols:
        return False
    common: set[str] | None = None
    for member in group.members.values():
        if member.classic is not None:
            names = {name for name, _ in member.classic.protocols}
            common = names if common is None else common & names
    return common is None or any(name in common for name, _ in protocols)


def _waiting_on_unreleased(group: ModernGroup, member: ModernMember) -> bool:
    """Whether a partition of its target is still held by another member."""
    held = group.holder_epochs(member.member_id)
    target = group.target.get(member.member_id, {})
    return any((topic, number) in held for topic, numbers in target.items()
               for number in numbers - member.assigned.get(topic, set()))
