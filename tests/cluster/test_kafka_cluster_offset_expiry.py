"""A deleted topic's offsets on a 2-broker cluster: removed by the group's coordinator, over a
failover.

Real processes (ZooKeeper, 2 bookies E=Qw=Qa=2, 2 brokers with ``--kafka-port 0``).
Broker B coordinates a group and sweeps every 200 ms; broker A sweeps every 10
minutes (Kafka's default), so it removes nothing itself during the test. The
topic is deleted through A (``folio topic delete``): B's sweep finds it gone and
removes the group's offsets of it, keeping the other topic's. B is then
SIGKILLed: A takes its containers, loads the group's records afresh and finds
the deleted topic's offsets still gone (B's tombstones), the other one intact.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient
from kafka.errors import KafkaError

from bench._cluster_client import list_brokers
from broker.kafka.locator import GROUP_KEY
from broker.kafka.locator import container_of as kafka_container_of
from tests.integration.kafka.test_kafka_clients import DEADLINE_S, create_topic
from tests.integration.kafka.test_kafka_offset_expiry import offsets_of
from tests.support.bookies import BookieProcesses, run_folio
from tests.support.cluster import LocalCluster
from tests.support.cluster_load import COUNT, wait_spread
from tests.support.kafka import kafka_address
from tests.support.wait import wait_for


def _offsets(admin: AdminClient, group: str) -> dict[tuple[str, int], int] | None:
    """The group's offsets, None while its coordinator does not answer (a failover)."""
    try:
        return offsets_of(admin, group)
    except KafkaException:
        return None


def _committed(admin: AdminClient, group: str, offsets: list[TopicPartition]) -> bool:
    """Commit as a consumer that assigns partitions itself; whether every partition took it."""
    request = ConsumerGroupTopicPartitions(group, offsets)
    (future,) = admin.alter_consumer_group_offsets([request]).values()
    try:
        answer = future.result(timeout=DEADLINE_S)
    except KafkaException:
        return False
    return all(tp.error is None for tp in answer.topic_partitions)


@pytest.mark.timeout(300)
def test_a_deleted_topics_offsets_stay_removed_at_the_next_coordinator(
        zk_url: str, bookie_processes: BookieProcesses, tmp_path: Path) -> None:
    cluster = LocalCluster(bookie_processes, zk_url, tmp_path)
    cluster.init(container_count=COUNT, ensemble_size=2, write_quorum=2, ack_quorum=2)
    for _ in range(2):
        cluster.start_bookie()
    a = cluster.start_broker("--kafka-port", "0")
    b = cluster.start_broker("--kafka-port", "0",
                             "--kafka-offsets-retention-check-interval-ms", "200")
    wait_spread(a.address, [COUNT // 2] * 2)
    bootstrap = ",".join("{}:{}".format(*kafka_address(x)) for x in (a, b))
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for topic in ("kx-doomed", "kx-stays"):
        create_topic(bootstrap, topic, 1)
    held = next(x.containers for x in list_brokers(a.address).brokers
                if x.address == b.address)
    group = next(f"kx{i}" for i in range(10_000)
                 if kafka_container_of(GROUP_KEY, f"kx{i}", COUNT) in held)
    # (Absolute offsets: committed again after NOT_COORDINATOR while a container settles.)
    wait_for(lambda: _committed(admin, group, [TopicPartition("kx-doomed", 0, 4),
                                               TopicPartition("kx-stays", 0, 2)]),
             "the group's commit", DEADLINE_S)

    deleted = run_folio("topic", "delete", "kx-doomed", "--endpoint", a.address)
    assert deleted.returncode == 0, deleted.stderr
    wait_for(lambda: _offsets(admin, group) == {("kx-stays", 0): 2},
             "the deleted topic's offset leaves the group at B", DEADLINE_S)
    assert f"kafka group {group}: 1 offsets removed (of a deleted topic)" in b.log()

    assert b.kill() == -9
    wait_spread(a.address, [COUNT])
    # Read with kafka-python: librdkafka's admin client was seen to crash the test
    # process asking a group whose coordinator had just died.
    py_admin = KafkaAdminClient(bootstrap_servers="{}:{}".format(*kafka_address(a)))
    try:
        def at_a() -> dict[tuple[str, int], int] | None:
            try:
                found = py_admin.list_group_offsets({group: None})[group]
            except KafkaError:
                return None
            return {(tp.topic, tp.partition): meta.offset for tp, meta in found.items()}
        wait_for(lambda: at_a() is not None, "the group at A", DEADLINE_S)
        assert at_a() == {("kx-stays", 0): 2}
    finally:
        py_admin.close()
