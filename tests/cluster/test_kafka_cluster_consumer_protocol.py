"""A KIP-848 consumer group (``group.protocol=consumer``) on a 3-broker cluster, through a SIGKILL.

Real processes (ZooKeeper, 3 bookies E=3/Qw=2/Qa=2, 3 brokers with
``--kafka-port 0``). Two librdkafka members of one group, whose coordinator
is the broker that also leads partition 0, share a topic spread over the
three brokers while an idempotent producer writes. That broker is
SIGKILLed: another claims its containers and loads the group's record and
state (its epoch, its members with their assignments), the members go on
there, and the group goes on to read every acknowledged record (docs/kafka.md,
"Consumer groups (KIP-848)"; ``test_kafka_cluster_groups_kept.py`` checks that
no member rejoins).
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException
from confluent_kafka.admin import AdminClient

from bench._cluster_client import lookup_owner
from tests.cluster.test_kafka_cluster import (
    PARTITIONS,
    _group_on,
    _kafka_cluster,
    _Producing,
    _spread_topic,
    _topic_contents,
)
from tests.integration.kafka.test_kafka_clients import create_topic
from tests.support.bookies import BookieProcesses
from tests.support.wait import wait_for


def _member(bootstrap: str, group: str, topic: str, name: str) -> Consumer:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "group.protocol": "consumer", "client.id": name,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    return consumer


def _round(members: list[Consumer], seen: list[bytes]) -> None:
    """Each member polls once and commits what it got."""
    for member in members:
        got = member.consume(500, 0.2)
        seen.extend(m.value() or b"" for m in got if m.error() is None)
        if got:
            # A stale epoch or a coordinator moving: the next round commits.
            with contextlib.suppress(KafkaException):
                member.commit(asynchronous=False)


def _consume(members: list[Consumer], want: set[bytes], seen: list[bytes], what: str,
             timeout_s: float = 90.0) -> None:
    """Poll every member (committing what it got) until ``want`` is all in ``seen``."""
    def done() -> bool:
        _round(members, seen)
        return want <= set(seen)

    wait_for(done, what, timeout_s=timeout_s)


@pytest.mark.timeout(400)
def test_sigkill_of_the_coordinator_the_kip848_group_goes_on(
        zk_url: str, bookie_processes: BookieProcesses, tmp_path: Path) -> None:
    brokers, kafka = _kafka_cluster(bookie_processes, zk_url, tmp_path)
    bootstrap = ",".join(kafka.values())
    topic = _spread_topic(brokers[0].address)
    create_topic(kafka[brokers[0].address], topic, PARTITIONS)
    addresses = list(kafka)
    victim_address = lookup_owner(addresses, f"{topic}/0")
    group = _group_on(victim_address, brokers[0].address)
    producing = _Producing(bootstrap, topic)
    members = [_member(bootstrap, group, topic, name) for name in ("one", "two")]
    seen: list[bytes] = []
    try:
        wait_for(lambda: len(producing.acked) >= 100, "100 records acknowledged")
        _consume(members, set(list(producing.acked)[:50]), seen, "the group consumes")
        admin = AdminClient({"bootstrap.servers": bootstrap})

        def both_in() -> bool:
            _round(members, seen)
            description = admin.describe_consumer_groups([group])[group].result(30)
            assert str(description.type).endswith("CONSUMER")
            return len(description.members) == 2

        wait_for(both_in, "both members in the group")

        victim = next(b for b in brokers if b.address == victim_address)
        victim.kill()
        survivors = [a for a in addresses if a != victim_address]

        def on_victim() -> int:  # records acknowledged in partition 0 (the victim's)
            return sum(1 for value in list(producing.acked) if value.startswith(b"0-"))

        before = on_victim()
        wait_for(lambda: on_victim() >= before + 50,
                 "50 more records of partition 0 acknowledged after the SIGKILL", timeout_s=90)
        producing.stop()
        assert producing.errors == []
        # The group goes on at the new coordinator (a record consumed but not
        # committed before the kill may come twice, as in Kafka).
        _consume(members, producing.acked, seen, "the group consumed every acknowledged record",
                 timeout_s=150)
        survivor_admin = AdminClient({"bootstrap.servers": ",".join(
            kafka[a] for a in survivors)})
        description = survivor_admin.describe_consumer_groups([group])[group].result(30)
        assert str(description.type).endswith("CONSUMER")
        assert description.members, "the members joined the new coordinator"
    finally:
        for member in members:
            member.close()
    contents = _topic_contents(",".join(kafka[a] for a in survivors), topic)
    assert set(contents) >= producing.acked
    assert len(contents) == len(set(contents)), "a record is in the topic twice"
