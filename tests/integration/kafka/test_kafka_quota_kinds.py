"""Kafka's request time, controller mutation and per-IP connection quotas on a real standalone.

docs/kafka.md, "Client quotas". One ``folio standalone`` for the module,
with ``--kafka-max-connections-per-ip-overrides`` for one loopback address
(the clients of the other tests connect from 127.0.0.1; the connection
tests connect from 127.0.0.3 and 127.0.0.4, so their quotas bound no one
else). Quotas are set with AlterClientQuotas, sent raw as in
``test_kafka_client_quotas.py``:

- controller mutations: kafka-python's admin client (CreateTopics v6,
  CreatePartitions v3, DeleteTopics v5, negotiated) gets
  THROTTLING_QUOTA_EXCEEDED once the client's tokens are spent; an older
  CreateTopics (v5) is served and throttled instead;
- request time: a client whose tiny ``request_percentage`` any request
  exceeds gets Kafka's bounded throttle (one window, 1 s) in its answers,
  and a librdkafka producer under it still delivers every record once;
- connections: over an address's ``connection_creation_rate`` a connection
  is closed (after its throttle time) without an answer; over the
  per-address count one is closed at once, and a slot freed is taken again.

No timing is asserted.
"""

from __future__ import annotations

import datetime
import socket
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Producer, ThrottleEvent
from kafka import KafkaAdminClient
from kafka import errors as kafka_errors
from kio.schema.errors import ErrorCode

from tests.integration.kafka.test_kafka_client_quotas import (
    _alter,
    _call,
    _describe,
    _end_offset,
    _entries,
    _make,
    _name,
    _payloads,
    _read_all,
)
from tests.observability.scrape import metrics_url, wait_for
from tests.support.bookies import BookieProcess, BookieProcesses
from tests.support.kafka import raw_request, read_frame, read_response
from tests.support.standalone import start_standalone
from tests.support.wait import wait_for as wait_until

_OK = (ErrorCode.none, None)
DEADLINE_S = 60.0
#: The address the per-address count is lowered for (``--kafka-max-connections-per-ip-overrides``).
_LIMITED = "127.0.0.4"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BookieProcess]:
    """The module's standalone: at most 2 Kafka connections from ``_LIMITED``."""
    processes = BookieProcesses()
    started = start_standalone(processes, tmp_path_factory.mktemp("standalone") / "data",
                               "--kafka-port", "0",
                               "--kafka-max-connections-per-ip-overrides", f"{_LIMITED}:2")
    yield started
    try:
        started.terminate()
    finally:
        processes.kill_all()


# ------------------------------------------------------------------ controller mutations


def _admin(bootstrap: str, client_id: str) -> Any:
    return KafkaAdminClient(bootstrap_servers=bootstrap, client_id=client_id,
                            request_timeout_ms=int(DEADLINE_S * 1000))


def _as(bootstrap: str, client_id: str, call: Callable[[Any], Any]) -> Any:
    """``call(admin)`` with a new admin client of ``client_id``.

    A new one each time: kafka-python holds a throttled connection's next
    request back itself (KIP-219), failing it with NodeNotReadyError meanwhile.
    """
    admin = _admin(bootstrap, client_id)
    try:
        return call(admin)
    finally:
        admin.close()


def test_over_the_mutation_rate_topics_are_refused_with_throttling_quota_exceeded(
        bootstrap: str) -> None:
    client = _name("cq-mutator")
    # 0.2 partitions per second: 2 tokens, a whole topic of 12 goes and leaves the
    # bucket at -10: the client is refused for the next 50 s, whatever the load here.
    assert _alter(bootstrap, [([("client-id", client)],
                               [("controller_mutation_rate", 0.2, False)])]) == [_OK]
    big, small = _name("cq-big"), _name("cq-small")
    made = _as(bootstrap, client, lambda admin: admin.create_topics(
        {big: {"num_partitions": 12, "replication_factor": 1}}))
    assert [topic["error_code"] for topic in made["topics"]] == [0]
    refused = _as(bootstrap, client, lambda admin: admin.create_topics(
        {small: {"num_partitions": 1}}, raise_errors=False))
    [topic] = refused["topics"]
    assert (topic["name"], topic["error_code"]) == (small, 89)
    assert topic["error_message"] == "The throttling quota has been exceeded."
    # Kafka checks the topic before the quota: an existing one is TOPIC_ALREADY_EXISTS.
    again = _as(bootstrap, client, lambda admin: admin.create_topics(
        {big: {"num_partitions": 1}}, raise_errors=False))
    assert again["topics"][0]["error_code"] == 36
    with pytest.raises(kafka_errors.ThrottlingQuotaExceededError):
        _as(bootstrap, client, lambda admin: admin.create_partitions({big: 14}))
    with pytest.raises(kafka_errors.ThrottlingQuotaExceededError):
        _as(bootstrap, client, lambda admin: admin.delete_topics([big]))
    # Nothing refused was done; another client is not bounded by this one's quota.
    free = _name("cq-free")
    [described] = _as(bootstrap, free, lambda admin: admin.describe_topics([big]))
    assert len(described["partitions"]) == 12
    assert _as(bootstrap, free, lambda admin: admin.list_topics()).count(small) == 0
    # Once the tokens are back, the client's retry is done (the bucket refills at
    # the quota: raised, at once; the throttle time itself is unit-tested).
    assert _alter(bootstrap, [([("client-id", client)],
                               [("controller_mutation_rate", 1000.0, False)])]) == [_OK]
    wait_until(lambda: _as(bootstrap, client, lambda admin: admin.create_topics(
        {small: {"num_partitions": 1}}, raise_errors=False))["topics"][0]["error_code"] == 0,
        "the refused topic made on a retry once the tokens are back", timeout_s=DEADLINE_S)
    assert _as(bootstrap, free, lambda admin: admin.delete_topics([big]))[
        "topics"][0]["error_code"] == 0


def _create(bootstrap: str, client_id: str, name: str, partitions: int,
            version: int = 5) -> Any:
    """The answer to a raw CreateTopics of one topic at ``version``, as ``client_id``."""
    request = _make(19, version, timeout=datetime.timedelta(seconds=30), validate_only=False,
                    topics=(_make(19, version, "CreatableTopic", name=name,
                                  num_partitions=partitions, replication_factor=-1,
                                  assignments=(), configs=()),))
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(raw_request(19, version, 1, request, client_id=client_id))
        _, answer = read_response(sock, 19, version)
    return answer


def test_an_older_create_topics_is_served_and_throttled(bootstrap: str) -> None:
    client = _name("cq-old")
    # 0.2 partitions per second: 2 tokens, which the first topic takes.
    assert _alter(bootstrap, [([("client-id", client)],
                               [("controller_mutation_rate", 0.2, False)])]) == [_OK]
    first = _create(bootstrap, client, _name("cq-v5"), 2)
    assert first.topics[0].error_code is ErrorCode.none
    assert first.throttle_time == datetime.timedelta(0)  # the bucket at 0: not below
    second = _create(bootstrap, client, _name("cq-v5"), 2)
    # Created all the same (v5 knows no THROTTLING_QUOTA_EXCEEDED), the bucket below 0
    # (-2, plus what 10 s at most refilled meanwhile): a throttle time.
    assert second.topics[0].error_code is ErrorCode.none
    assert second.throttle_time > datetime.timedelta(0)


# ------------------------------------------------------------------ request time


def test_a_client_over_its_request_percentage_is_throttled_and_loses_nothing(
        server: BookieProcess, bootstrap: str) -> None:
    topic, client = _name("cq-busy"), _name("cq-busy")
    admin = _admin(bootstrap, _name("cq-setup"))
    try:
        admin.create_topics({topic: {"num_partitions": 1}})
    finally:
        admin.close()
    # Any request uses more than a millionth of a percent of a thread: each answer
    # carries Kafka's bounded request throttle, one window.
    assert _alter(bootstrap, [([("client-id", client)],
                               [("request_percentage", 0.000001, False)])]) == [_OK]
    request = _make(3, 12, topics=None, allow_auto_topic_creation=False,
                    include_topic_authorized_operations=False)
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        for correlation in (1, 2):
            sock.sendall(raw_request(3, 12, correlation, request, client_id=client))
            got, answer = read_response(sock, 3, 12)
            assert got == correlation
            assert answer.throttle_time == datetime.timedelta(seconds=1)
    unbounded = _call(bootstrap, 3, 12, request)  # client id "test": no quota
    assert unbounded.throttle_time == datetime.timedelta(0)
    throttles: list[float] = []

    def throttled(event: ThrottleEvent) -> None:
        throttles.append(event.throttle_time)

    producer = Producer({"bootstrap.servers": bootstrap, "client.id": client,
                         "enable.idempotence": True, "linger.ms": 5,
                         "throttle_cb": throttled})
    payloads = _payloads(10, 100)
    for payload in payloads:
        producer.produce(topic, payload)
    assert producer.flush(DEADLINE_S) == 0
    assert any(seconds > 0 for seconds in throttles), throttles
    assert _end_offset(bootstrap, topic) == len(payloads)
    assert _read_all(bootstrap, topic, len(payloads), {}) == payloads
    page = wait_for(metrics_url(server),
                    lambda p: p.value("folio_kafka_throttled_responses_total",
                                      quota="request") > 0,
                    timeout_s=DEADLINE_S, what="a throttled request in /metrics")
    assert page.value("folio_kafka_throttle_seconds_total", quota="request") > 0


# ------------------------------------------------------------------ connections


def _connect(bootstrap: str, source: str) -> socket.socket:
    host, port = bootstrap.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=30, source_address=(source, 0))


def _answers(sock: socket.socket) -> bool:
    """Whether the broker answers an ApiVersions on ``sock`` (False: it closed it unanswered)."""
    request = _make(18, 3, client_software_name="quota-test", client_software_version="1")
    try:
        sock.sendall(raw_request(18, 3, 7, request))
    except OSError:  # reset before the request went out: closed all the same
        return False
    try:
        return read_frame(sock) is not None
    except OSError:
        return False


def test_connections_over_an_addresss_creation_rate_are_closed_unanswered(
        server: BookieProcess, bootstrap: str) -> None:
    source = "127.0.0.3"
    assert _alter(bootstrap, [([("ip", source)], [("connection_creation_rate", 1.0, False)])]) \
        == [_OK]
    assert _entries(_describe(bootstrap, [("ip", 0, source)])) == {
        (("ip", source),): {"connection_creation_rate": 1.0}}
    # 1 per second over Kafka's 10 s minimum window: ten at once, and not an eleventh.
    opened = [_connect(bootstrap, source) for _ in range(10)]
    try:
        assert all(_answers(sock) for sock in opened)
        with _connect(bootstrap, source) as refused:
            assert not _answers(refused)
        with _connect(bootstrap, "127.0.0.1") as other:
            assert _answers(other)  # another address: not bounded
    finally:
        for sock in opened:
            sock.close()
    page = wait_for(metrics_url(server),
                    lambda p: p.value("folio_kafka_connections_refused_total",
                                      reason="ip_rate") > 0,
                    timeout_s=DEADLINE_S, what="a refused connection in /metrics")
    assert page.value("folio_kafka_connections_refused_total", reason="ip_rate") >= 1


def test_a_connection_over_the_per_address_count_is_closed_until_one_closes(
        bootstrap: str) -> None:
    first, second = _connect(bootstrap, _LIMITED), _connect(bootstrap, _LIMITED)
    try:
        assert _answers(first) and _answers(second)
        with _connect(bootstrap, _LIMITED) as third:
            assert not _answers(third)
        first.close()
        # The broker sees the close when it reads: a new connection is admitted then.

        def admitted() -> bool:
            with _connect(bootstrap, _LIMITED) as again:
                return _answers(again)

        wait_until(admitted, "a connection from the address admitted after one closed",
                   timeout_s=DEADLINE_S)
    finally:
        first.close()
        second.close()
