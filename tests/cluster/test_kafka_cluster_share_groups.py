"""Kafka share groups (KIP-932) on a 3-broker cluster, through a SIGKILL of a partition's leader.

Real processes (ZooKeeper, 3 bookies E=3/Qw=2/Qa=2, 3 brokers with
``--kafka-port 0``). A topic whose 4 partitions are led by the three brokers;
the group's ``share.auto.offset.reset`` is set to ``earliest`` through one
broker (IncrementalAlterConfigs on the GROUP resource) and is in force on
every broker's partitions: the records written before the members came are
read. Two librdkafka ``ShareConsumer``s of the group read with explicit
ACCEPTs: each record once while nothing fails. Then the broker leading
partition 0, also the group's coordinator, is SIGKILLed mid-way: another
broker claims its containers and reads the share partition's state from the
container's share state segment, so no record whose ACCEPT was answered is
delivered again, every record is delivered, and the members join the new
coordinator. With the group empty, the offsets admin APIs, ``folio group
describe`` and DeleteGroups at the new coordinator reach the share partitions
of both leaders (described, altered, deleted: docs/kafka.md, "Share groups",
"On a cluster").
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType, KafkaException, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

import folio
from bench._cluster_client import lookup_owner
from tests.cluster.test_kafka_cluster import PARTITIONS, _group_on, _kafka_cluster, _spread_topic
from tests.integration.kafka.share_requests import alter, ask, offsets
from tests.integration.kafka.test_kafka_clients import DEADLINE_S, create_topic
from tests.integration.kafka.test_kafka_share_groups import set_group_configs
from tests.support.bookies import BookieProcesses
from tests.support.wait import wait_for

#: Records written to each partition before the members come, and after the kill.
BEFORE, AFTER = 60, 20


def _produce(bootstrap: str, topic: str, start: int, count: int) -> set[bytes]:
    """``p-i`` for i in [start, start + count) to each partition ``p``; all delivered."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "message.timeout.ms": 120_000})
    failures: list[object] = []
    values = set()
    for partition in range(PARTITIONS):
        for i in range(start, start + count):
            value = f"{partition}-{i}".encode()
            values.add(value)
            producer.produce(topic, value=value, partition=partition,
                             on_delivery=lambda error, _m: failures.append(error) if error
                             else None)
    assert producer.flush(120) == 0
    assert failures == []
    return values


def _members_at(address: str, group: str) -> tuple[ErrorCode, int]:
    """ShareGroupDescribe of ``group`` at one broker: (its error, the members it knows)."""
    schema: Any = load_request_schema(77, 1)
    [described] = ask(address, 77, 1, schema(group_ids=(group,),
                                              include_authorized_operations=False)).groups
    return described.error_code, len(described.members)


def _member(bootstrap: str, group: str, topic: str) -> ShareConsumer:
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                              "share.acknowledgement.mode": "explicit",
                              "max.poll.records": 20})
    consumer.subscribe([topic])
    return consumer


class _Reading:
    """What the members were handed, and which ACCEPTs the leaders answered as done."""

    def __init__(self, members: list[ShareConsumer]) -> None:
        self.members = members
        self.delivered: list[bytes] = []
        #: Records whose ACCEPT a commit answered without error for their partition.
        self.accepted: set[bytes] = set()

    def round(self) -> None:
        """Each member polls once, ACCEPTs what it got and commits the ACCEPTs."""
        for member in self.members:
            try:
                got = [m for m in member.poll(0.5) if m.error() is None]
            except KafkaException:
                continue  # a leader or coordinator moving: the next round goes on
            by_partition: dict[int, list[bytes]] = {}
            for message in got:
                value = message.value() or b""
                self.delivered.append(value)
                by_partition.setdefault(message.partition() or 0, []).append(value)
                member.acknowledge(message, AcknowledgeType.ACCEPT)
            if not got:
                continue
            try:
                results = member.commit_sync(DEADLINE_S)
            except KafkaException:
                continue  # unknown: these records may come again
            for tp, error in results.items():
                if error is None:
                    self.accepted.update(by_partition.get(tp.partition, ()))


@pytest.mark.timeout(400)
def test_two_share_consumers_read_every_record_once_and_a_leader_sigkill_loses_no_accept(
        zk_url: str, bookie_processes: BookieProcesses, tmp_path: Path) -> None:
    brokers, kafka = _kafka_cluster(bookie_processes, zk_url, tmp_path)
    addresses = list(kafka)
    topic = _spread_topic(brokers[0].address)
    create_topic(kafka[brokers[0].address], topic, PARTITIONS)
    victim_address = lookup_owner(addresses, f"{topic}/0")
    survivors = [a for a in addresses if a != victim_address]
    group = _group_on(victim_address, brokers[0].address)
    bootstrap = ",".join(kafka.values())

    # Set through one broker, in force on every broker (they all describe it).
    set_group_configs(kafka[survivors[1]], group, {"share.auto.offset.reset": "earliest"})
    resource = ConfigResource(ResourceType.GROUP, group)

    def everywhere() -> bool:
        for address in kafka.values():
            admin = AdminClient({"bootstrap.servers": address})
            described = admin.describe_configs([resource])[resource].result(DEADLINE_S)
            if described["share.auto.offset.reset"].value != "earliest":
                return False
        return True
    wait_for(everywhere, "every broker has the group's share.auto.offset.reset")
    written = _produce(bootstrap, topic, 0, BEFORE)

    reading = _Reading([_member(bootstrap, group, topic) for _ in range(2)])
    try:
        half = len(written) // 2

        every = {str(p).encode() for p in range(PARTITIONS)}

        def half_read() -> bool:
            reading.round()
            return len(set(reading.delivered)) >= half \
                and {value.split(b"-")[0] for value in reading.delivered} == every
        wait_for(half_read, "half the records read, from every partition", timeout_s=120)
        # Each record once while nothing fails (every one is ACCEPTed).
        assert len(reading.delivered) == len(set(reading.delivered)), "a record came twice"
        assert set(reading.delivered) <= written
        assert any(v.startswith(b"0-") for v in reading.accepted)
        assert _members_at(kafka[victim_address], group) == (ErrorCode.none, 2)
        assert {_members_at(kafka[a], group)[0] for a in survivors} == {
            ErrorCode.not_coordinator}
        mark = len(reading.delivered)
        accepted = set(reading.accepted)

        next(b for b in brokers if b.address == victim_address).kill()
        written |= _produce(",".join(kafka[a] for a in survivors), topic, BEFORE, AFTER)

        def all_read() -> bool:
            reading.round()
            return written <= set(reading.delivered)
        wait_for(all_read, "every record read after the SIGKILL", timeout_s=180)
        again = [v for v in reading.delivered[mark:] if v in accepted]
        assert again == [], "records whose ACCEPT was answered were delivered again"
        assert set(reading.delivered) == written

        def rejoined() -> bool:
            reading.round()
            found = sorted(_members_at(kafka[a], group) for a in survivors)
            return found == [(ErrorCode.none, 2), (ErrorCode.not_coordinator, 0)]
        wait_for(rejoined, "both members in the group at its new coordinator")
    finally:
        for member in reading.members:
            with contextlib.suppress(KafkaException):
                member.close()
    coordinator = next(kafka[a] for a in survivors
                       if _members_at(kafka[a], group)[0] == ErrorCode.none)
    _admin_at_the_coordinator(coordinator, survivors[0], group, topic, BEFORE + AFTER)


def _admin_at_the_coordinator(coordinator: str, grpc_address: str, group: str, topic: str,
                              end: int) -> None:
    """The offsets admin APIs, ``folio group describe`` and DeleteGroups at the
    coordinator reach the share partitions of every leader
    (``broker.kafka.share_groups.admin``)."""
    every = [(p, end, 0, ErrorCode.none) for p in range(PARTITIONS)]
    # The members' leaving reaches the coordinator with their close: the group empties.
    wait_for(lambda: _members_at(coordinator, group) == (ErrorCode.none, 0), "group empty")
    assert sorted(offsets(coordinator, group, None)) == every
    assert alter(coordinator, group, topic, 10) == (ErrorCode.none, [ErrorCode.none])
    assert offsets(coordinator, group, topic) == [(0, 10, end - 10, ErrorCode.none)]
    with folio.Client(grpc_address, timeout_s=30) as client:
        described = client.kafka_group(group).describe()  # WrongHost, followed
    assert [(p.partition, p.committed_offset, p.end_offset) for p in described.partitions] \
        == [(0, 10, end)] + [(p, end, end) for p in range(1, PARTITIONS)]
    assert alter(coordinator, group, topic, end + 1) == (
        ErrorCode.none, [ErrorCode.offset_out_of_range])
    schema: Any = load_request_schema(92, 0)
    module = sys.modules[schema.__module__]
    deleted = ask(coordinator, 92, 0, schema(group_id=group, topics=(
        module.DeleteShareGroupOffsetsRequestTopic(topic_name=topic),)))
    assert [t.error_code for t in deleted.responses] == [ErrorCode.none]
    assert offsets(coordinator, group, None) == []
    groups: Any = load_request_schema(42, 2)
    assert [r.error_code for r in ask(coordinator, 42, 2, groups(
        groups_names=(group,))).results] == [ErrorCode.none]
