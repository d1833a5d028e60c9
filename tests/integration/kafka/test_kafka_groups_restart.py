"""Group and transaction state survives a broker crash (SIGKILL) and restart.

Committed offsets (plain and transactional) are read back after the restart
from ``_kafka_offsets``; group generations go on from where they were; a
transactional id keeps its producer id, the next InitProducerId bumps its
epoch, and the transaction the crash left open is aborted by it, so a
``read_committed`` consumer never sees its records.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.integration.kafka.test_kafka_clients import DEADLINE_S, create_topic, produce
from tests.integration.kafka.test_kafka_groups import group_consumer, poll_until
from tests.integration.kafka.test_kafka_transactions import read_all, transactional_producer
from tests.support.bookies import BookieProcess, BookieProcesses
from tests.support.kafka import kafka_address
from tests.support.standalone import start_standalone


@pytest.fixture
def processes() -> Iterator[BookieProcesses]:
    started = BookieProcesses()
    yield started
    started.kill_all()


def bootstrap_of(server: BookieProcess) -> str:
    host, port = kafka_address(server)
    return f"{host}:{port}"


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        found = consumer.committed([TopicPartition(topic, p) for p in range(partitions)],
                                   timeout=DEADLINE_S)
    finally:
        consumer.close()
    return [tp.offset for tp in found]


@pytest.mark.faults
def test_offsets_generations_and_transactional_ids_survive_a_crash(
        processes: BookieProcesses, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    server = start_standalone(processes, data_dir, "--kafka-port", "0")
    bootstrap = bootstrap_of(server)
    topic, group = "restart-in", "restart-group"
    create_topic(bootstrap, topic, 2)
    create_topic(bootstrap, "restart-out", 1)
    produce(bootstrap, topic, [(p, b"%d" % i, None, []) for i in range(8) for p in range(2)])
    assigned: dict[str, set[int]] = {}
    settings: dict[str, Any] = {"group.id": group}
    consumer = group_consumer(bootstrap, topic, assigned, "one", **settings)
    try:
        poll_until([consumer], lambda: assigned["one"] == {0, 1}, "assignment")
        consumer.commit(offsets=[TopicPartition(topic, 0, 3), TopicPartition(topic, 1, 6)],
                        asynchronous=False)
    finally:
        consumer.close()
    # A committed transaction with offsets of another group, and one left open.
    producer = transactional_producer(bootstrap, "restart-producer")
    producer.begin_transaction()
    producer.produce("restart-out", value=b"committed", partition=0)
    metadata = Consumer({"bootstrap.servers": bootstrap, "group.id": "restart-txn-group"})
    producer.send_offsets_to_transaction([TopicPartition(topic, 0, 5)],
                                         metadata.consumer_group_metadata(), DEADLINE_S)
    metadata.close()
    producer.commit_transaction(DEADLINE_S)
    producer.begin_transaction()
    producer.produce("restart-out", value=b"left-open", partition=0)
    producer.flush(DEADLINE_S)

    assert server.kill() == -9
    server = start_standalone(processes, data_dir, "--kafka-port", "0")
    bootstrap = bootstrap_of(server)

    assert committed(bootstrap, group, topic, 2) == [3, 6]
    assert committed(bootstrap, "restart-txn-group", topic, 1) == [5]
    assigned = {}
    again = group_consumer(bootstrap, topic, assigned, "again", **settings)
    try:
        got: list[object] = []
        poll_until([again], lambda: len(got) == (8 - 3) + (8 - 6),
                   "the records after the committed offsets", got)
    finally:
        again.close()
    assert "kafka groups: loaded 2 groups' offsets and 1 group records" in server.log()
    # The next producer of the id aborts what the crash left open.
    after = transactional_producer(bootstrap, "restart-producer")
    after.begin_transaction()
    after.produce("restart-out", value=b"after", partition=0)
    after.commit_transaction(DEADLINE_S)
    values = [value for _, _, value in read_all(bootstrap, "restart-out", 1, 2,
                                                "read_committed")]
    assert values == [b"committed", b"after"]
    assert [value for _, _, value in read_all(bootstrap, "restart-out", 1, 3,
                                              "read_uncommitted")] == [
        b"committed", b"left-open", b"after"]
    # Same producer id, next epoch (the log line of InitProducerId).
    assert "restart-producer is producer 0 epoch 1" in server.log()
