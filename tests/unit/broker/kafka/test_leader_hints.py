"""KIP-951 leader hints in Produce (v10+) and Fetch (v16+) answers (``broker.kafka.leader_hints``).

A cluster broker's view on a real ``TopicManager``: ``OwnedTopics`` serves
partition 0 only (the others answer NOT_LEADER_OR_FOLLOWER, as on a cluster
broker), and the cluster's nodes say partition 1 is led by another broker and
partition 2's leader is not known. Each request is encoded as a client sends
it, decoded as the listener reads it, answered by the handler, and the answer
encoded and decoded back as a client reads it (kio): only partition 1 carries
``current_leader``, with the epoch Metadata reports for it, and the answer's
``node_endpoints`` names that broker alone. Versions before the fields, and a
standalone (no nodes), carry none.
"""

from __future__ import annotations

import datetime
import io
import sys
import uuid
from typing import Any

from kafka.record.default_records import DefaultRecordBatchBuilder
from kio.schema.errors import ErrorCode
from kio.static.primitive import Records

from broker.api import TopicConfig
from broker.cluster.owned_topics import OwnedTopics
from broker.kafka.context import KafkaContext
from broker.kafka.dispatch import Call, Deferred
from broker.kafka.handlers.fetch import FETCH_KEY, handle_fetch
from broker.kafka.handlers.metadata import METADATA_KEY, handle_metadata
from broker.kafka.handlers.produce import PRODUCE_KEY, handle_produce
from broker.kafka.locator import Node
from broker.kafka.messages import decode_entity, encode_entity, request_class, response_class
from broker.kafka.producer_ids import ProducerIds
from broker.topics.manager import TopicManager
from tests.support.kafka import raw_request
from tests.unit.broker.conftest import BrokerEnv

TOPIC = "hinted"
THIS = Node(11, "this-broker", 9011)
OTHER = Node(22, "other-broker", 9022)
#: The leader epoch of the partitions OTHER leads (``broker.kafka.leader_epochs``).
OTHER_EPOCH = 7


class _Nodes:
    """The cluster as Metadata and the hints see it: partition 0 here, 1 elsewhere, 2 unknown."""

    def this_node(self) -> Node:
        return THIS

    def nodes(self) -> list[Node]:
        return [THIS, OTHER]

    def leader_of(self, segment: str) -> Node | None:
        return {f"{TOPIC}/0": THIS, f"{TOPIC}/1": OTHER}.get(segment)

    def leader_epoch_of(self, segment: str) -> int:
        return {f"{TOPIC}/0": 3, f"{TOPIC}/1": OTHER_EPOCH}.get(segment, -1)

    def leader_lacks_listener(self, segment: str) -> bool:
        return False


def _batch(value: bytes) -> bytes:
    builder: Any = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=False, producer_id=-1,
        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    builder.append(0, 1_700_000_000_000, None, value, [])
    return bytes(builder.build())


def _call(api_key: int, version: int, request: Any) -> Call:
    """``request`` through the wire and back, as the listener reads it."""
    cls: Any = request_class(api_key, version)
    frame = raw_request(api_key, version, 5, request)[4:]
    header, used = decode_entity(cls.__header_schema__, frame, 0)
    decoded, size = decode_entity(cls, frame, used)
    assert used + size == len(frame)
    return Call(api_key, version, header.correlation_id, header.client_id, decoded)


def _as_client_reads(api_key: int, version: int, response: Any) -> Any:
    cls: Any = response_class(api_key, version)
    out = io.BytesIO()
    encode_entity(cls, response, out)
    decoded, size = decode_entity(cls, out.getvalue(), 0)
    assert size == len(out.getvalue())
    return decoded


async def _produce(context: KafkaContext, version: int, topic_id: uuid.UUID) -> Any:
    cls: Any = request_class(PRODUCE_KEY, version)
    module = sys.modules[cls.__module__]
    named = {"topic_id": topic_id} if version >= 13 else {"name": TOPIC}
    request = cls(transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=10),
                  topic_data=(module.TopicProduceData(**named, partition_data=tuple(
                      module.PartitionProduceData(index=index, records=Records(_batch(b"v")))
                      for index in range(3))),))
    deferred = await handle_produce(context, _call(PRODUCE_KEY, version, request))
    assert isinstance(deferred, Deferred)
    return _as_client_reads(PRODUCE_KEY, version, await deferred.result)


async def _fetch(context: KafkaContext, version: int, topic_id: uuid.UUID) -> Any:
    cls: Any = request_class(FETCH_KEY, version)
    module = sys.modules[cls.__module__]
    named = {"topic_id": topic_id} if version >= 13 else {"topic": TOPIC}
    request = cls(max_wait=datetime.timedelta(0), min_bytes=1, topics=(module.FetchTopic(
        **named, partitions=tuple(module.FetchPartition(
            partition=index, fetch_offset=0, partition_max_bytes=1 << 20)
            for index in range(3))),), forgotten_topics_data=())
    answer = await handle_fetch(context, _call(FETCH_KEY, version, request))
    return _as_client_reads(FETCH_KEY, version, answer)


async def _context(env: BrokerEnv, topics: TopicManager, *, cluster: bool,
                   ) -> tuple[KafkaContext, uuid.UUID]:
    info = await topics.create_topic(TOPIC, 3, TopicConfig())
    served = OwnedTopics(topics, lambda name: name == f"{TOPIC}/0",
                         lambda name: "" if name.endswith("/2") else "10.0.0.2:5000")
    context = KafkaContext(served, "this-broker", ProducerIds(env.store),
                           nodes=_Nodes() if cluster else None)
    return context, uuid.UUID(info.topic_id)


def _by_index(partitions: Any, attribute: str = "index") -> dict[int, Any]:
    return {getattr(p, attribute): p for p in partitions}


async def test_produce_names_the_leader_of_a_partition_owned_elsewhere(
        env: BrokerEnv, topics: TopicManager) -> None:
    context, topic_id = await _context(env, topics, cluster=True)
    for version in (10, 11, 12, 13):
        answer = await _produce(context, version, topic_id)
        [topic] = answer.responses
        parts = _by_index(topic.partition_responses)
        assert parts[0].error_code == ErrorCode.none
        assert parts[0].current_leader.leader_id == -1  # not written (the default)
        assert parts[1].error_code == ErrorCode.not_leader_or_follower
        assert (parts[1].current_leader.leader_id,
                parts[1].current_leader.leader_epoch) == (OTHER.node_id, OTHER_EPOCH)
        # Its leader is not known: nothing to hint, the client asks Metadata.
        assert parts[2].error_code == ErrorCode.not_leader_or_follower
        assert (parts[2].current_leader.leader_id,
                parts[2].current_leader.leader_epoch) == (-1, -1)
        assert [(e.node_id, e.host, e.port, e.rack) for e in answer.node_endpoints] == [
            (OTHER.node_id, OTHER.host, OTHER.port, None)]

    # v9 has no such fields; its answer still refuses the partitions owned elsewhere.
    answer = await _produce(context, 9, topic_id)
    parts = _by_index(answer.responses[0].partition_responses)
    assert not hasattr(parts[1], "current_leader") and not hasattr(answer, "node_endpoints")
    assert parts[1].error_code == ErrorCode.not_leader_or_follower


async def test_fetch_names_the_leader_of_a_partition_owned_elsewhere(
        env: BrokerEnv, topics: TopicManager) -> None:
    context, topic_id = await _context(env, topics, cluster=True)
    await _produce(context, 13, topic_id)  # partition 0 holds one record
    for version in (16, 17):
        answer = await _fetch(context, version, topic_id)
        [topic] = answer.responses
        assert topic.topic_id == topic_id
        parts = _by_index(topic.partitions, "partition_index")
        assert (parts[0].error_code, parts[0].high_watermark) == (ErrorCode.none, 1)
        assert parts[0].records
        assert parts[0].current_leader.leader_id == -1
        assert parts[1].error_code == ErrorCode.not_leader_or_follower
        assert (parts[1].current_leader.leader_id,
                parts[1].current_leader.leader_epoch) == (OTHER.node_id, OTHER_EPOCH)
        assert parts[2].error_code == ErrorCode.not_leader_or_follower
        assert parts[2].current_leader.leader_id == -1
        assert [(e.node_id, e.host, e.port) for e in answer.node_endpoints] == [
            (OTHER.node_id, OTHER.host, OTHER.port)]

    # v12-v15 have ``current_leader`` (a follower's, KIP-595) but not the endpoints:
    # left empty, as Kafka's broker fills them from v16 only.
    answer = await _fetch(context, 15, topic_id)
    parts = _by_index(answer.responses[0].partitions, "partition_index")
    assert parts[1].error_code == ErrorCode.not_leader_or_follower
    assert parts[1].current_leader.leader_id == -1
    assert not hasattr(answer, "node_endpoints")


async def test_the_hint_agrees_with_metadata(env: BrokerEnv, topics: TopicManager) -> None:
    context, topic_id = await _context(env, topics, cluster=True)
    cls: Any = request_class(METADATA_KEY, 12)
    module = sys.modules[cls.__module__]
    request = cls(topics=(module.MetadataRequestTopic(topic_id=None, name=TOPIC),),
                  allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    metadata = _as_client_reads(METADATA_KEY, 12, await handle_metadata(
        context, _call(METADATA_KEY, 12, request)))
    leader = _by_index(metadata.topics[0].partitions, "partition_index")[1]
    produced = await _produce(context, 13, topic_id)
    hint = _by_index(produced.responses[0].partition_responses)[1].current_leader
    assert (hint.leader_id, hint.leader_epoch) == (leader.leader_id, leader.leader_epoch)
    brokers = {b.node_id: (b.host, b.port) for b in metadata.brokers}
    [endpoint] = produced.node_endpoints
    assert brokers[endpoint.node_id] == (endpoint.host, endpoint.port)


async def test_a_standalone_hints_nothing(env: BrokerEnv, topics: TopicManager) -> None:
    # (A standalone owns every segment; a refusal here comes from the ownership
    # view alone, so the fields must stay empty without a cluster's nodes.)
    context, topic_id = await _context(env, topics, cluster=False)
    produced = await _produce(context, 13, topic_id)
    parts = _by_index(produced.responses[0].partition_responses)
    assert parts[1].error_code == ErrorCode.not_leader_or_follower
    assert parts[1].current_leader.leader_id == -1 and produced.node_endpoints == ()
    fetched = await _fetch(context, 17, topic_id)
    parts = _by_index(fetched.responses[0].partitions, "partition_index")
    assert parts[1].error_code == ErrorCode.not_leader_or_follower
    assert parts[1].current_leader.leader_id == -1 and fetched.node_endpoints == ()
