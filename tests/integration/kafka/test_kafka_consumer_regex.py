"""Regular-expression subscriptions of KIP-848 groups with librdkafka on a real standalone.

``consumer.subscribe(["^prefix-.*"])`` with ``group.protocol=consumer``: the
broker resolves the regex (``SubscribedTopicRegex``) against the topic names.
The two matching topics are consumed whole; a matching topic created later
is assigned at the group's next refresh (every 10 s) and read; a topic that
does not match is never assigned, proven by the later topic's records
arriving while its own were there all along. RE2 syntax Python's ``re``
lacks (``\\Q...\\E``, ``\\pL``) selects the topics RE2 would. A regex RE2
refuses (a backreference) is answered INVALID_REGULAR_EXPRESSION.
"""

from __future__ import annotations

import datetime
import socket
import time
import uuid
from typing import Any

from confluent_kafka import Consumer, KafkaError, TopicPartition
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

from tests.integration.kafka.test_kafka_clients import DEADLINE_S, create_topic, produce
from tests.support.kafka import raw_request, read_response

#: A refresh (10 s), a heartbeat (5 s) and librdkafka's metadata of the new topic, well
#: inside the test's timeout.
SLOW_S = DEADLINE_S


def _consumer(bootstrap: str, group: str, regex: str) -> Consumer:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "group.protocol": "consumer", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([regex])
    return consumer


def _records(bootstrap: str, topic: str, count: int) -> None:
    produce(bootstrap, topic, [(p, b"%s-%d-%d" % (topic.encode(), p, i), None, [])
                               for i in range(count) for p in range(2)])


def test_regex_members_read_matching_topics_and_later_ones(bootstrap: str) -> None:
    prefix = f"rx-{uuid.uuid4().hex[:8]}"
    first, second, later, other = f"{prefix}-a", f"{prefix}-b", f"{prefix}-c", f"x{prefix}-a"
    for topic in (first, second, other):
        create_topic(bootstrap, topic, 2)
        _records(bootstrap, topic, 3)
    consumer = _consumer(bootstrap, f"{prefix}-group", f"^{prefix}-.*")
    read: dict[str, int] = {}

    def poll_until(condition: Any, what: str) -> None:
        deadline = time.monotonic() + SLOW_S
        while not condition():
            assert time.monotonic() < deadline, f"not within {SLOW_S} s: {what}; read {read}"
            message = consumer.poll(0.1)
            if message is None:
                continue
            assert message.error() is None, message.error()
            topic = message.topic()
            assert topic is not None
            read[topic] = read.get(topic, 0) + 1

    try:
        poll_until(lambda: read.get(first) == 6 and read.get(second) == 6,
                   "every record of both matching topics")
        create_topic(bootstrap, later, 2)
        _records(bootstrap, later, 2)
        poll_until(lambda: read.get(later) == 4, "the matching topic created later")
        assigned = {tp.topic for tp in consumer.assignment()}
        assert assigned == {first, second, later}
        assert other not in read
        assert set(read) == {first, second, later}
        assert sum(read.values()) == 16
        consumer.commit(offsets=[TopicPartition(later, 0, 2)], asynchronous=False)
    finally:
        consumer.close()


def test_an_re2_regex_python_lacks_selects_its_topics(bootstrap: str) -> None:
    """``^\\Q<prefix>.\\E\\pL+``: RE2's quoting and a Unicode category (Python's ``re``
    has neither), sent by librdkafka as the member's SubscribedTopicRegex. (librdkafka
    compiles a subscription with its own engine first, which refuses ``\\p{L}``, ``(?i)``
    and ``(?P<name>``: those reach Kafka only from other clients.)"""
    prefix = f"re2.{uuid.uuid4().hex[:8]}"
    letters, digits, unquoted = f"{prefix}.eu", f"{prefix}.e1", f"{prefix}xeu"
    for topic in (letters, digits, unquoted):
        create_topic(bootstrap, topic, 2)
        _records(bootstrap, topic, 3)
    regex = "^\\Q" + prefix + ".\\E\\pL+"
    assert _heartbeat(bootstrap, f"{prefix}-raw", regex).error_code == ErrorCode.none
    consumer = _consumer(bootstrap, f"{prefix}-group", regex)
    read: dict[str, int] = {}
    try:
        deadline = time.monotonic() + SLOW_S
        while read.get(letters, 0) < 6:
            assert time.monotonic() < deadline, f"not within {SLOW_S} s; read {read}"
            message = consumer.poll(0.1)
            if message is None:
                continue
            assert message.error() is None, message.error()
            name = message.topic()
            assert name is not None
            read[name] = read.get(name, 0) + 1
        assert {tp.topic for tp in consumer.assignment()} == {letters}
        assert read == {letters: 6}  # "e1" is no letter, "x" is no quoted "."
    finally:
        consumer.close()


def _heartbeat(bootstrap: str, group: str, regex: str) -> Any:
    host, port = bootstrap.rsplit(":", 1)
    schema: Any = load_request_schema(68, 1)
    request = schema(
        group_id=group, member_id=str(uuid.uuid4()), member_epoch=0, instance_id=None,
        rack_id=None, rebalance_timeout=datetime.timedelta(seconds=30),
        subscribed_topic_names=(), subscribed_topic_regex=regex,
        server_assignor=None, topic_partitions=())
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(raw_request(68, 1, 7, request))
        correlation_id, answer = read_response(sock, 68, 1)
    assert correlation_id == 7
    return answer


def test_a_bad_regex_is_invalid_regular_expression(bootstrap: str) -> None:
    answer = _heartbeat(bootstrap, "rx-bad", "^rx-(a)\\1")
    assert answer.error_code == ErrorCode.invalid_regular_expression
    assert answer.error_message.startswith(
        "SubscribedTopicRegex `^rx-(a)\\1` is not a valid regular expression: ")
    # librdkafka reports the broker's refusal to the application as a fatal error,
    # with the text of code 128 (INVALID_REGULAR_EXPRESSION), as against Kafka.
    consumer = _consumer(bootstrap, "rx-bad-client", "^rx-(a)\\1")
    try:
        deadline = time.monotonic() + DEADLINE_S
        error: KafkaError | None = None
        while error is None:
            assert time.monotonic() < deadline, "the refusal never reached the consumer"
            message = consumer.poll(0.1)
            error = None if message is None else message.error()
        assert error.code() == KafkaError._FATAL, error
        assert "Broker: The regular expression is not valid" in error.str(), error
    finally:
        consumer.close()
