"""Topic ids: made with the topic, stored in its record, kept across restarts; a record of
an earlier build (no id) is given one by compare-and-set, once, whatever the outcome."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from broker.api import TopicConfig
from broker.kafka.topic_ids import TopicIds
from broker.segments.names import topic_path
from broker.system.snapshot_store import snapshot_store
from broker.topics.manager import TopicManager
from broker.topics.records import TopicRecord
from ledger.errors import MetadataUnavailableError
from tests.support.faulty_metadata import Fault, FaultyMetadataStore
from tests.unit.broker.conftest import BrokerEnv


def _without_id(data: bytes) -> bytes:
    """The record as an earlier build wrote it: no ``topic_id`` key."""
    record = TopicRecord.from_bytes(data)
    older = TopicRecord(record.name, record.config, record.segments,
                        record.next_segment_number, record.created_ms)
    assert b"topic_id" not in older.to_bytes()
    return older.to_bytes()


def test_records_with_and_without_an_id_load() -> None:
    record = TopicRecord("t", TopicConfig(), (), 0, 1)
    assert TopicRecord.from_bytes(record.to_bytes()).topic_id == ""
    given = str(uuid.uuid4())
    with_id = TopicRecord("t", TopicConfig(), (), 0, 1, topic_id=given)
    assert TopicRecord.from_bytes(with_id.to_bytes()).topic_id == given


async def test_id_made_with_the_topic_and_kept_across_a_restart(env: BrokerEnv) -> None:
    topics = env.manager()
    created = await topics.create_topic("t", 2, TopicConfig())
    assert uuid.UUID(created.topic_id).int != 0
    assert await topics.topic_id("t") == created.topic_id
    assert [info.topic_id for info in await topics.list_topics()] == [created.topic_id]
    await env.restart()
    assert await env.manager().topic_id("t") == created.topic_id
    other = await env.manager().create_topic("u", 1, TopicConfig())
    assert other.topic_id != created.topic_id


async def test_an_earlier_builds_topic_is_given_one_id(env: BrokerEnv) -> None:
    topics = env.manager()
    await topics.create_topic("t", 1, TopicConfig())
    node = await env.store.get(topic_path("t"))
    await env.store.set(topic_path("t"), _without_id(node.data), node.version)
    # Two brokers ask at once: one compare-and-set wins, both answer its id.
    first, second = await asyncio.gather(topics.topic_id("t"), env.manager().topic_id("t"))
    assert first == second and uuid.UUID(first).int != 0
    assert TopicRecord.from_bytes((await env.store.get(topic_path("t"))).data).topic_id == first
    await env.restart()
    assert (await env.manager().get_topic("t")).topic_id == first


@pytest.mark.faults
@pytest.mark.parametrize("fault", list(Fault))
async def test_giving_an_id_whose_answer_was_lost(env: BrokerEnv, fault: Fault) -> None:
    await env.manager().create_topic("t", 1, TopicConfig())
    node = await env.store.get(topic_path("t"))
    await env.store.set(topic_path("t"), _without_id(node.data), node.version)
    store = FaultyMetadataStore(env.store)
    topics = _on(env, store)
    fired = store.fail("set", topic_path("t").__eq__, fault)
    given = await topics.topic_id("t")
    assert fired == [topic_path("t")]
    # Landed: that id is the one answered; not landed: read again and given anew.
    stored = TopicRecord.from_bytes((await env.store.get(topic_path("t"))).data).topic_id
    assert given == stored
    assert await topics.topic_id("t") == given
    await topics.close()


async def test_giving_an_id_when_the_read_back_fails_too(env: BrokerEnv) -> None:
    await env.manager().create_topic("t", 1, TopicConfig())
    node = await env.store.get(topic_path("t"))
    await env.store.set(topic_path("t"), _without_id(node.data), node.version)
    store = FaultyMetadataStore(env.store)
    topics = _on(env, store)
    store.fail("set", topic_path("t").__eq__, Fault.LOST_ANSWER)
    reads: list[str] = []

    def the_read_back(path: str) -> bool:  # the first read is the record's; then the read-back
        reads.append(path)
        return path == topic_path("t") and len(reads) > 1

    store.fail_reads(1, the_read_back)
    with pytest.raises(MetadataUnavailableError):
        await topics.topic_id("t")  # unknown: the caller asks again
    assert store.failed_reads == [topic_path("t")]
    stored = TopicRecord.from_bytes((await env.store.get(topic_path("t"))).data).topic_id
    assert stored and await topics.topic_id("t") == stored
    await topics.close()


def _on(env: BrokerEnv, store: FaultyMetadataStore) -> TopicManager:
    return TopicManager(env.ledgers, store, txn_store_factory=snapshot_store, clock=env.clock)


async def test_resolving_an_id_for_a_change_reads_the_store(env: BrokerEnv) -> None:
    """``TopicIds.resolve`` (DeleteTopics v6 by id): a noted id whose name was made again
    under a new id (elsewhere: this map never saw it) names nothing; an id never noted
    is found in the topic list."""
    topics = env.manager()
    first = uuid.UUID((await topics.create_topic("t", 1, TopicConfig())).topic_id)
    ids = TopicIds(refresh_s=3600.0)  # (name_of would not list the topics again)
    ids.note("t", first)
    assert await ids.resolve(topics, first) == "t"
    await topics.delete_topic("t")
    second = uuid.UUID((await topics.create_topic("t", 1, TopicConfig())).topic_id)
    assert await ids.name_of(topics, first) == "t"  # the map's window (Fetch's)
    assert await ids.resolve(topics, first) is None
    assert await ids.resolve(topics, second) == "t"
    assert await ids.resolve(topics, uuid.uuid4()) is None
