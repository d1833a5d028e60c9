"""Keyed system topics: latest record per key, across restarts and crashes; size limits."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from broker.api import AppendResult, Block
from broker.errors import EventTooLargeError, InvalidArgumentError
from broker.segments.names import make_segment_name
from broker.system.compacted_topic import CompactedTopic
from broker.system.compaction import CompactionPolicy
from broker.system.records import MAX_KEY_BYTES, decode_record, encode_record
from broker.system.snapshot_store import SNAPSHOT_TOPIC, TopicSnapshotStore, snapshot_store
from broker.topics.manager import TopicManager
from tests.unit.broker.conftest import MAX_ENTRY_BYTES, BrokerEnv
from txnbuffer.api import SnapshotStore

NAME = "__folio_kv"


async def _fill(topic: CompactedTopic) -> dict[str, bytes]:
    await topic.write("seg-a-1", b"a1")
    await topic.write("seg-a-2", b"a2")
    await topic.write("seg-a-end", b"aend")
    await topic.write("seg-b-1", b"b1")
    await topic.write("seg-a-1", b"a1-new")  # overwrite
    await topic.write("seg-a-2", None)  # tombstone
    await topic.write("gone", b"x")
    await topic.write("gone", None)
    return {"seg-a-1": b"a1-new", "seg-a-end": b"aend", "seg-b-1": b"b1"}


async def test_write_overwrite_tombstone_read_prefix(topics: TopicManager) -> None:
    topic = CompactedTopic(topics, NAME)
    expected = await _fill(topic)
    assert dict(await topic.read_prefix("")) == expected
    assert dict(await topic.read_prefix("seg-a-")) == {
        "seg-a-1": b"a1-new", "seg-a-end": b"aend"}
    assert dict(await topic.read_prefix("nothing")) == {}
    assert await topic.get("seg-b-1") == b"b1"
    assert await topic.get("seg-a-2") is None
    await topic.write("seg-a-2", b"back")  # a tombstoned key may come back
    assert await topic.get("seg-a-2") == b"back"
    await topic.write("never-written", None)  # a tombstone of nothing is fine
    stats = await topic.stats()
    assert stats.live_keys == 4
    assert stats.dead_bytes > 0


async def test_system_topic_is_hidden_and_records_are_framed(topics: TopicManager) -> None:
    topic = CompactedTopic(topics, NAME)
    await topic.write("k", b"v")
    await topic.write("k", None)
    assert await topics.list_topics() == []
    assert (await topics.get_topic(NAME)).name == NAME
    segment = await topics.segment(make_segment_name(NAME, 0))
    blocks = (await segment.read(0, 1 << 20)).blocks
    assert [decode_record(b.data) for b in blocks] == [
        decode_record(encode_record("k", b"v", 10)), decode_record(encode_record("k", None, 10))]
    assert [decode_record(b.data).value for b in blocks] == [b"v", None]


async def test_clean_restart_keeps_the_view(env: BrokerEnv) -> None:
    topic = CompactedTopic(env.manager(), NAME)
    expected = await _fill(topic)
    await env.restart()
    again = CompactedTopic(env.manager(), NAME)
    assert dict(await again.read_prefix("")) == expected
    await again.write("seg-b-1", b"b1-new")
    expected["seg-b-1"] = b"b1-new"
    await env.restart()
    assert dict(await CompactedTopic(env.manager(), NAME).read_prefix("")) == expected


async def test_crash_keeps_the_view(env: BrokerEnv) -> None:
    first = env.manager()
    expected = await _fill(CompactedTopic(first, NAME))
    env.abandon(first)  # its ledger stays open: the next owner recovers it
    second = env.manager()
    topic = CompactedTopic(second, NAME)
    assert dict(await topic.read_prefix("")) == expected
    await topic.write("after", b"crash")
    env.abandon(second)
    await env.restart()
    expected["after"] = b"crash"
    assert dict(await CompactedTopic(env.manager(), NAME).read_prefix("")) == expected


async def test_largest_record_round_trips_and_larger_is_refused(env: BrokerEnv) -> None:
    topic = CompactedTopic(env.manager(), NAME)
    limit = topic.max_record_bytes
    assert MAX_ENTRY_BYTES - 2048 < limit < MAX_ENTRY_BYTES
    key = "k" * MAX_KEY_BYTES
    big = bytes(range(256)) * (limit // 256) + b"z" * (limit % 256)
    await topic.write(key, big)
    await topic.write("small", b"s")
    with pytest.raises(EventTooLargeError, match=f"exceeds the limit of {limit} bytes"):
        await topic.write("too-big", big + b"!")
    with pytest.raises(InvalidArgumentError, match="key must be 1 to"):
        await topic.write("k" * (MAX_KEY_BYTES + 1), b"v")
    with pytest.raises(InvalidArgumentError):
        await topic.write("", b"v")
    assert await topic.get(key) == big
    await env.restart()
    again = CompactedTopic(env.manager(), NAME)
    assert dict(await again.read_prefix("")) == {key: big, "small": b"s"}
    assert (await again.compact()).copied == 2
    assert dict(await again.read_prefix("")) == {key: big, "small": b"s"}


async def test_snapshot_store_adapter(topics: TopicManager) -> None:
    store: SnapshotStore = snapshot_store(topics)
    assert isinstance(store, TopicSnapshotStore)
    assert store.topic.name == SNAPSHOT_TOPIC
    assert store.max_record_bytes == store.topic.max_record_bytes
    await store.write("s/0-1", b"chunk1")
    await store.write("s/0-end", b"end")
    await store.write("s/1-end", b"other")
    await store.write("s/0-1", None)
    assert dict(await store.read_prefix("s/0-")) == {"s/0-end": b"end"}


async def test_maintenance_compacts_by_policy(topics: TopicManager) -> None:
    policy = CompactionPolicy(min_dead_bytes=1000, dead_ratio=1.0)
    topic = CompactedTopic(topics, NAME, policy=policy)
    await topic.write("k", b"v" * 100)
    await topics.run_maintenance()
    assert (await topic.stats()).start_offset == 0  # nothing dead yet
    for i in range(30):
        await topic.write("k", b"%03d" % i * 40)
    assert policy.due(await topic.stats())
    await topics.run_maintenance()
    stats = await topic.stats()
    assert stats.start_offset == 31
    assert stats.dead_bytes == 0
    assert await topic.get("k") == b"029" * 40


def test_names_must_be_system_names(topics: TopicManager) -> None:
    with pytest.raises(ValueError, match="must start with '__folio_'"):
        CompactedTopic(topics, "user-topic", maintain=False)


async def test_concurrent_writes_share_durable_appends(env: BrokerEnv) -> None:
    """Group commit: 64 concurrent writers take far fewer entries than records."""
    topics = env.manager()
    topic = CompactedTopic(topics, NAME)
    await topic.write("warm", b"up")  # the topic exists and is loaded
    segment = await topics.segment(make_segment_name(NAME, 0))
    appends: list[int] = []
    real_append = segment.append

    async def counting_append(*args: Any, **kwargs: Any) -> AppendResult:
        appends.append(len(args[0]))
        return await real_append(*args, **kwargs)

    segment.append = counting_append  # type: ignore[method-assign]
    await asyncio.gather(*(topic.write(f"k{i % 16}", f"v{i}".encode()) for i in range(64)))
    assert sum(appends) == 64
    assert len(appends) < 64
    expected = {f"k{k}": f"v{48 + k}".encode() for k in range(16)}  # the last write per key
    assert dict(await topic.read_prefix("k")) == expected
    await env.restart()
    again = CompactedTopic(env.manager(), NAME)
    assert dict(await again.read_prefix("k")) == expected


async def test_a_block_that_is_no_record_is_skipped_and_compacted_away(
        topics: TopicManager, caplog: pytest.LogCaptureFixture) -> None:
    topic = CompactedTopic(topics, NAME, maintain=False)
    await topic.write("k", b"v1")
    segment = await topics.segment(make_segment_name(NAME, 0))
    # What `folio produce _kv` appended before system topics were closed to it.
    await segment.append([Block(b"\x08\x01garbage", 1)], "", -1)
    await topic.write("k", b"v2")
    reloaded = CompactedTopic(topics, NAME, maintain=False)  # reads the segment anew
    with caplog.at_level(logging.ERROR):
        assert dict(await reloaded.read_prefix("")) == {"k": b"v2"}
    assert (f"system topic {NAME}: skipped the block at offset 1 of segment {NAME}/0 "
            "(9 bytes, starting 080167617262616765)") in caplog.text
    assert reloaded.offset_of("k") == 2
    await reloaded.compact()
    caplog.clear()
    again = CompactedTopic(topics, NAME, maintain=False)
    assert dict(await again.read_prefix("")) == {"k": b"v2"}
    assert "skipped" not in caplog.text
