"""TopicMaintenance alone: its rounds, hooks, rate meter and task, on real topics.

The topics it maintains are a real ``TopicManager`` on the ledger stack of
``conftest.py`` (RocksDB metadata, an in-process bookie) whose own maintenance
is never started: only the part under test runs rounds.
"""

from __future__ import annotations

import asyncio
import contextlib

from broker.api import TopicConfig
from broker.errors import BrokerError
from broker.topics.maintenance import TopicMaintenance
from tests.unit.broker.conftest import BrokerEnv, block

DAY_MS = 24 * 3600 * 1000


def _maintenance_tasks() -> list[asyncio.Task[object]]:
    return [t for t in asyncio.all_tasks() if t.get_name() == "topic-maintenance"]


async def test_a_round_expires_writers_then_runs_every_hook_even_after_one_fails(
        env: BrokerEnv) -> None:
    topics = env.manager(writer_expiry_ms=DAY_MS)
    await topics.create_topic("t", 1, TopicConfig())
    segment = await topics.segment("t/0")
    await segment.append([block(0)], "idle", 0)
    part = TopicMaintenance(topics, interval_s=60.0, clock=env.clock)
    seen: list[str] = []

    async def first() -> None:
        seen.append(f"first: {segment.writer_count} writers")

    async def failing() -> None:
        seen.append("failing")
        raise BrokerError("hook failed")

    async def last() -> None:
        seen.append("last")

    for hook in (first, failing, last):
        part.add_hook(hook)
    await part.run_round()
    assert seen == ["first: 1 writers", "failing", "last"]
    env.clock.advance_ms(DAY_MS + 1)
    seen.clear()
    await part.run_round()
    assert seen == ["first: 0 writers", "failing", "last"]
    assert await segment.last_event_number("idle") == -1


async def test_each_part_measures_rates_with_its_own_meter(env: BrokerEnv) -> None:
    topics = env.manager()
    config = TopicConfig(scale_target_events_per_s=100, scale_cooldown_ms=1000)
    await topics.create_topic("t", 1, config)
    segment = await topics.segment("t/0")
    part = TopicMaintenance(topics, interval_s=60.0, clock=env.clock)
    await part.run_round()  # first round: its rates start here
    await segment.append([block(0, 1000)], "w", 999)
    env.clock.advance_ms(2000)
    # A part that never sampled the topic has no rate yet: nothing scales.
    await TopicMaintenance(topics, interval_s=60.0, clock=env.clock).run_round()
    assert len((await topics.get_topic("t")).segments) == 1
    await part.run_round()  # 500 events/s over its two samples > 100: split
    assert [(s.key_low, s.key_high, s.predecessors)
            for s in (await topics.get_topic("t")).segments] == [
        (0.0, 0.5, ("t/0",)), (0.5, 1.0, ("t/0",))]
    assert (await topics.get_topic("t")).segments[0].name == "t/1"


async def test_the_task_runs_rounds_until_stopped_and_never_starts_again(
        env: BrokerEnv) -> None:
    topics = env.manager()
    part = TopicMaintenance(topics, interval_s=0.01, clock=env.clock)
    rounds = 0
    three = asyncio.Event()

    async def count() -> None:
        nonlocal rounds
        rounds += 1
        if rounds >= 3:
            three.set()

    part.add_hook(count)
    part.start()
    part.start()  # started already: still one task
    assert len(_maintenance_tasks()) == 1
    await asyncio.wait_for(three.wait(), 30)
    await asyncio.wait_for(part.stop(), 30)
    assert _maintenance_tasks() == []
    after_stop = rounds
    part.start()
    assert _maintenance_tasks() == []
    await part.stop()  # stopping again is harmless
    assert rounds == after_stop


async def test_stop_returns_when_a_hook_swallows_the_cancellation(env: BrokerEnv) -> None:
    # Code under a hook may turn the CancelledError of stop() into an error the
    # round logs; stop() must still return (a broker then hung on SIGTERM).
    topics = env.manager()
    part = TopicMaintenance(topics, interval_s=0.01, clock=env.clock)
    entered = asyncio.Event()

    async def swallowing_hook() -> None:
        entered.set()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.Event().wait()

    part.add_hook(swallowing_hook)
    part.start()
    await asyncio.wait_for(entered.wait(), 30)
    await asyncio.wait_for(part.stop(), 30)
    assert _maintenance_tasks() == []
