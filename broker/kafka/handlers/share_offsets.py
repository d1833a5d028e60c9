"""DescribeShareGroupOffsets (90) v0-v1, AlterShareGroupOffsets (91) v0, DeleteShareGroupOffsets
(92) v0: a share group's start offsets (KIP-932's admin calls, ``kafka-share-groups.sh``).

A share partition's "offset" is its start offset (SPSO, ``broker.kafka.share_groups``).
Describe answers it for each partition asked (null topics: every share partition
the group has), -1 for one never started, and (v1) the lag: the records from the
SPSO to the partition's end not yet acknowledged or archived. Alter starts a share
partition at the offset given with nothing in flight (OFFSET_OUT_OF_RANGE outside
the partition's [start, end]); Delete forgets a topic's share partitions of the
group, so its next fetch starts by ``share.auto.offset.reset``. Both need the group
empty (NON_EMPTY_GROUP, as Kafka's GROUP_NOT_EMPTY) and are refused for a group id
of a classic or consumer group (GROUP_ID_NOT_FOUND). Permissions: describe any on
the group and each topic, alter ``consume`` on both, delete ``admin`` on the group
and ``consume`` on each topic (Kafka's DESCRIBE, READ, DELETE and READ).
Served by the group's coordinator; on a cluster each share partition is read or
changed at its leader (``broker.kafka.share_groups.admin``).
"""

from __future__ import annotations

import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from broker.errors import BrokerError
from broker.kafka.access import (
    GROUP_ADMIN,
    GROUP_CONSUME,
    GROUP_LOOKUP,
    TOPIC_CONSUME,
    TOPIC_LOOKUP,
    Requirement,
    allowed,
)
from broker.kafka.context import KafkaContext
from broker.kafka.dispatch import Api, Call
from broker.kafka.error_codes import error_code
from broker.kafka.handlers.coordination import ZERO, checked_coordinators
from broker.kafka.handlers.fetch import read_error_code
from broker.kafka.handlers.share_membership import NO_SHARE_GROUPS
from broker.kafka.leader_epochs import leader_epoch
from broker.kafka.locator import GROUP_KEY
from broker.kafka.messages import build, nested, response_class
from broker.kafka.partitions import segment_name
from broker.kafka.share_groups.admin import LocalShareStates, ShareStates
from broker.kafka.share_groups.coordinator import ShareCoordinator
from ledger.errors import LedgerError

__all__ = ["ALTER_SHARE_GROUP_OFFSETS_KEY", "DELETE_SHARE_GROUP_OFFSETS_KEY",
           "DESCRIBE_SHARE_GROUP_OFFSETS_KEY", "ROWS"]

DESCRIBE_SHARE_GROUP_OFFSETS_KEY = 90
ALTER_SHARE_GROUP_OFFSETS_KEY = 91
DELETE_SHARE_GROUP_OFFSETS_KEY = 92


def _code(error: BrokerError | LedgerError) -> ErrorCode:
    return read_error_code(error) if isinstance(error, LedgerError) else error_code(error)


def _group(context: KafkaContext, call: Call, requirement: Requirement, group_id: str,
           ) -> tuple[ShareCoordinator | None, ErrorCode, str | None]:
    """The share groups if ``group_id`` may be worked on here, else the group's error."""
    code, coordinators = checked_coordinators(context, call, requirement, GROUP_KEY, group_id)
    if coordinators is None:
        return None, code, None
    if coordinators.shares is None:
        return None, ErrorCode.unsupported_version, NO_SHARE_GROUPS
    return coordinators.shares, ErrorCode.none, None


def _states(context: KafkaContext, shares: ShareCoordinator) -> ShareStates:
    """Where the share partitions' states are read and changed (at their leaders)."""
    coordinators = context.coordinators
    if coordinators is not None and coordinators.share_states is not None:
        return coordinators.share_states
    return ShareStates(LocalShareStates(context.topics, shares))


async def _topic_id(context: KafkaContext, topic: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(await context.topics.topic_id(topic))
    except (BrokerError, LedgerError, ValueError):
        return None


async def handle_describe(context: KafkaContext, call: Call) -> Any:
    """Each group's start offsets (and v1 lags) of the partitions asked."""
    cls = response_class(DESCRIBE_SHARE_GROUP_OFFSETS_KEY, call.version)
    group_cls = nested(cls, "DescribeShareGroupOffsetsResponseGroup")
    answered = []
    for asked in call.request.groups:
        shares, code, message = _group(context, call, GROUP_LOOKUP, asked.group_id)
        topics: tuple[Any, ...] = ()
        if shares is not None:
            try:
                topics = await _described(context, call, cls, shares, asked)
            except (BrokerError, LedgerError) as error:
                code, message = _code(error), str(error)
        answered.append(build(group_cls, group_id=asked.group_id, topics=topics,
                              error_code=code, error_message=message))
    return build(cls, throttle_time=ZERO, groups=tuple(answered))


async def _described(context: KafkaContext, call: Call, cls: Any, shares: ShareCoordinator,
                     asked: Any) -> tuple[Any, ...]:
    topic_cls = nested(cls, "DescribeShareGroupOffsetsResponseTopic")
    part_cls = nested(cls, "DescribeShareGroupOffsetsResponsePartition")
    states = _states(context, shares)
    wanted: dict[str, list[int]] = {}
    if asked.topics is None:
        for topic, number in await states.listed(asked.group_id):
            wanted.setdefault(topic, []).append(number)
    else:
        for topic in asked.topics:
            wanted.setdefault(topic.topic_name, []).extend(topic.partitions)
    answered = []
    for topic, numbers in sorted(wanted.items()):
        topic_id = await _topic_id(context, topic)
        parts = []
        for number in sorted(set(numbers)):
            code, message, start, lag = ErrorCode.none, None, -1, -1
            if not allowed(context, call, TOPIC_LOOKUP, topic):
                code = TOPIC_LOOKUP.refused
            elif topic_id is None:
                code = ErrorCode.unknown_topic_or_partition
            else:
                try:
                    start, lag = await states.describe(asked.group_id, topic, number)
                except (BrokerError, LedgerError) as error:
                    code, message = _code(error), str(error)
            extra = {"lag": lag} if call.version >= 1 else {}
            parts.append(build(part_cls, partition_index=number, start_offset=start,
                               leader_epoch=leader_epoch(context.nodes, topic, number),
                               error_code=code, error_message=message, **extra))
        answered.append(build(topic_cls, topic_name=topic, topic_id=topic_id,
                              partitions=tuple(parts)))
    return tuple(answered)


def _empty_error(shares: ShareCoordinator, group_id: str) -> tuple[ErrorCode, str | None]:
    group = shares.groups.group(group_id)
    if group is not None and group.members:
        return ErrorCode.non_empty_group, f"Group {group_id} is not empty."
    if group is None and shares.groups.in_use_elsewhere(group_id):
        return ErrorCode.group_id_not_found, f"Group {group_id} is not a share group."
    return ErrorCode.none, None


async def handle_alter(context: KafkaContext, call: Call) -> Any:
    """Start each partition asked at its offset (an empty group)."""
    cls = response_class(ALTER_SHARE_GROUP_OFFSETS_KEY, call.version)
    request = call.request
    shares, code, message = _group(context, call, GROUP_CONSUME, request.group_id)
    if shares is not None:
        code, message = _empty_error(shares, request.group_id)
    if shares is None or code is not ErrorCode.none:
        return build(cls, throttle_time=ZERO, error_code=code, error_message=message,
                     responses=())
    topic_cls = nested(cls, "AlterShareGroupOffsetsResponseTopic")
    part_cls = nested(cls, "AlterShareGroupOffsetsResponsePartition")
    answered = []
    for topic in request.topics:
        topic_id = await _topic_id(context, topic.topic_name)
        parts = []
        for entry in topic.partitions:
            code, message = await _alter_one(context, call, shares, request.group_id,
                                             topic.topic_name, topic_id, entry)
            parts.append(build(part_cls, partition_index=entry.partition_index,
                               error_code=code, error_message=message))
        answered.append(build(topic_cls, topic_name=topic.topic_name, topic_id=topic_id,
                              partitions=tuple(parts)))
    return build(cls, throttle_time=ZERO, error_code=ErrorCode.none, error_message=None,
                 responses=tuple(answered))


async def _alter_one(context: KafkaContext, call: Call, shares: ShareCoordinator,
                     group_id: str, topic: str, topic_id: uuid.UUID | None,
                     entry: Any) -> tuple[ErrorCode, str | None]:
    if not allowed(context, call, TOPIC_CONSUME, topic):
        return TOPIC_CONSUME.refused, None
    if topic_id is None:
        return ErrorCode.unknown_topic_or_partition, None
    try:
        segment_name(topic, entry.partition_index)  # a negative partition: no such one
        return await _states(context, shares).reset(group_id, topic, entry.partition_index,
                                                    entry.start_offset)
    except (BrokerError, LedgerError) as error:
        return _code(error), str(error)


async def handle_delete(context: KafkaContext, call: Call) -> Any:
    """Forget each topic's share partitions of the group (an empty group)."""
    cls = response_class(DELETE_SHARE_GROUP_OFFSETS_KEY, call.version)
    request = call.request
    shares, code, message = _group(context, call, GROUP_ADMIN, request.group_id)
    if shares is not None:
        code, message = _empty_error(shares, request.group_id)
    if shares is None or code is not ErrorCode.none:
        return build(cls, throttle_time=ZERO, error_code=code, error_message=message,
                     responses=())
    topic_cls = nested(cls, "DeleteShareGroupOffsetsResponseTopic")
    answered = []
    for topic in request.topics:
        name = topic.topic_name
        topic_id = await _topic_id(context, name)
        code, message = ErrorCode.none, None
        if not allowed(context, call, TOPIC_CONSUME, name):
            code = TOPIC_CONSUME.refused
        elif topic_id is None:
            code = ErrorCode.unknown_topic_or_partition
        else:
            try:
                states = _states(context, shares)
                for written, number in await states.listed(request.group_id):
                    if written == name:
                        await states.forget(request.group_id, name, number)
            except (BrokerError, LedgerError) as error:
                code, message = _code(error), str(error)
        answered.append(build(topic_cls, topic_name=name, topic_id=topic_id, error_code=code,
                              error_message=message))
    return build(cls, throttle_time=ZERO, error_code=ErrorCode.none, error_message=None,
                 responses=tuple(answered))


ROWS = (
    Api(DESCRIBE_SHARE_GROUP_OFFSETS_KEY, "DescribeShareGroupOffsets", 0, 1, handle_describe),
    Api(ALTER_SHARE_GROUP_OFFSETS_KEY, "AlterShareGroupOffsets", 0, 0, handle_alter),
    Api(DELETE_SHARE_GROUP_OFFSETS_KEY, "DeleteShareGroupOffsets", 0, 0, handle_delete),
)
