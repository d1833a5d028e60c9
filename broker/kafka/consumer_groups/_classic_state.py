"""A classic group's members kept over a restart or failover: their image and its reading.

Kafka's ``GroupMetadata`` record, in Folio's store: the image (key
``s/<group>`` in ``_kafka_offsets``, ``offsets.OffsetStore.write_state``) holds
the generation, the protocol, the leader and every member (ids, client,
timeouts, protocols with their metadata, its assignment). It is written with
the group record (``g/<group>``), in one append, when the leader's SyncGroup
brings a generation's assignment (``_rebalance.Rebalancer._assign``), and a
tombstone replaces it when the group empties (the empty generation's record).
A broker that loads the group (at start, or a cluster broker claiming its
container) gets it back Stable at that generation with those members and
assignments: their heartbeats and commits of that generation are accepted, and
each member's session timer starts again from the load (as in Kafka).

Crash windows:

- The image is durable before any SyncGroup of the generation is answered, so
  a member that holds an assignment holds one the store has: after a crash it
  heartbeats and commits on as before.
- A crash after the write but before the answers: the members did not get
  their assignments; they send SyncGroup again (answered from the loaded,
  Stable group with the assignment the leader sent) or JoinGroup (a rebalance,
  as their ids are known).
- A write that failed may have landed (unknown outcome): the syncs were
  answered COORDINATOR_NOT_AVAILABLE and the group rebalances; if the broker
  dies before the next generation is written, the loaded group is the one of
  the failed write, whose assignments no member holds: the members rejoin (a
  JoinGroup starts a rebalance), and one that syncs again gets the assignment
  the leader made, which is as good.
- A rebalance under way is not kept (nor in Kafka): the loaded group is the
  last written generation; members of a newer one get ILLEGAL_GENERATION or
  UNKNOWN_MEMBER_ID and rejoin. A generation number given in a JoinGroup
  answer and lost with the crash may be given again, but only with its own
  SyncGroup, so no member holds an assignment of a generation the store does
  not have.
- The image and the record are two records of one append; if only one of them
  landed, the image is used only when its generation is the record's, so a
  stale image (of an earlier generation) never comes back.
"""

from __future__ import annotations

import base64
import logging
from typing import Any

from broker.kafka.consumer_groups.members import Group, Member
from broker.kafka.consumer_groups.states import ConsumerGroupState
from ledger.records import dump_record, load_record

__all__ = ["classic_image", "restore_classic"]

log = logging.getLogger(__name__)

_VERSION = 1
_KIND = "classic"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def classic_image(group: Group) -> bytes | None:
    """The image of ``group``'s members and their assignments; None if it has no member."""
    if not group.members:
        return None
    members = [{"member_id": m.member_id, "instance_id": m.group_instance_id,
                "client_id": m.client_id, "client_host": m.client_host,
                "session_timeout_ms": m.session_timeout_ms,
                "rebalance_timeout_ms": m.rebalance_timeout_ms,
                "protocols": [[name, _b64(metadata)] for name, metadata in m.protocols],
                "assignment": _b64(m.assignment)}
               for m in group.members.values()]
    return dump_record(_VERSION, {"kind": _KIND, "generation": group.generation,
                                  "protocol_type": group.protocol_type,
                                  "protocol_name": group.protocol_name,
                                  "leader": group.leader, "members": members})


def _member(data: dict[str, Any]) -> Member:
    instance = data.get("instance_id")
    return Member(str(data["member_id"]), str(data["client_id"]), str(data["client_host"]),
                  int(data["session_timeout_ms"]), int(data["rebalance_timeout_ms"]),
                  tuple((str(name), base64.b64decode(metadata))
                        for name, metadata in data["protocols"]),
                  None if instance is None else str(instance),
                  base64.b64decode(data["assignment"]))


def restore_classic(group: Group, image: bytes) -> bool:
    """Give ``group`` (loaded Empty at its record's generation) the image's members.

    Only an image of the record's generation counts (module docstring); the
    group is then Stable. False (the group stays Empty) for another kind's
    image, another generation, or an image that does not decode (logged).
    """
    try:
        data = load_record(image, "classic group state", (_VERSION,))
        if data.get("kind") != _KIND:
            return False
        if int(data["generation"]) != group.generation:
            log.info("kafka group %s: state of generation %s, record of %d: members not "
                     "kept", group.group_id, data["generation"], group.generation)
            return False
        members = [_member(m) for m in data["members"]]
    except (ValueError, KeyError, TypeError) as error:
        log.error("kafka group %s: state unreadable (%s: %s); members not kept",
                  group.group_id, type(error).__name__, error)
        return False
    if not members:
        return False
    group.members = {m.member_id: m for m in members}
    group.protocol_type = data.get("protocol_type")
    group.protocol_name = data.get("protocol_name")
    leader = data.get("leader")
    group.leader = leader if leader in group.members else next(iter(group.members))
    group.state = ConsumerGroupState.STABLE
    log.info("kafka group %s: %d members kept at generation %d", group.group_id,
             len(members), group.generation)
    return True
