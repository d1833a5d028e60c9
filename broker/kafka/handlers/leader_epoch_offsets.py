"""OffsetForLeaderEpoch (key 23), v2-v4: the end offset of a leader epoch (KIP-101, KIP-320).

A consumer asks it after its partition's leader epoch changed (a failover,
a handover): for the epoch of the last record it read, where that epoch's
records end. An end below its position means the log was truncated under it
(an unclean election in Kafka). Folio never truncates acknowledged data, so
that never happens here; the answer is still Kafka's, exactly:

- ``current_leader_epoch`` (not -1) is checked first, as Fetch checks it
  (``broker.kafka.leader_epochs``): FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH.
- The segment's leader-epoch history (``broker.segments.epoch_history``: the
  offset each ownership's appends started at, kept in the segment record),
  with the partition's epoch now at the log end if it is newer than the
  history's (a sealed segment, or one written before histories were kept:
  Kafka's leader assigns its epoch at the log end the same way), answers as
  Kafka's ``LeaderEpochFileCache.endOffsetFor``: the requested epoch (or the
  largest one below it) and the start offset of the first epoch above it;
  the log end for the newest epoch; UNDEFINED (-1, -1) for an epoch above
  the newest, or -1.

Versions 0 and 1 (removed from Kafka 4.0 by KIP-896, and not in kio) are not
served. Needs DESCRIBE-like consume rights on the topic (Kafka asks DESCRIBE).
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode

from broker.api import LeaderEpochs
from broker.errors import BrokerError
from broker.kafka.access import TOPIC_LOOKUP, allowed
from broker.kafka.context import KafkaContext
from broker.kafka.dispatch import Api, Call
from broker.kafka.error_codes import error_code
from broker.kafka.leader_epochs import NO_EPOCH, epoch_error, leader_epoch
from broker.kafka.messages import build, nested, response_class
from broker.kafka.partitions import segment_name
from broker.segments.epoch_history import EpochHistory
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
    if requested == NO_EPOCH:
        return ErrorCode.none, _UNDEFINED, _UNDEFINED
    log_end = segment.info().segment.end_offset
    history = EpochHistory(segment.leader_epochs() if isinstance(segment, LeaderEpochs) else ())
    epoch = leader_epoch(context.nodes, topic, partition)
    if epoch >= 0:
        history = history.assign(epoch, log_end)
    elif not history.entries:  # no epoch known at all (never in practice): the log end
        return ErrorCode.none, requested, log_end
    found, end = history.end_offset_for(requested, log_end)
    return ErrorCode.none, found, end


ROWS = (Api(OFFSET_FOR_LEADER_EPOCH_KEY, "OffsetForLeaderEpoch", 2, 4,
            handle_offset_for_leader_epoch),)
