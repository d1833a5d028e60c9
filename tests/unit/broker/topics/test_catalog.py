"""TopicCatalog alone: topic locks, record reads and compare-and-sets, descriptions.

On the ledger stack of ``conftest.py`` (RocksDB metadata, an in-process
bookie); a ``TopicManager`` on the same stack writes the records and segments
the catalog reads (``parts.Parts`` builds the catalog with its own table of
loaded segments).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from broker.api import SegmentState, TopicConfig
from broker.errors import TopicNotFoundError
from broker.segments.names import segment_path, topic_path
from broker.segments.records import SegmentRecord
from broker.topics.records import TopicRecord
from broker.topics.scaling import successors_of
from tests.support.faulty_metadata import Fault, FaultyMetadataStore
from tests.unit.broker.conftest import SMALL, BrokerEnv, block
from tests.unit.broker.topics.parts import Parts


async def test_one_lock_per_topic(env: BrokerEnv) -> None:
    parts = Parts(env, env.manager())
    held = parts.catalog.lock("t")
    async with held:
        assert parts.catalog.lock("t") is held
        assert parts.catalog.lock("t").locked()
        assert not parts.catalog.lock("u").locked()


async def test_read_a_record_or_topic_not_found(env: BrokerEnv) -> None:
    topics = env.manager()
    await topics.create_topic("t", 2, SMALL)
    parts = Parts(env, topics)
    record, version = await parts.catalog.read("t")
    assert (record.name, record.next_segment_number) == ("t", 2)
    assert [(s.number, s.key_low, s.key_high) for s in record.segments] == [
        (0, 0.0, 0.5), (1, 0.5, 1.0)]
    assert version == (await env.store.get(topic_path("t"))).version
    for name in ("nope", "bad name!"):  # a bad name is no topic either
        with pytest.raises(TopicNotFoundError):
            await parts.catalog.read(name)


def _with_retention(record: TopicRecord, retention_ms: int) -> TopicRecord:
    return record.with_config(replace(record.config, retention_ms=retention_ms))


async def test_replace_is_a_compare_and_set(env: BrokerEnv) -> None:
    topics = env.manager()
    await topics.create_topic("t", 1, SMALL)
    parts = Parts(env, topics)
    record, version = await parts.catalog.read("t")
    assert await parts.catalog.replace("t", _with_retention(record, 1000), version, change="x")
    stale = _with_retention(record, 2000)
    assert not await parts.catalog.replace("t", stale, version, change="x")
    now, _ = await parts.catalog.read("t")
    assert now.config.retention_ms == 1000
    await topics.delete_topic("t")
    with pytest.raises(TopicNotFoundError):
        await parts.catalog.replace("t", stale, version + 1, change="x")


@pytest.mark.faults
async def test_replace_reads_back_an_unknown_outcome(env: BrokerEnv) -> None:
    topics = env.manager()
    await topics.create_topic("t", 1, SMALL)
    store = FaultyMetadataStore(env.store)
    parts = Parts(env, topics, store=store)
    record, version = await parts.catalog.read("t")
    fired = store.fail("set", topic_path("t").__eq__, Fault.LOST_ANSWER)
    assert await parts.catalog.replace("t", _with_retention(record, 1000), version, change="x")
    assert fired == [topic_path("t")]
    record, version = await parts.catalog.read("t")
    fired = store.fail("set", topic_path("t").__eq__, Fault.BEFORE)
    assert not await parts.catalog.replace("t", _with_retention(record, 2000), version,
                                           change="x")
    assert fired == [topic_path("t")]
    assert (await parts.catalog.read("t"))[0].config.retention_ms == 1000


async def test_create_segment_record_overwrites_a_leftover(env: BrokerEnv) -> None:
    parts = Parts(env, env.manager())
    await parts.catalog.create_segment_record("t", 3)
    fresh = (await env.store.get(segment_path("t", 3))).data
    assert SegmentRecord.from_bytes(fresh) == SegmentRecord("t", 3)
    # Left by a create that crashed before its topic record: ours to overwrite.
    leftover = replace(SegmentRecord("t", 3), start_offset=7)
    await env.store.set(segment_path("t", 3), leftover.to_bytes(), -1)
    await parts.catalog.create_segment_record("t", 3)
    assert (await env.store.get(segment_path("t", 3))).data == fresh


async def test_offsets_from_the_record_then_from_the_loaded_segment(env: BrokerEnv) -> None:
    topics, writer = env.manager(), env.manager()
    await topics.create_topic("t", 1, SMALL)
    written = await writer.segment("t/0")
    for i in range(3):
        await written.append([block(i)], "w", i)
    parts = Parts(env, topics)
    record, _ = await parts.catalog.read("t")
    # Not loaded in this table: from the segment record and its ledger's tail.
    found = await parts.catalog.segment_offsets("t", record.segments[0])
    assert (found.name, found.start_offset, found.end_offset) == ("t/0", 0, 3)
    await writer.close()  # closes the segment cleanly; this table loads it next
    segment = await parts.loaded.segment("t/0")
    await segment.append([block(3)], "w", 3)
    assert (await parts.catalog.segment_offsets("t", record.segments[0])).end_offset == 4
    await parts.close()


async def test_a_deleted_segment_has_no_offsets(env: BrokerEnv) -> None:
    topics = env.manager()
    await topics.create_topic("t", 1, SMALL)
    parts = Parts(env, topics)
    record, _ = await parts.catalog.read("t")
    await env.store.delete(segment_path("t", 0))
    found = await parts.catalog.segment_offsets("t", record.segments[0])
    assert (found.start_offset, found.end_offset) == (0, 0)


async def test_info_and_ranges_follow_the_topic_record(env: BrokerEnv) -> None:
    topics = env.manager()
    await topics.create_topic("t", 2, SMALL)
    await topics.scale_topic("t", ["t/0"], [(0.25, 0.5), (0.0, 0.25)])
    parts = Parts(env, topics)
    record, _ = await parts.catalog.read("t")
    info = await parts.catalog.info(record)
    assert (info.name, info.created_ms, info.sealed) == ("t", record.created_ms, False)
    assert [(s.name, s.key_low) for s in info.segments] == [
        ("t/2", 0.0), ("t/3", 0.25), ("t/1", 0.5)]  # the open ones, by key_low
    successors = successors_of(record)
    sealed = await parts.catalog.segment_range("t", record.segments[0], successors)
    assert (sealed.state, sealed.successors) == (SegmentState.SEALED, ("t/2", "t/3"))
    created = await parts.catalog.segment_range("t", record.segments[2], successors)
    assert (created.predecessors, created.successors) == (("t/0",), ())
    # A seal the record holds is reported even before the segment's own record has it.
    marked = replace(record.segments[1], state=SegmentState.SEALED)
    assert (await parts.catalog.segment_range("t", marked)).state is SegmentState.SEALED
    assert (await parts.catalog.info(TopicRecord("t", TopicConfig(), (), 0, 5))).segments == ()
