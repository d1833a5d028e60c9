"""OffsetCommit (8) v2-v9 and OffsetFetch (9) v1-v9: a group's committed offsets.

Per partition, as in Kafka: a commit writes one record per partition (in one
durable append) in ``_kafka_offsets``; a fetch answers from memory, -1 for a
partition the group never committed. OffsetFetch v8 asks for several groups
(KIP-709); v7+'s ``require_stable`` answers UNSTABLE_OFFSET_COMMIT while a
transaction holds offsets of the partition (in a cluster, asked of the
transaction coordinator wherever it runs). The rules:
``broker.kafka.consumer_groups.coordinator``; for a consumer-protocol group
(KIP-848) the member and its epoch are checked first (UNKNOWN_MEMBER_ID,
STALE_MEMBER_EPOCH; a member commits with v9+: UNSUPPORTED_VERSION), and
OffsetFetch v9 checks the member id and epoch it names the same way
(``broker.kafka.consumer_groups.modern``).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.kafka.access import GROUP_CONSUME, TOPIC_CONSUME, allowed
from broker.kafka.consumer_groups.coordinator import OffsetCommitItem
from broker.kafka.consumer_groups.offsets import CommittedOffset, TopicPartition
from broker.kafka.context import KafkaContext
from broker.kafka.coordinators import ClassicView, KafkaCoordinators
from broker.kafka.dispatch import Api, Call
from broker.kafka.handlers.coordination import ZERO, checked_coordinators
from broker.kafka.locator import GROUP_KEY
from broker.kafka.messages import build, nested, response_class

__all__ = ["OFFSET_COMMIT_KEY", "OFFSET_FETCH_KEY", "ROWS", "commit_items", "split_refused",
           "topic_answers"]

OFFSET_COMMIT_KEY = 8
OFFSET_FETCH_KEY = 9


def commit_items(request: Any) -> list[OffsetCommitItem]:
    """The partitions of an OffsetCommit or TxnOffsetCommit request, whatever its version."""
    return [OffsetCommitItem(topic.name, partition.partition_index, CommittedOffset(
        partition.committed_offset, getattr(partition, "committed_leader_epoch", -1),
        partition.committed_metadata))
        for topic in request.topics for partition in topic.partitions]


def split_refused(context: KafkaContext, call: Call, items: list[OffsetCommitItem],
                  ) -> tuple[list[OffsetCommitItem], dict[TopicPartition, ErrorCode]]:
    """The items of topics the role may read, and the others' TOPIC_AUTHORIZATION_FAILED."""
    kept = [item for item in items if allowed(context, call, TOPIC_CONSUME, item.topic)]
    refused = {(item.topic, item.partition): TOPIC_CONSUME.refused for item in items
               if not allowed(context, call, TOPIC_CONSUME, item.topic)}
    return kept, refused


def topic_answers(cls: Any, topic_name: str, partition_name: str,
                  errors: dict[TopicPartition, ErrorCode]) -> tuple[Any, ...]:
    """Per-topic answers of a commit (``cls``'s nested topic and partition structs)."""
    topic_cls = nested(cls, topic_name)
    partition_cls = nested(cls, partition_name)
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), code in errors.items():
        by_topic.setdefault(topic, []).append(
            build(partition_cls, partition_index=partition, error_code=code))
    return tuple(build(topic_cls, name=name, partitions=tuple(parts))
                 for name, parts in by_topic.items())


async def handle_offset_commit(context: KafkaContext, call: Call) -> Any:
    """Commit each partition's offset for the group."""
    cls = response_class(OFFSET_COMMIT_KEY, call.version)
    request = call.request
    every = commit_items(request)
    code, coordinators = checked_coordinators(context, call, GROUP_CONSUME, GROUP_KEY,
                                              request.group_id)
    if coordinators is None:  # the group's error (its authorisation first) on every partition
        errors = {(item.topic, item.partition): code for item in every}
    else:
        items, errors = split_refused(context, call, every)
        consumers = coordinators.consumers
        if items and consumers is not None and consumers.group(request.group_id) is not None:
            errors.update(await _commit_modern(coordinators, call, items))
        elif items:
            errors.update(await coordinators.groups.commit(
                request.group_id, request.generation_id_or_member_epoch, request.member_id,
                items, getattr(request, "group_instance_id", None)))
    return build(cls, throttle_time=ZERO, topics=topic_answers(
        cls, "OffsetCommitResponseTopic", "OffsetCommitResponsePartition", errors))


async def _commit_modern(coordinators: KafkaCoordinators, call: Call,
                         items: list[OffsetCommitItem]) -> dict[TopicPartition, ErrorCode]:
    """A commit into a consumer-protocol group (KIP-848): the member epoch is checked."""
    request = call.request
    assert coordinators.consumers is not None
    code = coordinators.consumers.commit_error(
        request.group_id, request.member_id, request.generation_id_or_member_epoch,
        call.version)
    if code is not ErrorCode.none:
        return {(item.topic, item.partition): code for item in items}
    errors = await coordinators.groups.partition_errors(items)
    errors = await coordinators.groups.write_offsets(request.group_id, items, errors)
    # The classic side made an Empty group of it to hold the offsets: not its group.
    ClassicView(coordinators.groups).forget_empty(request.group_id)
    return errors


async def handle_offset_fetch(context: KafkaContext, call: Call) -> Any:
    """The committed offsets of the partitions asked (all the group has: topics null)."""
    cls = response_class(OFFSET_FETCH_KEY, call.version)
    request = call.request
    stable = bool(getattr(request, "require_stable", False))
    if call.version >= 8:
        group_cls = nested(cls, "OffsetFetchResponseGroup")
        groups = []
        for group in request.groups:
            code, topics = await _fetch_group(context, call, cls, group.group_id,
                                              group.topics, stable,
                                              getattr(group, "member_id", None),
                                              getattr(group, "member_epoch", -1))
            groups.append(build(group_cls, group_id=group.group_id, topics=topics,
                                error_code=code))
        return build(cls, throttle_time=ZERO, groups=tuple(groups))
    code, topics = await _fetch_group(context, call, cls, request.group_id, request.topics,
                                      stable)
    return build(cls, throttle_time=ZERO, topics=topics, error_code=code)


async def _fetch_group(context: KafkaContext, call: Call, cls: Any, group_id: str,
                       asked: Any, stable: bool, member_id: str | None = None,
                       member_epoch: int = -1) -> tuple[ErrorCode, tuple[Any, ...]]:
    version = call.version
    suffix = "s" if version >= 8 else ""
    topic_cls = nested(cls, "OffsetFetchResponseTopic" + suffix)
    partition_cls = nested(cls, "OffsetFetchResponsePartition" + suffix)
    partitions = None if asked is None else [
        (topic.name, index) for topic in asked for index in topic.partition_indexes]
    code, coordinators = checked_coordinators(context, call, GROUP_CONSUME, GROUP_KEY, group_id)
    if coordinators is None:
        if version < 2:  # no group-level error: every partition carries it
            refused: list[_Answer] = [(tp, None, code) for tp in partitions or []]
            return ErrorCode.none, _topics(topic_cls, partition_cls, refused)
        return code, ()
    if coordinators.consumers is not None:  # v9: a KIP-848 member's epoch is checked
        code = coordinators.consumers.fetch_error(group_id, member_id, member_epoch)
        if code is not ErrorCode.none:
            return code, ()
    code, answers = coordinators.groups.fetch(group_id, partitions, stable)
    if stable and code is ErrorCode.none and coordinators.cluster_txns is not None:
        # In a cluster the transaction coordinator (perhaps another broker)
        # knows the offsets transactions hold (``broker.kafka.txns.cluster``).
        unstable = await coordinators.cluster_txns.unstable_offsets(group_id)
        # Unanswered (None): every partition UNSTABLE_OFFSET_COMMIT, retried by clients.
        answers = [(partition, value, ErrorCode.unstable_offset_commit)
                   if error is ErrorCode.none and (unstable is None or partition in unstable)
                   else (partition, value, error) for partition, value, error in answers]
    if context.authorizer is not None:
        # Topics the role may not read: left out of "all", refused when named.
        answers = [answer if allowed(context, call, TOPIC_CONSUME, answer[0][0])
                   else (answer[0], None, TOPIC_CONSUME.refused) for answer in answers
                   if asked is not None or allowed(context, call, TOPIC_CONSUME, answer[0][0])]
    return code, _topics(topic_cls, partition_cls, answers)


#: (partition, its committed offset or None, error) of a fetch.
_Answer = tuple[TopicPartition, CommittedOffset | None, ErrorCode]


def _topics(topic_cls: Any, partition_cls: Any, answers: list[_Answer]) -> tuple[Any, ...]:
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), value, code in answers:
        by_topic.setdefault(topic, []).append(build(
            partition_cls, partition_index=partition,
            committed_offset=value.offset if value is not None else -1,
            committed_leader_epoch=value.leader_epoch if value is not None else -1,
            metadata=value.metadata if value is not None else "", error_code=code))
    return tuple(build(topic_cls, name=name, partitions=tuple(parts))
                 for name, parts in by_topic.items())


ROWS = (
    Api(OFFSET_COMMIT_KEY, "OffsetCommit", 2, 9, handle_offset_commit),
    Api(OFFSET_FETCH_KEY, "OffsetFetch", 1, 9, handle_offset_fetch),
)
