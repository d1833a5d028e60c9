"""Group members kept when their coordinator broker is SIGKILLed on a 3-broker cluster.

Real processes (ZooKeeper, 3 bookies E=3/Qw=2/Qa=2, 3 brokers with
``--kafka-port 0``). A librdkafka consumer in a classic group and one in a
KIP-848 group (``group.protocol=consumer``), both groups coordinated by the
same broker, read and commit record by record. That broker is SIGKILLed:
another claims its containers and loads the groups with their members, and the
consumers go on there with no rebalance: the same members, the classic
generation and the KIP-848 epochs unchanged, their commits accepted, every
record read exactly once (docs/kafka.md, "Clusters"). The same when the
groups' container is handed over gracefully to a broker that joins.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import TopicPartition

from bench._cluster_client import list_brokers
from broker.kafka.locator import GROUP_KEY
from broker.kafka.locator import container_of as kafka_container_of
from tests.cluster.test_kafka_cluster import PARTITIONS, _kafka_cluster
from tests.integration.kafka.test_kafka_clients import DEADLINE_S, create_topic, produce
from tests.integration.kafka.test_kafka_groups_kept import (
    Member,
    _consumer_group_describe,
    _folio_describe,
    _poll_until,
)
from tests.support.bookies import BookieProcesses
from tests.support.cluster import LocalCluster
from tests.support.cluster_load import COUNT
from tests.support.cluster_load import wait_spread as spread
from tests.support.kafka import kafka_address
from tests.support.wait import wait_for

BEFORE, AFTER = 10, 10


def _groups_on(owner: str, address: str, count: int) -> list[str]:
    """``count`` group ids whose container (their coordinator) ``owner`` holds."""
    held = next(b.containers for b in list_brokers(address).brokers if b.address == owner)
    names = (f"kept{i}" for i in range(10_000))
    return [name for name in names if kafka_container_of(GROUP_KEY, name, COUNT) in held][:count]


def _records(first: int, last: int) -> list[tuple[int, bytes, bytes | None,
                                                  list[tuple[str, bytes]]]]:
    return [(p, b"%d-%d" % (p, i), None, []) for i in range(first, last)
            for p in range(PARTITIONS)]


@pytest.mark.timeout(400)
def test_sigkill_of_the_coordinator_members_kept_at_the_next(
        zk_url: str, bookie_processes: BookieProcesses, tmp_path: Path) -> None:
    brokers, kafka = _kafka_cluster(bookie_processes, zk_url, tmp_path)
    bootstrap = ",".join(kafka.values())
    victim, survivor = brokers[2], brokers[0]
    classic_group, modern_group = _groups_on(victim.address, survivor.address, 2)
    for topic in (classic_group, modern_group):
        create_topic(bootstrap, topic, PARTITIONS)
        produce(bootstrap, topic, _records(0, BEFORE))
    members: list[Member] = []
    try:
        classic = Member(bootstrap, classic_group, classic_group,
                         **{"session.timeout.ms": 30_000, "heartbeat.interval.ms": 1_000})
        members.append(classic)
        modern = Member(bootstrap, modern_group, modern_group, **{"group.protocol": "consumer"})
        members.append(modern)
        _poll_until(members, lambda: all(len(m.read) == BEFORE * PARTITIONS for m in members),
                    "every record before the kill")
        assert classic.held == modern.held == set(range(PARTITIONS))
        generation = _folio_describe(survivor, classic_group)["generation"]
        epochs = _consumer_group_describe(kafka[victim.address], modern_group)
        assert list(epochs[1]) == [modern.consumer.memberid()]
        callbacks = (classic.callbacks, modern.callbacks)

        victim.kill()
        survivors = [b for b in brokers if b is not victim]

        def loaded() -> bool:
            logs = "".join(b.log() for b in survivors)
            return (f"kafka group {classic_group}: 1 members kept" in logs
                    and f"kafka consumer group {modern_group}: 1 members kept" in logs)

        after = ",".join(kafka[b.address] for b in survivors)
        for topic in (classic_group, modern_group):
            produce(after, topic, _records(BEFORE, BEFORE + AFTER))
        total = (BEFORE + AFTER) * PARTITIONS
        _poll_until(members, lambda: all(len(m.read) >= total for m in members),
                    "every record after the failover")
        assert (classic.callbacks, modern.callbacks) == callbacks  # no rebalance
        assert _folio_describe(survivor, classic_group)["generation"] == generation
        wait_for(loaded, "a survivor loaded both groups with their members")
        coordinator = next(kafka[b.address] for b in survivors
                           if f"kafka consumer group {modern_group}: 1 members kept" in b.log())
        assert _consumer_group_describe(coordinator, modern_group) == epochs
        everything = sorted((p, o) for p in range(PARTITIONS) for o in range(BEFORE + AFTER))
        for group, member in ((classic_group, classic), (modern_group, modern)):
            assert sorted(member.read) == everything  # none lost, none twice
            committed = member.consumer.committed(
                [TopicPartition(group, p) for p in range(PARTITIONS)], timeout=DEADLINE_S)
            assert [tp.offset for tp in committed] == [BEFORE + AFTER] * PARTITIONS
    finally:
        for member in members:
            member.consumer.close()


@pytest.mark.timeout(400)
def test_a_graceful_hand_over_keeps_the_members(
        zk_url: str, bookie_processes: BookieProcesses, tmp_path: Path) -> None:
    cluster = LocalCluster(bookie_processes, zk_url, tmp_path)
    cluster.init(container_count=COUNT, ensemble_size=3, write_quorum=2, ack_quorum=2)
    for _ in range(3):
        cluster.start_bookie()
    brokers = [cluster.start_broker("--kafka-port", "0") for _ in range(2)]
    spread(brokers[0].address, [COUNT // 2] * 2)
    kafka = {b.address: "{}:{}".format(*kafka_address(b)) for b in brokers}
    bootstrap = ",".join(kafka.values())
    # A broker keeps its lowest containers when a newcomer joins: the highest one moves.
    held = next(b.containers for b in list_brokers(brokers[0].address).brokers
                if b.address == brokers[0].address)
    moving = max(held)
    names = (f"kept{i}" for i in range(10_000))
    classic_group, modern_group = [
        name for name in names if kafka_container_of(GROUP_KEY, name, COUNT) == moving][:2]
    for topic in (classic_group, modern_group):
        create_topic(bootstrap, topic, PARTITIONS)
        produce(bootstrap, topic, _records(0, BEFORE))
    members: list[Member] = []
    try:
        classic = Member(bootstrap, classic_group, classic_group,
                         **{"session.timeout.ms": 30_000, "heartbeat.interval.ms": 1_000})
        members.append(classic)
        modern = Member(bootstrap, modern_group, modern_group, **{"group.protocol": "consumer"})
        members.append(modern)
        _poll_until(members, lambda: all(len(m.read) == BEFORE * PARTITIONS for m in members),
                    "every record before the hand-over")
        generation = _folio_describe(brokers[0], classic_group)["generation"]
        epochs = _consumer_group_describe(kafka[brokers[0].address], modern_group)
        callbacks = (classic.callbacks, modern.callbacks)

        newcomer = cluster.start_broker("--kafka-port", "0")
        spread(brokers[0].address, [COUNT // 3] * 3)
        owner = next(b.address for b in list_brokers(brokers[0].address).brokers
                     if moving in b.containers)
        assert owner == newcomer.address
        for topic in (classic_group, modern_group):
            produce(bootstrap, topic, _records(BEFORE, BEFORE + AFTER))
        total = (BEFORE + AFTER) * PARTITIONS
        _poll_until(members, lambda: all(len(m.read) >= total for m in members),
                    "every record after the hand-over")
        assert (classic.callbacks, modern.callbacks) == callbacks  # no rebalance
        assert _folio_describe(newcomer, classic_group)["generation"] == generation
        assert _consumer_group_describe(
            "{}:{}".format(*kafka_address(newcomer)), modern_group) == epochs
        everything = sorted((p, o) for p in range(PARTITIONS) for o in range(BEFORE + AFTER))
        for member in members:
            assert sorted(member.read) == everything  # none lost, none twice
    finally:
        for member in members:
            member.consumer.close()
