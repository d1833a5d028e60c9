"""ListOffsets (key 2), v1-v6: earliest, latest, or the first offset at a time.

Timestamp -2 (earliest) answers the segment's start offset; -1 (latest) its
end, or with ``read_committed`` its last stable offset (where committed
reads stop); a time in ms the first record at or after it
(``broker.kafka.timestamps``), -1 if none. Other negative timestamps (v7+'s
max timestamp, v8+'s earliest local) are not served at these versions.
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode

from broker.api import Isolation
from broker.errors import BrokerError
from broker.kafka.access import TOPIC_CONSUME, allowed
from broker.kafka.context import KafkaContext
from broker.kafka.dispatch import Api, Call
from broker.kafka.error_codes import error_code
from broker.kafka.handlers.fetch import isolation_of
from broker.kafka.leader_epochs import NO_EPOCH, epoch_error, leader_epoch
from broker.kafka.messages import build, nested, response_class
from broker.kafka.partitions import segment_name
from broker.kafka.timestamps import offset_for_time
from ledger.errors import LedgerError

__all__ = ["LIST_OFFSETS_KEY", "ROWS"]

LIST_OFFSETS_KEY = 2
_LATEST = -1
_EARLIEST = -2
_ZERO = datetime.timedelta(0)


async def handle_list_offsets(context: KafkaContext, call: Call) -> Any:
    """The offset asked of each partition."""
    cls = response_class(LIST_OFFSETS_KEY, call.version)
    topic_cls = nested(cls, "ListOffsetsTopicResponse")
    partition_cls = nested(cls, "ListOffsetsPartitionResponse")
    isolation = isolation_of(getattr(call.request, "isolation_level", 0))
    topics = []
    for topic in call.request.topics:
        partitions = []
        for partition in topic.partitions:
            index = partition.partition_index
            if not allowed(context, call, TOPIC_CONSUME, topic.name):
                code, offset, stamp = TOPIC_CONSUME.refused, -1, -1
            else:
                code = epoch_error(context.nodes, topic.name, index,
                                   getattr(partition, "current_leader_epoch", NO_EPOCH))
                offset = stamp = -1
                if code is ErrorCode.none:
                    code, offset, stamp = await _lookup(context, topic.name, index,
                                                        partition.timestamp, isolation)
            epoch = leader_epoch(context.nodes, topic.name, index) if index >= 0 else -1
            partitions.append(build(partition_cls, partition_index=index,
                                    error_code=code, timestamp=stamp, offset=offset,
                                    leader_epoch=epoch if code is ErrorCode.none else -1))
        topics.append(build(topic_cls, name=topic.name, partitions=tuple(partitions)))
    return build(cls, throttle_time=_ZERO, topics=tuple(topics))


async def _lookup(context: KafkaContext, topic: str, partition: int, timestamp: int,
                  isolation: Isolation) -> tuple[ErrorCode, int, int]:
    try:
        segment = await context.topics.segment(segment_name(topic, partition))
        info = segment.info().segment
        if timestamp == _EARLIEST:
            return ErrorCode.none, info.start_offset, -1
        if timestamp == _LATEST:
            end = (segment.committed_end if isolation is Isolation.READ_COMMITTED
                   else info.end_offset)
            return ErrorCode.none, end, -1
        if timestamp < 0:
            return ErrorCode.unsupported_version, -1, -1
        offset, stamp = await offset_for_time(segment, timestamp, isolation)
    except (BrokerError, LedgerError) as error:
        return error_code(error), -1, -1
    return ErrorCode.none, offset, stamp


ROWS = (Api(LIST_OFFSETS_KEY, "ListOffsets", 1, 6, handle_list_offsets),)
