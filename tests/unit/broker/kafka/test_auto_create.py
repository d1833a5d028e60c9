"""Kafka topic auto-creation (``broker.kafka.auto_create``) through the Metadata handler.

On a real ledger stack (``BrokerEnv``, RocksDB): a missing topic is created
with ``num_partitions`` segments when the request and the broker allow it,
refused at once otherwise; a lost answer of the creation is read back; many
creators of one name on two brokers' topic managers (one metadata store, as
in a cluster) end with one topic and no error; and a creator whose
existence check went stale never overwrites the segment records of a topic
already in use (``broker.topics.catalog``). Faults are injected at the store's
seam (``FaultyMetadataStore``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.api import TopicConfig
from broker.errors import TopicExistsError
from broker.kafka.context import KafkaContext
from broker.kafka.dispatch import Call
from broker.kafka.handlers.metadata import METADATA_KEY, handle_metadata
from broker.kafka.messages import build, nested, request_class
from broker.kafka.producer_ids import ProducerIds
from broker.segments.names import topic_path
from broker.system.snapshot_store import snapshot_store
from broker.topics.manager import TopicManager
from ledger.api import MetadataStore
from tests.support.faulty_metadata import Fault, FaultyMetadataStore
from tests.unit.broker.conftest import BrokerEnv, block, read_all

pytestmark = pytest.mark.faults

VERSION = 9
_Answer = dict[str, tuple[ErrorCode, list[int]]]


def _manager(env: BrokerEnv, store: MetadataStore) -> TopicManager:
    return TopicManager(env.ledgers, store, txn_store_factory=snapshot_store, clock=env.clock)


@pytest.fixture
async def faulty(env: BrokerEnv) -> AsyncIterator[tuple[FaultyMetadataStore, KafkaContext]]:
    store = FaultyMetadataStore(env.store)
    topics = _manager(env, store)
    yield store, KafkaContext(topics, "127.0.0.1", ProducerIds(store), num_partitions=3)
    await topics.close()


def _metadata(names: list[str], *, allow: bool = True) -> Call:
    cls = request_class(METADATA_KEY, VERSION)
    asked = tuple(build(nested(cls, "MetadataRequestTopic"), name=name) for name in names)
    request = build(cls, topics=asked, allow_auto_topic_creation=allow,
                    include_cluster_authorized_operations=False,
                    include_topic_authorized_operations=False)
    return Call(METADATA_KEY, VERSION, 1, "test", request, None)


async def _ask(context: KafkaContext, names: list[str], *, allow: bool = True) -> _Answer:
    answer: Any = await handle_metadata(context, _metadata(names, allow=allow))
    return {topic.name: (topic.error_code, [p.partition_index for p in topic.partitions])
            for topic in answer.topics}


async def test_a_missing_topic_is_created_with_num_partitions(
        faulty: tuple[FaultyMetadataStore, KafkaContext]) -> None:
    _, context = faulty
    assert await _ask(context, ["_schemas", ".hidden"]) == {
        "_schemas": (ErrorCode.none, [0, 1, 2]), ".hidden": (ErrorCode.none, [0, 1, 2])}
    info = await context.topics.get_topic("_schemas")
    assert [segment.name for segment in info.segments] == [
        "_schemas/0", "_schemas/1", "_schemas/2"]
    assert info.config == context.topics.default_config()


async def test_nothing_is_created_when_the_request_or_the_broker_says_no(
        faulty: tuple[FaultyMetadataStore, KafkaContext]) -> None:
    _, context = faulty
    assert await _ask(context, ["asked-not"], allow=False) == {
        "asked-not": (ErrorCode.unknown_topic_or_partition, [])}
    context.auto_create_topics = False
    assert await _ask(context, ["off"]) == {"off": (ErrorCode.unknown_topic_or_partition, [])}
    assert [t.name for t in await context.topics.list_topics()] == []


async def test_names_kafka_refuses_and_system_topics_are_never_created(
        faulty: tuple[FaultyMetadataStore, KafkaContext]) -> None:
    _, context = faulty
    assert await _ask(context, ["a b", "..", "a/../b", "_txnlog", "__folio_x"]) == {
        "a b": (ErrorCode.invalid_topic_exception, []),
        "..": (ErrorCode.invalid_topic_exception, []),
        "a/../b": (ErrorCode.invalid_topic_exception, []),
        "_txnlog": (ErrorCode.unknown_topic_or_partition, []),
        "__folio_x": (ErrorCode.unknown_topic_or_partition, [])}
    # Not creating: a name no topic can have is unknown, as any missing topic.
    assert await _ask(context, ["a b", "a/../b"], allow=False) == {
        "a b": (ErrorCode.unknown_topic_or_partition, []),
        "a/../b": (ErrorCode.unknown_topic_or_partition, [])}
    assert await context.topics.list_topics(include_internal=True) == []


@pytest.mark.parametrize("fault", list(Fault))
async def test_an_unknown_outcome_of_the_create_is_read_back(
        faulty: tuple[FaultyMetadataStore, KafkaContext], fault: Fault) -> None:
    store, context = faulty
    fired = store.fail("create", lambda path: path == topic_path("orders"), fault)
    assert await _ask(context, ["orders"]) == {"orders": (ErrorCode.none, [0, 1, 2])}
    assert fired == [topic_path("orders")]
    assert [t.name for t in await context.topics.list_topics()] == ["orders"]


async def test_concurrent_creators_on_two_brokers_end_with_one_topic(env: BrokerEnv) -> None:
    first, second = _manager(env, env.store), _manager(env, env.store)
    contexts = [KafkaContext(topics, "127.0.0.1", ProducerIds(env.store), num_partitions=2)
                for topics in (first, second)]
    try:
        answers = await asyncio.gather(*(_ask(contexts[i % 2], ["raced"]) for i in range(8)))
        for answer in answers:
            # Made here, or by another creator: ready, or being finished.
            assert answer["raced"] in ((ErrorCode.none, [0, 1]),
                                       (ErrorCode.leader_not_available, [])), answer
        assert any(answer["raced"][0] == ErrorCode.none for answer in answers)
        for context in contexts:
            assert await _ask(context, ["raced"]) == {"raced": (ErrorCode.none, [0, 1])}
        assert [t.name for t in await first.list_topics()] == ["raced"]
    finally:
        await first.close()
        await second.close()


class _StaleCheck(FaultyMetadataStore):
    """The next ``exists`` of a path answers False: the check raced with a creator."""

    def __init__(self, store: MetadataStore, path: str) -> None:
        super().__init__(store)
        self.stale = {path}

    async def exists(self, path: str) -> bool:
        if path in self.stale:
            self.stale.discard(path)
            return False
        return await super().exists(path)


async def test_a_racing_create_never_overwrites_a_topic_in_use(env: BrokerEnv) -> None:
    """The creator that lost the race finds the topic made: its appended event stays."""
    winner = _manager(env, env.store)
    loser = _manager(env, _StaleCheck(env.store, topic_path("orders")))
    try:
        await winner.create_topic("orders", 1, TopicConfig())
        segment = await winner.segment("orders/0")
        assert (await segment.append([block(0)], "w", 0)).offset == 0
        with pytest.raises(TopicExistsError):
            await loser.create_topic("orders", 1, TopicConfig())
        reader = _manager(env, env.store)
        try:
            events = await read_all(await reader.segment("orders/0"), 0)
            assert len(events) == 1
        finally:
            await reader.close()
    finally:
        await winner.close()
        await loser.close()
