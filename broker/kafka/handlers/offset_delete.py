"""OffsetDelete (key 47) v0: a consumer group's committed offsets of some partitions removed.

The group's coordinator (``GroupCoordinator.delete_offsets``) writes a
tombstone per partition to ``_kafka_offsets``, as DeleteGroups does for all
of them; the partitions of a topic a member of the group subscribes to (a
KIP-848 group's members: their subscriptions as its coordinator has them) answer
GROUP_SUBSCRIBED_TO_TOPIC (their offsets are in use), an unknown group
GROUP_ID_NOT_FOUND, a group another broker coordinates NOT_COORDINATOR.

Permissions, as Kafka: ``admin`` on the group (Delete), and ``consume`` on
each topic (Read); a topic refused answers TOPIC_AUTHORIZATION_FAILED for its
partitions and its offsets are kept.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.kafka.access import GROUP_ADMIN, TOPIC_CONSUME, allowed
from broker.kafka.consumer_groups.offsets import TopicPartition
from broker.kafka.context import KafkaContext
from broker.kafka.dispatch import Api, Call
from broker.kafka.handlers.coordination import ZERO, checked_coordinators
from broker.kafka.locator import GROUP_KEY
from broker.kafka.messages import build, nested, response_class

__all__ = ["OFFSET_DELETE_KEY", "ROWS"]

OFFSET_DELETE_KEY = 47


async def handle_offset_delete(context: KafkaContext, call: Call) -> Any:
    """Delete the group's offsets of the partitions asked."""
    cls = response_class(OFFSET_DELETE_KEY, call.version)
    topic_cls = nested(cls, "OffsetDeleteResponseTopic")
    partition_cls = nested(cls, "OffsetDeleteResponsePartition")
    request = call.request
    code, coordinators = checked_coordinators(context, call, GROUP_ADMIN, GROUP_KEY,
                                              request.group_id)
    answers: dict[TopicPartition, ErrorCode] = {}
    if coordinators is not None:
        refused = {topic.name for topic in request.topics
                   if not allowed(context, call, TOPIC_CONSUME, topic.name)}
        asked = [(topic.name, partition.partition_index) for topic in request.topics
                 if topic.name not in refused for partition in topic.partitions]
        modern = (None if coordinators.consumers is None
                  else coordinators.consumers.group(request.group_id))
        if modern is not None:  # a KIP-848 group: its members' subscriptions are its own
            subscribed = {t for member in modern.members.values() for t in member.subscribed}
            answers = {tp: ErrorCode.group_subscribed_to_topic for tp in asked
                       if tp[0] in subscribed}
            asked = [tp for tp in asked if tp[0] not in subscribed]
        if asked:  # (every topic refused: nothing to delete, the group is not needed)
            code, deleted = await coordinators.groups.delete_offsets(request.group_id, asked)
            answers.update(deleted)
        answers.update({(topic.name, partition.partition_index): TOPIC_CONSUME.refused
                        for topic in request.topics if topic.name in refused
                        for partition in topic.partitions})
    if code is not ErrorCode.none:
        return build(cls, error_code=code, throttle_time=ZERO, topics=())
    topics = tuple(build(topic_cls, name=topic.name, partitions=tuple(
        build(partition_cls, partition_index=partition.partition_index,
              error_code=answers.get((topic.name, partition.partition_index), ErrorCode.none))
        for partition in topic.partitions)) for topic in request.topics)
    return build(cls, error_code=ErrorCode.none, throttle_time=ZERO, topics=topics)


ROWS = (Api(OFFSET_DELETE_KEY, "OffsetDelete", 0, 0, handle_offset_delete),)
