"""TopicManager: creating, reading, listing, updating and deleting topics."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from broker.api import SegmentState, TopicConfig
from broker.errors import (
    InternalTopicError,
    InvalidArgumentError,
    NoSuchSegmentError,
    TopicExistsError,
    TopicNameError,
    TopicNotFoundError,
)
from broker.topics.manager import TopicManager
from tests.unit.broker.conftest import BrokerEnv, block


async def test_create_and_get(topics: TopicManager, env: BrokerEnv) -> None:
    config = TopicConfig(retention_ms=60_000)
    created = await topics.create_topic("orders", 3, config)
    assert created.name == "orders"
    assert created.config == config
    assert created.created_ms == int(env.clock.now * 1000)
    assert [(s.name, s.number, s.key_low, s.key_high, s.state) for s in created.segments] == [
        ("orders/0", 0, 0.0, 1 / 3, SegmentState.OPEN),
        ("orders/1", 1, 1 / 3, 2 / 3, SegmentState.OPEN),
        ("orders/2", 2, 2 / 3, 1.0, SegmentState.OPEN),
    ]
    assert await topics.get_topic("orders") == created


async def test_key_ranges_cover_exactly(topics: TopicManager) -> None:
    info = await topics.create_topic("many", 7, TopicConfig())
    assert info.segments[0].key_low == 0.0
    assert info.segments[-1].key_high == 1.0
    for left, right in zip(info.segments, info.segments[1:], strict=False):
        assert left.key_high == right.key_low


@pytest.mark.parametrize("count", [0, 1025, -1])
async def test_segment_count_refused(topics: TopicManager, count: int) -> None:
    with pytest.raises(InvalidArgumentError, match="segment_count"):
        await topics.create_topic("t", count, TopicConfig())
    with pytest.raises(TopicNotFoundError):
        await topics.get_topic("t")


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "x" * 250, "_" + "x" * 249])
async def test_bad_names_refused(topics: TopicManager, name: str) -> None:
    with pytest.raises(TopicNameError):
        await topics.create_topic(name, 1, TopicConfig())


@pytest.mark.parametrize("name", ["__folio_sys", "_txnlog", "_kafka_offsets"])
async def test_system_names_are_the_brokers(topics: TopicManager, name: str) -> None:
    with pytest.raises(InternalTopicError, match="CreateTopic is refused") as raised:
        await topics.create_topic(name, 1, TopicConfig())
    assert raised.value.topic == name


@pytest.mark.parametrize("name", [
    "_schemas", "_confluent-metrics", ".hidden", "__consumer_offsets"])
async def test_names_kafka_accepts_are_user_topics(topics: TopicManager, name: str) -> None:
    await topics.create_topic(name, 2, TopicConfig())
    assert [t.name for t in await topics.list_topics()] == [name]
    segment = await topics.segment(f"{name}/1")
    assert segment.info().segment.name == f"{name}/1"
    assert (await segment.append([block(0)], "w", 0)).offset == 0


async def test_system_topics_internal_and_unlisted(topics: TopicManager) -> None:
    await topics.create_topic("_txnlog", 1, TopicConfig(), internal=True)
    await topics.create_topic("b", 1, TopicConfig())
    await topics.create_topic("a", 1, TopicConfig())
    assert [t.name for t in await topics.list_topics()] == ["a", "b"]
    assert (await topics.get_topic("_txnlog")).name == "_txnlog"


async def test_list_empty(topics: TopicManager) -> None:
    assert await topics.list_topics() == []


async def test_duplicate_refused(topics: TopicManager) -> None:
    await topics.create_topic("t", 1, TopicConfig())
    with pytest.raises(TopicExistsError) as raised:
        await topics.create_topic("t", 2, TopicConfig())
    assert raised.value.topic == "t"
    assert len((await topics.get_topic("t")).segments) == 1


async def test_concurrent_create_one_wins(topics: TopicManager) -> None:
    results = await asyncio.gather(
        *(topics.create_topic("race", n, TopicConfig()) for n in (1, 2, 3, 4)),
        return_exceptions=True)
    winners = [r for r in results if not isinstance(r, BaseException)]
    assert len(winners) == 1
    assert all(isinstance(r, TopicExistsError) for r in results if r not in winners)
    assert await topics.get_topic("race") == winners[0]


async def test_bad_config_refused(topics: TopicManager) -> None:
    loose = object.__new__(TopicConfig)  # skips __post_init__, as a careless caller might
    for name, value in (("retention_ms", 0), ("retention_bytes", -1), ("max_event_bytes", 1),
                        ("ledger_rollover_bytes", 1024), ("ledger_rollover_ms", 1000),
                            ("scale_target_events_per_s", 0), ("scale_min_segments", 1),
                            ("scale_cooldown_ms", 0)):
        object.__setattr__(loose, name, value)
    with pytest.raises(InvalidArgumentError, match="retention_ms must be"):
        await topics.create_topic("t", 1, loose)


async def test_unknown_topics(topics: TopicManager) -> None:
    for call in (topics.get_topic("nope"), topics.delete_topic("nope"),
                 topics.update_topic_config("nope", {"retention_ms": 5000}),
                 topics.get_topic("bad/name")):
        with pytest.raises(TopicNotFoundError):
            await call
    for name in ("nope/0", "nope", "x/y"):
        with pytest.raises(NoSuchSegmentError):
            await topics.segment(name)
    await topics.create_topic("t", 2, TopicConfig())
    with pytest.raises(NoSuchSegmentError):
        await topics.segment("t/2")


async def test_update_config(topics: TopicManager) -> None:
    await topics.create_topic("t", 1, TopicConfig())
    segment = await topics.segment("t/0")
    updated = await topics.update_topic_config("t", {"retention_bytes": 4096,
                                                     "ledger_rollover_bytes": 2048})
    assert updated.config == TopicConfig(retention_bytes=4096, ledger_rollover_bytes=2048)
    assert (await topics.get_topic("t")).config == updated.config
    assert segment.config == updated.config
    with pytest.raises(InvalidArgumentError, match="unknown topic config fields"):
        await topics.update_topic_config("t", {"colour": 1})
    with pytest.raises(InvalidArgumentError, match="ledger_rollover_ms must be"):
        await topics.update_topic_config("t", {"ledger_rollover_ms": 5})
    assert (await topics.get_topic("t")).config == updated.config


async def test_get_topic_shows_offsets(topics: TopicManager, env: BrokerEnv) -> None:
    await topics.create_topic("t", 2, TopicConfig())
    segment = await topics.segment("t/1")
    await segment.append([block(0, 5)], "w", 4)
    info = await topics.get_topic("t")
    assert [(s.start_offset, s.end_offset) for s in info.segments] == [(0, 0), (0, 5)]
    # From the records and ledgers, without loading: another manager on the same store.
    other = env.manager()
    assert [(s.start_offset, s.end_offset) for s in (await other.get_topic("t")).segments] == [
        (0, 0), (0, 5)]


async def test_delete_topic(topics: TopicManager, env: BrokerEnv) -> None:
    await topics.create_topic("t", 2, TopicConfig(ledger_rollover_bytes=1024))
    await topics.create_topic("keep", 1, TopicConfig())
    loaded = await topics.segment("t/0")
    for i in range(20):
        await loaded.append([block(i, size=200)], "w", i)
    assert len(loaded.info().ledgers) > 2
    ledger_ids = {ledger.ledger_id for ledger in loaded.info().ledgers}
    # t/1 was loaded by a manager that went away cleanly: its ledgers are only in records.
    first = env.manager()
    unloaded = await first.segment("t/1")
    await unloaded.append([block(0)], "w", 0)
    ledger_ids |= {ledger.ledger_id for ledger in unloaded.info().ledgers}
    await first.close()

    await topics.delete_topic("t")
    with pytest.raises(TopicNotFoundError):
        await topics.get_topic("t")
    assert [t.name for t in await topics.list_topics()] == ["keep"]
    assert not ledger_ids & set(env.bookie.ledger_ids())
    with pytest.raises(NoSuchSegmentError):
        await loaded.append([block(99)], "w", 99)
    with pytest.raises(NoSuchSegmentError):
        await loaded.read(0, 100)
    with pytest.raises(NoSuchSegmentError):
        await topics.segment("t/0")
    # The name is free again, with fresh segments.
    again = await topics.create_topic("t", 1, TopicConfig())
    assert again.segments[0].end_offset == 0
    segment = await topics.segment("t/0")
    assert (await segment.append([block(0)], "w", 0)).offset == 0


async def test_closed_manager_refuses(env: BrokerEnv) -> None:
    manager = env.manager()
    await manager.start()
    await manager.close()
    with pytest.raises(Exception, match="shutting down"):
        await manager.get_topic("t")


async def test_close_ends_maintenance_even_when_a_hook_swallows_the_cancellation(
        env: BrokerEnv) -> None:
    # Code under a hook may turn the CancelledError of close() into an error the
    # round logs; close() must still return (a broker then hung on SIGTERM).
    topics = env.manager(retention_interval_s=0.01)
    entered = asyncio.Event()

    async def swallowing_hook() -> None:
        entered.set()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.Event().wait()

    topics.add_maintenance_hook(swallowing_hook)
    await topics.start()
    await asyncio.wait_for(entered.wait(), 30)
    await asyncio.wait_for(topics.close(), 30)
