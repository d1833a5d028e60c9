"""Leader epochs on a 3-broker cluster: a failover grows them, librdkafka validates and goes on.

Real processes (ZooKeeper, 3 bookies E=3/Qw=2/Qa=2, 3 brokers each with
``--kafka-port 0``). librdkafka's idempotent producer writes to every
partition and a librdkafka consumer with assigned partitions (positions in
memory, ``auto.offset.reset=earliest``: a position found invalid would start
again from 0 and double records) reads them. The owner of partition 0 is
SIGKILLed: Metadata then names a survivor with a larger epoch for the
partitions that moved and the same epoch for the others; the consumer sees
the epoch change, validates its position with OffsetForLeaderEpoch (its
debug log says so) and reads every acknowledged record exactly once. The new
owner fences a Fetch naming the old epoch, takes one naming the new, stores
the batches written after the failover with the new epoch, and answers the
old epoch's exact end: the first offset of the new epoch's batches
(docs/kafka.md, "Leader epochs"). Then that owner is SIGKILLed too: the last broker, in a third
epoch, answers OffsetForLeaderEpoch for each earlier epoch with its exact end
offset, the first offset of the next epoch's batches (the segment's
leader-epoch history, kept in its record across both failovers).
"""

from __future__ import annotations

import datetime
import logging
import struct
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from kio.schema.errors import ErrorCode

from bench._cluster_client import lookup_owner
from broker.kafka.batches import split_batches
from broker.kafka.messages import build, nested, request_class
from tests.cluster.test_kafka_cluster import PARTITIONS, _kafka_cluster, _Producing, _spread_topic
from tests.cluster.test_kafka_cluster_leader_hints import _ask
from tests.integration.kafka.test_kafka_clients import create_topic
from tests.support.bookies import BookieProcess, BookieProcesses
from tests.support.wait import wait_for

FETCH, METADATA, OFFSET_FOR_LEADER_EPOCH = 1, 3, 23


def _leaders(address: str, topic: str) -> tuple[uuid.UUID, dict[int, tuple[int, int]]]:
    """(topic id, partition -> (leader node id, leader epoch)) from a Metadata v12 answer."""
    cls = request_class(METADATA, 12)
    request = build(cls, topics=(build(nested(cls, "MetadataRequestTopic"), name=topic,
                                       topic_id=None),),
                    allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    [answered] = _ask(address, METADATA, 12, request).topics
    return answered.topic_id, {p.partition_index: (p.leader_id, p.leader_epoch)
                               for p in answered.partitions}


def _node_ids(address: str) -> dict[str, int]:
    cls = request_class(METADATA, 12)
    request = build(cls, topics=(), allow_auto_topic_creation=False,
                    include_topic_authorized_operations=False)
    return {f"{b.host}:{b.port}": b.node_id for b in _ask(address, METADATA, 12, request).brokers}


def _fetch(address: str, topic_id: uuid.UUID, current: int, offset: int = 0) -> Any:
    """Fetch v13 of partition 0 from ``offset`` naming ``current`` as its leader epoch."""
    cls: Any = request_class(FETCH, 13)
    module = sys.modules[cls.__module__]
    request = cls(max_wait=datetime.timedelta(0), min_bytes=1, max_bytes=64 << 20,
                  topics=(module.FetchTopic(topic_id=topic_id, partitions=(
                      module.FetchPartition(partition=0, fetch_offset=offset,
                                            partition_max_bytes=64 << 20,
                                            current_leader_epoch=current),)),),
                  forgotten_topics_data=())
    return _ask(address, FETCH, 13, request).responses[0].partitions[0]


def _batches(address: str, topic_id: uuid.UUID,
             current: int) -> tuple[list[tuple[int, int]], int]:
    """((base offset, leader epoch) of each batch of partition 0, in order; its high watermark)."""
    batches: list[tuple[int, int]] = []
    offset, end = 0, 1
    while offset < end:
        fetched = _fetch(address, topic_id, current, offset)
        assert fetched.error_code == ErrorCode.none
        end = fetched.high_watermark
        for batch in split_batches(bytes(fetched.records)):
            base, _length, epoch = struct.unpack_from(">qii", batch, 0)
            count = struct.unpack_from(">i", batch, 57)[0]
            if base + count > offset:
                batches.append((base, epoch))
                offset = base + count
    return batches, end


def _end_of(address: str, topic: str, current: int, epoch: int) -> Any:
    """OffsetForLeaderEpoch v4 of partition 0."""
    cls: Any = request_class(OFFSET_FOR_LEADER_EPOCH, 4)
    module = sys.modules[cls.__module__]
    request = cls(replica_id=-1, topics=(module.OffsetForLeaderTopic(topic=topic, partitions=(
        module.OffsetForLeaderPartition(partition=0, current_leader_epoch=current,
                                        leader_epoch=epoch),)),))
    return _ask(address, OFFSET_FOR_LEADER_EPOCH, 4, request).topics[0].partitions[0]


class _Lines(logging.Handler):
    """librdkafka's debug lines, kept."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.mark.timeout(300)
def test_a_failover_grows_the_epoch_and_a_consumer_validates_and_reads_everything_once(
        zk_url: str, bookie_processes: BookieProcesses, tmp_path: Path) -> None:
    brokers, kafka = _kafka_cluster(bookie_processes, zk_url, tmp_path)
    bootstrap = ",".join(kafka.values())
    topic = _spread_topic(brokers[0].address)
    create_topic(kafka[brokers[0].address], topic, PARTITIONS)
    addresses = list(kafka)
    victim_address = lookup_owner(addresses, f"{topic}/0")
    survivors = [a for a in addresses if a != victim_address]
    nodes = _node_ids(kafka[survivors[0]])
    victim_node = nodes[kafka[victim_address]]
    topic_id, before = _leaders(kafka[survivors[0]], topic)
    assert before[0][0] == victim_node and all(epoch >= 0 for _, epoch in before.values())

    lines = _Lines()
    logger = logging.getLogger(f"librdkafka.{topic}")
    logger.setLevel(logging.DEBUG)
    logger.addHandler(lines)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-reader",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "debug": "fetch"}, logger=logger)
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    seen: list[bytes] = []

    def read() -> bool:
        """Read what is there; False (so ``read() or condition`` asks the condition)."""
        for message in consumer.consume(500, 0.2):
            if message.error() is None:
                seen.append(message.value() or b"")
        return False

    producing = _Producing(bootstrap, topic)
    wait_for(lambda: len(producing.acked) >= 100, "100 records acknowledged")
    # Partition 0 read before the failover: its position has the old epoch then.
    wait_for(lambda: read() or sum(1 for v in seen if v.startswith(b"0-")) >= 20,
             "the consumer reads partition 0")

    victim = next(b for b in brokers if b.address == victim_address)
    victim.kill()
    mark = len(lines.lines)

    def on_partition_0() -> int:
        return sum(1 for value in list(producing.acked) if value.startswith(b"0-"))

    acked_before = on_partition_0()
    wait_for(lambda: read() or on_partition_0() >= acked_before + 50,
             "50 more records of partition 0 acknowledged after the SIGKILL", timeout_s=60)
    new_owner = lookup_owner(survivors, f"{topic}/0")
    assert new_owner in survivors
    _, after = _leaders(kafka[survivors[0]], topic)
    for partition, (leader, epoch) in before.items():
        if leader == victim_node:  # moved: a new leader with a larger epoch
            assert after[partition][0] != victim_node and after[partition][1] > epoch
        else:  # stayed: the same leader and epoch
            assert after[partition] == (leader, epoch)
    producing.stop()
    assert producing.errors == []
    acked = producing.acked
    wait_for(lambda: read() or acked <= set(seen),
             "the consumer read every acknowledged record", timeout_s=90)
    assert len(seen) == len(set(seen)), "a record was read twice (a position reset?)"
    # It saw partition 0's epoch change and validated its position (KIP-320).
    after_kill = lines.lines[mark:]
    assert any(f"{topic} [0]: offset and epoch validation succeeded" in line
               for line in after_kill), "librdkafka never validated partition 0's position"
    assert not any("truncat" in line.lower() for line in after_kill)
    consumer.close()

    old, new = before[0][1], after[0][1]
    fenced = _fetch(kafka[new_owner], topic_id, old)
    assert fenced.error_code == ErrorCode.fenced_leader_epoch
    assert _fetch(kafka[new_owner], topic_id, new + 1).error_code == (
        ErrorCode.unknown_leader_epoch)
    batches, high_watermark = _batches(kafka[new_owner], topic_id, new)
    epochs = [epoch for _base, epoch in batches]
    assert epochs[0] == old and epochs[-1] == new and epochs == sorted(epochs)
    # The old epoch's exact end: where the new owner's batches start.
    end = _end_of(kafka[new_owner], topic, new, old)
    assert (end.error_code, end.leader_epoch, end.end_offset) == (
        ErrorCode.none, old, next(base for base, epoch in batches if epoch > old))
    current = _end_of(kafka[new_owner], topic, new, new)
    assert (current.leader_epoch, current.end_offset) == (new, high_watermark)
    _second_failover(brokers, kafka, topic, topic_id, new_owner, new)


def _second_failover(brokers: list[BookieProcess], kafka: dict[str, str], topic: str,
                     topic_id: uuid.UUID, owner: str, epoch: int) -> None:
    """SIGKILL ``owner`` (partition 0's, in ``epoch``) too: each earlier epoch's end is exact."""
    last = next(b.address for b in brokers if b.address != owner and b.running())
    producing = _Producing(",".join(kafka.values()), topic)

    def on_partition_0() -> int:
        return sum(1 for value in list(producing.acked) if value.startswith(b"0-"))

    wait_for(lambda: on_partition_0() >= 50, "50 records of partition 0 acknowledged",
             timeout_s=60)
    next(b for b in brokers if b.address == owner).kill()
    acked_before = on_partition_0()
    wait_for(lambda: on_partition_0() >= acked_before + 50,
             "50 more records of partition 0 acknowledged after the second SIGKILL",
             timeout_s=60)
    producing.stop()
    assert producing.errors == []
    assert lookup_owner([last], f"{topic}/0") == last
    _, now = _leaders(kafka[last], topic)
    third = now[0][1]
    assert third > epoch
    batches, high_watermark = _batches(kafka[last], topic_id, third)
    epochs = sorted({batch_epoch for _base, batch_epoch in batches})
    assert len(epochs) >= 3 and epoch in epochs and epochs[-1] == third
    for earlier in epochs[:-1]:
        # Its exact end: where the next ownership's batches start.
        expected = next(base for base, batch_epoch in batches if batch_epoch > earlier)
        end = _end_of(kafka[last], topic, third, earlier)
        assert (end.error_code, end.leader_epoch, end.end_offset) == (
            ErrorCode.none, earlier, expected), f"epoch {earlier}"
    current = _end_of(kafka[last], topic, third, third)
    assert (current.leader_epoch, current.end_offset) == (third, high_watermark)
