"""OffsetForLeaderEpoch (key 23), v2-v4: the end offset of a leader epoch (KIP-101, KIP-320).

A consumer asks it after its partition's leader epoch changed (a failover,
a handover): for the epoch of the last record it read, where that epoch's
records end. An end below its position means the log was truncated under it
(an unclean election in Kafka). Folio never truncates acknowledged data, so
that never happens here, and the answer is chosen to say so exactly:

- ``current_leader_epoch`` (not -1) is checked first, as Fetch checks it
  (``broker.kafka.leader_epochs``): FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH.
- A requested epoch above the partition's: UNDEFINED (-1, -1), as Kafka.
- Otherwise: the requested epoch and the partition's log end offset. For the
  current epoch this is Kafka's answer. For an earlier epoch Kafka answers the
  start offset of the next epoch; Folio keeps no history of epoch start
  offsets, and the log end is an upper bound of that offset that no reader's
  position ever exceeds (every record read is below it): a client validating
  its position always finds it valid, which is true, as nothing it read was
  ever truncated. docs/kafka.md, "Leader epochs", says this.

Versions 0 and 1 (removed from Kafka 4.0 by KIP-896, and not in kio) are not
served. Needs DESCRIBE-like consume rights on the topic (Kafka asks DESCRIBE).
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode

from broker.errors import BrokerError
from broker.kafka.access import TOPIC_LOOKUP, allowed
from broker.kafka.context import KafkaContext
from broker.kafka.dispatch import Api, Call
from broker.kafka.error_codes import error_code
from broker.kafka.leader_epochs import NO_EPOCH, epoch_error, leader_epoch
from broker.kafka.messages import build, nested, response_class
from broker.kafka.partitions import segment_name
from ledger.errors import LedgerError

__all__ = ["OFFSET_FOR_LEADER_EPOCH_KEY", "ROWS"]

OFFSET_FOR_LEADER_EPOCH_KEY = 23
_UNDEFINED = -1
_ZERO = datetime.timedelta(0)


async def handle_offset_for_leader_epoch(context: KafkaContext, call: Call) -> Any:
    """The end offset of each requested epoch (module docstring)."""
    cls = response_class(OFFSET_FOR_LEADER_EPOCH_KEY, call.version)
    topic_cls = nested(cls, "OffsetForLeaderTopicResult")
    partition_cls = nested(cls, "EpochEndOffset")
    topics = []
    for topic in call.request.topics:
        permitted = allowed(context, call, TOPIC_LOOKUP, topic.topic)
        partitions = []
        for asked in topic.partitions:
            if permitted:
                code, epoch, end = await _end_of(context, topic.topic, asked.partition,
                                                 asked.current_leader_epoch, asked.leader_epoch)
            else:
                code, epoch, end = TOPIC_LOOKUP.refused, _UNDEFINED, _UNDEFINED
            partitions.append(build(partition_cls, error_code=code, partition=asked.partition,
                                    leader_epoch=epoch, end_offset=end))
        topics.append(build(topic_cls, topic=topic.topic, partitions=tuple(partitions)))
    return build(cls, throttle_time=_ZERO, topics=tuple(topics))


async def _end_of(context: KafkaContext, topic: str, partition: int, current: int,
                  requested: int) -> tuple[ErrorCode, int, int]:
    """(error, epoch, end offset) of one partition."""
    try:
        segment = await context.topics.segment(segment_name(topic, partition))
    except (BrokerError, LedgerError) as error:
        return error_code(error), _UNDEFINED, _UNDEFINED
    # Checked once this broker serves the partition (its epoch is then its own).
    code = epoch_error(context.nodes, topic, partition, current)
    if code is not ErrorCode.none:
        return code, _UNDEFINED, _UNDEFINED
    epoch = leader_epoch(context.nodes, topic, partition)
    if requested == NO_EPOCH or requested > epoch >= 0:
        return ErrorCode.none, _UNDEFINED, _UNDEFINED
    return ErrorCode.none, requested, segment.info().segment.end_offset


ROWS = (Api(OFFSET_FOR_LEADER_EPOCH_KEY, "OffsetForLeaderEpoch", 2, 4,
            handle_offset_for_leader_epoch),)
