"""KIP-890 in the Kafka transaction coordinator's state (``broker.kafka.txns``).

On a real ledger stack (``BrokerEnv``): EndTxn v5 bumps the epoch at every
transaction's end (recorded: it survives a restart), a retry of it is
answered its outcome while the old epoch is fenced for anything else, an
exhausted epoch takes a new producer id; partitions added are checked
(part 1) and cleared at the end; EndTxn below v5 keeps the epoch.
"""

from __future__ import annotations

import asyncio

from kio.schema.errors import ErrorCode

from broker.api import TopicConfig
from broker.kafka.consumer_groups.coordinator import GroupCoordinator
from broker.kafka.consumer_groups.offsets import OffsetStore
from broker.kafka.producer_ids import ProducerIds
from broker.kafka.txns.producers import TxnProducers
from broker.kafka.txns.records import TxnProducer
from broker.kafka.txns.versions import EXHAUSTED_EPOCH, adds_by_producing, produce_error
from broker.txn.coordinator import TxnCoordinator, TxnState
from tests.unit.broker.conftest import BrokerEnv


async def _producers(env: BrokerEnv) -> tuple[TxnCoordinator, TxnProducers]:
    topics = env.manager()
    coordinator = TxnCoordinator(topics, clock=env.clock)
    await coordinator.start()
    groups = GroupCoordinator(topics, OffsetStore(topics))
    await groups.start()
    producers = TxnProducers(topics, coordinator, ProducerIds(env.store), groups)
    await producers.start()
    return coordinator, producers


def _current(producers: TxnProducers) -> tuple[int, int]:
    producer = producers.producer("tid")
    assert producer is not None
    return producer.producer_id, producer.epoch


async def test_end_txn_v5_bumps_the_epoch_and_a_retry_gets_the_outcome(env: BrokerEnv) -> None:
    coordinator, producers = await _producers(env)
    try:
        await env.manager().create_topic("t", 2, TopicConfig())
        code, producer_id, epoch = await producers.init("tid", 60_000, -1, -1)
        assert code is ErrorCode.none
        assert await producers.begin("tid", producer_id, epoch,
                                     partitions=[("t", 0)]) is ErrorCode.none
        txn_id = producers.append_check("tid", producer_id, epoch)[1]
        assert txn_id is not None
        # Part 1: the partition added is in, the other is not.
        assert producers.verify("tid", producer_id, epoch, [("t", 0), ("t", 1)]) == {
            ("t", 0): ErrorCode.none, ("t", 1): ErrorCode.transaction_abortable}
        assert await producers.end("tid", producer_id, epoch, True,
                                   bump_epoch=True) is ErrorCode.none
        assert coordinator.status(txn_id).state in (TxnState.COMMITTING, TxnState.COMMITTED)
        assert _current(producers) == (producer_id, epoch + 1)
        # The retry (its answer lost) carries the old epoch: the outcome, not fenced.
        assert await producers.end("tid", producer_id, epoch, True,
                                   bump_epoch=True) is ErrorCode.none
        assert _current(producers) == (producer_id, epoch + 1)
        assert await producers.end("tid", producer_id, epoch, False,
                                   bump_epoch=True) is ErrorCode.invalid_txn_state
        # Anything else with the old epoch is fenced; the new one begins the next.
        assert await producers.begin("tid", producer_id, epoch) is ErrorCode.producer_fenced
        assert producers.verify("tid", producer_id, epoch, [("t", 0)]) == {
            ("t", 0): ErrorCode.producer_fenced}
        assert await producers.begin("tid", producer_id, epoch + 1,
                                     partitions=[("t", 1)]) is ErrorCode.none
        # The partitions of the last transaction were cleared at its end.
        assert producers.verify("tid", producer_id, epoch + 1, [("t", 0), ("t", 1)]) == {
            ("t", 0): ErrorCode.transaction_abortable, ("t", 1): ErrorCode.none}
        await coordinator.close()
        await env.restart()
        coordinator, producers = await _producers(env)
        # Recorded: the bumped epoch, the open transaction's partitions, the retry's key.
        assert _current(producers) == (producer_id, epoch + 1)
        assert producers.verify("tid", producer_id, epoch + 1, [("t", 1)]) == {
            ("t", 1): ErrorCode.none}
        assert await producers.end("tid", producer_id, epoch + 1, False,
                                   bump_epoch=True) is ErrorCode.none
        assert _current(producers) == (producer_id, epoch + 2)
    finally:
        await coordinator.close()


async def test_end_txn_below_v5_keeps_the_epoch(env: BrokerEnv) -> None:
    coordinator, producers = await _producers(env)
    try:
        await env.manager().create_topic("t", 1, TopicConfig())
        _, producer_id, epoch = await producers.init("tid", 60_000, -1, -1)
        assert await producers.begin("tid", producer_id, epoch,
                                     partitions=[("t", 0)]) is ErrorCode.none
        assert await producers.end("tid", producer_id, epoch, True) is ErrorCode.none
        assert _current(producers) == (producer_id, epoch)
        assert await producers.end("tid", producer_id, epoch, True) is ErrorCode.none
        assert await producers.begin("tid", producer_id, epoch) is ErrorCode.none
    finally:
        await coordinator.close()


async def test_an_exhausted_epoch_takes_a_new_producer_id(env: BrokerEnv) -> None:
    coordinator, producers = await _producers(env)
    try:
        _, producer_id, _ = await producers.init("tid", 60_000, -1, -1)
        # The record of a producer at the last epoch a bump may reach.
        producers._producers["tid"] = TxnProducer("tid", producer_id, EXHAUSTED_EPOCH, 60_000)
        assert await producers.begin("tid", producer_id, EXHAUSTED_EPOCH) is ErrorCode.none
        assert await producers.end("tid", producer_id, EXHAUSTED_EPOCH, False,
                                   bump_epoch=True) is ErrorCode.none
        new_id, new_epoch = _current(producers)
        assert new_id != producer_id and new_epoch == 0
        # Its retry names the old id and epoch.
        assert await producers.end("tid", producer_id, EXHAUSTED_EPOCH, False,
                                   bump_epoch=True) is ErrorCode.none
        assert await producers.begin("tid", producer_id, EXHAUSTED_EPOCH) is (
            ErrorCode.invalid_producer_id_mapping)
    finally:
        await coordinator.close()


async def test_a_produce_adds_its_partition_only_after_a_bumped_end(env: BrokerEnv) -> None:
    coordinator, producers = await _producers(env)
    try:
        _, producer_id, epoch = await producers.init("tid", 60_000, -1, -1)
        assert adds_by_producing(producers.producer("tid"))  # fresh from InitProducerId
        await producers.begin("tid", producer_id, epoch)
        assert await producers.end("tid", producer_id, epoch, True) is ErrorCode.none
        # Ended at this epoch without a bump: a late batch must not open the next one.
        assert not adds_by_producing(producers.producer("tid"))
        await producers.begin("tid", producer_id, epoch)
        assert await producers.end("tid", producer_id, epoch, True,
                                   bump_epoch=True) is ErrorCode.none
        assert adds_by_producing(producers.producer("tid"))
        # A v3 end after a v5 one: no retry of the v5 one is recognised any more.
        await producers.begin("tid", producer_id, epoch + 1)
        assert await producers.end("tid", producer_id, epoch + 1, True) is ErrorCode.none
        assert await producers.end("tid", producer_id, epoch, True,
                                   bump_epoch=True) is ErrorCode.producer_fenced
        assert not adds_by_producing(producers.producer("tid"))
        assert not adds_by_producing(producers.producer("unknown"))
    finally:
        await coordinator.close()


def test_produce_says_the_coordinators_answers_as_kafkas_partition_leader() -> None:
    assert produce_error(ErrorCode.producer_fenced, 12) is ErrorCode.invalid_producer_epoch
    assert produce_error(ErrorCode.transaction_abortable, 11) is ErrorCode.transaction_abortable
    assert produce_error(ErrorCode.transaction_abortable, 10) is ErrorCode.invalid_txn_state
    assert produce_error(ErrorCode.concurrent_transactions, 12) is ErrorCode.not_enough_replicas
    assert produce_error(ErrorCode.invalid_producer_id_mapping, 9) is (
        ErrorCode.invalid_producer_id_mapping)


def test_the_record_keeps_partitions_and_the_last_end() -> None:
    producer = TxnProducer("tid", 7, 3, 60_000, partitions={("a", 0), ("b/c", 2)},
                           ended_with=(7, 2))
    again = TxnProducer.decode(producer.key, producer.encode())
    assert (again.partitions, again.ended_with) == ({("a", 0), ("b/c", 2)}, (7, 2))
    # A record of an earlier build (neither field) reads as none.
    earlier = (TxnProducer("tid", 7, 3, 60_000).encode()
               .replace(b'"ended_with":null,', b"").replace(b'"partitions":[],', b""))
    assert b"partitions" not in earlier and b"ended_with" not in earlier
    old = TxnProducer.decode(producer.key, earlier)
    assert (old.partitions, old.ended_with) == (set(), None)


async def test_a_retry_sent_while_its_end_is_under_way_is_not_bumped_twice(
        env: BrokerEnv) -> None:
    coordinator, producers = await _producers(env)
    try:
        _, producer_id, epoch = await producers.init("tid", 60_000, -1, -1)
        await producers.begin("tid", producer_id, epoch, partitions=[("t", 0)])
        first = asyncio.ensure_future(producers.end("tid", producer_id, epoch, True,
                                                    bump_epoch=True))
        retry = asyncio.ensure_future(producers.end("tid", producer_id, epoch, True,
                                                    bump_epoch=True))
        assert list(await asyncio.gather(first, retry)) == [ErrorCode.none, ErrorCode.none]
        assert _current(producers) == (producer_id, epoch + 1)
    finally:
        await coordinator.close()
