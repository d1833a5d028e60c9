"""A keyed idempotent Kafka producer writes on while its topic splits and merges.

No delivery fails; every delivered record is read back exactly once by a
Kafka consumer and by an SDK reader, and the records of each stream (key and
the partition the producer chose for it) come back in the order they were
produced. With the producer's partition count fixed (it does not refresh its
metadata during the run) a key always has one stream: per-key order is kept.
With frequent metadata refreshes the producer sees the new partitions and
moves keys to them, as a Kafka producer does when partitions are added, and
order is kept per stream (docs/kafka.md, "Partitions and scaling").
The same holds through auto-scaling, for kafka-python's idempotent producer,
and for a librdkafka transactional producer whose partition is split while a
transaction has records in it.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaProducer

import folio
from tests.integration.kafka.test_kafka_clients import DEADLINE_S, create_topic
from tests.support.bookies import BookieProcess, BookieProcesses, folio_argv, folio_env
from tests.support.kafka import kafka_address
from tests.support.standalone import start_standalone

KEYS = 24

#: (key, number of the record among the key's, partition the producer chose)
Delivered = tuple[str, int, int]


class KeyedProducer:
    """An idempotent producer writing ``key-i:n`` records round the keys from a thread."""

    def __init__(self, bootstrap: str, topic: str, **settings: Any) -> None:
        self.topic = topic
        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                                  "linger.ms": 2, "message.timeout.ms": 120_000, **settings})
        self.delivered: list[Delivered] = []
        self.errors: list[KafkaError] = []
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _report(self, error: KafkaError | None, message: Any) -> None:
        with self.lock:
            if error is not None:
                self.errors.append(error)
            else:
                value = message.value()
                assert value is not None
                key, number = value.decode().split(":")
                self.delivered.append((key, int(number), message.partition()))

    def _run(self) -> None:
        number = 0
        while not self.stop.is_set():
            for index in range(KEYS):
                key = f"key-{index}"
                self.producer.produce(self.topic, key=key.encode(),
                                      value=f"{key}:{number}".encode(),
                                      on_delivery=self._report)
            number += 1
            self.producer.poll(0.005)
            while len(self.producer) > 2_000 and not self.stop.is_set():
                self.producer.poll(0.05)  # a bounded backlog: never BufferError
        self.producer.flush(DEADLINE_S)

    def count(self) -> int:
        with self.lock:
            return len(self.delivered)

    def wait_for_more(self, records: int, partition: int | None = None) -> None:
        """Wait until ``records`` more are delivered (to ``partition``, if given)."""
        def matching() -> int:
            with self.lock:
                return sum(1 for _, _, chosen in self.delivered
                           if partition is None or chosen == partition)
        target = matching() + records
        deadline = time.monotonic() + DEADLINE_S
        while matching() < target:
            assert time.monotonic() < deadline, f"{matching()} of {target} delivered"
            assert not self.errors, self.errors
            self.stop.wait(0.05)

    def finish(self) -> list[Delivered]:
        self.stop.set()
        self.thread.join(DEADLINE_S)
        assert not self.thread.is_alive(), "the producer did not finish"
        assert self.producer.flush(DEADLINE_S) == 0, "records left undelivered"
        return self.delivered


def kafka_read_back(bootstrap: str, topic: str) -> list[tuple[str, int]]:
    """Every record, partition after partition in number order, each from 0 to its end.

    Numbers follow creation, so every partition comes after its predecessors.
    """
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(
        topic=topic, timeout=DEADLINE_S)
    partitions = sorted(metadata.topics[topic].partitions)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                         "enable.auto.commit": False})
    records: list[tuple[str, int]] = []
    try:
        for partition in partitions:
            _, end = consumer.get_watermark_offsets(TopicPartition(topic, partition),
                                                    timeout=DEADLINE_S)
            consumer.assign([TopicPartition(topic, partition, 0)])
            offset = 0
            deadline = time.monotonic() + DEADLINE_S
            while offset < end:
                assert time.monotonic() < deadline, f"partition {partition}: {offset}/{end}"
                message = consumer.poll(0.5)
                if message is None:
                    continue
                assert message.error() is None, message.error()
                assert message.offset() == offset
                value = message.value()
                assert value is not None
                key, number = value.decode().split(":")
                assert message.key() == key.encode()
                records.append((key, int(number)))
                offset += 1
    finally:
        consumer.close()
    return records


def sdk_read_back(client: folio.Client, topic: str, count: int) -> list[tuple[str, int]]:
    """``count`` events through an SDK reader (predecessors before successors)."""
    records: list[tuple[str, int]] = []
    deadline = time.monotonic() + DEADLINE_S
    with client.reader(topic, "earliest") as reader:
        while len(records) < count:
            assert time.monotonic() < deadline, f"read {len(records)} of {count}"
            event = reader.read_next(timeout=1.0)
            if event is None:
                continue
            key, number = event.payload.decode().split(":")
            assert event.routing_key == key
            records.append((key, int(number)))
        assert reader.read_next(timeout=1.0) is None, "more events than were delivered"
    return records


def scale_with_cli(server: BookieProcess, topic: str, *how: str) -> None:
    """``folio topic scale TOPIC HOW...`` against the server, as an operator runs it."""
    result = subprocess.run(folio_argv("topic", "scale", topic, *how, "--endpoint",
                                       server.address),
                            capture_output=True, env=folio_env(), timeout=DEADLINE_S,
                            check=False)
    assert result.returncode == 0, (result.stdout, result.stderr)


def assert_in_stream_order(records: list[tuple[str, int]], delivered: list[Delivered],
                           per_key: bool) -> None:
    """Each stream's numbers increase in ``records`` (per key when ``per_key``)."""
    chosen = {(key, number): partition for key, number, partition in delivered}
    last: dict[tuple[str, int], int] = defaultdict(lambda: -1)
    for key, number in records:
        stream = (key, -1 if per_key else chosen[(key, number)])
        assert number > last[stream], (
            f"{key}:{number} read after {key}:{last[stream]} (stream {stream})")
        last[stream] = number


@pytest.mark.parametrize("refresh_ms", [300_000, 200], ids=["fixed-count", "refreshing"])
def test_keyed_producer_writes_through_split_and_merge(
        server: BookieProcess, bootstrap: str, client: folio.Client, refresh_ms: int) -> None:
    topic = f"scaling-{refresh_ms}"
    create_topic(bootstrap, topic, 2)
    producer = KeyedProducer(bootstrap, topic, **{"topic.metadata.refresh.interval.ms":
                                                  refresh_ms})
    producer.thread.start()
    producer.wait_for_more(200)
    # Split partition 0 ([0, 0.5)) into segments 2 and 3; then merge those
    # into 4 (both with the CLI); then split partition 1 into 5 and 6 (with
    # the SDK). Each time, the producer must go on delivering to the sealed
    # partitions.
    scale_with_cli(server, topic, "--split", "0")
    producer.wait_for_more(200, partition=0)
    scale_with_cli(server, topic, "--merge", "2,3")
    producer.wait_for_more(200, partition=0)
    client.scale_topic(topic, [f"{topic}/1"], [(0.5, 0.75), (0.75, 1.0)])
    producer.wait_for_more(200, partition=1)
    producer.wait_for_more(200)
    delivered = producer.finish()
    assert producer.errors == []
    expected = Counter((key, number) for key, number, _ in delivered)
    assert max(expected.values()) == 1
    sealed = {segment.name for segment in client.get_segments(topic, include_sealed=True)
              if segment.sealed}
    assert sealed == {f"{topic}/{n}" for n in (0, 1, 2, 3)}

    through_kafka = kafka_read_back(bootstrap, topic)
    assert Counter(through_kafka) == expected
    assert_in_stream_order(through_kafka, delivered, per_key=refresh_ms > 60_000)
    through_sdk = sdk_read_back(client, topic, len(delivered))
    assert Counter(through_sdk) == expected
    assert_in_stream_order(through_sdk, delivered, per_key=refresh_ms > 60_000)


@pytest.fixture(scope="module")
def autoscaling_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BookieProcess]:
    """A standalone serving Kafka whose maintenance round (auto-scaling) runs every 0.2 s."""
    processes = BookieProcesses()
    started = start_standalone(processes, tmp_path_factory.mktemp("autoscaling") / "data",
                               "--kafka-port", "0", "--retention-interval-s", "0.2")
    yield started
    try:
        started.terminate()
    finally:
        processes.kill_all()


def test_keyed_producer_writes_through_auto_scaling(autoscaling_server: BookieProcess) -> None:
    host, port = kafka_address(autoscaling_server)
    bootstrap = f"{host}:{port}"
    topic = "auto-scaled"
    with folio.Client(autoscaling_server.address, timeout_s=30) as client:
        client.create_topic(topic, 2, scale_target_events_per_s=200, scale_min_segments=1,
                            scale_cooldown_ms=500)
        producer = KeyedProducer(bootstrap, topic,
                                 **{"topic.metadata.refresh.interval.ms": 300_000})
        producer.thread.start()

        def sealed() -> list[int]:
            return [segment.number for segment in client.get_segments(
                topic, include_sealed=True) if segment.sealed]
        deadline = time.monotonic() + DEADLINE_S
        while not {0, 1} & set(sealed()):
            assert time.monotonic() < deadline, "auto-scaling never scaled the topic"
            producer.wait_for_more(100)
        for number in {0, 1} & set(sealed()):
            producer.wait_for_more(200, partition=number)  # to a sealed partition
        delivered = producer.finish()
        assert producer.errors == []
        expected = Counter((key, number) for key, number, _ in delivered)
        assert max(expected.values()) == 1
        through_kafka = kafka_read_back(bootstrap, topic)
        assert Counter(through_kafka) == expected
        assert_in_stream_order(through_kafka, delivered, per_key=True)
        through_sdk = sdk_read_back(client, topic, len(delivered))
        assert Counter(through_sdk) == expected
        assert_in_stream_order(through_sdk, delivered, per_key=True)


def test_transactional_producer_writes_through_split_and_merge(
        bootstrap: str, client: folio.Client) -> None:
    topic = "scaling-txn"
    create_topic(bootstrap, topic, 2)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "scaling-txn",
                         "linger.ms": 5})
    producer.init_transactions(DEADLINE_S)
    committed: list[bytes] = []

    def transaction(values: list[bytes], *, commit: bool = True,
                    scale: tuple[list[str], list[tuple[float, float]]] | None = None) -> None:
        producer.begin_transaction()
        for index, value in enumerate(values):
            producer.produce(topic, key=b"k", value=value, partition=index % 2)
            if scale is not None and index == len(values) // 2:
                assert producer.flush(DEADLINE_S) == 0  # written, the transaction open
                client.scale_topic(topic, *scale)
        if commit:
            producer.commit_transaction(DEADLINE_S)
            committed.extend(values)
        else:
            assert producer.flush(DEADLINE_S) == 0
            producer.abort_transaction(DEADLINE_S)

    transaction([b"a%d" % i for i in range(10)])
    # Split partition 0 while a transaction has records in it, then write on.
    transaction([b"b%d" % i for i in range(10)],
                scale=([f"{topic}/0"], [(0.0, 0.25), (0.25, 0.5)]))
    transaction([b"c%d" % i for i in range(6)], commit=False)
    transaction([b"d%d" % i for i in range(10)],
                scale=([f"{topic}/2", f"{topic}/3"], [(0.0, 0.5)]))
    # Read partition after partition in number order, read_committed: the
    # committed records once each, partition 0's stream (even numbers) in order.
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    read: list[bytes] = []
    try:
        for partition in range(5):
            tp = TopicPartition(topic, partition)
            _, end = consumer.get_watermark_offsets(tp, timeout=DEADLINE_S)
            consumer.assign([TopicPartition(topic, partition, 0)])
            deadline = time.monotonic() + DEADLINE_S
            while end > 0:
                position = consumer.position([tp])[0].offset  # (-1001 before the first)
                if position >= end:
                    break
                assert time.monotonic() < deadline, f"partition {partition}: {position}/{end}"
                message = consumer.poll(0.2)
                if message is not None:
                    assert message.error() is None, message.error()
                    value = message.value()
                    assert value is not None
                    read.append(value)
    finally:
        consumer.close()
    assert Counter(read) == Counter(committed)
    assert [value for value in read if int(value[1:]) % 2 == 0] == [
        value for value in committed if int(value[1:]) % 2 == 0]  # partition 0's stream
    with client.reader(topic, "earliest") as reader:
        events: list[bytes] = []
        deadline = time.monotonic() + DEADLINE_S
        while len(events) < len(committed):
            assert time.monotonic() < deadline, f"read {len(events)} of {len(committed)}"
            event = reader.read_next(timeout=1.0)
            if event is not None:
                events.append(event.payload)
        assert reader.read_next(timeout=1.0) is None
    assert Counter(events) == Counter(committed)
    assert [value for value in events if int(value[1:]) % 2 == 0] == [
        value for value in committed if int(value[1:]) % 2 == 0]


def test_kafka_python_idempotent_producer_writes_through_a_split(
        server: BookieProcess, bootstrap: str, client: folio.Client) -> None:
    topic = "scaling-kp"
    create_topic(bootstrap, topic, 2)
    producer = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True,
                             linger_ms=2)
    sent: list[tuple[str, int]] = []

    def send_round(number: int) -> None:
        futures = []
        for index in range(KEYS):
            key = f"key-{index}"
            futures.append(producer.send(topic, key=key.encode(),
                                         value=f"{key}:{number}".encode()))
            sent.append((key, number))
        for future in futures:
            future.get(timeout=DEADLINE_S)  # raises on a delivery error

    try:
        for number in range(20):
            send_round(number)
        scale_with_cli(server, topic, "--split", "0")
        for number in range(20, 40):
            send_round(number)
        scale_with_cli(server, topic, "--merge", "2,3")
        for number in range(40, 60):
            send_round(number)
    finally:
        producer.close(timeout=DEADLINE_S)
    through_kafka = kafka_read_back(bootstrap, topic)
    assert Counter(through_kafka) == Counter(sent)
    assert_in_stream_order(through_kafka, [(k, n, 0) for k, n in sent], per_key=True)
    through_sdk = sdk_read_back(client, topic, len(sent))
    assert Counter(through_sdk) == Counter(sent)
    assert_in_stream_order(through_sdk, [(k, n, 0) for k, n in sent], per_key=True)
