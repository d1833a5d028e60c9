"""Committed offsets and transactional ids on their system topics, over broker restarts.

On a real ledger stack (``BrokerEnv``): offsets of groups whose ids hold
``/`` read back exactly; an unreadable record is left out, the others load;
the crash window of a Kafka transaction (its commit decided, its offsets not
yet written) is closed by the next start, and an aborted one's offsets are
dropped.
"""

from __future__ import annotations

import logging

import pytest
from kio.schema.errors import ErrorCode

from broker.api import TopicConfig
from broker.kafka.consumer_groups.coordinator import GroupCoordinator, OffsetCommitItem
from broker.kafka.consumer_groups.offsets import OFFSETS_TOPIC, CommittedOffset, OffsetStore
from broker.kafka.producer_ids import ProducerIds
from broker.kafka.txns.producers import TxnProducers
from broker.system.compacted_topic import CompactedTopic
from broker.txn.coordinator import TxnCoordinator, TxnState
from tests.unit.broker.conftest import BrokerEnv


async def test_offsets_of_any_group_id_survive_a_restart(
        env: BrokerEnv, caplog: pytest.LogCaptureFixture) -> None:
    topics = env.manager()
    store = OffsetStore(topics)
    await store.load()
    await store.commit("a/b", [(("t", 0), CommittedOffset(5, 1, "meta")),
                               (("t", 1), CommittedOffset(7))])
    await store.commit("a", [(("t/x", 0), CommittedOffset(9))])  # not a topic name: any key
    await CompactedTopic(topics, OFFSETS_TOPIC, maintain=False).write("o/9/broken", b"{")
    await env.restart()
    again = OffsetStore(env.manager())
    with caplog.at_level(logging.ERROR):
        await again.load()
    assert "record 'o/9/broken' of _kafka_offsets is unreadable" in caplog.text
    assert {tp: value.offset for tp, value in again.offsets("a/b").items()} == {
        ("t", 0): 5, ("t", 1): 7}
    assert again.offset("a/b", ("t", 0)) == CommittedOffset(
        5, 1, "meta", again.offset("a/b", ("t", 0)).commit_time_ms)  # type: ignore[union-attr]
    assert {tp: value.offset for tp, value in again.offsets("a").items()} == {("t/x", 0): 9}


async def _producers(env: BrokerEnv) -> tuple[TxnCoordinator, GroupCoordinator, TxnProducers]:
    topics = env.manager()
    coordinator = TxnCoordinator(topics, clock=env.clock)
    await coordinator.start()
    groups = GroupCoordinator(topics, OffsetStore(topics))
    await groups.start()
    producers = TxnProducers(topics, coordinator, ProducerIds(env.store), groups)
    await producers.start()
    return coordinator, groups, producers


async def test_a_commit_decided_before_a_crash_gets_its_offsets_at_the_next_start(
        env: BrokerEnv) -> None:
    coordinator, groups, producers = await _producers(env)
    await env.manager().create_topic("in", 2, TopicConfig())
    code, producer_id, epoch = await producers.init("tid", 60_000, -1, -1)
    assert (code, epoch) == (ErrorCode.none, 0)
    assert await producers.begin("tid", producer_id, epoch, "g") == ErrorCode.none
    items = [OffsetCommitItem("in", 0, CommittedOffset(4)),
             OffsetCommitItem("in", 1, CommittedOffset(6))]
    errors = await producers.add_offsets("tid", producer_id, epoch, "g", -1, "", items)
    assert set(errors.values()) == {ErrorCode.none}
    assert groups.fetch("g", [("in", 0)], require_stable=True)[1][0][2] == (
        ErrorCode.unstable_offset_commit)
    # The commit is decided; the broker dies before the offsets are written.
    txn_id = producers.append_check("tid", producer_id, epoch)[1]
    assert txn_id is not None
    await coordinator.commit([txn_id])
    await coordinator.close()
    await env.restart()
    coordinator, groups, producers = await _producers(env)
    try:
        assert coordinator.status(txn_id).state is TxnState.COMMITTED
        assert {tp: value.offset for tp, value in groups.store.offsets("g").items()} == {
            ("in", 0): 4, ("in", 1): 6}
        assert groups.pending_txn_offsets("g") == set()
        # The same id goes on with the next epoch; the old epoch is fenced.
        code, same_id, next_epoch = await producers.init("tid", 60_000, -1, -1)
        assert (code, same_id, next_epoch) == (ErrorCode.none, producer_id, 1)
        assert await producers.end("tid", producer_id, epoch, True) == ErrorCode.producer_fenced
    finally:
        await coordinator.close()


async def test_an_aborted_transaction_drops_its_offsets(env: BrokerEnv) -> None:
    coordinator, groups, producers = await _producers(env)
    try:
        await env.manager().create_topic("in", 1, TopicConfig())
        _, producer_id, epoch = await producers.init("tid", 60_000, -1, -1)
        await producers.begin("tid", producer_id, epoch, "g")
        await producers.add_offsets("tid", producer_id, epoch, "g", -1, "",
                                    [OffsetCommitItem("in", 0, CommittedOffset(3))])
        assert await producers.end("tid", producer_id, epoch, False) == ErrorCode.none
        assert groups.store.offsets("g") == {}
        assert groups.pending_txn_offsets("g") == set()
        # A second InitProducerId while a transaction is open aborts it.
        await producers.begin("tid", producer_id, epoch, "g")
        txn_id = producers.append_check("tid", producer_id, epoch)[1]
        assert txn_id is not None
        assert (await producers.init("tid", 60_000, -1, -1))[2] == epoch + 1
        assert coordinator.status(txn_id).state is TxnState.ABORTED
    finally:
        await coordinator.close()


async def test_a_transaction_aborted_under_the_producer_must_be_aborted_by_it(
        env: BrokerEnv) -> None:
    coordinator, _, producers = await _producers(env)
    try:
        await env.manager().create_topic("in", 1, TopicConfig())
        _, producer_id, epoch = await producers.init("tid", 60_000, -1, -1)
        assert await producers.begin("tid", producer_id, epoch) == ErrorCode.none
        await producers.add_offsets("tid", producer_id, epoch, "g", -1, "",
                                    [OffsetCommitItem("in", 0, CommittedOffset(3))])
        assert producers.pending_offsets("g") == {("in", 0)}
        txn_id = producers.append_check("tid", producer_id, epoch)[1]
        assert txn_id is not None
        await coordinator.abort(txn_id)  # as its timeout does
        assert producers.pending_offsets("g") == set()  # never stable: holds no fetch
        assert await producers.begin("tid", producer_id, epoch) == ErrorCode.invalid_txn_state
        assert await producers.end("tid", producer_id, epoch, True) == (
            ErrorCode.invalid_txn_state)
        assert await producers.end("tid", producer_id, epoch, False) == ErrorCode.none
        assert await producers.begin("tid", producer_id, epoch) == ErrorCode.none
        assert producers.append_check("tid", producer_id, epoch)[1] != txn_id
        assert await producers.end("tid", producer_id, epoch, True) == ErrorCode.none
    finally:
        await coordinator.close()
