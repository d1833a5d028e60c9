"""TopicCrud alone: create, get, list, reconfigure, delete, through its collaborators.

On the ledger stack of ``conftest.py`` (RocksDB metadata, an in-process
bookie); ``parts.Parts`` builds the part with its own catalog and table of
loaded segments, and a ``TopicManager`` on the same stack holds the snapshot
store (and plays another broker where a test needs one).
"""

from __future__ import annotations

import pytest

from broker.api import TopicConfig
from broker.errors import (
    BrokerShuttingDownError,
    InternalTopicError,
    InvalidArgumentError,
    NoSuchSegmentError,
    TopicExistsError,
    TopicNotFoundError,
)
from broker.segments.names import segment_path, topic_path
from broker.segments.records import SegmentRecord
from tests.unit.broker.conftest import SMALL, BrokerEnv, block
from tests.unit.broker.topics.parts import Parts


async def test_create_writes_the_records_and_describes_the_topic(env: BrokerEnv) -> None:
    parts = Parts(env, env.manager())
    info = await parts.crud.create_topic("t", 3, SMALL)
    assert info.created_ms == int(env.clock.now * 1000)  # the clock passed in
    assert [(s.name, s.key_low, s.key_high) for s in info.segments] == [
        ("t/0", 0.0, 1 / 3), ("t/1", 1 / 3, 2 / 3), ("t/2", 2 / 3, 1.0)]
    record, _ = await parts.catalog.read("t")
    assert (record.config, record.next_segment_number) == (SMALL, 3)
    for number in range(3):
        stored = (await env.store.get(segment_path("t", number))).data
        assert SegmentRecord.from_bytes(stored) == SegmentRecord("t", number)
    assert await parts.crud.get_topic("t") == info
    with pytest.raises(TopicExistsError):
        await parts.crud.create_topic("t", 1, SMALL)


async def test_create_refuses_bad_counts_configs_and_system_names(env: BrokerEnv) -> None:
    parts = Parts(env, env.manager())
    for count in (0, 1025):
        with pytest.raises(InvalidArgumentError, match="segment_count"):
            await parts.crud.create_topic("t", count, SMALL)
    loose = TopicConfig()
    object.__setattr__(loose, "retention_ms", -5)  # built around its checks
    with pytest.raises(InvalidArgumentError):
        await parts.crud.create_topic("t", 1, loose)
    with pytest.raises(InternalTopicError):
        await parts.crud.create_topic("__folio_mine", 1, SMALL)
    assert not await env.store.exists(topic_path("t"))
    made = await parts.crud.create_topic("__folio_mine", 1, SMALL, internal=True)
    assert made.name == "__folio_mine"


async def test_list_hides_system_topics_unless_asked(env: BrokerEnv) -> None:
    parts = Parts(env, env.manager())
    assert await parts.crud.list_topics() == []
    await parts.crud.create_topic("b", 1, SMALL)
    await parts.crud.create_topic("a", 1, SMALL)
    await parts.crud.create_topic("__folio_mine", 1, SMALL, internal=True)
    assert [t.name for t in await parts.crud.list_topics()] == ["a", "b"]
    every = [t.name for t in await parts.crud.list_topics(include_internal=True)]
    assert {"__folio_mine", "a", "b"} <= set(every)
    assert every == sorted(every)


async def test_update_config_reaches_the_loaded_segments(env: BrokerEnv) -> None:
    parts = Parts(env, env.manager())
    await parts.crud.create_topic("t", 2, SMALL)
    segment = await parts.loaded.segment("t/0")
    info = await parts.crud.update_topic_config("t", {"retention_ms": 60_000})
    assert info.config == TopicConfig(ledger_rollover_bytes=1024, retention_ms=60_000)
    assert segment.config.retention_ms == 60_000
    assert (await parts.catalog.read("t"))[0].config.retention_ms == 60_000
    with pytest.raises(InvalidArgumentError, match="unknown topic config fields"):
        await parts.crud.update_topic_config("t", {"colour": 1})
    with pytest.raises(InvalidArgumentError):
        await parts.crud.update_topic_config("t", {"retention_ms": -2})
    with pytest.raises(TopicNotFoundError):
        await parts.crud.update_topic_config("nope", {"retention_ms": 1})
    await parts.crud.create_topic("__folio_mine", 1, SMALL, internal=True)
    with pytest.raises(InternalTopicError):
        await parts.crud.update_topic_config("__folio_mine", {"retention_ms": 1})
    await parts.crud.update_topic_config("__folio_mine", {"retention_ms": 1}, internal=True)
    await parts.close()


async def test_delete_takes_loaded_and_unloaded_segments_and_their_ledgers(
        env: BrokerEnv) -> None:
    topics = env.manager()
    parts = Parts(env, topics)
    await parts.crud.create_topic("t", 2, SMALL)
    loaded = await parts.loaded.segment("t/0")
    await loaded.append([block(0)], "w", 0)
    other = env.manager()  # wrote t/1 and went away: its ledgers are only in records
    written = await other.segment("t/1")
    await written.append([block(0)], "w", 0)
    ledger_ids = {ledger.ledger_id for s in (loaded, written) for ledger in s.info().ledgers}
    await other.close()
    await parts.crud.delete_topic("t")
    assert not await env.store.exists(topic_path("t"))
    assert not await env.store.exists(segment_path("t", 1))
    assert not ledger_ids & set(env.bookie.ledger_ids())
    assert parts.loaded.get("t/0") is None
    with pytest.raises(NoSuchSegmentError):
        await loaded.append([block(1)], "w", 1)
    with pytest.raises(TopicNotFoundError):
        await parts.crud.delete_topic("t")
    await parts.crud.create_topic("__folio_mine", 1, SMALL, internal=True)
    with pytest.raises(InternalTopicError):
        await parts.crud.delete_topic("__folio_mine")
    await parts.crud.delete_topic("__folio_mine", internal=True)


async def test_a_closed_owner_refuses_every_call(env: BrokerEnv) -> None:
    parts = Parts(env, env.manager())
    await parts.crud.create_topic("t", 1, SMALL)
    parts.closed = True
    calls = [parts.crud.create_topic("u", 1, SMALL), parts.crud.get_topic("t"),
             parts.crud.list_topics(), parts.crud.delete_topic("t"),
             parts.crud.update_topic_config("t", {"retention_ms": 1})]
    for call in calls:
        with pytest.raises(BrokerShuttingDownError):
            await call
    assert await env.store.exists(topic_path("t"))


async def test_deletion_hooks_run_after_a_deletion_and_never_fail_it(env: BrokerEnv) -> None:
    parts = Parts(env, env.manager())
    seen: list[str] = []

    async def failing(name: str) -> None:
        raise RuntimeError(f"hook of {name} failed")

    async def noting(name: str) -> None:
        seen.append(name)
        assert not await env.store.exists(topic_path(name))  # after the deletion

    parts.crud.add_deletion_hook(failing)
    parts.crud.add_deletion_hook(noting)
    await parts.crud.create_topic("t", 1, SMALL)
    await parts.crud.delete_topic("t")  # the failing hook is logged, not raised
    assert seen == ["t"]
    with pytest.raises(TopicNotFoundError):
        await parts.crud.delete_topic("t")
    assert seen == ["t"], "no hook for a deletion that did not happen"
