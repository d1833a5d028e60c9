"""Raw share-group requests (kio) of the share group tests: one connection per request.

Moved from ``test_kafka_share_groups.py`` (the file's limit); each returns the
decoded answer or the fields its callers compare.
"""

from __future__ import annotations

import datetime
import socket
import sys
from typing import Any

from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

from tests.support.kafka import raw_request, read_response

__all__ = ["alter", "ask", "describe", "heartbeat", "listed", "offsets", "partition",
           "share_acknowledge", "share_fetch"]


def ask(bootstrap: str, api_key: int, version: int, request: Any) -> Any:
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(raw_request(api_key, version, 7, request))
        return read_response(sock, api_key, version)[1]


def listed(bootstrap: str, group_type: str) -> list[tuple[str, str, str]]:
    """ListGroups v5 of ``group_type``: (group id, protocol type, state) of each group."""
    schema: Any = load_request_schema(16, 5)
    answer = ask(bootstrap, 16, 5, schema(states_filter=(), types_filter=(group_type,)))
    return [(g.group_id, g.protocol_type, g.group_state) for g in answer.groups]


def describe(bootstrap: str, group: str) -> Any:
    schema: Any = load_request_schema(77, 1)
    answer = ask(bootstrap, 77, 1, schema(group_ids=(group,),
                                           include_authorized_operations=False))
    [described] = answer.groups
    assert described.error_code == ErrorCode.none
    return described


def heartbeat(bootstrap: str, group: str, member: str, epoch: int,
               topics: tuple[str, ...] | None) -> Any:
    schema: Any = load_request_schema(76, 1)
    return ask(bootstrap, 76, 1, schema(group_id=group, member_id=member, member_epoch=epoch,
                                         rack_id=None, subscribed_topic_names=topics))


def share_fetch(bootstrap: str, group: str, member: str, epoch: int, topic_id: Any,
                 acks: tuple[tuple[int, int, tuple[int, ...]], ...] = ()) -> Any:
    schema: Any = load_request_schema(78, 1)
    module = sys.modules[schema.__module__]
    return ask(bootstrap, 78, 1, schema(
        group_id=group, member_id=member, share_session_epoch=epoch,
        max_wait=datetime.timedelta(milliseconds=200), min_bytes=1, max_bytes=1 << 20,
        max_records=100, batch_size=100, forgotten_topics_data=(), topics=(module.FetchTopic(
            topic_id=topic_id, partitions=(module.FetchPartition(
                partition_index=0, acknowledgement_batches=tuple(
                    module.AcknowledgementBatch(first_offset=first, last_offset=last,
                                                acknowledge_types=types)
                    for first, last, types in acks)),)),)))


def share_acknowledge(bootstrap: str, group: str, member: str, epoch: int, topic_id: Any,
                       acks: tuple[tuple[int, int, tuple[int, ...]], ...]) -> Any:
    schema: Any = load_request_schema(79, 1)
    module = sys.modules[schema.__module__]
    return ask(bootstrap, 79, 1, schema(
        group_id=group, member_id=member, share_session_epoch=epoch, topics=(
            module.AcknowledgeTopic(topic_id=topic_id, partitions=(module.AcknowledgePartition(
                partition_index=0, acknowledgement_batches=tuple(
                    module.AcknowledgementBatch(first_offset=first, last_offset=last,
                                                acknowledge_types=types)
                    for first, last, types in acks)),)),)))


def partition(answer: Any) -> Any:
    [topic] = answer.responses
    [partition] = topic.partitions
    return partition


def offsets(bootstrap: str, group: str,
             topic: str | None) -> list[tuple[int, int, int, ErrorCode]]:
    """DescribeShareGroupOffsets v1 of partition 0 (None: every topic): (partition, start
    offset, lag, error) of each partition answered."""
    schema: Any = load_request_schema(90, 1)
    module = sys.modules[schema.__module__]
    topics = None if topic is None else (module.DescribeShareGroupOffsetsRequestTopic(
        topic_name=topic, partitions=(0,)),)
    answer = ask(bootstrap, 90, 1, schema(groups=(
        module.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=topics),)))
    [described] = answer.groups
    assert described.error_code == ErrorCode.none
    return [(p.partition_index, p.start_offset, p.lag, p.error_code)
            for t in described.topics for p in t.partitions]


def alter(bootstrap: str, group: str, topic: str,
           start: int) -> tuple[ErrorCode, list[ErrorCode]]:
    schema: Any = load_request_schema(91, 0)
    module = sys.modules[schema.__module__]
    answer = ask(bootstrap, 91, 0, schema(group_id=group, topics=(
        module.AlterShareGroupOffsetsRequestTopic(topic_name=topic, partitions=(
            module.AlterShareGroupOffsetsRequestPartition(partition_index=0,
                                                          start_offset=start),)),)))
    return answer.error_code, [p.error_code for t in answer.responses for p in t.partitions]
