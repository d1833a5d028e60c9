"""CreatePartitions (key 37) v0-v3 and DeleteRecords (key 21) v0-v2: partitions grown and cut.

**CreatePartitions onto scaling.** A Folio topic's partitions are its
segments by number, sealed ones included (``broker.kafka.partitions``), and
a topic only grows by scaling: sealing segments and creating successors that
cover their key ranges. Growing a topic from C partitions to N is one split:
the open segment with the widest key range (the lowest number among equals)
is sealed and N - C successors split its range in equal parts, so the topic
then has N partitions, numbered as before plus C .. N-1. The split segment
stays a partition, readable to its end with the same offsets; a Produce to
it goes to its heir, the first successor (``broker.kafka.succession``,
docs/kafka.md, "Partitions and scaling"). A split makes at least two successors, so growing
by exactly one partition cannot be mapped: INVALID_PARTITIONS, saying so.
A count not above the current one is INVALID_PARTITIONS, as in Kafka; manual
assignments INVALID_REPLICA_ASSIGNMENT (segments are placed by container).

**DeleteRecords onto truncation** (``SegmentHandle.truncate``, the call behind
``folio topic truncate``): the ledgers wholly before the offset are deleted
(-1: the high watermark, everything). Truncation deletes whole ledgers, so the
new log start offset (the answer's ``low_watermark``, what ListOffsets
earliest then says) may be below the offset asked: the records between stay
readable until their ledger goes. An offset past the high watermark is
OFFSET_OUT_OF_RANGE.

Both need ``admin`` on the topic (Kafka: Alter and Delete on the topic).

CreatePartitions counts the partitions added against the client's controller
mutation quota (KIP-599, ``broker.kafka.quotas.mutations``): a topic over it
is refused with THROTTLING_QUOTA_EXCEEDED at v3, served and throttled below.
"""

from __future__ import annotations

import datetime
import logging
from typing import Any

from kio.schema.errors import ErrorCode

from broker.api import SegmentRange, SegmentState
from broker.errors import BrokerError, OffsetOutOfRangeError
from broker.kafka.access import TOPIC_ADMIN, allowed
from broker.kafka.context import KafkaContext
from broker.kafka.dispatch import Api, Call
from broker.kafka.error_codes import error_code
from broker.kafka.handlers.topics_admin import mutation_quota
from broker.kafka.messages import build, nested, response_class
from broker.kafka.partitions import partition_segments, segment_name
from broker.kafka.quotas.mutations import THROTTLING_MESSAGE, MutationQuota
from broker.topics.manager import MAX_SEGMENT_COUNT
from ledger.errors import LedgerError

__all__ = ["CREATE_PARTITIONS_KEY", "DELETE_RECORDS_KEY", "ROWS", "split_plan"]

log = logging.getLogger(__name__)

CREATE_PARTITIONS_KEY = 37
DELETE_RECORDS_KEY = 21
_HIGH_WATERMARK = -1
_ZERO = datetime.timedelta(0)
#: The first version whose clients know THROTTLING_QUOTA_EXCEEDED (KIP-599).
_STRICT_CREATE_PARTITIONS = 3

#: (error code, message) of one topic.
_Outcome = tuple[ErrorCode, str | None]


def split_plan(segments: list[SegmentRange], count: int,
               ) -> tuple[SegmentRange, list[tuple[float, float]]] | str:
    """The segment to split and its successors' ranges so the topic has ``count`` partitions.

    ``segments``: every segment of the topic (sealed ones too). A string: why
    it cannot be mapped (the INVALID_PARTITIONS message).
    """
    current = len(segments)
    if count < current:
        return (f"topic currently has {current} partitions, which is higher than the "
                f"requested {count}")
    if count == current:
        return f"topic already has {current} partitions"
    if count > MAX_SEGMENT_COUNT:
        return f"a topic has at most {MAX_SEGMENT_COUNT} partitions, {count} asked"
    added = count - current
    if added == 1:
        return (f"Folio adds partitions by splitting one open segment into at least two "
                f"(the split one stays a read-only partition): ask for {current + 2} or "
                f"more, not {count}")
    open_segments = [s for s in segments if s.state is SegmentState.OPEN]
    if not open_segments:
        return "the topic is sealed: no segment can be split"
    widest = min(open_segments, key=lambda s: (-(s.key_high - s.key_low), s.number))
    width = widest.key_high - widest.key_low
    bounds = [widest.key_low + width * i / added for i in range(added)] + [widest.key_high]
    return widest, [(bounds[i], bounds[i + 1]) for i in range(added)]


async def handle_create_partitions(context: KafkaContext, call: Call) -> Any:
    """Grow each topic asked to its count, by one split each."""
    cls = response_class(CREATE_PARTITIONS_KEY, call.version)
    result_cls = nested(cls, "CreatePartitionsTopicResult")
    quota = mutation_quota(context, call, _STRICT_CREATE_PARTITIONS)
    results = []
    for topic in call.request.topics:
        if allowed(context, call, TOPIC_ADMIN, topic.name):
            code, message = await _grow(context, topic, bool(call.request.validate_only), quota)
        else:
            code, message = TOPIC_ADMIN.refused, f"admin permission on topic {topic.name!r} needed"
        results.append(build(result_cls, name=topic.name, error_code=code,
                             error_message=message))
    return build(cls, throttle_time=quota.throttle_time(), results=tuple(results))


async def _grow(context: KafkaContext, topic: Any, validate_only: bool,
                quota: MutationQuota) -> _Outcome:
    if topic.assignments:
        return (ErrorCode.invalid_replica_assignment, "manual assignments are not supported: "
                "a partition's owner is the broker owning its segment's container")
    try:
        segments = await partition_segments(context.topics, topic.name)
        plan = split_plan(segments, topic.count)
        if isinstance(plan, str):
            return ErrorCode.invalid_partitions, plan
        if validate_only:  # takes no tokens, as in Kafka
            return ErrorCode.none, None
        if not quota.admit(topic.count - len(segments)):
            return ErrorCode.throttling_quota_exceeded, THROTTLING_MESSAGE
        split, ranges = plan
        try:
            await context.topics.scale_topic(topic.name, [split.name], ranges)
        except LedgerError as error:
            if not error.retriable:
                raise
            # Unknown outcome (the store's answer lost): the split may have
            # landed. Read back: the count reached is a success, else the error.
            after = await partition_segments(context.topics, topic.name)
            if len(after) != topic.count:
                raise
            log.info("kafka: CreatePartitions of %s: the split landed despite %s",
                     topic.name, error)
        log.info("kafka: CreatePartitions: %s grown to %d partitions by splitting %s",
                 topic.name, topic.count, split.name)
    except (BrokerError, LedgerError) as error:
        return error_code(error), str(error)
    return ErrorCode.none, None


async def handle_delete_records(context: KafkaContext, call: Call) -> Any:
    """Truncate each partition before its offset; answer the new low watermarks."""
    cls = response_class(DELETE_RECORDS_KEY, call.version)
    topic_cls = nested(cls, "DeleteRecordsTopicResult")
    partition_cls = nested(cls, "DeleteRecordsPartitionResult")
    topics = []
    for topic in call.request.topics:
        may = allowed(context, call, TOPIC_ADMIN, topic.name)
        partitions = []
        for partition in topic.partitions:
            if may:
                code, low = await _truncate(context, topic.name, partition.partition_index,
                                            partition.offset)
            else:
                code, low = TOPIC_ADMIN.refused, -1
            partitions.append(build(partition_cls, partition_index=partition.partition_index,
                                    low_watermark=low, error_code=code))
        topics.append(build(topic_cls, name=topic.name, partitions=tuple(partitions)))
    return build(cls, throttle_time=_ZERO, topics=tuple(topics))


async def _truncate(context: KafkaContext, topic: str, partition: int,
                    offset: int) -> tuple[ErrorCode, int]:
    try:
        name = segment_name(topic, partition)
        segment = await context.topics.writable_segment(name, "Kafka DeleteRecords")
        end = segment.info().segment.end_offset
        if offset == _HIGH_WATERMARK:
            offset = end
        if offset < 0:
            raise OffsetOutOfRangeError(name, offset, segment.info().segment.start_offset, end)
        info = await segment.truncate(offset)
    except (BrokerError, LedgerError) as error:
        return error_code(error), -1
    return ErrorCode.none, info.segment.start_offset


ROWS = (
    Api(CREATE_PARTITIONS_KEY, "CreatePartitions", 0, 3, handle_create_partitions),
    Api(DELETE_RECORDS_KEY, "DeleteRecords", 0, 2, handle_delete_records),
)
