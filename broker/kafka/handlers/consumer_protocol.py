"""ConsumerGroupHeartbeat (68) v0-v1 and ConsumerGroupDescribe (69) v0-v1: KIP-848 groups.

Thin: the heartbeat's topics come by id; they are named here (the
listener's ``TopicIds``, as Fetch v13+ does) and the rules are the consumer
protocol's coordinator's (``broker.kafka.consumer_groups.modern``). An owned
partition of a topic id no topic has any more is left out; an assignment's
topic that is gone meanwhile too (the next heartbeat brings the new target).
The heartbeat needs ``consume`` on the group and any permission on each
subscribed topic (TOPIC_AUTHORIZATION_FAILED, as Kafka's DESCRIBE check); a
regex subscription matches only the topics the member has any permission on;
a describe any permission on the group (a group without: GROUP_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from kio.schema.errors import ErrorCode

from broker.errors import BrokerError
from broker.kafka.access import GROUP_CONSUME, GROUP_LOOKUP, TOPIC_LOOKUP, allowed
from broker.kafka.consumer_groups.modern import HeartbeatRequest
from broker.kafka.consumer_groups.modern_members import ModernGroup, Partitions
from broker.kafka.context import KafkaContext
from broker.kafka.dispatch import Api, Call
from broker.kafka.handlers.coordination import ZERO, checked_coordinators
from broker.kafka.locator import GROUP_KEY
from broker.kafka.messages import build, nested, response_class
from ledger.errors import LedgerError

__all__ = ["CONSUMER_GROUP_DESCRIBE_KEY", "CONSUMER_GROUP_HEARTBEAT_KEY", "ROWS"]

CONSUMER_GROUP_HEARTBEAT_KEY = 68
CONSUMER_GROUP_DESCRIBE_KEY = 69
#: Kafka's "authorized operations not asked for".
_NO_OPERATIONS = -(2**31)
#: ConsumerGroupDescribe v1's member types: a classic member (inside a consumer group,
#: ``broker.kafka.consumer_groups.mixed``), a consumer-protocol member.
_CLASSIC_MEMBER, _CONSUMER_MEMBER = 0, 1


def _ms(value: Any) -> int:
    """A kio timedelta field in whole milliseconds (-1 stays -1)."""
    return int(value.total_seconds() * 1000)


async def _names(context: KafkaContext, topic_partitions: Any) -> Partitions | None:
    """Owned partitions by topic name (None stays None: not reported)."""
    if topic_partitions is None:
        return None
    owned: Partitions = {}
    for entry in topic_partitions:
        if entry.topic_id is None:
            continue
        try:
            name = await context.topic_ids.name_of(context.topics, entry.topic_id)
        except (BrokerError, LedgerError):
            name = None
        if name is not None:
            owned.setdefault(name, set()).update(entry.partitions)
    return owned


async def assigned_topic_ids(context: KafkaContext, partitions: Mapping[str, Iterable[int]],
                             ) -> list[tuple[uuid.UUID, str, tuple[int, ...]]]:
    """(topic id, name, partitions) of each topic that still has an id (the assignment a
    KIP-848 or a share group's heartbeat answers, by topic id)."""
    found = []
    for name in sorted(partitions):
        try:
            topic_id = uuid.UUID(await context.topics.topic_id(name))
        except (BrokerError, LedgerError, ValueError):
            continue  # deleted meanwhile: the next assignment leaves it out
        context.topic_ids.note(name, topic_id)
        found.append((topic_id, name, tuple(sorted(partitions[name]))))
    return found


async def handle_heartbeat(context: KafkaContext, call: Call) -> Any:
    """Join, heartbeat in, or leave a consumer-protocol group."""
    cls = response_class(CONSUMER_GROUP_HEARTBEAT_KEY, call.version)
    request = call.request

    def answer(code: ErrorCode, message: str | None = None) -> Any:
        return build(cls, throttle_time=ZERO, error_code=code, error_message=message,
                     member_id=None, member_epoch=-1, heartbeat_interval=ZERO, assignment=None)

    code, coordinators = checked_coordinators(context, call, GROUP_CONSUME, GROUP_KEY,
                                              request.group_id)
    if coordinators is None or coordinators.consumers is None:
        return answer(code if coordinators is None else ErrorCode.coordinator_not_available)
    subscribed = request.subscribed_topic_names
    for topic in subscribed or ():
        if not allowed(context, call, TOPIC_LOOKUP, topic):
            return answer(TOPIC_LOOKUP.refused, f"Not authorized to describe topic {topic}.")
    rebalance = _ms(request.rebalance_timeout)
    result = await coordinators.consumers.heartbeat(HeartbeatRequest(
        group_id=request.group_id, member_id=request.member_id,
        member_epoch=request.member_epoch, client_id=call.client_id or "",
        client_host=call.client_host, instance_id=request.instance_id,
        rack_id=request.rack_id, rebalance_timeout_ms=rebalance,
        subscribed=None if subscribed is None else tuple(subscribed),
        regex=getattr(request, "subscribed_topic_regex", None),
        topic_allowed=lambda topic: allowed(context, call, TOPIC_LOOKUP, topic),
        server_assignor=request.server_assignor,
        owned=await _names(context, request.topic_partitions), version=call.version))
    if result.error is not ErrorCode.none:
        return answer(result.error, result.message)
    assignment = None
    if result.assignment is not None:
        topic_cls = nested(cls, "TopicPartitions")
        assignment = build(nested(cls, "Assignment"), topic_partitions=tuple(
            build(topic_cls, topic_id=topic_id, partitions=partitions)
            for topic_id, _, partitions in await assigned_topic_ids(context, result.assignment)))
    return build(cls, throttle_time=ZERO, error_code=ErrorCode.none, error_message=None,
                 member_id=result.member_id, member_epoch=result.member_epoch,
                 heartbeat_interval=datetime.timedelta(milliseconds=result.heartbeat_interval_ms),
                 assignment=assignment)


async def handle_describe(context: KafkaContext, call: Call) -> Any:
    """Each group asked: epochs, assignor, members with their assignment and target."""
    cls = response_class(CONSUMER_GROUP_DESCRIBE_KEY, call.version)
    group_cls = nested(cls, "DescribedGroup")
    described = []
    for group_id in call.request.group_ids:
        code, coordinators = checked_coordinators(context, call, GROUP_LOOKUP, GROUP_KEY,
                                                  group_id)
        group = None
        if coordinators is not None:
            code = ErrorCode.group_id_not_found
            if coordinators.consumers is not None:
                group = coordinators.consumers.group(group_id)
        if group is None:
            described.append(build(group_cls, error_code=code, error_message=None,
                                   group_id=group_id, group_state="", group_epoch=-1,
                                   assignment_epoch=-1, assignor_name="", members=(),
                                   authorized_operations=_NO_OPERATIONS))
            continue
        described.append(await _described(context, cls, group))
    return build(cls, throttle_time=ZERO, groups=tuple(described))


async def _described(context: KafkaContext, cls: Any, group: ModernGroup) -> Any:
    member_cls = nested(cls, "Member")
    assignment_cls = nested(cls, "Assignment")
    topic_cls = nested(cls, "TopicPartitions")

    async def assignment(partitions: Partitions) -> Any:
        return build(assignment_cls, topic_partitions=tuple(
            build(topic_cls, topic_id=topic_id, topic_name=name, partitions=numbers)
            for topic_id, name, numbers in await assigned_topic_ids(context, partitions)))

    members = []
    for member in group.members.values():
        members.append(build(
            member_cls, member_id=member.member_id, instance_id=member.instance_id,
            rack_id=member.rack_id, member_epoch=member.member_epoch,
            client_id=member.client_id, client_host=member.client_host,
            subscribed_topic_names=tuple(sorted(member.topic_names)),
            subscribed_topic_regex=member.regex, assignment=await assignment(member.assigned),
            target_assignment=await assignment(group.target.get(member.member_id, {})),
            member_type=_CONSUMER_MEMBER if member.classic is None else _CLASSIC_MEMBER))
    return build(nested(cls, "DescribedGroup"), error_code=ErrorCode.none, error_message=None,
                 group_id=group.group_id, group_state=group.state.value,
                 group_epoch=group.group_epoch, assignment_epoch=group.assignment_epoch,
                 assignor_name=group.assignor or "uniform", members=tuple(members),
                 authorized_operations=_NO_OPERATIONS)


ROWS = (
    Api(CONSUMER_GROUP_HEARTBEAT_KEY, "ConsumerGroupHeartbeat", 0, 1, handle_heartbeat),
    Api(CONSUMER_GROUP_DESCRIBE_KEY, "ConsumerGroupDescribe", 0, 1, handle_describe),
)
