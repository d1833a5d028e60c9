"""Kafka client quotas on a real ``folio standalone`` (docs/kafka.md, "Client quotas").

Neither confluent-kafka 2.16's nor kafka-python 3.0's admin client offers
DescribeClientQuotas / AlterClientQuotas, so they are sent raw (kio), as
Kafka's Java AdminClient and ``kafka-configs.sh`` send them: set, describe
with each filter, validate only, remove; Kafka's refusals and their codes;
the quotas kept over a restart. Enforcement with librdkafka: a producer and
a consumer over their byte rates get throttle times in their answers (the
client's ``throttle_cb`` reports what the broker answered when above 0, and 0
once a throttle has ended; the broker's ``/metrics`` counts them too) and every record arrives,
intact and in order. No timing is asserted.
"""

from __future__ import annotations

import datetime
import itertools
import socket
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, ThrottleEvent, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

import folio
from ledger.security.tokens import create_token
from tests.observability.scrape import metrics_url, wait_for
from tests.support.bookies import BookieProcess, BookieProcesses
from tests.support.kafka import kafka_address, raw_request, read_response, sasl_plain
from tests.support.standalone import start_standalone

DESCRIBE, ALTER = 48, 49
SECRET = b"kafka-quotas-test-secret-0123456789abcdef"
DEADLINE_S = 60.0
_IDS = itertools.count(1)
#: (entity type, name or None: the default)
Component = tuple[str, str | None]


def _make(api_key: int, version: int, struct: str | None = None, /, **values: Any) -> Any:
    cls: Any = load_request_schema(api_key, version)
    if struct is not None:
        cls = getattr(sys.modules[cls.__module__], struct)
    return cls(**values)


def _call(bootstrap: str, api_key: int, version: int, request: Any,
          token: str | None = None) -> Any:
    """The answer to ``request`` (authenticated with SASL PLAIN and ``token`` if given)."""
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        if token is not None:
            sasl_plain(sock, token)
        correlation = next(_IDS)
        sock.sendall(raw_request(api_key, version, correlation, request))
        got, answer = read_response(sock, api_key, version)
    assert got == correlation
    return answer


def _alter(bootstrap: str, entries: list[tuple[list[Component], list[tuple[str, float, bool]]]],
           *, validate_only: bool = False, version: int = 1,
           token: str | None = None) -> list[tuple[ErrorCode, str | None]]:
    """(code, message) of each entry: (components, [(key, value, remove)])."""
    request = _make(ALTER, version, entries=tuple(
        _make(ALTER, version, "EntryData", entity=tuple(
            _make(ALTER, version, "EntityData", entity_type=t, entity_name=n)
            for t, n in entity), ops=tuple(
            _make(ALTER, version, "OpData", key=key, value=value, remove=remove)
            for key, value, remove in ops))
        for entity, ops in entries), validate_only=validate_only)
    answer = _call(bootstrap, ALTER, version, request, token)
    return [(entry.error_code, entry.error_message) for entry in answer.entries]


def _describe(bootstrap: str, components: list[tuple[str, int, str | None]],
              strict: bool = False, version: int = 1) -> Any:
    request = _make(DESCRIBE, version, components=tuple(
        _make(DESCRIBE, version, "ComponentData", entity_type=t, match_type=m, match=n)
        for t, m, n in components), strict=strict)
    return _call(bootstrap, DESCRIBE, version, request)


def _entries(answer: Any) -> dict[tuple[Component, ...], dict[str, float]]:
    assert answer.error_code is ErrorCode.none, answer.error_message
    return {tuple((e.entity_type, e.entity_name) for e in entry.entity):
            {v.key: v.value for v in entry.values} for entry in answer.entries}


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


_OK = (ErrorCode.none, None)


def test_quotas_are_set_described_by_each_filter_and_removed(bootstrap: str) -> None:
    client, user = _name("cq-client"), _name("cq-user")
    assert _alter(bootstrap, [
        ([("client-id", client)], [("producer_byte_rate", 1024.0, False)]),
        ([("user", user), ("client-id", None)], [("producer_byte_rate", 2048.0, False),
                                                 ("consumer_byte_rate", 4096.0, False)]),
        ([("user", user)], [("consumer_byte_rate", 8192.0, False)]),
    ]) == [_OK, _OK, _OK]
    assert _entries(_describe(bootstrap, [("client-id", 0, client)])) == {
        (("client-id", client),): {"producer_byte_rate": 1024.0}}
    assert _entries(_describe(bootstrap, [("user", 0, user)])) == {
        (("client-id", None), ("user", user)): {"producer_byte_rate": 2048.0,
                                                "consumer_byte_rate": 4096.0},
        (("user", user),): {"consumer_byte_rate": 8192.0}}
    assert _entries(_describe(bootstrap, [("user", 0, user)], strict=True)) == {
        (("user", user),): {"consumer_byte_rate": 8192.0}}
    assert _entries(_describe(bootstrap, [("user", 0, user), ("client-id", 1, None)],
                              version=0)) == {
        (("client-id", None), ("user", user)): {"producer_byte_rate": 2048.0,
                                                "consumer_byte_rate": 4096.0}}
    everything = _entries(_describe(bootstrap, []))
    assert (("client-id", client),) in everything and (("user", user),) in everything
    # validate_only checks and stores nothing; v0 changes as v1 does.
    other = _name("cq-other")
    assert _alter(bootstrap, [([("client-id", other)], [("consumer_byte_rate", 10.0, False)])],
                  validate_only=True) == [_OK]
    assert _entries(_describe(bootstrap, [("client-id", 0, other)])) == {}
    assert _alter(bootstrap, [([("client-id", client)], [("producer_byte_rate", 0.0, True)]),
                              ([("user", user)], [("consumer_byte_rate", 16384.0, False)])],
                  version=0) == [_OK, _OK]
    assert _entries(_describe(bootstrap, [("client-id", 0, client)])) == {}
    assert _entries(_describe(bootstrap, [("user", 0, user)], strict=True)) == {
        (("user", user),): {"consumer_byte_rate": 16384.0}}


def test_what_kafka_refuses_is_refused_with_its_code_and_the_rest_applies(
        bootstrap: str) -> None:
    good = _name("cq-good")
    answers = _alter(bootstrap, [
        ([("client-id", _name("cq"))], [("connection_creation_rate", 50.0, False)]),
        ([("client-id", _name("cq"))], [("no_such_quota", 5.0, False)]),
        ([("user", _name("cq"))], [("producer_byte_rate", 10.5, False)]),
        ([("ip", "127.0.0.1"), ("user", "u")], [("connection_creation_rate", 5.0, False)]),
        ([("user", "")], [("producer_byte_rate", 5.0, False)]),
        ([("client-id", good)], [("producer_byte_rate", 5.0, False)]),
        ([], [("producer_byte_rate", 5.0, False)]),
    ])
    assert [code for code, _ in answers] == [ErrorCode.invalid_request] * 5 + [
        ErrorCode.none, ErrorCode.invalid_request]
    assert "Invalid configuration key connection_creation_rate" in str(answers[0][1])
    assert "IP quota should not combine with user or clientId" in str(answers[3][1])
    assert "Invalid configuration key no_such_quota" in str(answers[1][1])
    assert "must be a Long value" in str(answers[2][1])
    assert _entries(_describe(bootstrap, [("client-id", 0, good)])) == {
        (("client-id", good),): {"producer_byte_rate": 5.0}}
    twice = _name("cq-twice")
    assert [code for code, _ in _alter(bootstrap, [
        ([("client-id", twice)], [("producer_byte_rate", 5.0, False)]),
        ([("client-id", twice)], [("consumer_byte_rate", 5.0, False)])])] == [
        ErrorCode.invalid_request] * 2
    assert _entries(_describe(bootstrap, [("client-id", 0, twice)])) == {}
    unknown = _describe(bootstrap, [("group", 0, "g")])
    assert (unknown.error_code, unknown.entries) == (ErrorCode.unsupported_version, None)
    both = _describe(bootstrap, [("user", 2, None), ("user", 1, None)])
    assert both.error_code is ErrorCode.invalid_request


def _topic(bootstrap: str, prefix: str) -> str:
    name = _name(prefix)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, num_partitions=1,
                                                replication_factor=1)]).values():
        future.result(timeout=DEADLINE_S)
    return name


def _end_offset(bootstrap: str, topic: str, partition: int = 0,
                config: dict[str, Any] | None = None) -> int:
    """The partition's end offset (ListOffsets), what a duplicate would move."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": _name("cq-w"),
                         **(config or {})})
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, partition),
                                                 timeout=DEADLINE_S)
        return int(high)
    finally:
        consumer.close()


def _read_all(bootstrap: str, topic: str, count: int, config: dict[str, Any], *,
              partition: int = 0) -> list[bytes]:
    """The first ``count`` records of the partition, read by a consumer of ``config``."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": _name("cq-g"),
                         "enable.auto.commit": False, **config})
    try:
        consumer.assign([TopicPartition(topic, partition, 0)])
        values: list[bytes] = []
        for _ in range(10_000):
            if len(values) >= count:
                break
            message = consumer.poll(1.0)
            if message is None:
                continue
            assert message.error() is None, message.error()
            value = message.value()
            assert value is not None
            values.append(value)
        return values
    finally:
        consumer.close()


def _payloads(count: int, size: int) -> list[bytes]:
    return [f"{n:06d}".encode() + bytes([n % 251]) * (size - 6) for n in range(count)]


def _throttled(page: Any, quota: str) -> float:
    return float(page.value("folio_kafka_throttled_responses_total", quota=quota))


def test_a_producer_over_its_byte_rate_is_throttled_and_loses_nothing(
        server: BookieProcess, bootstrap: str) -> None:
    topic, client = _topic(bootstrap, "cq-produce"), _name("cq-producer")
    # 5,000 B/s over Kafka's 10 s minimum window: 60 KB sent is about 2 s over.
    assert _alter(bootstrap, [([("client-id", client)],
                               [("producer_byte_rate", 5000.0, False)])]) == [_OK]
    throttles: list[int] = []

    def throttled(event: ThrottleEvent) -> None:
        throttles.append(int(event.throttle_time * 1000))

    producer = Producer({"bootstrap.servers": bootstrap, "client.id": client,
                         "linger.ms": 5, "batch.size": 4096, "enable.idempotence": True,
                         "throttle_cb": throttled})
    payloads = _payloads(60, 1000)
    failures: list[Any] = []

    def delivered(error: Any, _message: Any) -> None:
        if error is not None:
            failures.append(error)

    for payload in payloads:
        producer.produce(topic, payload, on_delivery=delivered)
    assert producer.flush(DEADLINE_S) == 0
    assert failures == []
    assert any(ms > 0 for ms in throttles), throttles
    assert _end_offset(bootstrap, topic) == len(payloads)  # each record stored once
    assert _read_all(bootstrap, topic, len(payloads), {}) == payloads
    page = wait_for(metrics_url(server), lambda p: _throttled(p, "produce") > 0,
                    timeout_s=DEADLINE_S, what="a throttled produce answer in /metrics")
    assert page.value("folio_kafka_throttle_seconds_total", quota="produce") > 0


def test_a_consumer_over_its_byte_rate_is_throttled_and_reads_everything_in_order(
        server: BookieProcess, bootstrap: str) -> None:
    topic, client = _topic(bootstrap, "cq-fetch"), _name("cq-consumer")
    payloads = _payloads(40, 500)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for payload in payloads:
        producer.produce(topic, payload)
    assert producer.flush(DEADLINE_S) == 0
    # The default user's quota for this client id (each client's own): 20 KB read
    # at most 4 KiB per fetch against 1,500 B/s over 10 s.
    assert _alter(bootstrap, [([("user", None), ("client-id", client)],
                               [("consumer_byte_rate", 1500.0, False)])]) == [_OK]
    throttles: list[float] = []
    values = _read_all(bootstrap, topic, len(payloads), {
        "client.id": client, "fetch.max.bytes": 4096, "message.max.bytes": 4096,
        "max.partition.fetch.bytes": 4096,
        "throttle_cb": lambda event: throttles.append(event.throttle_time)})
    assert values == payloads
    assert any(seconds > 0 for seconds in throttles), throttles
    page = wait_for(metrics_url(server), lambda p: _throttled(p, "fetch") > 0,
                    timeout_s=DEADLINE_S, what="a throttled fetch answer in /metrics")
    assert page.value("folio_kafka_throttle_seconds_total", quota="fetch") > 0


def _raw_fetch(bootstrap: str, topic: str, client_id: str) -> Any:
    """One Fetch v11 of the whole partition (50 MB asked), as ``client_id``."""
    request = _make(1, 11, replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=1,
                    max_bytes=50_000_000, isolation_level=0, session_id=0, session_epoch=-1,
                    rack_id="", forgotten_topics_data=(), topics=(_make(
                        1, 11, "FetchTopic", topic=topic, partitions=(_make(
                            1, 11, "FetchPartition", partition=0, current_leader_epoch=-1,
                            fetch_offset=0, log_start_offset=-1,
                            partition_max_bytes=50_000_000),)),))
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(raw_request(1, 11, 1, request, client_id=client_id))
        _, answer = read_response(sock, 1, 11)
    [part] = answer.responses[0].partitions
    assert part.error_code is ErrorCode.none
    return answer


def test_one_fetch_carries_at_most_what_the_quota_window_holds(bootstrap: str) -> None:
    topic, client = _topic(bootstrap, "cq-window"), _name("cq-window")
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for payload in _payloads(30, 1000):
        producer.produce(topic, payload)
        producer.flush(DEADLINE_S)  # one batch each
    unbounded = _raw_fetch(bootstrap, topic, _name("cq-free"))
    assert len(unbounded.responses[0].partitions[0].records) > 30_000
    assert unbounded.throttle_time == datetime.timedelta(0)
    # 1,000 B/s: at most 10,000 bytes in one answer (Kafka: the quota x 10 s),
    # the one batch over them included, and a throttle time for what went past.
    assert _alter(bootstrap, [([("client-id", client)],
                               [("consumer_byte_rate", 1000.0, False)])]) == [_OK]
    bounded = _raw_fetch(bootstrap, topic, client)
    assert 1_000 < len(bounded.responses[0].partitions[0].records) < 12_000
    again = _raw_fetch(bootstrap, topic, client)
    assert again.throttle_time > datetime.timedelta(0)


@pytest.fixture
def restartable(tmp_path: Path) -> Iterator[tuple[BookieProcesses, Path]]:
    processes = BookieProcesses()
    try:
        yield processes, tmp_path / "data"
    finally:
        processes.kill_all()


def test_quotas_are_kept_in_the_metadata_over_a_restart(
        restartable: tuple[BookieProcesses, Path]) -> None:
    processes, data = restartable
    first = start_standalone(processes, data, "--kafka-port", "0")
    host, port = kafka_address(first)
    assert _alter(f"{host}:{port}", [([("user", "kept"), ("client-id", "app")],
                                      [("producer_byte_rate", 777.0, False)])]) == [_OK]
    first.terminate()
    second = start_standalone(processes, data, "--kafka-port", "0")
    host, port = kafka_address(second)
    assert _entries(_describe(f"{host}:{port}", [("user", 0, "kept")])) == {
        (("client-id", "app"), ("user", "kept")): {"producer_byte_rate": 777.0}}
    second.terminate()


def _token(role: str) -> str:
    return create_token(role, SECRET, "HS256")


@pytest.fixture
def secured(tmp_path: Path) -> Iterator[BookieProcess]:
    """A standalone with token authentication and a SASL_PLAINTEXT Kafka listener."""
    secret = tmp_path / "secret"
    secret.write_bytes(SECRET + b"\n")
    processes = BookieProcesses()
    try:
        started = start_standalone(processes, tmp_path / "data", "--auth-token-secret-file",
                                   str(secret), "--super-users", "admin", "--kafka-port", "0",
                                   "--kafka-security-protocol", "SASL_PLAINTEXT",
                                   "--kafka-sasl-mechanisms", "PLAIN")
        yield started
        started.terminate()
    finally:
        processes.kill_all()


def test_a_user_quota_bounds_the_authenticated_role(secured: BookieProcess) -> None:
    host, port = kafka_address(secured)
    bootstrap = f"{host}:{port}"
    topic = _name("cq-user")
    with folio.Client(secured.address, token=_token("admin"), timeout_s=30) as admin:
        admin.create_topic(topic)
        admin.grant_permission("quser", topic, ["produce"])
    # Only a super-user may set quotas (Kafka: ALTER_CONFIGS on the cluster).
    entry: tuple[list[Component], list[tuple[str, float, bool]]] = (
        [("user", "quser")], [("producer_byte_rate", 5000.0, False)])
    assert _alter(bootstrap, [entry], token=_token("quser"))[0][0] is \
        ErrorCode.cluster_authorization_failed
    assert _alter(bootstrap, [entry], token=_token("admin")) == [_OK]
    throttles: list[float] = []
    sasl = {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "PLAIN", "sasl.username": "quser",
            "sasl.password": _token("quser")}
    producer = Producer({**sasl, "client.id": _name("any-client"), "linger.ms": 5,
                         "batch.size": 4096,
                         "throttle_cb": lambda event: throttles.append(event.throttle_time)})
    payloads = _payloads(60, 1000)
    for payload in payloads:
        producer.produce(topic, payload)
    assert producer.flush(DEADLINE_S) == 0
    assert any(seconds > 0 for seconds in throttles), throttles
    as_admin = {**sasl, "sasl.username": "admin", "sasl.password": _token("admin")}
    assert _end_offset(bootstrap, topic, 0, as_admin) == len(payloads)
    assert _read_all(bootstrap, topic, len(payloads), as_admin) == payloads
