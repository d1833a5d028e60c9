"""A mixed group kept when its coordinator broker is SIGKILLed on a 3-broker cluster.

As ``test_kafka_cluster_groups_kept`` (ZooKeeper, 3 bookies, 3 brokers with
``--kafka-port 0``), with one group coordinated by the broker to be killed: a
classic librdkafka consumer reads it, then a ``group.protocol=consumer`` one
joins (the online upgrade: a consumer group with the classic member inside).
The coordinator is SIGKILLed; a survivor claims its containers and loads the
group with both members, the classic one still classic, and they go on
there with no rebalance: the same members, epochs and partitions, every
record read exactly once (docs/kafka.md, "Online upgrade and downgrade").
"""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import TopicPartition

from tests.cluster.test_kafka_cluster import PARTITIONS, _kafka_cluster
from tests.cluster.test_kafka_cluster_groups_kept import _groups_on, _records
from tests.integration.kafka.test_kafka_clients import DEADLINE_S, create_topic, produce
from tests.integration.kafka.test_kafka_groups_kept import Member, _poll_until
from tests.integration.kafka.test_kafka_mixed_group_kept import _describe
from tests.support.bookies import BookieProcesses
from tests.support.wait import wait_for

BEFORE, AFTER = 10, 10
EVERY = set(range(PARTITIONS))


@pytest.mark.timeout(400)
def test_sigkill_of_the_coordinator_keeps_a_mixed_group(
        zk_url: str, bookie_processes: BookieProcesses, tmp_path: Path) -> None:
    brokers, kafka = _kafka_cluster(bookie_processes, zk_url, tmp_path)
    bootstrap = ",".join(kafka.values())
    victim, survivor = brokers[2], brokers[0]
    (group,) = _groups_on(victim.address, survivor.address, 1)
    create_topic(bootstrap, group, PARTITIONS)
    members: list[Member] = []
    try:
        classic = Member(bootstrap, group, group,
                         **{"session.timeout.ms": 30_000, "heartbeat.interval.ms": 1_000,
                            "partition.assignment.strategy": "range"})
        members.append(classic)
        _poll_until(members, lambda: classic.held == EVERY, "the classic group's member")
        modern = Member(bootstrap, group, group, **{"group.protocol": "consumer"})
        members.append(modern)
        _poll_until(members, lambda: bool(classic.held) and bool(modern.held)
                    and classic.held | modern.held == EVERY
                    and not classic.held & modern.held, "the two members share")
        produce(bootstrap, group, _records(0, BEFORE))
        _poll_until(members, lambda: len(classic.read) + len(modern.read)
                    == BEFORE * PARTITIONS, "every record before the kill")
        epoch, described = _describe(kafka[victim.address], group)
        assert described == {classic.consumer.memberid(): (epoch, 0),
                             modern.consumer.memberid(): (epoch, 1)}
        held = (set(classic.held), set(modern.held))
        callbacks = (classic.callbacks, modern.callbacks)

        victim.kill()
        survivors = [b for b in brokers if b is not victim]
        produce(",".join(kafka[b.address] for b in survivors), group,
                _records(BEFORE, BEFORE + AFTER))
        total = (BEFORE + AFTER) * PARTITIONS
        _poll_until(members, lambda: len(classic.read) + len(modern.read) >= total,
                    "every record after the failover")
        assert (classic.callbacks, modern.callbacks) == callbacks  # no rebalance
        assert (classic.held, modern.held) == held
        kept = f"kafka consumer group {group}: 2 members kept"
        wait_for(lambda: any(kept in b.log() for b in survivors),
                 "a survivor loaded the group with both members")
        coordinator = next(kafka[b.address] for b in survivors if kept in b.log())
        assert _describe(coordinator, group) == (epoch, described)
        assert sorted(classic.read + modern.read) == sorted(
            (p, o) for p in range(PARTITIONS) for o in range(BEFORE + AFTER)), \
            "a record read twice or never"
        committed = classic.consumer.committed(
            [TopicPartition(group, p) for p in range(PARTITIONS)], timeout=DEADLINE_S)
        assert [tp.offset for tp in committed] == [BEFORE + AFTER] * PARTITIONS
    finally:
        for member in members:
            member.consumer.close()
