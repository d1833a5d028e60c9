"""Kafka groups in ``folio group`` on a 3-broker cluster: listed from every broker, described
at their coordinator.

Real processes (ZooKeeper, 3 bookies, 3 brokers with ``--kafka-port 0``). Two
librdkafka groups are coordinated by two brokers other than the one the SDK
and the CLI are pointed at: the list merges every broker's groups, and a
describe sent to the first broker answers WrongHost naming the coordinator,
which the SDK follows, with the right committed offsets and lag; a reset and a
delete are followed there too. A reset by time (``folio group reset
--to-datetime``) of a group whose coordinator serves neither partition reads
each partition on its owner (``KafkaInternal.OffsetForTime``).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

import folio
from bench._cluster_client import lookup_owner
from tests.cluster.test_kafka_cluster import _group_on, _kafka_cluster
from tests.integration.kafka.test_kafka_clients import DEADLINE_S, create_topic, produce
from tests.integration.kafka.test_kafka_group_reset import _utc
from tests.support.bookies import BookieProcess, BookieProcesses, run_folio
from tests.support.wait import wait_for

TOPIC = "kcg-in"


def _commit_as(bootstrap: str, group: str, offsets: list[int]) -> None:
    """A member of ``group`` that commits ``offsets`` (one per partition), then leaves."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(TOPIC, p) for p in range(len(offsets))])
        consumer.commit(offsets=[TopicPartition(TOPIC, p, o) for p, o in enumerate(offsets)],
                        asynchronous=False)
    finally:
        consumer.close()


@pytest.mark.timeout(240)
def test_kafka_groups_listed_from_every_broker_and_described_at_their_coordinator(
        zk_url: str, bookie_processes: BookieProcesses, tmp_path: Path) -> None:
    brokers, kafka = _kafka_cluster(bookie_processes, zk_url, tmp_path)
    bootstrap = ",".join(kafka.values())
    first = brokers[0].address
    create_topic(kafka[first], TOPIC, 2)
    produce(bootstrap, TOPIC, [(p, b"%d-%d" % (p, i), None, []) for p in (0, 1)
                               for i in range(5)])
    elsewhere = {_group_on(brokers[1].address, first): [2, 5],
                 _group_on(brokers[2].address, first): [5, 1]}
    for group, offsets in elsewhere.items():
        _commit_as(bootstrap, group, offsets)

    with folio.Client(first, timeout_s=30) as client:
        def listed() -> bool:
            names = {g.name for g in client.list_groups("kafka")}
            return set(elsewhere) <= names
        wait_for(listed, "both groups listed through the first broker", timeout_s=60)
        for group, offsets in elsewhere.items():
            described = client.kafka_group(group).describe()  # WrongHost, followed
            assert (described.name, described.state) == (group, "Empty")
            assert [(p.partition, p.committed_offset, p.end_offset, p.lag)
                    for p in described.partitions] == [
                (0, offsets[0], 5, 5 - offsets[0]), (1, offsets[1], 5, 5 - offsets[1])]
        with pytest.raises(folio.ReaderGroupNotFoundError):
            client.kafka_group("kcg-nobody").describe()
        # Reset and delete go to the coordinator the same way.
        reset, deleted = list(elsewhere)
        after = client.kafka_group(reset).reset("latest")
        assert [(p.committed_offset, p.lag) for p in after.partitions] == [(5, 0), (5, 0)]
        client.kafka_group(deleted).delete()
        with pytest.raises(folio.ReaderGroupNotFoundError):
            client.kafka_group(deleted).describe()
        elsewhere = {reset: [5, 5]}

    shown = run_folio("group", "list", "--kind", "kafka", "--json", "--endpoint", first)
    assert shown.returncode == 0, shown.stderr
    rows = {g["name"]: g for g in json.loads(shown.stdout)}
    for group, offsets in elsewhere.items():
        assert rows[group]["lag"] == 10 - sum(offsets)
        assert rows[group]["kind"] == "kafka"
    _reset_by_time_at_the_owners(brokers, bootstrap)


def _reset_by_time_at_the_owners(brokers: list[BookieProcess], bootstrap: str) -> None:
    """A reset by time on a coordinator serving neither partition: read by their owners."""
    addresses = [b.address for b in brokers]
    owners = {lookup_owner(addresses, f"{TOPIC}/{p}") for p in (0, 1)}
    coordinator = next(a for a in addresses if a not in owners)
    group = _group_on(coordinator, addresses[0])
    # 3 more records per partition (offsets 5-7), a minute apart from tomorrow on.
    tomorrow = int(time.time() * 1000) + 86_400_000
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for partition in (0, 1):
        for index in range(3):
            producer.produce(TOPIC, value=b"t%d" % index, partition=partition,
                             timestamp=tomorrow + index * 60_000)
    assert producer.flush(DEADLINE_S) == 0
    _commit_as(bootstrap, group, [1, 1])
    done = run_folio("group", "reset", group, "--to-datetime", _utc(tomorrow + 90_000),
                     "--topic", TOPIC, "--json", "--endpoint", coordinator)
    assert done.returncode == 0, done.stderr
    assert [(o["partition"], o["new_offset"]) for o in json.loads(done.stdout)["offsets"]] == [
        (0, 7), (1, 7)]
    with folio.Client(addresses[0], timeout_s=30) as client:
        described = client.kafka_group(group).describe()
        assert [(p.partition, p.committed_offset, p.end_offset) for p in described.partitions] \
            == [(0, 7, 8), (1, 7, 8)]
