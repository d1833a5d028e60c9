"""Kafka's topic names, auto-creation and replication factor on a real ``folio standalone``.

- A name Kafka accepts (``_schemas``) works end to end: created by a
  librdkafka producer's Metadata (auto-creation), consumed in a group, written
  and read through the SDK.
- Auto-creation as Kafka does it: a producer to a missing topic is delivered
  (librdkafka and kafka-python); with ``--no-kafka-auto-create-topics`` it
  fails with the unknown-topic error once the client's propagation wait
  passes, and Metadata answers UNKNOWN_TOPIC_OR_PARTITION at once;
  ``--kafka-num-partitions`` sizes auto-created topics and CreateTopics with -1.
- CreateTopics' replication factor is checked against the copies Folio keeps
  (the write quorum, 1 on a standalone): 3 is INVALID_REPLICATION_FACTOR.
- Upgrade: the build before this change (``EARLIER_BUILD``, taken from the
  repository's history with ``git archive``) writes a transactional id,
  committed offsets and its transaction log; this build, started on that data
  directory, finds them under the names it keeps.
"""

from __future__ import annotations

import io
import subprocess
import tarfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaProducer

import folio
from broker.segments.names import LEGACY_SYSTEM_TOPICS, SYSTEM_TOPIC_PREFIX
from tests.integration.kafka.test_kafka_clients import DEADLINE_S, consume
from tests.support.bookies import BookieProcess, BookieProcesses
from tests.support.kafka import kafka_address
from tests.support.standalone import start_standalone

#: The commit before issue 27's names (main when it started): its system topics,
#: under the names every earlier build gave them, are what an upgrade meets.
EARLIER_BUILD = "21925f6bc32fa6facf5245b1d319d7dfc08b6db0"
_PACKAGES = ("broker", "folio", "ledger", "txnbuffer")


def _bootstrap(server: BookieProcess) -> str:
    host, port = kafka_address(server)
    return f"{host}:{port}"


def _produce(bootstrap: str, topic: str, values: list[bytes],
             **settings: object) -> list[KafkaError | None]:
    """Produce ``values`` (keyed by themselves); each one's delivery error (None: delivered)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **settings})
    outcomes: dict[int, KafkaError | None] = {}

    def report(index: int) -> Callable[[KafkaError | None, Any], None]:
        def delivered(error: KafkaError | None, _message: Any) -> None:
            outcomes[index] = error
        return delivered

    transactional = "transactional.id" in settings
    if transactional:
        producer.init_transactions(DEADLINE_S)
        producer.begin_transaction()
    for index, value in enumerate(values):
        producer.produce(topic, value=value, key=value, on_delivery=report(index))
    if transactional:
        producer.commit_transaction(DEADLINE_S)
    assert producer.flush(DEADLINE_S) == 0, "messages left without an outcome"
    return [outcomes[index] for index in range(len(values))]


@pytest.fixture(scope="module")
def refusing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BookieProcess]:
    """A standalone with auto-creation off and 3 partitions by default."""
    processes = BookieProcesses()
    started = start_standalone(
        processes, tmp_path_factory.mktemp("refusing") / "data", "--kafka-port", "0",
        "--no-kafka-auto-create-topics", "--kafka-num-partitions", "3")
    yield started
    try:
        started.terminate()
    finally:
        processes.kill_all()


def test_schemas_works_end_to_end(bootstrap: str, client: folio.Client) -> None:
    # Created by the producer's Metadata request: no CreateTopics.
    assert _produce(bootstrap, "_schemas", [b"k0", b"k1", b"k2"]) == [None] * 3
    assert [segment.name for segment in client.get_topic("_schemas").segments] == [
        "_schemas/0"]
    with client.writer("_schemas") as writer:
        written = writer.write_event(b"from-sdk", routing_key="k3").result(DEADLINE_S)
    assert (written.segment, written.offset) == ("_schemas/0", 3)
    events = list(client.batch_client().read_segment("_schemas/0", 0, 4))
    assert [event.payload for event in events] == [b"k0", b"k1", b"k2", b"from-sdk"]
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "schema-registry",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe(["_schemas"])
    values: list[bytes] = []
    deadline = time.monotonic() + DEADLINE_S
    try:
        while len(values) < 4:
            assert time.monotonic() < deadline, f"consumed {values}"
            message = consumer.poll(0.5)
            if message is None:
                continue
            assert message.error() is None, message.error()
            value = message.value()
            assert value is not None
            values.append(value)
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    assert values == [b"k0", b"k1", b"k2", b"from-sdk"]
    assert "_schemas" in {topic.name for topic in client.list_topics()}


def test_kafka_python_producer_to_a_missing_topic_is_delivered(
        bootstrap: str, client: folio.Client) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    try:
        sent = producer.send("_made-by-kafka-python", b"v").get(timeout=DEADLINE_S)
    finally:
        producer.close()
    assert (sent.partition, sent.offset) == (0, 0)
    assert len(client.get_topic("_made-by-kafka-python").segments) == 1


def test_replication_factor_is_checked_against_the_copies_kept(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic("rf-three", num_partitions=1,
                                            replication_factor=3),
                                   NewTopic("rf-default", num_partitions=2),
                                   NewTopic("rf-one", num_partitions=1, replication_factor=1)])
    with pytest.raises(KafkaException) as refused:
        futures["rf-three"].result(DEADLINE_S)
    error = refused.value.args[0]
    assert error.code() == KafkaError.INVALID_REPLICATION_FACTOR
    assert "replication factor 3 is more than the 1 copies" in error.str()
    futures["rf-default"].result(DEADLINE_S)
    futures["rf-one"].result(DEADLINE_S)
    topics = admin.list_topics(timeout=DEADLINE_S).topics
    assert "rf-three" not in topics
    refused_names = admin.create_topics([NewTopic(name, 1) for name in ("..", "__folio_x")])
    for name, future in refused_names.items():
        with pytest.raises(KafkaException) as bad:
            future.result(DEADLINE_S)
        assert bad.value.args[0].code() == KafkaError.TOPIC_EXCEPTION, name
    assert sorted(topics["rf-default"].partitions) == [0, 1]


def test_with_auto_creation_off_a_missing_topic_fails_fast(refusing: BookieProcess) -> None:
    bootstrap = _bootstrap(refusing)
    lookup = AdminClient({"bootstrap.servers": bootstrap})
    missing = lookup.list_topics(topic="never", timeout=DEADLINE_S).topics["never"]
    assert missing.error is not None
    assert missing.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    # librdkafka waits topic.metadata.propagation.max.ms (30 s by default, as
    # for a Kafka broker with auto.create.topics.enable=false) before it fails
    # the messages: the broker's answer was at once.
    [outcome] = _produce(bootstrap, "never", [b"v"], **{
        "topic.metadata.propagation.max.ms": 1000, "message.timeout.ms": 120000})
    assert outcome is not None
    assert outcome.code() in (KafkaError._UNKNOWN_TOPIC, KafkaError.UNKNOWN_TOPIC_OR_PART)
    with folio.Client(refusing.address, timeout_s=30) as client:
        assert [topic.name for topic in client.list_topics()] == []
        # CreateTopics without a partition count takes --kafka-num-partitions.
        lookup.create_topics([NewTopic("sized")])["sized"].result(DEADLINE_S)
        assert len(client.get_topic("sized").segments) == 3


def _earlier_build(into: Path) -> Path:
    """The packages of ``EARLIER_BUILD`` (from this repository's history) under ``into``."""
    root = Path(__file__).resolve().parents[3]
    known = subprocess.run(
        ["git", "-C", str(root), "cat-file", "-e", f"{EARLIER_BUILD}^{{commit}}"],
        capture_output=True, check=False, timeout=60)
    if known.returncode != 0:  # a shallow clone or an exported tree: no earlier build to run
        pytest.skip(f"the earlier build {EARLIER_BUILD} is not in this checkout's git history")
    archive = subprocess.run(["git", "-C", str(root), "archive", EARLIER_BUILD, *_PACKAGES],
                             capture_output=True, check=False, timeout=60)
    assert archive.returncode == 0, (
        f"this test runs the build before issue 27 ({EARLIER_BUILD}) from the repository's "
        f"history, which git cannot give here: {archive.stderr.decode()}")
    into.mkdir()
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(into, filter="data")
    return into


def _started_in(directory: Path, processes: BookieProcesses, data: Path,
                monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> BookieProcess:
    # ``python -m`` puts the working directory first on the path: the build run
    # is the one in ``directory``.
    with monkeypatch.context() as patch:
        patch.chdir(directory)
        return start_standalone(processes, data, "--kafka-port", "0", env=env)


def test_data_of_the_build_before_names_changed_is_found(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A standalone of this build started on an earlier build's data finds its system topics."""
    earlier = _earlier_build(tmp_path / "earlier")
    processes = BookieProcesses()
    data = tmp_path / "data"
    try:
        first = _started_in(earlier, processes, data, monkeypatch, {"PYTHONPATH": str(earlier)})
        with folio.Client(first.address, timeout_s=30) as client:
            # It is the earlier build: it refused every name starting with '_'.
            with pytest.raises(folio.InternalTopicError):
                client.create_topic("_schemas")
            client.create_topic("orders")
        bootstrap = _bootstrap(first)
        assert _produce(bootstrap, "orders", [b"a", b"b"], **{
            "transactional.id": "upgrader"}) == [None, None]
        committer = Consumer({"bootstrap.servers": bootstrap, "group.id": "upgrade-group"})
        try:
            committer.commit(offsets=[TopicPartition("orders", 0, 2)], asynchronous=False)
        finally:
            committer.close()
        with folio.Client(first.address, timeout_s=30) as client:
            before = {topic.name for topic in client.list_topics(include_internal=True)}
        assert first.terminate() == 0

        again = _started_in(Path(__file__).resolve().parents[3], processes, data, monkeypatch,
                            {})
        with folio.Client(again.address, timeout_s=30) as client:
            after = {topic.name for topic in client.list_topics(include_internal=True)}
            assert after == before
            assert {"_txnlog", "_kafka_offsets", "_kafka_txn_state"} <= after
            assert after - {"orders"} <= LEGACY_SYSTEM_TOPICS
            assert not any(name.startswith(SYSTEM_TOPIC_PREFIX) for name in after)
            assert client.create_topic("_schemas").name == "_schemas"
        bootstrap = _bootstrap(again)
        reader = Consumer({"bootstrap.servers": bootstrap, "group.id": "upgrade-group"})
        try:
            [committed] = reader.committed([TopicPartition("orders", 0)], timeout=DEADLINE_S)
        finally:
            reader.close()
        assert committed.offset == 2
        # The transactional id's state was found: its next transaction commits.
        assert _produce(bootstrap, "orders", [b"c"], **{
            "transactional.id": "upgrader"}) == [None]
        messages = consume(bootstrap, [TopicPartition("orders", 0, 0)], 3,
                           **{"isolation.level": "read_committed"})
        assert [message.value() for message in messages] == [b"a", b"b", b"c"]
        assert again.terminate() == 0
    finally:
        processes.kill_all()
