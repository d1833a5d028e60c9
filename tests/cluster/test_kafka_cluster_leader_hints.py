"""KIP-951 leader hints on a 3-broker cluster: a wrong broker names the partition's owner.

Real processes (ZooKeeper, 3 bookies E=3/Qw=2/Qa=2, 3 brokers each with
``--kafka-port 0``). A raw Produce (v11 by name, v13 by id) and Fetch (v16,
v17) of partition 0 sent to a broker that does not own it answer
NOT_LEADER_OR_FOLLOWER with ``current_leader`` naming the owner's node and the
leader epoch Metadata reports for the partition, and ``node_endpoints`` giving
the owner's Kafka address, which then takes the same Produce. After the owner
stops, a survivor that does not own the partition names its new owner the same
way. Then librdkafka: a producer whose metadata is stale (the partition's
container moved to a joining broker meanwhile) sends to the old owner, and
applies the hint of its answer (its "updated with leader" debug line, which
only a Produce or Fetch answer's hints print) before the record is delivered
(docs/kafka.md, "Clusters"). A ShareFetch of the partition sent to a broker not
leading it is refused the same way, with the same hint.
"""

from __future__ import annotations

import datetime
import logging
import socket
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from kio.schema.errors import ErrorCode
from kio.static.primitive import Records

from bench._cluster_client import list_brokers, lookup_owner
from broker.cluster.containers import container_of
from broker.kafka.messages import build, nested, request_class
from tests.cluster.test_kafka_cluster import PARTITIONS, _kafka_cluster, _spread_topic
from tests.integration.kafka.share_requests import partition as share_partition
from tests.integration.kafka.share_requests import share_fetch
from tests.integration.kafka.test_kafka_bad_input import _batch
from tests.integration.kafka.test_kafka_clients import create_topic
from tests.support.bookies import BookieProcesses
from tests.support.cluster import LocalCluster
from tests.support.cluster_load import COUNT
from tests.support.cluster_load import wait_spread as _spread
from tests.support.kafka import kafka_address, raw_request, read_response
from tests.support.wait import wait_for

PRODUCE, FETCH, METADATA = 0, 1, 3


def _ask(address: str, api_key: int, version: int, request: Any) -> Any:
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(raw_request(api_key, version, 1, request))
        return read_response(sock, api_key, version)[1]


def _metadata(address: str, topic: str) -> tuple[dict[str, int], uuid.UUID, Any]:
    """(Kafka address -> node id, the topic's id, partition 0) from a Metadata v12 answer."""
    cls = request_class(METADATA, 12)
    request = build(cls, topics=(build(nested(cls, "MetadataRequestTopic"), name=topic,
                                       topic_id=None),),
                    allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    answer = _ask(address, METADATA, 12, request)
    nodes = {f"{b.host}:{b.port}": b.node_id for b in answer.brokers}
    [answered] = answer.topics
    partition = next(p for p in answered.partitions if p.partition_index == 0)
    return nodes, answered.topic_id, partition


def _produce(address: str, version: int, topic: str, topic_id: uuid.UUID) -> Any:
    """A Produce of one record to partition 0: (its partition answer, the answer)."""
    cls: Any = request_class(PRODUCE, version)
    module = sys.modules[cls.__module__]
    named = {"topic_id": topic_id} if version >= 13 else {"name": topic}
    request = cls(transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=10),
                  topic_data=(module.TopicProduceData(**named, partition_data=(
                      module.PartitionProduceData(index=0, records=Records(
                          bytes(_batch([b"probe"])))),)),))
    answer = _ask(address, PRODUCE, version, request)
    return answer.responses[0].partition_responses[0], answer


def _fetch(address: str, version: int, topic_id: uuid.UUID) -> Any:
    """A Fetch of partition 0 from offset 0: (its partition answer, the answer)."""
    cls: Any = request_class(FETCH, version)
    module = sys.modules[cls.__module__]
    request = cls(max_wait=datetime.timedelta(0), min_bytes=1, topics=(module.FetchTopic(
        topic_id=topic_id, partitions=(module.FetchPartition(
            partition=0, fetch_offset=0, partition_max_bytes=1 << 20),)),),
        forgotten_topics_data=())
    answer = _ask(address, FETCH, version, request)
    return answer.responses[0].partitions[0], answer


def _hint(part: Any, answer: Any) -> tuple[ErrorCode, int, int, list[str]]:
    """(error, hinted leader id, its epoch, the answer's endpoints as ``host:port``)."""
    return (part.error_code, part.current_leader.leader_id, part.current_leader.leader_epoch,
            [f"{e.host}:{e.port}" for e in answer.node_endpoints])


def _hints_name(stranger: str, topic: str, topic_id: uuid.UUID, owner: str,
                node_id: int, epoch: int) -> None:
    """Every Produce and Fetch version with the fields, sent to ``stranger``, names ``owner``."""
    want = (ErrorCode.not_leader_or_follower, node_id, epoch, [owner])
    for version in (11, 13):
        assert _hint(*_produce(stranger, version, topic, topic_id)) == want, version
    for version in (16, 17):
        assert _hint(*_fetch(stranger, version, topic_id)) == want, version


@pytest.mark.timeout(300)
def test_a_wrong_broker_names_the_owner_and_after_it_stops_the_new_one(
        zk_url: str, bookie_processes: BookieProcesses, tmp_path: Path) -> None:
    brokers, kafka = _kafka_cluster(bookie_processes, zk_url, tmp_path)
    topic = _spread_topic(brokers[0].address)
    create_topic(kafka[brokers[0].address], topic, PARTITIONS)
    segment = f"{topic}/0"
    owner_grpc = lookup_owner(list(kafka), segment)
    owner = kafka[owner_grpc]
    stranger = next(k for k in kafka.values() if k != owner)

    def stranger_knows_the_owner() -> bool:
        nodes, _, partition = _metadata(stranger, topic)
        return len(nodes) == 3 and partition.leader_id == nodes[owner]
    wait_for(stranger_knows_the_owner, "the stranger's Metadata names the owner of partition 0")
    nodes, topic_id, partition = _metadata(stranger, topic)
    _hints_name(stranger, topic, topic_id, owner, nodes[owner], partition.leader_epoch)
    # The hinted endpoint takes the batch the stranger refused.
    written, _ = _produce(owner, 13, topic, topic_id)
    assert written.error_code == ErrorCode.none
    # The owner itself hints nothing (kio leaves default fields out of the answer).
    fetched, answer = _fetch(owner, 17, topic_id)
    assert (fetched.error_code, fetched.current_leader.leader_id) == (ErrorCode.none, -1)
    assert answer.node_endpoints == ()
    _share_fetch_hints(stranger, owner, nodes[owner], partition.leader_epoch, topic_id)

    # The owner stops: its containers go to the survivors, and a survivor that
    # does not own the partition names the new owner.
    victim = next(b for b in brokers if b.address == owner_grpc)
    assert victim.terminate() == 0
    survivors = [address for address in kafka if address != owner_grpc]
    moved: dict[str, str] = {}

    def a_survivor_names_the_new_owner() -> bool:
        new_owner = kafka[lookup_owner(survivors, segment)]
        other = next(kafka[a] for a in survivors if kafka[a] != new_owner)
        nodes, _, partition = _metadata(other, topic)
        if partition.leader_id != nodes.get(new_owner):
            return False
        part, answer = _produce(other, 11, topic, topic_id)
        moved.update(new_owner=new_owner, other=other)
        return _hint(part, answer) == (ErrorCode.not_leader_or_follower, nodes[new_owner],
                                       partition.leader_epoch, [new_owner])
    wait_for(a_survivor_names_the_new_owner, "a survivor's hint names the new owner",
             timeout_s=90)
    new_owner, other = moved["new_owner"], moved["other"]
    assert new_owner != owner
    nodes, _, partition = _metadata(other, topic)
    _hints_name(other, topic, topic_id, new_owner, nodes[new_owner], partition.leader_epoch)
    written, _ = _produce(new_owner, 11, topic, topic_id)
    assert written.error_code == ErrorCode.none


def _share_fetch_hints(stranger: str, owner: str, node_id: int, epoch: int,
                       topic_id: uuid.UUID) -> None:
    """A ShareFetch of partition 0 sent to a broker that does not lead it answers
    NOT_LEADER_OR_FOLLOWER naming the leader (docs/kafka.md, "Share groups")."""
    answer = share_fetch(stranger, "share-g", "m", 0, topic_id)
    assert answer.error_code == ErrorCode.none
    part = share_partition(answer)
    assert _hint(part, answer) == (ErrorCode.not_leader_or_follower, node_id, epoch, [owner])
    assert part.acquired_records == ()


class _Lines(logging.Handler):
    """Keeps the messages librdkafka logs (its debug lines included)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def _deliver(producer: Producer, topic: str, value: bytes) -> None:
    """Produce ``value`` to partition 0 and wait for its delivery, which must succeed."""
    outcome: list[KafkaError | None] = []
    producer.produce(topic, value=value, partition=0,
                     on_delivery=lambda error, _message: outcome.append(error))
    assert producer.flush(60) == 0
    assert outcome == [None]


@pytest.mark.timeout(300)
def test_librdkafka_follows_the_hint_of_a_stale_leader(
        zk_url: str, bookie_processes: BookieProcesses, tmp_path: Path) -> None:
    cluster = LocalCluster(bookie_processes, zk_url, tmp_path)
    cluster.init(container_count=COUNT, ensemble_size=3, write_quorum=2, ack_quorum=2)
    for _ in range(3):
        cluster.start_bookie()
    brokers = [cluster.start_broker("--kafka-port", "0") for _ in range(2)]
    _spread(brokers[0].address, [COUNT // 2] * 2)
    kafka = {b.address: "{}:{}".format(*kafka_address(b)) for b in brokers}
    # A broker keeps its lowest containers when a newcomer joins: the highest one
    # moves. Partition 0 of the topic is in it.
    held = next(b.containers for b in list_brokers(brokers[0].address).brokers
                if b.address == brokers[0].address)
    moving = max(held)
    topic = next(f"h{i}" for i in range(10_000) if container_of(f"h{i}/0", COUNT) == moving)
    old = kafka[brokers[0].address]
    create_topic(old, topic, PARTITIONS)

    lines = _Lines()
    logger = logging.getLogger(f"librdkafka.{tmp_path.name}")
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    logger.addHandler(lines)
    # No periodic metadata refresh within the test: what the producer knows stays
    # stale. (Not much longer: librdkafka 2.16 keeps a cache entry for three times
    # this, in microseconds in a 32-bit int; an hour overflows and expires it at once.)
    producer = Producer({"bootstrap.servers": ",".join(kafka.values()), "debug": "metadata",
                         "topic.metadata.refresh.interval.ms": 300_000,
                         "message.timeout.ms": 60_000}, logger=logger)
    _deliver(producer, topic, b"before")  # to the old owner: its metadata names it

    newcomer = cluster.start_broker("--kafka-port", "0")
    _spread(brokers[0].address, [COUNT // 3] * 3)
    new = "{}:{}".format(*kafka_address(newcomer))
    assert lookup_owner([newcomer.address], f"{topic}/0") == newcomer.address

    def old_owner_hints_the_newcomer() -> bool:
        nodes, topic_id, _ = _metadata(old, topic)
        if new not in nodes:
            return False
        hint = _hint(*_fetch(old, 16, topic_id))
        return hint[:2] == (ErrorCode.not_leader_or_follower, nodes[new])
    wait_for(old_owner_hints_the_newcomer, "the old owner's hint names the newcomer")
    new_id = _metadata(old, topic)[0][new]

    # The producer still thinks the old owner leads partition 0: its batch goes
    # there, is refused with the hint, and is delivered to the newcomer.
    del lines.lines[:]
    _deliver(producer, topic, b"after")
    applied = [line for line in lines.lines if "updated with leader" in line]
    assert any(f"{topic}" in line and f"[0]: updated with leader {new_id} " in line
               for line in applied), "\n".join(lines.lines)
