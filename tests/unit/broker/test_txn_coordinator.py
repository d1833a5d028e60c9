"""TxnCoordinator on a TopicManager: transitions, timeouts, registration, log replay."""

from __future__ import annotations

import json

import pytest

from broker.api import TopicConfig
from broker.errors import TxnNotFoundError, TxnStateError
from broker.system_topics import CompactedTopic
from broker.topics import TopicManager
from broker.txn_coordinator import (
    LOG_FORMAT_VERSION,
    TXN_LOG_TOPIC,
    TxnCoordinator,
    TxnState,
    check_transition,
)
from tests.unit.broker.conftest import BrokerEnv, block, read_all


def test_transition_table() -> None:
    check_transition("t", TxnState.OPEN, TxnState.COMMITTING)
    check_transition("t", TxnState.ABORTING, TxnState.TIMED_OUT)
    with pytest.raises(TxnStateError) as raised:
        check_transition("t", TxnState.ABORTED, TxnState.COMMITTING)
    assert (raised.value.expected, raised.value.actual) == ("OPEN", "ABORTED")
    with pytest.raises(TxnStateError):
        check_transition("t", TxnState.COMMITTED, TxnState.ABORTING)


async def _write(coordinator: TxnCoordinator, topics: TopicManager, txn: bytes,
                 index: int) -> None:
    segment = await topics.segment("t/0")
    async with coordinator.writing(txn, "t/0"):
        await segment.append([block(index)], "", -1, txn_id=txn)


async def test_timeout_aborts_and_log_replays(env: BrokerEnv) -> None:
    topics = env.manager()
    await topics.create_topic("t", 1, TopicConfig())
    coordinator = TxnCoordinator(topics, clock=env.clock)
    await coordinator.start()
    late = await coordinator.begin(1000)
    kept = await coordinator.begin(60_000)
    await _write(coordinator, topics, late, 0)
    await _write(coordinator, topics, kept, 1)
    env.clock.advance_ms(1001)
    assert await coordinator.tick() == 1
    assert coordinator.status(late).state is TxnState.TIMED_OUT
    assert coordinator.status(kept).segments == ("t/0",)
    with pytest.raises(TxnStateError):
        await _write(coordinator, topics, late, 2)
    with pytest.raises(TxnNotFoundError):
        coordinator.status(bytes(range(16)))
    await env.restart()
    topics = env.manager()
    again = TxnCoordinator(topics, clock=env.clock)
    await again.start()
    assert again.status(late).state is TxnState.TIMED_OUT
    assert again.status(kept).state is TxnState.OPEN
    await again.commit([kept])
    segment = await topics.segment("t/0")
    batch = await segment.read(0, 1 << 20)
    assert [b.data for b in batch.blocks] == [block(1).data]


async def test_finished_transactions_are_forgotten_after_their_retention(
    env: BrokerEnv,
) -> None:
    topics = env.manager()
    await topics.create_topic("t", 1, TopicConfig())
    coordinator = TxnCoordinator(topics, clock=env.clock, finished_retention_ms=10_000)
    await coordinator.start()
    done = await coordinator.begin(60_000)
    await _write(coordinator, topics, done, 0)
    await coordinator.commit([done])
    still_open = await coordinator.begin(600_000)
    env.clock.advance_ms(9_000)
    await coordinator.tick()
    assert coordinator.status(done).state is TxnState.COMMITTED
    env.clock.advance_ms(2_000)
    await coordinator.tick()
    with pytest.raises(TxnNotFoundError):
        coordinator.status(done)
    assert coordinator.status(still_open).state is TxnState.OPEN
    await env.restart()  # the log no longer holds it either
    again = TxnCoordinator(env.manager(), clock=env.clock, finished_retention_ms=10_000)
    await again.start()
    with pytest.raises(TxnNotFoundError):
        again.status(done)
    assert again.status(still_open).state is TxnState.OPEN


async def test_timer_aborts_at_the_deadline_without_a_maintenance_round(
    env: BrokerEnv,
) -> None:
    topics = env.manager()
    await topics.create_topic("t", 1, TopicConfig())
    coordinator = TxnCoordinator(topics)  # the real clock: the timer fires
    await coordinator.start()
    short = await coordinator.begin(50)
    await _write(coordinator, topics, short, 0)
    kept = await coordinator.begin(600_000)
    segment = await topics.segment("t/0")
    # read_committed waits for the open transaction's fate: the timer's abort marker.
    assert await segment.wait_for_data(0, timeout_s=30)
    assert segment.committed_end == segment.end_offset
    await coordinator.close()  # waits out the abort the timer started
    assert coordinator.status(short).state is TxnState.TIMED_OUT
    assert coordinator.status(kept).state is TxnState.OPEN
    await coordinator.commit([kept])
    assert coordinator.status(kept).state is TxnState.COMMITTED


async def test_group_record_of_forgotten_transactions_is_cleared_on_start(
    env: BrokerEnv,
) -> None:
    topics = env.manager()
    txn_log = CompactedTopic(topics, TXN_LOG_TOPIC, maintain=False)
    gone = bytes(range(16)).hex()
    await txn_log.write("commit-" + gone, json.dumps(
        {"v": LOG_FORMAT_VERSION, "state": "COMMITTING", "txns": [gone]}).encode())
    coordinator = TxnCoordinator(topics, clock=env.clock)
    await coordinator.start()
    reloaded = CompactedTopic(topics, TXN_LOG_TOPIC, maintain=False)  # reads the segment anew
    assert await reloaded.get("commit-" + gone) is None
    with pytest.raises(TxnNotFoundError):
        coordinator.status(bytes(range(16)))


@pytest.mark.parametrize("outcome", ["commit", "abort"])
async def test_a_transaction_open_across_a_seal_is_still_decided(
    env: BrokerEnv, outcome: str,
) -> None:
    """The seal stops data, not markers: read_committed waits, then sees the fate, then ends."""
    topics = env.manager()
    await topics.create_topic("t", 1, TopicConfig())
    coordinator = TxnCoordinator(topics, clock=env.clock)
    await coordinator.start()
    txn = await coordinator.begin(60_000)
    await _write(coordinator, topics, txn, 0)
    segment = await topics.segment("t/0")
    await segment.append([block(1)], "", -1)  # plain, after the open transaction
    await segment.seal()
    held = await segment.read(0, 1 << 20)
    assert held.blocks == [] and not held.end_of_segment  # held at max_read_position
    await env.restart()  # the seal and the open transaction survive
    topics = env.manager()
    coordinator = TxnCoordinator(topics, clock=env.clock)
    await coordinator.start()
    if outcome == "commit":
        await coordinator.commit([txn])
    else:
        await coordinator.abort(txn)
    for _ in range(2):  # and again after a restart
        segment = await topics.segment("t/0")
        assert segment.sealed
        shown = await read_all(segment, 0)
        want = [block(0).data, block(1).data] if outcome == "commit" else [block(1).data]
        assert [b.data for b in shown] == want
        assert (await segment.read(segment.end_offset, 1 << 20)).end_of_segment
        assert segment.end_offset == 2
        await env.restart()
        topics = env.manager()
