"""Kafka Metadata and Fetch while the metadata store cannot be read: retriable answers, quietly.

Issue 22: in a fault run a ZooKeeper connection loss made
``partition_segments`` raise ``MetadataUnavailableError`` inside the Metadata
handler; it escaped as "unexpected error" and closed the client's connection.
A topic whose record or ledgers cannot be read is now read again, with
backoff, for up to ``READ_WAIT_S`` per request; past that the request fails
(the connection is closed with a warning, the client asks again). It is never
answered with an error and no partitions: a librdkafka consumer reports such
a topic as unknown (``test_metadata_first_answer.py``). The store is wrapped
at its seam (``FaultyMetadataStore``: the next reads fail as a lost connection).

Fetch: a partition whose segment cannot be loaded answered REQUEST_TIMED_OUT,
which librdkafka hands to the application as a consumer error (the nemesis,
seed 2: "Fetch from broker ... failed at offset 4421"); Kafka answers
KAFKA_STORAGE_ERROR for a log it cannot read, which consumers retry quietly.
"""

from __future__ import annotations

import datetime
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.api import TopicConfig
from broker.errors import BrokerShuttingDownError
from broker.kafka.context import KafkaContext
from broker.kafka.dispatch import Call
from broker.kafka.handlers import metadata
from broker.kafka.handlers.fetch import FETCH_KEY, handle_fetch
from broker.kafka.handlers.metadata import METADATA_KEY, handle_metadata
from broker.kafka.messages import build, nested, request_class
from broker.kafka.producer_ids import ProducerIds
from broker.system.snapshot_store import snapshot_store
from broker.topics.manager import TopicManager
from ledger.errors import MetadataUnavailableError
from tests.support.faulty_metadata import FaultyMetadataStore
from tests.unit.broker.conftest import BrokerEnv

pytestmark = pytest.mark.faults

VERSION = 9


@pytest.fixture
async def faulty(env: BrokerEnv) -> AsyncIterator[tuple[FaultyMetadataStore, KafkaContext]]:
    store = FaultyMetadataStore(env.store)
    topics = TopicManager(env.ledgers, store, txn_store_factory=snapshot_store,
                          clock=env.clock)
    await topics.create_topic("orders", 2, TopicConfig())
    yield store, KafkaContext(topics, "127.0.0.1", ProducerIds(store))
    await topics.close()


def _metadata(names: list[str] | None) -> Call:
    cls = request_class(METADATA_KEY, VERSION)
    asked = None if names is None else tuple(
        build(nested(cls, "MetadataRequestTopic"), name=name) for name in names)
    request = build(cls, topics=asked, allow_auto_topic_creation=False,
                    include_cluster_authorized_operations=False,
                    include_topic_authorized_operations=False)
    return Call(METADATA_KEY, VERSION, 1, "test", request, None)


def _topics(answer: Any) -> dict[str, tuple[ErrorCode, list[tuple[int, ErrorCode]]]]:
    return {topic.name: (topic.error_code, [(p.partition_index, p.error_code)
                                            for p in topic.partitions])
            for topic in answer.topics}


async def test_a_topic_that_cannot_be_read_for_a_moment_is_read_again(
        faulty: tuple[FaultyMetadataStore, KafkaContext]) -> None:
    store, context = faulty
    store.fail_reads(3)  # the topic's first reads fail, then the store answers
    answer = await handle_metadata(context, _metadata(["orders"]))
    assert store.failed_reads == ["/folio/topics/orders"] * 3
    assert _topics(answer) == {"orders": (ErrorCode.none, [(0, ErrorCode.none),
                                                           (1, ErrorCode.none)])}


async def test_a_topic_that_cannot_be_read_at_all_closes_the_connection(
        faulty: tuple[FaultyMetadataStore, KafkaContext],
        monkeypatch: pytest.MonkeyPatch) -> None:
    # It used to answer LEADER_NOT_AVAILABLE with no partitions, which a
    # librdkafka consumer with no cache entry for the topic reports to the
    # application as "Subscribed topic not available: ... Unknown topic or
    # partition" (test_metadata_first_answer.py). The handler raises instead:
    # the connection closes and the client asks again, maybe elsewhere.
    monkeypatch.setattr(metadata, "READ_WAIT_S", 0.3)
    store, context = faulty
    store.fail_reads(1000)  # ZooKeeper away for longer than the request waits
    with pytest.raises(MetadataUnavailableError):
        await handle_metadata(context, _metadata(["orders"]))
    assert len(store.failed_reads) >= 2  # read again before giving up
    store.fail_reads(0)  # back: the client's next Metadata has the partitions
    answer = await handle_metadata(context, _metadata(["orders", "missing"]))
    assert _topics(answer) == {
        "orders": (ErrorCode.none, [(0, ErrorCode.none), (1, ErrorCode.none)]),
        "missing": (ErrorCode.unknown_topic_or_partition, [])}


async def test_all_topics_waits_out_a_short_outage(
        faulty: tuple[FaultyMetadataStore, KafkaContext]) -> None:
    store, context = faulty
    store.fail_reads(3)  # the listing's first reads fail, then the store answers
    answer = await handle_metadata(context, _metadata(None))
    assert _topics(answer) == {"orders": (ErrorCode.none, [(0, ErrorCode.none),
                                                           (1, ErrorCode.none)])}


def _fetch(partition: int) -> Call:
    cls = request_class(FETCH_KEY, 12)
    topic_cls = nested(cls, "FetchTopic")
    part = build(nested(topic_cls, "FetchPartition"), partition=partition,
                 current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
                 log_start_offset=-1, partition_max_bytes=1 << 20)
    request = build(cls, cluster_id=None, replica_id=-1,
                    max_wait=datetime.timedelta(0), min_bytes=0, max_bytes=1 << 20,
                    isolation_level=0, session_id=0, session_epoch=-1,
                    topics=(build(topic_cls, topic="orders", partitions=(part,)),),
                    forgotten_topics_data=(), rack_id="")
    return Call(FETCH_KEY, 12, 1, "test", request, None)


async def test_a_partition_that_cannot_be_loaded_answers_kafka_storage_error(
        faulty: tuple[FaultyMetadataStore, KafkaContext]) -> None:
    store, context = faulty
    store.fail_reads(1000)  # the segment's first load cannot read its record
    answer = await handle_fetch(context, _fetch(0))
    [partition] = answer.responses[0].partitions
    assert partition.error_code == ErrorCode.kafka_storage_error
    store.fail_reads(0)
    answer = await handle_fetch(context, _fetch(0))
    [partition] = answer.responses[0].partitions
    assert partition.error_code == ErrorCode.none


async def test_a_stopping_broker_closes_the_connection_instead_of_an_empty_topic(
        faulty: tuple[FaultyMetadataStore, KafkaContext]) -> None:
    # It answered NOT_LEADER_OR_FOLLOWER with no partitions: a consumer
    # starting during a SIGTERM reported the topic as unknown to the
    # application. Raised, the connection closes and the client asks elsewhere.
    _store, context = faulty
    await context.topics.close()
    with pytest.raises(BrokerShuttingDownError):
        await handle_metadata(context, _metadata(["orders"]))
