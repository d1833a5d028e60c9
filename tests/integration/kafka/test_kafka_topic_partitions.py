"""DescribeTopicPartitions (key 75) on a real ``folio standalone`` (docs/kafka.md).

Raw requests as Kafka 3.8's Java AdminClient sends them (``describeTopics``
pages with a cursor), over a topic of several partitions made by a real
client: every page as Kafka's broker cuts it, the cursor walked to the end,
the leaders as Metadata names them, and the per-topic errors. librdkafka's
``describe_topics`` (which asks with Metadata) answers the same partitions.
"""

from __future__ import annotations

import itertools
import socket
import uuid
from typing import Any

from confluent_kafka import TopicCollection
from confluent_kafka.admin import AdminClient, NewTopic
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

from tests.support.kafka import raw_request, read_response

DEADLINE_S = 60.0
KEY = 75
_IDS = itertools.count(1)


def _request(names: list[str], limit: int, cursor: tuple[str, int] | None) -> Any:
    cls: Any = load_request_schema(KEY, 0)
    module = __import__(cls.__module__, fromlist=["TopicRequest", "Cursor"])
    return cls(topics=tuple(module.TopicRequest(name=name) for name in names),
               response_partition_limit=limit,
               cursor=None if cursor is None else module.Cursor(topic_name=cursor[0],
                                                               partition_index=cursor[1]))


def _pages(bootstrap: str, names: list[str], limit: int) -> list[Any]:
    """Every answer, from no cursor to the one without ``next_cursor``."""
    host, port = bootstrap.rsplit(":", 1)
    answers = []
    cursor = None
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        while True:
            correlation = next(_IDS)
            sock.sendall(raw_request(KEY, 0, correlation, _request(names, limit, cursor)))
            got, answer = read_response(sock, KEY, 0)
            assert got == correlation
            answers.append(answer)
            if answer.next_cursor is None:
                return answers
            cursor = (answer.next_cursor.topic_name, answer.next_cursor.partition_index)


def test_pages_of_a_topic_of_several_partitions_follow_the_cursor(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    first, second = (f"dtp.{n}.{uuid.uuid4().hex[:6]}" for n in ("a", "b"))
    futures = admin.create_topics([NewTopic(first, num_partitions=5, replication_factor=1),
                                   NewTopic(second, num_partitions=2, replication_factor=1)])
    for future in futures.values():
        future.result(DEADLINE_S)
    missing = "dtp.missing"
    pages = _pages(bootstrap, [second, missing, first], 2)
    seen = [[(t.name, t.error_code, [p.partition_index for p in t.partitions])
             for t in page.topics] for page in pages]
    ok = ErrorCode.none
    assert seen == [[(first, ok, [0, 1])], [(first, ok, [2, 3])],
                    [(first, ok, [4]), (second, ok, [0])],
                    [(second, ok, [1]), (missing, ErrorCode.unknown_topic_or_partition, [])]]
    partitions = [p for page in pages for t in page.topics for p in t.partitions]
    assert {(p.leader_id, p.replica_nodes, p.isr_nodes) for p in partitions} == {(0, (0,), (0,))}
    described = admin.describe_topics(TopicCollection([first])).get(first)
    assert described is not None
    answer = described.result(DEADLINE_S)
    assert [p.id for p in answer.partitions] == [0, 1, 2, 3, 4]
    # The same topic id as Metadata's (librdkafka's answer comes from Metadata v12).
    mask = (1 << 64) - 1
    metadata_id = uuid.UUID(int=(answer.topic_id.get_most_significant_bits() & mask) << 64
                            | answer.topic_id.get_least_significant_bits() & mask)
    assert {t.topic_id for page in pages for t in page.topics if t.name == first} \
        == {metadata_id}


def test_all_topics_fit_in_one_page_under_the_limit(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    name = f"dtp.all.{uuid.uuid4().hex[:6]}"
    admin.create_topics([NewTopic(name, num_partitions=3, replication_factor=1)])[name].result(
        DEADLINE_S)
    [page] = _pages(bootstrap, [], 2000)
    listed = {t.name: [p.partition_index for p in t.partitions] for t in page.topics}
    assert listed[name] == [0, 1, 2]
    assert list(listed) == sorted(listed)
    assert {t.error_code for t in page.topics} == {ErrorCode.none}
