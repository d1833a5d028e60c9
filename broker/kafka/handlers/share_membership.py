"""ShareGroupHeartbeat (76) v1 and ShareGroupDescribe (77) v1: share groups' members (KIP-932).

Thin: topics come and go by id (the listener's ``TopicIds``); the rules are
``broker.kafka.share_groups.membership``'s. A heartbeat needs ``consume`` on
the group (GROUP_AUTHORIZATION_FAILED) and any permission on each subscribed
topic (TOPIC_AUTHORIZATION_FAILED); a describe any permission on the group.
On a cluster the group's coordinator (FindCoordinator key type 0, as for
consumer groups) serves both; another broker answers NOT_COORDINATOR. A
broker built without share groups answers UNSUPPORTED_VERSION with the reason.
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode

from broker.errors import BrokerError
from broker.kafka.access import GROUP_CONSUME, GROUP_LOOKUP, TOPIC_LOOKUP, allowed
from broker.kafka.context import KafkaContext
from broker.kafka.dispatch import Api, Call
from broker.kafka.handlers.consumer_protocol import assigned_topic_ids
from broker.kafka.handlers.coordination import ZERO, checked_coordinators
from broker.kafka.locator import GROUP_KEY
from broker.kafka.messages import build, nested, response_class
from broker.kafka.share_groups.coordinator import ShareCoordinator
from broker.kafka.share_groups.membership import ShareGroup
from ledger.errors import LedgerError

__all__ = ["NO_SHARE_GROUPS", "ROWS", "SHARE_GROUP_DESCRIBE_KEY",
           "SHARE_GROUP_HEARTBEAT_KEY", "shares_of"]

SHARE_GROUP_HEARTBEAT_KEY = 76
SHARE_GROUP_DESCRIBE_KEY = 77
_NO_OPERATIONS = -(2**31)
NO_SHARE_GROUPS = "share groups are not served by this broker (docs/kafka.md)"


def shares_of(context: KafkaContext) -> ShareCoordinator | None:
    """The broker's share groups, None where they are not served."""
    return None if context.coordinators is None else context.coordinators.shares


async def handle_heartbeat(context: KafkaContext, call: Call) -> Any:
    """Join, heartbeat in, or leave a share group."""
    cls = response_class(SHARE_GROUP_HEARTBEAT_KEY, call.version)
    request = call.request

    def answer(code: ErrorCode, message: str | None = None) -> Any:
        return build(cls, throttle_time=ZERO, error_code=code, error_message=message,
                     member_id=None, member_epoch=-1, heartbeat_interval=ZERO, assignment=None)

    if context.coordinators is not None and context.coordinators.shares is None:
        return answer(ErrorCode.unsupported_version, NO_SHARE_GROUPS)
    code, coordinators = checked_coordinators(context, call, GROUP_CONSUME, GROUP_KEY,
                                              request.group_id)
    if coordinators is None or coordinators.shares is None:
        return answer(code)
    shares = coordinators.shares
    for topic in request.subscribed_topic_names or ():
        if not allowed(context, call, TOPIC_LOOKUP, topic):
            return answer(TOPIC_LOOKUP.refused, f"Not authorized to describe topic {topic}.")
    try:
        await shares.load_group(request.group_id)
    except (BrokerError, LedgerError) as error:
        return answer(ErrorCode.coordinator_load_in_progress, str(error))
    subscribed = request.subscribed_topic_names
    result = await shares.groups.heartbeat(
        request.group_id, request.member_id, request.member_epoch, call.client_id or "",
        call.client_host, request.rack_id, None if subscribed is None else tuple(subscribed))
    if result.error is not ErrorCode.none:
        return answer(result.error, result.message)
    assignment = None
    if result.assignment is not None:
        topic_cls = nested(cls, "TopicPartitions")
        assignment = build(nested(cls, "Assignment"), topic_partitions=tuple(
            build(topic_cls, topic_id=topic_id, partitions=numbers)
            for topic_id, _, numbers in await assigned_topic_ids(context, result.assignment)))
    return build(cls, throttle_time=ZERO, error_code=ErrorCode.none, error_message=None,
                 member_id=result.member_id, member_epoch=result.member_epoch,
                 heartbeat_interval=datetime.timedelta(milliseconds=result.heartbeat_interval_ms),
                 assignment=assignment)


async def handle_describe(context: KafkaContext, call: Call) -> Any:
    """Each group asked: epochs, members with their assignment."""
    cls = response_class(SHARE_GROUP_DESCRIBE_KEY, call.version)
    group_cls = nested(cls, "DescribedGroup")
    described = []
    for group_id in call.request.group_ids:
        code, coordinators = checked_coordinators(context, call, GROUP_LOOKUP, GROUP_KEY,
                                                  group_id)
        group = None
        message = None
        if coordinators is not None:
            code = ErrorCode.group_id_not_found
            message = f"Group {group_id} not found."
            if coordinators.shares is None:
                code, message = ErrorCode.unsupported_version, NO_SHARE_GROUPS
            else:
                group = coordinators.shares.groups.group(group_id)
        if group is None:
            described.append(build(group_cls, error_code=code, error_message=message,
                                   group_id=group_id, group_state="", group_epoch=-1,
                                   assignment_epoch=-1, assignor_name="", members=(),
                                   authorized_operations=_NO_OPERATIONS))
            continue
        described.append(await _described(context, cls, group))
    return build(cls, throttle_time=ZERO, groups=tuple(described))


async def _described(context: KafkaContext, cls: Any, group: ShareGroup) -> Any:
    member_cls = nested(cls, "Member")
    topic_cls = nested(cls, "TopicPartitions")
    members = []
    for member in group.members.values():
        assignment = build(nested(cls, "Assignment"), topic_partitions=tuple(
            build(topic_cls, topic_id=topic_id, topic_name=name, partitions=numbers)
            for topic_id, name, numbers in await assigned_topic_ids(context, member.assigned)))
        members.append(build(
            member_cls, member_id=member.member_id, rack_id=member.rack_id,
            member_epoch=member.member_epoch, client_id=member.client_id,
            client_host=member.client_host, subscribed_topic_names=tuple(sorted(member.topics)),
            assignment=assignment))
    return build(nested(cls, "DescribedGroup"), error_code=ErrorCode.none, error_message=None,
                 group_id=group.group_id, group_state=group.state,
                 group_epoch=group.group_epoch, assignment_epoch=group.assignment_epoch,
                 assignor_name="simple", members=tuple(members),
                 authorized_operations=_NO_OPERATIONS)


ROWS = (
    Api(SHARE_GROUP_HEARTBEAT_KEY, "ShareGroupHeartbeat", 1, 1, handle_heartbeat),
    Api(SHARE_GROUP_DESCRIBE_KEY, "ShareGroupDescribe", 1, 1, handle_describe),
)
