"""A consumer-protocol group's members kept over a restart or failover (KIP-848).

Kafka keeps a consumer group as records in ``__consumer_offsets``: the group
metadata (its epoch), each member's metadata (subscription, assignor,
client), the target assignment and each member's current assignment (its
epoch, what it holds, what it must revoke). Folio keeps the same things in one
image per group (key ``s/<group>`` in ``_kafka_offsets``,
``offsets.OffsetStore.write_state``): the group and assignment epochs, the
assignor, the partition counts the target was computed from, the target, and
every member with its epochs, reconciliation state, assigned partitions and
partitions pending revocation. Once the group has no member a tombstone
replaces it (the group record ``g/<group>`` keeps the epoch).

``KeptModernGroups`` writes the image after a heartbeat has changed the group
and **before the heartbeat is answered** (``ModernGroups.heartbeat``), and
after a removal by a timer; an image equal to the last one written is not
written again. A broker that loads the group (at start, or a cluster broker
claiming its container) gets every member back at its epoch with its
partitions: its heartbeats with that epoch go on, its commits of that epoch
are accepted, its session timer starts again from the load.

Crash windows:

- Written, then the broker dies before the answer: the member never heard of
  its new epoch; its next heartbeat (at the new coordinator) carries the
  previous epoch and the partitions it still owns, which the coordinator takes
  as a lost answer (``modern._find_member``: the previous epoch, nothing it no
  longer owns) and answers with the current epoch and assignment.
- The write fails: the heartbeat is answered COORDINATOR_NOT_AVAILABLE (the
  member looks the coordinator up again and sends its heartbeat again, at its
  old epoch: the lost-answer case above), and the next heartbeat of the group
  writes the image again, whatever it holds. The failed write's outcome is
  unknown: if it landed and the broker dies, the loaded members are at epochs
  they never heard of, which is the first window again; if not, they are at
  the epochs they know.
- A bump's group record (``g/<group>``, written before the bump is applied)
  may be newer than the image (the image's write failed or the broker died
  between the two): the loaded group takes the record's epoch and computes a
  new target for it (``ModernGroups``), so epochs never go back.
- Session timers are not kept: each member's session restarts at the load, so
  a member that died with the broker is removed one session timeout later.

**Mixed groups** (``mixed``: classic members inside a consumer group). A
classic member's image carries what it joined with (``ModernMember.classic``:
its session timeout and protocols, their metadata in base64), so it comes back
as a classic member (its Heartbeat and SyncGroup served, its own session
timeout); an image with one is of version 2, which an earlier build refuses
(members not kept, logged) rather than load it as a KIP-848 member. Its
JoinGroup is a heartbeat (``mixed.ClassicMembers.join``), so it is answered
once the image is written, and COORDINATOR_NOT_AVAILABLE if that fails; its
LeaveGroup likewise; a removal by its session or rebalance timer writes the
image as any removal does. SyncGroup and Heartbeat only restart timers, which
are not kept.

**A group's kind** is its group record's (``ConsumerGroupRecord.group_protocol``):
the image (one key, ``s/<group>``, for both kinds) is used only if it is of
that kind. Every write that changes the kind writes the record and the image
together (``OffsetStore.write_state``, one append), so a group comes back as
the kind last written, never as both:

- **upgrade** (a classic group converted, ``mixed.ClassicMembers.upgrade``):
  the joining heartbeat's bump writes the consumer record, then its answer
  writes the image (with the consumer record too if the bump's write failed:
  ``keep`` writes the record with the image while the stored one is not a
  consumer record). A crash before that write: the store has the classic
  group, or the bump's consumer record with the classic image, which loads
  as a consumer group without members (its classic members get
  UNKNOWN_MEMBER_ID and join again, a classic group again); the joining
  member's heartbeat was not answered, it sends it again. The classic
  coordinator's own writes for the group (a generation's record, queued
  before the upgrade) come first on the same keyed log, so they never land
  after it.
- **downgrade** (``mixed.ClassicMembers.downgrade``, ``downgraded``): the
  classic group it becomes (Stable at the group epoch, each member with its
  protocols and current partitions: ``migration.to_classic``) is written as
  the classic coordinator writes a generation (``_classic_state``: its record
  and its image, one append) before the leaving member's heartbeat is
  answered (a timer's removal: logged); the failed write answers
  COORDINATOR_NOT_AVAILABLE. The classic coordinator has the group from the
  downgrade on (its members are told to rejoin there): if the write failed
  and the broker dies before the classic group's next generation is written
  (its record and image, which supersede), the store still has the consumer
  group with every member, the leaving one too, and the downgrade happens
  again when its session ends. The classic coordinator's next write follows
  this one on the same keyed log (it needs the members to rejoin first).
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Mapping
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from broker.errors import BrokerError, WrongHostError
from broker.kafka.consumer_groups._classic_state import classic_image
from broker.kafka.consumer_groups.assignors import DEFAULT_ASSIGNOR
from broker.kafka.consumer_groups.members import Group
from broker.kafka.consumer_groups.modern_members import (
    ClassicMetadata,
    MemberState,
    ModernGroup,
    ModernMember,
    Partitions,
)
from broker.kafka.consumer_groups.modern_requests import HeartbeatResult, refused
from broker.kafka.consumer_groups.offsets import ConsumerGroupRecord
from ledger.errors import LedgerError
from ledger.records import dump_record, load_record

__all__ = ["GroupStates", "KeptModernGroups", "modern_image", "restore_modern"]

log = logging.getLogger(__name__)

_VERSION = 1
#: An image with a classic member (``ModernMember.classic``): earlier builds refuse it.
_MIXED_VERSION = 2
_KIND = "consumer"


class GroupStates(Protocol):
    """Where the images are kept (``offsets.OffsetStore``)."""

    def group_state(self, group_id: str) -> bytes | None: ...

    def group_record(self, group_id: str) -> ConsumerGroupRecord | None: ...

    async def write_state(self, group_id: str, state: bytes | None,
                          record: ConsumerGroupRecord | None = None) -> None: ...


def _partitions(partitions: Partitions) -> dict[str, list[int]]:
    return {topic: sorted(numbers) for topic, numbers in sorted(partitions.items()) if numbers}


def _read_partitions(data: Mapping[str, Any]) -> Partitions:
    return {str(topic): {int(n) for n in numbers} for topic, numbers in data.items()}


def _member_fields(m: ModernMember) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "member_id": m.member_id, "client_id": m.client_id, "client_host": m.client_host,
        "instance_id": m.instance_id, "rack_id": m.rack_id,
        "rebalance_timeout_ms": m.rebalance_timeout_ms,
        "subscribed": sorted(m.subscribed), "topic_names": sorted(m.topic_names),
        "regex": m.regex, "server_assignor": m.server_assignor,
        "member_epoch": m.member_epoch, "previous_member_epoch": m.previous_member_epoch,
        "state": m.state.value, "assigned": _partitions(m.assigned),
        "pending_revocation": _partitions(m.pending_revocation)}
    if m.classic is not None:  # a classic member inside the group (``mixed``)
        fields["classic"] = {
            "session_timeout_ms": m.classic.session_timeout_ms,
            "protocols": [[name, base64.b64encode(metadata).decode()]
                          for name, metadata in m.classic.protocols]}
    return fields


def _classic(data: Mapping[str, Any] | None) -> ClassicMetadata | None:
    """A classic member's JoinGroup, as ``_member_fields`` wrote it (None: a KIP-848 member)."""
    if data is None:
        return None
    return ClassicMetadata(int(data["session_timeout_ms"]), tuple(
        (str(name), base64.b64decode(metadata, validate=True))
        for name, metadata in data["protocols"]))


def modern_image(group: ModernGroup) -> bytes | None:
    """The image of ``group`` and its members; None if it has no member."""
    if not group.members:
        return None
    mixed = any(m.classic is not None for m in group.members.values())
    return dump_record(_MIXED_VERSION if mixed else _VERSION, {
        "kind": _KIND, "group_epoch": group.group_epoch,
        "assignment_epoch": group.assignment_epoch, "assignor": group.assignor,
        "partition_counts": dict(sorted(group.partition_counts.items())),
        "target": {member_id: _partitions(partitions)
                   for member_id, partitions in sorted(group.target.items())},
        "members": [_member_fields(group.members[m]) for m in sorted(group.members)]})


def _optional(value: Any) -> str | None:
    return None if value is None else str(value)


def _member(data: Mapping[str, Any]) -> ModernMember:
    return ModernMember(
        str(data["member_id"]), client_id=str(data["client_id"]),
        client_host=str(data["client_host"]), instance_id=_optional(data.get("instance_id")),
        rack_id=_optional(data.get("rack_id")),
        rebalance_timeout_ms=int(data["rebalance_timeout_ms"]),
        subscribed=frozenset(str(t) for t in data["subscribed"]),
        topic_names=frozenset(str(t) for t in data["topic_names"]),
        regex=_optional(data.get("regex")),
        server_assignor=_optional(data.get("server_assignor")),
        member_epoch=int(data["member_epoch"]),
        previous_member_epoch=int(data["previous_member_epoch"]),
        state=MemberState(data["state"]), assigned=_read_partitions(data["assigned"]),
        pending_revocation=_read_partitions(data["pending_revocation"]),
        classic=_classic(data.get("classic")))


def restore_modern(group_id: str, record: ConsumerGroupRecord,
                   image: bytes) -> ModernGroup | None:
    """The group with its members from ``image``; None (members not kept, logged) for
    another kind's image or one that does not decode.

    The group epoch is the greater of the image's and the record's; the caller
    computes a new target when the record's is greater (module docstring).
    """
    try:
        data = load_record(image, "consumer group state", (_VERSION, _MIXED_VERSION))
        if data.get("kind") != _KIND:
            return None
        members = [_member(m) for m in data["members"]]
        group = ModernGroup(
            group_id, group_epoch=max(int(data["group_epoch"]), record.generation),
            assignment_epoch=int(data["assignment_epoch"]), assignor=str(data["assignor"]),
            partition_counts={str(t): int(n) for t, n in data["partition_counts"].items()},
            target={str(m): _read_partitions(p) for m, p in data["target"].items()},
            members={m.member_id: m for m in members})
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        log.error("kafka consumer group %s: state unreadable (%s: %s); members not kept",
                  group_id, type(error).__name__, error)
        return None
    log.info("kafka consumer group %s: %d members kept at epoch %d", group_id,
             len(members), group.group_epoch)
    return group


class KeptModernGroups:
    """Writes each group's image when it changed; reads it back at a load.

    Args:
        states: where the images are kept; None: nowhere (members are not kept:
            after a restart their heartbeats answer UNKNOWN_MEMBER_ID).
    """

    def __init__(self, states: GroupStates | None) -> None:
        self._states = states
        #: The image last written (or loaded) per group; absent: unknown, write.
        self._written: dict[str, bytes | None] = {}
        #: Groups downgraded and not yet written as classic (``downgraded``):
        #: group id -> (the consumer group that was, the classic image, its record).
        self._downgrades: dict[str, tuple[ModernGroup, bytes | None, ConsumerGroupRecord]] = {}

    def restore(self, group_id: str, record: ConsumerGroupRecord) -> ModernGroup | None:
        """The group as its stored image has it, None if it has none (or not readable)."""
        image = None if self._states is None else self._states.group_state(group_id)
        group = None if image is None else restore_modern(group_id, record, image)
        if group is not None:
            self._written[group_id] = image
        return group

    def downgraded(self, group: ModernGroup, classic: Group) -> None:
        """``group`` became ``classic`` (``mixed``, before the classic coordinator takes
        it): the next ``keep`` of ``group`` writes the classic group, its record and
        its image as they are now (module docstring), instead of ``group``'s image."""
        self._written.pop(group.group_id, None)
        self._downgrades[group.group_id] = (group, classic_image(classic), ConsumerGroupRecord(
            classic.generation, classic.protocol_type, classic.protocol_name))

    async def keep(self, group: ModernGroup) -> None:
        """Write the group's image if it differs from the last one written, with a
        consumer record if the stored record is not one (an upgrade: the kind
        changes in one append); or the classic group it was downgraded to.

        Raises what the store raises (``WrongHostError``: another broker has
        the group now); the next call writes again (the outcome is unknown).
        """
        downgrade = self._downgrades.get(group.group_id)
        if downgrade is not None and downgrade[0] is group:
            del self._downgrades[group.group_id]  # the classic coordinator's from now on
            if self._states is not None:
                await self._states.write_state(group.group_id, downgrade[1], downgrade[2])
            return
        if self._states is None:
            return
        image = modern_image(group)
        stored = self._states.group_record(group.group_id)
        record = None
        if (stored is not None and not stored.modern) or (stored is None and image is not None):
            record = ConsumerGroupRecord(group.group_epoch, "consumer",
                                         group.assignor or DEFAULT_ASSIGNOR, "consumer")
        elif group.group_id in self._written and self._written[group.group_id] == image:
            return
        self._written.pop(group.group_id, None)
        await self._states.write_state(group.group_id, image, record)
        self._written[group.group_id] = image

    async def answer(self, group: ModernGroup, result: HeartbeatResult) -> HeartbeatResult:
        """``result``, once the group's image is written (``keep``); a failed write
        answers NOT_COORDINATOR (the group moved) or COORDINATOR_NOT_AVAILABLE (the
        member sends its heartbeat again: the module docstring's crash windows)."""
        try:
            await self.keep(group)
        except WrongHostError:
            return refused(ErrorCode.not_coordinator,
                           f"Group {group.group_id} is coordinated by another broker now.")
        except (BrokerError, LedgerError) as error:
            log.warning("kafka consumer group %s: state not written (%s); the member "
                        "retries", group.group_id, error)
            return refused(ErrorCode.coordinator_not_available,
                           f"The state of group {group.group_id} could not be written.")
        return result

    def forget(self, group_id: str) -> None:
        """The group is no longer coordinated here (or deleted): nothing is known written."""
        self._written.pop(group_id, None)
        self._downgrades.pop(group_id, None)
