"""JoinGroup (11) v0-v9, SyncGroup (14) v0-v5, Heartbeat (12) v0-v4, LeaveGroup (13) v0-v5.

Thin: each request is read whatever its version and handed to the group
coordinator (``broker.kafka.consumer_groups.membership``), whose answer is encoded
back. JoinGroup v4+ without a member id is answered MEMBER_ID_REQUIRED with
the id to join with (KIP-394); v0's session timeout is also its rebalance
timeout; v9+ may tell a static leader back without a rebalance to skip the
assignment (KIP-814). LeaveGroup v3+ removes several members (KIP-345). A consumer-protocol
group's classic members (Kafka 4.0's online upgrade) are served by its
``classic_members`` part (``broker.kafka.consumer_groups.mixed``).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.kafka.access import GROUP_CONSUME
from broker.kafka.consumer_groups.membership import JoinRequest
from broker.kafka.consumer_groups.mixed import ClassicMembers
from broker.kafka.context import KafkaContext
from broker.kafka.coordinators import KafkaCoordinators
from broker.kafka.dispatch import Api, Call
from broker.kafka.handlers.coordination import ZERO, checked_coordinators
from broker.kafka.locator import GROUP_KEY
from broker.kafka.messages import build, nested, response_class

__all__ = ["HEARTBEAT_KEY", "JOIN_GROUP_KEY", "LEAVE_GROUP_KEY", "ROWS", "SYNC_GROUP_KEY"]

JOIN_GROUP_KEY = 11
HEARTBEAT_KEY = 12
LEAVE_GROUP_KEY = 13
SYNC_GROUP_KEY = 14


def _mixed(coordinators: KafkaCoordinators | None, group_id: str) -> ClassicMembers | None:
    """The classic members' part if ``group_id`` is a consumer-protocol group (Kafka's
    coordinator serves classic members inside it), None otherwise."""
    consumers = None if coordinators is None else coordinators.consumers
    if consumers is None or consumers.group(group_id) is None:
        return None
    return consumers.classic_members


def _ms(value: Any) -> int:
    """A kio timedelta field in whole milliseconds."""
    return int(value.total_seconds() * 1000)


async def handle_join_group(context: KafkaContext, call: Call) -> Any:
    """Join (or rejoin) a group; answered once the rebalance completes."""
    cls = response_class(JOIN_GROUP_KEY, call.version)
    request = call.request
    code, coordinators = checked_coordinators(context, call, GROUP_CONSUME, GROUP_KEY,
                                             request.group_id)
    if coordinators is None:
        # protocol_name is not nullable before v7 (an answer with None failed
        # to encode and closed the connection while the coordinator moved).
        return build(cls, throttle_time=ZERO, error_code=code, generation_id=-1,
                     protocol_type=None, protocol_name=None if call.version >= 7 else "",
                     leader="", skip_assignment=False, member_id=request.member_id,
                     members=())
    consumers = coordinators.consumers
    session_ms = _ms(request.session_timeout)
    rebalance = getattr(request, "rebalance_timeout", None)
    joining = JoinRequest(
        group_id=request.group_id, member_id=request.member_id,
        client_id=call.client_id or "", client_host=call.client_host,
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=_ms(rebalance) if rebalance is not None else session_ms,
        protocol_type=request.protocol_type,
        protocols=tuple((p.name, p.metadata) for p in request.protocols),
        group_instance_id=getattr(request, "group_instance_id", None),
        require_known_member=call.version >= 4,
        skip_assignment_supported=call.version >= 9)
    if consumers is not None and consumers.in_use(request.group_id):
        # A consumer-protocol group with members (KIP-848): a classic member
        # inside it (``broker.kafka.consumer_groups.mixed``).
        result = await consumers.classic_members.join(joining)
    else:
        if consumers is not None:
            consumers.forget_empty(request.group_id)  # an empty one becomes classic again
        result = await coordinators.groups.join(joining)
    member_cls = nested(cls, "JoinGroupResponseMember")
    members = tuple(build(member_cls, member_id=member_id, group_instance_id=instance_id,
                          metadata=metadata)
                    for member_id, instance_id, metadata in result.members)
    protocol_name = result.protocol_name
    if protocol_name is None and call.version < 7:
        protocol_name = ""  # not nullable before v7
    return build(cls, throttle_time=ZERO, error_code=result.error,
                 generation_id=result.generation, protocol_type=result.protocol_type,
                 protocol_name=protocol_name, leader=result.leader,
                 skip_assignment=result.skip_assignment, member_id=result.member_id,
                 members=members)


async def handle_sync_group(context: KafkaContext, call: Call) -> Any:
    """The member's assignment of this generation (the leader's request brings them all)."""
    cls = response_class(SYNC_GROUP_KEY, call.version)
    request = call.request
    code, coordinators = checked_coordinators(context, call, GROUP_CONSUME, GROUP_KEY,
                                             request.group_id)
    if coordinators is None:
        return build(cls, throttle_time=ZERO, error_code=code, protocol_type=None,
                     protocol_name=None, assignment=b"")
    assignments = {a.member_id: a.assignment for a in request.assignments}
    mixed = _mixed(coordinators, request.group_id)
    protocol_type = getattr(request, "protocol_type", None)
    protocol_name = getattr(request, "protocol_name", None)
    instance_id = getattr(request, "group_instance_id", None)
    if mixed is not None:  # the broker assigned: the assignments sent are not read
        result = mixed.sync(request.group_id, request.generation_id, request.member_id,
                            protocol_type, protocol_name, instance_id)
    else:
        result = await coordinators.groups.sync(
            request.group_id, request.generation_id, request.member_id, protocol_type,
            protocol_name, assignments, instance_id)
    return build(cls, throttle_time=ZERO, error_code=result.error,
                 protocol_type=result.protocol_type, protocol_name=result.protocol_name,
                 assignment=result.assignment)


async def handle_heartbeat(context: KafkaContext, call: Call) -> Any:
    """NONE, or what the member must do (rejoin, ...)."""
    cls = response_class(HEARTBEAT_KEY, call.version)
    request = call.request
    code, coordinators = checked_coordinators(context, call, GROUP_CONSUME, GROUP_KEY,
                                             request.group_id)
    mixed = _mixed(coordinators, request.group_id)
    if mixed is not None:
        code = mixed.heartbeat(
            request.group_id, request.generation_id, request.member_id,
            getattr(request, "group_instance_id", None))
    elif coordinators is not None:
        code = coordinators.groups.heartbeat(request.group_id, request.generation_id,
                                             request.member_id,
                                             getattr(request, "group_instance_id", None))
    return build(cls, throttle_time=ZERO, error_code=code)


async def handle_leave_group(context: KafkaContext, call: Call) -> Any:
    """Remove the member (v0-v2) or members (v3+); the others rebalance."""
    cls = response_class(LEAVE_GROUP_KEY, call.version)
    request = call.request
    if call.version >= 3:
        leaving = [(m.member_id, m.group_instance_id) for m in request.members]
    else:
        leaving = [(request.member_id, None)]
    code, coordinators = checked_coordinators(context, call, GROUP_CONSUME, GROUP_KEY,
                                             request.group_id)
    if coordinators is None:
        errors = [code] * len(leaving)
    elif (mixed := _mixed(coordinators, request.group_id)) is not None:
        errors = await mixed.leave(request.group_id, leaving)
        code = ErrorCode.none if call.version >= 3 else errors[0]
    else:
        errors = coordinators.groups.leave(request.group_id, leaving)
        code = ErrorCode.none if call.version >= 3 else errors[0]
    if call.version < 3:
        return build(cls, throttle_time=ZERO, error_code=code)
    member_cls = nested(cls, "MemberResponse")
    members = tuple(build(member_cls, member_id=member_id, group_instance_id=instance_id,
                          error_code=error)
                    for (member_id, instance_id), error in zip(leaving, errors, strict=True))
    return build(cls, throttle_time=ZERO, error_code=code, members=members)


ROWS = (
    Api(JOIN_GROUP_KEY, "JoinGroup", 0, 9, handle_join_group),
    Api(HEARTBEAT_KEY, "Heartbeat", 0, 4, handle_heartbeat),
    Api(LEAVE_GROUP_KEY, "LeaveGroup", 0, 5, handle_leave_group),
    Api(SYNC_GROUP_KEY, "SyncGroup", 0, 5, handle_sync_group),
)
