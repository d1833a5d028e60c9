"""Fetch sessions (KIP-227) and topic ids (Metadata v10+, Fetch v13+) with real clients.

kafka-python opens a fetch session and goes on with incremental fetches (its
session's epoch grows only while the broker accepts them); librdkafka fetches
by topic id (Fetch v13+). Raw requests check what clients do not show: the
omitted partitions of an incremental answer, the session errors, Fetch by an
unknown id, a topic's id across a broker restart.
"""

from __future__ import annotations

import datetime
import re
import socket
import sys
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaPythonPartition
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

from tests.integration.kafka.test_kafka_clients import DEADLINE_S, create_topic, produce
from tests.integration.kafka.test_kafka_topic_names import _earlier_build, _started_in
from tests.support.bookies import BookieProcess, BookieProcesses
from tests.support.kafka import kafka_address, raw_request, read_response
from tests.support.standalone import start_standalone
from tests.support.wait import wait_for

FETCH, METADATA = 1, 3
_MAX_WAIT = datetime.timedelta(0)


def _module(api_key: int, version: int) -> Any:
    return sys.modules[load_request_schema(api_key, version).__module__]


class Raw:
    """One connection sending raw requests."""

    def __init__(self, address: tuple[str, int]) -> None:
        self.sock = socket.create_connection(address, timeout=DEADLINE_S)
        self.correlation = 0

    def ask(self, api_key: int, version: int, request: Any) -> Any:
        self.correlation += 1
        self.sock.sendall(raw_request(api_key, version, self.correlation, request))
        correlation, response = read_response(self.sock, api_key, version)
        assert correlation == self.correlation
        return response

    def topic_id(self, topic: str, *, allow_none: bool = False) -> Any:
        m = _module(METADATA, 12)
        answer = self.ask(METADATA, 12, m.MetadataRequest(
            topics=(m.MetadataRequestTopic(topic_id=None, name=topic),),
            allow_auto_topic_creation=False, include_topic_authorized_operations=False))
        (found,) = answer.topics
        assert found.error_code is ErrorCode.none and found.name == topic
        assert allow_none or isinstance(found.topic_id, uuid.UUID), found.topic_id
        return found.topic_id

    def fetch(self, version: int, topic: str | uuid.UUID, offsets: dict[int, int], *,
              session_id: int = 0, epoch: int = -1,
              forget: tuple[int, ...] = ()) -> Any:
        m = _module(FETCH, version)
        named = {"topic_id": topic} if version >= 13 else {"topic": topic}
        partitions = tuple(m.FetchPartition(partition=p, fetch_offset=o,
                                            partition_max_bytes=1 << 20)
                           for p, o in offsets.items())
        forgotten = (m.ForgottenTopic(**named, partitions=forget),) if forget else ()
        return self.ask(FETCH, version, m.FetchRequest(
            max_wait=_MAX_WAIT, min_bytes=1, max_bytes=1 << 22, isolation_level=0,
            session_id=session_id, session_epoch=epoch,
            topics=(m.FetchTopic(**named, partitions=partitions),) if partitions else (),
            forgotten_topics_data=forgotten, rack_id=""))

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def raw(server: BookieProcess) -> Iterator[Raw]:
    made = Raw(kafka_address(server))
    yield made
    made.close()


def _answered(response: Any) -> dict[int, Any]:
    return {p.partition_index: p for topic in response.responses for p in topic.partitions}


def _sessions_metric(server: BookieProcess, event: str) -> float:
    """``folio_kafka_fetch_sessions_total{event}`` scraped from the server."""
    match = re.search(r"metrics on (https?://\S+/metrics)", server.ready_line)
    assert match is not None, server.ready_line
    text = urllib.request.urlopen(match[1], timeout=10).read().decode()
    found = re.search(rf'folio_kafka_fetch_sessions_total{{event="{event}"}} (\S+)', text)
    return 0.0 if found is None else float(found[1])


def test_kafka_python_consumer_reads_through_an_incremental_session(
        bootstrap: str, server: BookieProcess) -> None:
    topic = "fs-kafka-python"
    opened_before = _sessions_metric(server, "opened")
    incremental_before = _sessions_metric(server, "incremental")
    create_topic(bootstrap, topic, 3)
    produce(bootstrap, topic, [(i % 3, b"a%d" % i, None, []) for i in range(30)])
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             enable_auto_commit=False, consumer_timeout_ms=20_000,
                             fetch_max_wait_ms=100)
    try:
        consumer.assign([KafkaPythonPartition(topic, p) for p in range(3)])
        got: list[Any] = []
        for record in consumer:
            got.append(record)
            if len(got) == 30:
                break
        (handler,) = consumer._fetcher._session_handlers.values()
        opened = handler.next_metadata.session_id
        produce(bootstrap, topic, [(i % 3, b"b%d" % i, None, []) for i in range(30)])
        for record in consumer:
            got.append(record)
            if len(got) == 60:
                break

        def fetched_incrementally() -> bool:
            consumer.poll(timeout_ms=100)
            return bool(handler.next_metadata.epoch > 5)

        # The epoch only grows while the broker's answers keep the session.
        wait_for(fetched_incrementally, "five incremental fetches", DEADLINE_S)
        assert opened != 0 and handler.next_metadata.session_id == opened
    finally:
        consumer.close()
    assert sorted((r.partition, r.offset) for r in got) == sorted(
        (p, o) for p in range(3) for o in range(20))
    # The broker's side: it opened the session and served the incremental fetches.
    assert _sessions_metric(server, "opened") >= opened_before + 1
    assert _sessions_metric(server, "incremental") >= incremental_before + 5


def test_kafka_python_reassignment_forgets_partitions_in_the_session(
        bootstrap: str, server: BookieProcess) -> None:
    """A consumer whose assignment shrinks drops those partitions from its session
    (``forgotten_topics_data``) and keeps fetching incrementally in the same session."""
    topic = "fs-forget"
    create_topic(bootstrap, topic, 4)
    produce(bootstrap, topic, [(i % 4, b"a%d" % i, None, []) for i in range(40)])
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             enable_auto_commit=False, fetch_max_wait_ms=100)
    got: dict[tuple[int, int], bytes] = {}

    def read_until(count: int) -> Callable[[], bool]:
        def done() -> bool:
            for records in consumer.poll(timeout_ms=100).values():
                for record in records:
                    got[record.partition, record.offset] = record.value
            return len(got) >= count
        return done

    try:
        consumer.assign([KafkaPythonPartition(topic, p) for p in range(4)])
        wait_for(read_until(40), "all four partitions read", DEADLINE_S)
        (handler,) = consumer._fetcher._session_handlers.values()
        session = handler.next_metadata.session_id
        refused_before = _sessions_metric(server, "refused")
        kept = {KafkaPythonPartition(topic, p) for p in (0, 1)}
        consumer.assign(sorted(kept))
        produce(bootstrap, topic, [(i % 4, b"b%d" % i, None, []) for i in range(40)])
        wait_for(read_until(60), "the two partitions kept read on", DEADLINE_S)
        # The same session throughout. Partitions 2 and 3 got records after they
        # were dropped: had the broker not forgotten them, its answers would carry
        # them, which kafka-python treats as an invalid incremental answer and
        # closes the session.
        assert session != 0 and handler.next_metadata.session_id == session
        assert set(handler.session_partitions) == kept
        assert _sessions_metric(server, "refused") == refused_before
    finally:
        consumer.close()
    assert sorted(got) == sorted([(p, o) for p in range(4) for o in range(10)]
                                 + [(p, o) for p in (0, 1) for o in range(10, 20)])


def test_librdkafka_consumer_reads_by_topic_id(bootstrap: str) -> None:
    topic = "fs-librdkafka"
    create_topic(bootstrap, topic, 2)
    produce(bootstrap, topic, [(i % 2, b"v%d" % i, None, []) for i in range(20)])
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "fs-unused",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    got: list[tuple[int, int]] = []
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(2)])

        def read_all() -> bool:
            message = consumer.poll(0.5)
            if message is not None:
                assert message.error() is None, message.error()
                got.append((int(message.partition() or 0), int(message.offset() or 0)))
            return len(got) >= 20

        wait_for(read_all, "librdkafka read every record", DEADLINE_S)
    finally:
        consumer.close()
    assert sorted(got) == [(p, o) for p in range(2) for o in range(10)]


def test_incremental_answers_and_session_errors(bootstrap: str, raw: Raw) -> None:
    topic = "fs-raw"
    create_topic(bootstrap, topic, 2)
    produce(bootstrap, topic, [(0, b"x", None, [])])
    opened = raw.fetch(12, topic, {0: 0, 1: 0}, epoch=0)
    assert opened.error_code is ErrorCode.none and opened.session_id != 0
    assert sorted(_answered(opened)) == [0, 1]
    session = opened.session_id
    # Nothing new: an empty incremental answer.
    quiet = raw.fetch(12, topic, {0: 1}, session_id=session, epoch=1)
    assert quiet.error_code is ErrorCode.none and quiet.session_id == session
    assert _answered(quiet) == {}
    produce(bootstrap, topic, [(1, b"y", None, [])])
    moved = raw.fetch(12, topic, {}, session_id=session, epoch=2)
    assert list(_answered(moved)) == [1] and _answered(moved)[1].high_watermark == 1
    # Forget partition 1: more data there is not answered.
    produce(bootstrap, topic, [(1, b"z", None, [])])
    forgot = raw.fetch(12, topic, {}, session_id=session, epoch=3, forget=(1,))
    assert _answered(forgot) == {}
    wrong = raw.fetch(12, topic, {}, session_id=session, epoch=9)
    assert wrong.error_code is ErrorCode.invalid_fetch_session_epoch and wrong.responses == ()
    unknown = raw.fetch(12, topic, {}, session_id=session + 1, epoch=1)
    assert unknown.error_code is ErrorCode.fetch_session_id_not_found
    by_id = raw.fetch(13, raw.topic_id(topic), {}, session_id=session, epoch=4)
    assert by_id.error_code is ErrorCode.fetch_session_topic_id_error


def test_fetch_by_topic_id(bootstrap: str, raw: Raw) -> None:
    topic = "fs-by-id"
    create_topic(bootstrap, topic, 1)
    produce(bootstrap, topic, [(0, b"r%d" % i, None, []) for i in range(3)])
    topic_id = raw.topic_id(topic)
    assert raw.topic_id(topic) == topic_id
    for version in (13, 16, 17):
        answer = raw.fetch(version, topic_id, {0: 0})
        (topic_answer,) = answer.responses
        assert topic_answer.topic_id == topic_id
        (partition,) = topic_answer.partitions
        assert partition.error_code is ErrorCode.none and partition.high_watermark == 3
        assert len(bytes(partition.records)) > 0
    stranger = uuid.uuid4()
    answer = raw.fetch(13, stranger, {0: 0})
    (topic_answer,) = answer.responses
    assert topic_answer.topic_id == stranger
    assert [p.error_code for p in topic_answer.partitions] == [ErrorCode.unknown_topic_id]


@pytest.fixture
def processes() -> Iterator[BookieProcesses]:
    started = BookieProcesses()
    yield started
    started.kill_all()


@pytest.mark.faults
def test_topic_id_survives_a_broker_crash(processes: BookieProcesses, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    server = start_standalone(processes, data_dir, "--kafka-port", "0")
    host, port = kafka_address(server)
    create_topic(f"{host}:{port}", "fs-restart", 1)
    raw = Raw((host, port))
    before = raw.topic_id("fs-restart")
    raw.close()
    server.kill()
    server = start_standalone(processes, data_dir, "--kafka-port", "0")
    raw = Raw(kafka_address(server))
    try:
        assert raw.topic_id("fs-restart") == before
        answer = raw.fetch(13, before, {0: 0})
        assert [p.error_code for t in answer.responses for p in t.partitions] == [
            ErrorCode.none]
    finally:
        raw.close()


@pytest.mark.faults
def test_an_earlier_builds_topic_gets_an_id_that_stays(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, processes: BookieProcesses) -> None:
    """A topic written by the build before topic ids gets one, the same after a crash."""
    earlier = _earlier_build(tmp_path / "earlier")
    data = tmp_path / "data"
    first = _started_in(earlier, processes, data, monkeypatch, {"PYTHONPATH": str(earlier)})
    host, port = kafka_address(first)
    create_topic(f"{host}:{port}", "legacy", 1)
    produce(f"{host}:{port}", "legacy", [(0, b"old", None, [])])
    raw = Raw((host, port))
    try:
        # The earlier build has no topic ids: the zero UUID, which kio reads as None.
        assert raw.topic_id("legacy", allow_none=True) is None
    finally:
        raw.close()
    assert first.terminate() == 0
    here = Path(__file__).resolve().parents[3]
    ids = []
    for _ in range(2):
        server = _started_in(here, processes, data, monkeypatch, {})
        raw = Raw(kafka_address(server))
        try:
            ids.append(raw.topic_id("legacy"))
            answer = raw.fetch(13, ids[-1], {0: 0})
            assert [(p.error_code, p.high_watermark) for t in answer.responses
                    for p in t.partitions] == [(ErrorCode.none, 1)]
        finally:
            raw.close()
        server.kill()
    assert ids[0] == ids[1]
