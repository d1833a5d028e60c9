"""DescribeTopicPartitions (key 75), v0: Kafka 3.8's paged Metadata (KIP-966).

The partitions of the topics asked (none asked: every topic the role may
see), each with its leader as Metadata answers it (``metadata.partition_leader``:
the node of the segment's owner, this broker on a standalone). Topics are
answered in name order and at most ``min(response_partition_limit, 2000)``
partitions in all, as Kafka's broker pages them: when the limit is reached
inside a topic, or before the next topic, ``next_cursor`` names the topic and
partition to start from, and the client asks again with it. A cursor whose
topic is not among those asked, or whose partition is negative, is
INVALID_REQUEST for every topic asked (for all topics the cursor's topic may
have been deleted since: the page starts at the next name). Topics are
answered without their authorized operations (the field's "not asked"
value).

Errors per topic, as Kafka answers them: UNKNOWN_TOPIC_OR_PARTITION for a
missing topic asked by name (INVALID_TOPIC_EXCEPTION for a name Kafka
refuses), TOPIC_AUTHORIZATION_FAILED for a topic the role may not see
(appended after the page, as Kafka does; all topics lists only those it may
see). Topics are never auto-created here. The store is read again for up to
``metadata.READ_WAIT_S`` while it cannot be read, as Metadata does.
"""

from __future__ import annotations

import datetime
import time
import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from broker.errors import BrokerError, BrokerShuttingDownError, TopicNameError
from broker.kafka.access import TOPIC_LOOKUP, allowed
from broker.kafka.context import KafkaContext
from broker.kafka.dispatch import Api, Call
from broker.kafka.error_codes import error_code
from broker.kafka.handlers.metadata import READ_WAIT_S, partition_leader, read_again
from broker.kafka.leader_epochs import leader_epoch
from broker.kafka.messages import build, nested, response_class
from broker.kafka.partitions import partition_segments
from broker.segments.names import check_topic_name
from ledger.errors import LedgerError

__all__ = ["DESCRIBE_TOPIC_PARTITIONS_KEY", "MAX_PARTITIONS", "ROWS"]

DESCRIBE_TOPIC_PARTITIONS_KEY = 75
#: Kafka's ``max.request.partition.size.limit`` (default 2000): the most partitions per answer.
MAX_PARTITIONS = 2000
_ZERO = datetime.timedelta(0)
_NO_TOPIC_ID = uuid.UUID(int=0)


async def handle_describe_topic_partitions(context: KafkaContext, call: Call) -> Any:
    """One page of the topics asked: their partitions from the cursor, up to the limit."""
    cls = response_class(DESCRIBE_TOPIC_PARTITIONS_KEY, call.version)
    topic_cls = nested(cls, "DescribeTopicPartitionsResponseTopic")
    request = call.request
    deadline = time.monotonic() + READ_WAIT_S
    cursor = request.cursor
    start = "" if cursor is None else cursor.topic_name
    everything = not request.topics
    if everything:
        infos = await read_again(context.topics.list_topics, deadline,
                                 "the topic list cannot be read")
        names = sorted(info.name for info in infos if info.name >= start)
    else:
        names = sorted({topic.name for topic in request.topics if topic.name >= start})
    if cursor is not None and (cursor.partition_index < 0
                               or (not everything and cursor.topic_name not in names)):
        return build(cls, throttle_time=_ZERO, next_cursor=None, topics=tuple(
            _failed(topic_cls, topic.name, ErrorCode.invalid_request) for topic in request.topics))
    visible = [name for name in names if allowed(context, call, TOPIC_LOOKUP, name)]
    seen = set(visible)
    refused = [] if everything else [name for name in names if name not in seen]
    topics: list[Any] = []
    next_cursor = None
    remaining = min(request.response_partition_limit, MAX_PARTITIONS)
    for name in visible:
        if remaining == 0:  # the previous topic filled the page: start at this one
            next_cursor = build(nested(cls, "Cursor"), topic_name=name, partition_index=0)
            break
        if remaining < 0:
            continue  # (a negative limit answers no topic, as Kafka's broker)
        first = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
        answer, following = await _topic(cls, context, name, deadline, first, remaining,
                                         skip_errors=everything)
        if answer is None:
            continue
        topics.append(answer)
        if following is not None:
            next_cursor = build(nested(cls, "Cursor"), topic_name=name,
                                partition_index=following)
            break
        remaining -= len(answer.partitions)
    topics.extend(_failed(topic_cls, name, TOPIC_LOOKUP.refused) for name in refused)
    return build(cls, throttle_time=_ZERO, topics=tuple(topics), next_cursor=next_cursor)


def _failed(topic_cls: Any, name: str, code: ErrorCode) -> Any:
    return build(topic_cls, error_code=code, name=name, topic_id=_NO_TOPIC_ID,
                 is_internal=False, partitions=())


async def _topic(cls: Any, context: KafkaContext, name: str, deadline: float, first: int,
                 limit: int, *, skip_errors: bool) -> tuple[Any | None, int | None]:
    """The topic's partitions from ``first``, at most ``limit``, and the next one's (None: all).

    A topic that cannot be answered is an error answer, or None with ``skip_errors``
    (all topics: one deleted meanwhile is left out, as Kafka does).
    """
    topic_cls = nested(cls, "DescribeTopicPartitionsResponseTopic")
    try:
        check_topic_name(name, internal=True)
    except TopicNameError:
        return (None if skip_errors
                else _failed(topic_cls, name, ErrorCode.invalid_topic_exception)), None
    try:
        segments = await read_again(lambda: partition_segments(context.topics, name),
                                    deadline, f"topic {name} cannot be read")
        topic_id = uuid.UUID(await read_again(lambda: context.topics.topic_id(name),
                                              deadline, f"topic {name} cannot be read"))
        context.topic_ids.note(name, topic_id)
    except BrokerShuttingDownError:
        raise
    except (BrokerError, LedgerError) as error:
        if isinstance(error, LedgerError) and error.retriable:
            raise  # past the deadline: the connection is closed, the client asks again
        return (None if skip_errors
                else _failed(topic_cls, name, error_code(error))), None
    partition_cls = nested(cls, "DescribeTopicPartitionsResponsePartition")
    later = [segment for segment in segments if segment.number >= first]
    page = later[:limit]
    partitions = []
    for segment in page:
        leader = partition_leader(context, name, segment.number)
        replicas = (leader,) if leader >= 0 else ()
        partitions.append(build(
            partition_cls, partition_index=segment.number, leader_id=leader,
            leader_epoch=(leader_epoch(context.nodes, name, segment.number) if leader >= 0
                          else -1),
            error_code=ErrorCode.none if leader >= 0 else ErrorCode.leader_not_available,
            replica_nodes=replicas, isr_nodes=replicas, eligible_leader_replicas=(),
            last_known_elr=(), offline_replicas=()))
    following = later[limit].number if len(later) > limit else None
    return build(topic_cls, error_code=ErrorCode.none, name=name, topic_id=topic_id,
                 is_internal=False, partitions=tuple(partitions)), following


ROWS = (Api(DESCRIBE_TOPIC_PARTITIONS_KEY, "DescribeTopicPartitions", 0, 0,
            handle_describe_topic_partitions),)
