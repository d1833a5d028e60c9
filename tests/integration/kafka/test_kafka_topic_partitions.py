"""Topics described and their ids on a real ``folio standalone`` (docs/kafka.md).

DescribeTopicPartitions (key 75): raw requests as Kafka 3.8's Java
AdminClient sends them (``describeTopics`` pages with a cursor), over a topic
of several partitions made by a real client: every page as Kafka's broker
cuts it, the cursor walked to the end, the leaders as Metadata names them, and
the per-topic errors. librdkafka's ``describe_topics`` (which asks with
Metadata) answers the same partitions.

Topic ids in CreateTopics v7 and DeleteTopics v6 (KIP-516): raw kio requests
(the id made is the one Metadata shows; deletion by id; UNKNOWN_TOPIC_ID and
INVALID_REQUEST as Kafka answers them), and kafka-python 3 (which sends those
versions; librdkafka sends CreateTopics up to v4 and DeleteTopics up to v1)
creating a topic, reading its id and deleting it by that id.
"""

from __future__ import annotations

import datetime
import itertools
import socket
import uuid
from typing import Any

from confluent_kafka import TopicCollection
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

from tests.support.kafka import raw_request, read_response
from tests.support.wait import wait_for

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


# --- topic ids in CreateTopics v7 and DeleteTopics v6 ----------------------------------------

#: Kafka's "no topic id" (kio decodes it as None).
_ZERO = uuid.UUID(int=0)


def _ask(bootstrap: str, key: int, version: int, request: Any) -> Any:
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        correlation = next(_IDS)
        sock.sendall(raw_request(key, version, correlation, request))
        got, answer = read_response(sock, key, version)
    assert got == correlation
    return answer


def _create_v7(bootstrap: str, names: list[str], partitions: int, *,
               validate_only: bool = False) -> Any:
    cls: Any = load_request_schema(19, 7)
    topic = __import__(cls.__module__, fromlist=["CreatableTopic"]).CreatableTopic
    return _ask(bootstrap, 19, 7, cls(topics=tuple(topic(
        name=name, num_partitions=partitions, replication_factor=-1, assignments=(), configs=())
        for name in names), timeout=datetime.timedelta(seconds=30), validate_only=validate_only))


def _delete_v6(bootstrap: str, entries: list[tuple[str | None, uuid.UUID]]) -> Any:
    cls: Any = load_request_schema(20, 6)
    state = __import__(cls.__module__, fromlist=["DeleteTopicState"]).DeleteTopicState
    return _ask(bootstrap, 20, 6, cls(topics=tuple(state(name=name, topic_id=topic_id)
                                                   for name, topic_id in entries),
                                      timeout=datetime.timedelta(seconds=30)))


def _metadata_ids(bootstrap: str, names: list[str]) -> dict[str, tuple[ErrorCode, uuid.UUID]]:
    cls: Any = load_request_schema(3, 12)
    topic = __import__(cls.__module__, fromlist=["MetadataRequestTopic"]).MetadataRequestTopic
    answer = _ask(bootstrap, 3, 12, cls(
        topics=tuple(topic(name=name, topic_id=None) for name in names),
        allow_auto_topic_creation=False, include_topic_authorized_operations=False))
    return {t.name: (t.error_code, t.topic_id) for t in answer.topics}


def test_create_topics_v7_answers_the_id_metadata_shows(bootstrap: str) -> None:
    made, bad, checked = (f"tid.{n}.{uuid.uuid4().hex[:6]}" for n in ("made", "bad", "checked"))
    answer = _create_v7(bootstrap, [made, bad + "/x"], 2)
    results = {t.name: t for t in answer.topics}
    assert results[made].error_code == ErrorCode.none and results[made].num_partitions == 2
    assert results[made].topic_id not in (None, _ZERO)
    assert results[bad + "/x"].error_code == ErrorCode.invalid_topic_exception
    assert results[bad + "/x"].topic_id is None  # nothing made: the zero id (kio: None)
    assert _metadata_ids(bootstrap, [made]) == {made: (ErrorCode.none, results[made].topic_id)}
    # Made again: TOPIC_ALREADY_EXISTS, no id; only checked: no id, nothing made.
    (again,) = _create_v7(bootstrap, [made], 2).topics
    assert (again.error_code, again.topic_id) == (ErrorCode.topic_already_exists, None)
    (validated,) = _create_v7(bootstrap, [checked], 1, validate_only=True).topics
    assert (validated.error_code, validated.topic_id) == (ErrorCode.none, None)
    assert _metadata_ids(bootstrap, [checked])[checked][0] == (
        ErrorCode.unknown_topic_or_partition)


def test_delete_topics_v6_by_id_and_by_name_as_kafka_answers(bootstrap: str) -> None:
    by_id, by_name, kept, both = (f"tid.{n}.{uuid.uuid4().hex[:6]}"
                                  for n in ("id", "name", "kept", "both"))
    made = {t.name: t.topic_id
            for t in _create_v7(bootstrap, [by_id, by_name, kept, both], 1).topics}
    unknown = uuid.uuid4()
    answer = _delete_v6(bootstrap, [
        (None, made[by_id]), (by_name, _ZERO), (None, unknown), (kept, made[kept]),
        (None, _ZERO), (None, made[kept]), (None, made[kept]), (None, made[both]),
        (both, _ZERO)])
    got = [(t.name, t.topic_id, t.error_code, t.error_message) for t in answer.responses]
    assert got == [
        (by_id, made[by_id], ErrorCode.none, None),
        (by_name, made[by_name], ErrorCode.none, None),  # by name: answered with its id too
        (None, unknown, ErrorCode.unknown_topic_id, "This server does not host this topic ID."),
        (kept, made[kept], ErrorCode.invalid_request,
         "You may not specify both topic name and topic id."),
        (None, None, ErrorCode.invalid_request, "Neither topic name nor id were specified."),
        (None, made[kept], ErrorCode.invalid_request, "Duplicate topic id."),
        *[(both, made[both], ErrorCode.invalid_request,  # by id and by name: neither deleted
           "The provided topic name maps to an ID that was already supplied.")] * 2]
    ids = _metadata_ids(bootstrap, [by_id, by_name, kept, both])
    assert {name: code for name, (code, _) in ids.items()} == {
        by_id: ErrorCode.unknown_topic_or_partition,
        by_name: ErrorCode.unknown_topic_or_partition, kept: ErrorCode.none,
        both: ErrorCode.none}
    # The id of a deleted topic names nothing, also once its name is made again.
    remade = _create_v7(bootstrap, [by_id], 1).topics[0].topic_id
    assert remade not in (made[by_id], _ZERO)
    (stale,) = _delete_v6(bootstrap, [(None, made[by_id])]).responses
    assert stale.error_code == ErrorCode.unknown_topic_id
    assert _metadata_ids(bootstrap, [by_id]) == {by_id: (ErrorCode.none, remade)}


def test_kafka_python_creates_and_deletes_by_topic_id(bootstrap: str) -> None:
    """kafka-python 3 negotiates CreateTopics v7 and DeleteTopics v6 from ApiVersions."""
    name = f"tid.kp.{uuid.uuid4().hex[:6]}"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30_000)
    try:
        created = admin.create_topics({name: {"num_partitions": 3}})
        ((topic),) = created["topics"]
        topic_id = uuid.UUID(topic["topic_id"])  # (its answers give ids as text)
        assert (topic["error_code"], topic["num_partitions"]) == (0, 3)
        assert _metadata_ids(bootstrap, [name]) == {name: (ErrorCode.none, topic_id)}
        deleted = admin.delete_topics([topic_id])
        assert [(t["name"], t["topic_id"], t["error_code"]) for t in deleted["topics"]] == [
            (name, str(topic_id), 0)]
        wait_for(lambda: name not in admin.list_topics(), f"{name} gone from the topic list")
    finally:
        admin.close()
