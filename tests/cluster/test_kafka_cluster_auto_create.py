"""Kafka auto-creation and the replication factor on a 2-broker cluster.

Real processes (ZooKeeper, 2 bookies E=2/Qw=2/Qa=2, 2 brokers each with
``--kafka-port 0``). Sixteen connections, eight to each broker, ask Metadata
for one missing topic at once: every answer is the topic or "being created"
(LEADER_NOT_AVAILABLE), never an error; both brokers then answer the one topic
with ``--kafka-num-partitions`` partitions, and a producer writes to every
partition (no creator overwrote another's records: docs/kafka.md, "Topic
names and auto-creation"). CreateTopics takes replication factor 2 (the write
quorum) and refuses 3 with INVALID_REPLICATION_FACTOR.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.errors import ErrorCode

import folio
from broker.kafka.messages import build, nested, request_class
from tests.support.bookies import BookieProcesses
from tests.support.cluster import LocalCluster
from tests.support.kafka import kafka_address, raw_request, read_response
from tests.support.wait import wait_for

PARTITIONS = 3
TOPIC = "_raced"


def _metadata(address: tuple[str, int], topic: str) -> tuple[ErrorCode, int]:
    """(error code, partition count) of ``topic`` in a Metadata v9 answer that may create it."""
    cls = request_class(3, 9)
    request = build(cls, topics=(build(nested(cls, "MetadataRequestTopic"), name=topic),),
                    allow_auto_topic_creation=True,
                    include_cluster_authorized_operations=False,
                    include_topic_authorized_operations=False)
    with socket.create_connection(address, timeout=60) as sock:
        sock.sendall(raw_request(3, 9, 1, request))
        answer: Any = read_response(sock, 3, 9)[1]
    [answered] = answer.topics
    return answered.error_code, len(answered.partitions)


def _answers_the_topic(address: tuple[str, int]) -> Callable[[], bool]:
    return lambda: _metadata(address, TOPIC) == (ErrorCode.none, PARTITIONS)


@pytest.mark.timeout(240)
def test_concurrent_auto_creation_on_two_brokers_makes_one_topic(
        zk_url: str, bookie_processes: BookieProcesses, tmp_path: Path) -> None:
    cluster = LocalCluster(bookie_processes, zk_url, tmp_path)
    cluster.init(container_count=8, ensemble_size=2, write_quorum=2, ack_quorum=2)
    for _ in range(2):
        cluster.start_bookie()
    brokers = [cluster.start_broker("--kafka-port", "0", "--kafka-num-partitions",
                                    str(PARTITIONS)) for _ in range(2)]
    addresses = [kafka_address(broker) for broker in brokers]

    answers: list[tuple[ErrorCode, int]] = []
    failures: list[BaseException] = []
    start = threading.Barrier(16)

    def ask(address: tuple[str, int]) -> None:
        try:
            start.wait(60)
            answers.append(_metadata(address, TOPIC))
        except BaseException as error:  # reported below, with the answers
            failures.append(error)

    threads = [threading.Thread(target=ask, args=(addresses[i % 2],)) for i in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert failures == []
    assert len(answers) == 16
    # The topic (its partitions, maybe no leader yet) or "being created": no error.
    assert {code for code, _ in answers} <= {ErrorCode.none, ErrorCode.leader_not_available}
    assert {count for code, count in answers if code is ErrorCode.none} <= {PARTITIONS}
    for address in addresses:
        wait_for(_answers_the_topic(address), f"{address} answers the topic")
    with folio.Client(brokers[0].address, timeout_s=30) as client:
        assert [topic.name for topic in client.list_topics()] == [TOPIC]
        assert len(client.get_topic(TOPIC).segments) == PARTITIONS

    bootstrap = ",".join(f"{host}:{port}" for host, port in addresses)
    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 120_000})
    errors: list[KafkaError] = []
    for partition in range(PARTITIONS):
        producer.produce(TOPIC, value=b"v", partition=partition, on_delivery=lambda error, _:
                         errors.append(error) if error is not None else None)
    # A name starting with '.' (a ZooKeeper node name as any other but "." and "..").
    producer.produce(".hidden", value=b"v", on_delivery=lambda error, _:
                     errors.append(error) if error is not None else None)
    assert producer.flush(120) == 0
    assert errors == []
    with folio.Client(brokers[1].address, timeout_s=30) as client:
        assert sorted(topic.name for topic in client.list_topics()) == [".hidden", TOPIC]

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic("rf-two", 1, replication_factor=2),
                                   NewTopic("rf-three", 1, replication_factor=3)])
    futures["rf-two"].result(60)
    with pytest.raises(KafkaException) as refused:
        futures["rf-three"].result(60)
    assert refused.value.args[0].code() == KafkaError.INVALID_REPLICATION_FACTOR
