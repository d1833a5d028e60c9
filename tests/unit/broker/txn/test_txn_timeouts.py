"""TxnTimeouts alone: deadline timers, the maintenance tick, forgetting finished transactions.

On a real table (its log on a real ``TopicManager``) and a real finisher
(transactions here touch no segment: their aborts write no marker).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable

import pytest

from broker.system.compacted_topic import CompactedTopic
from broker.topics.manager import TopicManager
from broker.txn import _timeouts
from broker.txn._finish import TxnFinisher
from broker.txn._markers import TxnMarkers
from broker.txn._table import TxnTable
from broker.txn._tasks import BackgroundTasks
from broker.txn._timeouts import TxnTimeouts
from broker.txn.states import TXN_LOG_TOPIC, Txn, TxnState
from tests.support.wait import wait_for_async
from tests.unit.broker.conftest import BrokerEnv


class Parts:
    """Timeouts with the collaborators the coordinator would pass them."""

    def __init__(self, topics: TopicManager, clock: Callable[[], float], *,
                 finished_retention_ms: int = 1_000) -> None:
        self.topics = topics
        self.clock = clock
        self.table = TxnTable(CompactedTopic(topics, TXN_LOG_TOPIC))
        self.tasks = BackgroundTasks()
        self.finisher = TxnFinisher(self.table, TxnMarkers(topics), self.tasks, clock=clock)
        self.timeouts = TxnTimeouts(self.table, self.finisher, self.tasks, clock=clock,
                                    finished_retention_ms=finished_retention_ms)

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    async def txn(self, number: int, state: TxnState, deadline_ms: int, *,
                  finished_ms: int = -1) -> Txn:
        txn = Txn((0, number), state, deadline_ms, finished_ms=finished_ms)
        self.table.add(txn)
        await self.table.save(txn)
        return txn

    async def logged(self) -> dict[str, str]:
        records = await CompactedTopic(self.topics, TXN_LOG_TOPIC,
                                       maintain=False).read_prefix("")
        return {key: json.loads(value)["state"] for key, value in records.items()}


async def test_the_tick_aborts_what_is_past_its_deadline(env: BrokerEnv) -> None:
    parts = Parts(env.manager(), env.clock)
    late = await parts.txn(1, TxnState.OPEN, parts.now_ms() + 1_000)
    kept = await parts.txn(2, TxnState.OPEN, parts.now_ms() + 60_000)
    assert await parts.timeouts.tick() == 0
    env.clock.advance_ms(1_000)
    assert await parts.timeouts.tick() == 1
    assert (late.state, kept.state) == (TxnState.TIMED_OUT, TxnState.OPEN)
    assert (await parts.logged())[late.name] == "TIMED_OUT"
    assert await parts.timeouts.tick() == 0  # not again


async def test_a_timer_aborts_at_the_deadline(env: BrokerEnv) -> None:
    parts = Parts(env.manager(), time.time)  # the loop's time passes: the timer fires
    txn = await parts.txn(1, TxnState.OPEN, parts.now_ms() + 50)
    parts.timeouts.schedule(txn)
    assert txn.timer is not None

    async def timed_out() -> bool:
        return txn.state is TxnState.TIMED_OUT and parts.finisher.job(txn.name) is None

    await wait_for_async(timed_out, "the transaction timed out by its timer")
    assert txn.timer is None
    assert (await parts.logged())[txn.name] == "TIMED_OUT"


async def test_a_timer_early_by_the_clock_waits_again(env: BrokerEnv) -> None:
    parts = Parts(env.manager(), env.clock)  # a clock that is not the loop's
    txn = await parts.txn(1, TxnState.OPEN, parts.now_ms() + 5)
    parts.timeouts.schedule(txn)
    first = txn.timer

    async def rescheduled() -> bool:
        return txn.timer is not None and txn.timer is not first

    await wait_for_async(rescheduled, "the timer set again")
    assert txn.state is TxnState.OPEN  # the clock says: not yet
    env.clock.advance_ms(5)

    async def timed_out() -> bool:
        return txn.state is TxnState.TIMED_OUT

    await wait_for_async(timed_out, "the transaction timed out once the clock passed")


async def test_cancel_all_stops_the_timers(env: BrokerEnv) -> None:
    parts = Parts(env.manager(), env.clock)
    txns = [await parts.txn(n, TxnState.OPEN, parts.now_ms() + 60_000) for n in (1, 2)]
    for txn in txns:
        parts.timeouts.schedule(txn)
    handles = [txn.timer for txn in txns]
    parts.timeouts.cancel_all()
    assert [txn.timer for txn in txns] == [None, None]
    assert all(handle is not None and handle.cancelled() for handle in handles)


async def test_finished_transactions_are_forgotten_after_retention(env: BrokerEnv) -> None:
    parts = Parts(env.manager(), env.clock, finished_retention_ms=1_000)
    now = parts.now_ms()
    old = await parts.txn(1, TxnState.COMMITTED, 0, finished_ms=now)
    undated = await parts.txn(2, TxnState.ABORTED, 0)  # logged before finished_ms existed
    unlogged = await parts.txn(3, TxnState.COMMITTED, 0, finished_ms=now)
    parts.finisher.decided_commit([unlogged.txn_id], None, logged=True)  # final record pending
    parts.table.close_label("job", now)
    env.clock.advance_ms(999)
    await parts.timeouts.tick()
    assert parts.table.find(old.txn_id) is old  # not yet
    assert undated.finished_ms == now + 999  # counted from now
    assert parts.table.is_closed("job")
    env.clock.advance_ms(1)
    await parts.timeouts.tick()
    assert parts.table.find(old.txn_id) is None
    assert old.name not in await parts.logged()  # a tombstone
    assert parts.table.find(undated.txn_id) is undated
    assert parts.table.find(unlogged.txn_id) is unlogged  # its job keeps it
    assert not parts.table.is_closed("job")


async def test_the_tick_waits_a_bounded_time_for_what_it_started(
        env: BrokerEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_timeouts, "TICK_WAIT_S", 0.05)
    parts = Parts(env.manager(), env.clock)
    txn = await parts.txn(1, TxnState.OPEN, parts.now_ms())
    txn.in_flight = 1
    txn.idle.clear()  # an append in flight: the abort waits for it
    assert await parts.timeouts.tick() == 1  # returns though the abort goes on
    assert txn.state is TxnState.ABORTING
    assert len(parts.tasks) == 1
    txn.in_flight = 0
    txn.idle.set()
    await asyncio.wait_for(parts.tasks.wait(), timeout=30)
    assert parts.table.get(txn.txn_id).state is TxnState.TIMED_OUT


def test_a_negative_retention_is_refused(topics: TopicManager) -> None:
    with pytest.raises(ValueError, match="finished_retention_ms"):
        Parts(topics, time.time, finished_retention_ms=-1)
