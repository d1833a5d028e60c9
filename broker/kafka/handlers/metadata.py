"""Metadata (key 3), v0-v12: one broker (this one) leading every partition of the topics asked.

A topic's partitions are its segments by number (``broker.kafka.partitions``),
sealed ones included. No topic is created by Metadata
(``allow_auto_topic_creation`` is ignored: create topics with CreateTopics or
``folio topic create``); an unknown topic, or a system one (``_`` name), is
UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

import datetime
import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from broker.errors import BrokerError
from broker.kafka.context import NODE_ID, KafkaContext
from broker.kafka.dispatch import Api, Call
from broker.kafka.error_codes import error_code
from broker.kafka.messages import build, nested, response_class
from broker.kafka.partitions import partition_segments

__all__ = ["METADATA_KEY", "ROWS"]

METADATA_KEY = 3
_ZERO = datetime.timedelta(0)
#: Kafka's "no topic id" (topic ids are not used: Fetch is served up to v12, by name).
_NO_TOPIC_ID = uuid.UUID(int=0)


async def handle_metadata(context: KafkaContext, call: Call) -> Any:
    """The brokers (this one) and the partitions of the topics asked (all: every user topic)."""
    cls = response_class(METADATA_KEY, call.version)
    asked = call.request.topics
    if asked is None or (call.version == 0 and not asked):
        names = [info.name for info in await context.topics.list_topics()]
    else:
        names = [topic.name for topic in asked if topic.name is not None]
    topics = [await _topic(cls, context, name) for name in names]
    broker = build(nested(cls, "MetadataResponseBroker"), node_id=NODE_ID, host=context.host,
                   port=context.advertised_port or context.port, rack=None)
    return build(cls, throttle_time=_ZERO, brokers=(broker,), cluster_id=context.cluster_id,
                 controller_id=NODE_ID, topics=tuple(topics), cluster_authorized_operations=0)


async def _topic(cls: Any, context: KafkaContext, name: str) -> Any:
    topic_cls = nested(cls, "MetadataResponseTopic")
    try:
        segments = await partition_segments(context.topics, name)
    except BrokerError as error:
        return build(topic_cls, error_code=error_code(error), name=name, topic_id=_NO_TOPIC_ID,
                     is_internal=False, partitions=(), topic_authorized_operations=0)
    partition_cls = nested(cls, "MetadataResponsePartition")
    partitions = tuple(
        build(partition_cls, error_code=ErrorCode.none, partition_index=segment.number,
              leader_id=NODE_ID, leader_epoch=0, replica_nodes=(NODE_ID,),
              isr_nodes=(NODE_ID,), offline_replicas=())
        for segment in segments)
    return build(topic_cls, error_code=ErrorCode.none, name=name, topic_id=_NO_TOPIC_ID,
                 is_internal=False, partitions=partitions, topic_authorized_operations=0)


ROWS = (Api(METADATA_KEY, "Metadata", 0, 12, handle_metadata),)
