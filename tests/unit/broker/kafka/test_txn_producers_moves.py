"""Transactional ids' rules that a multi-broker cluster relies on, on a real ledger stack.

The next transaction waits (CONCURRENT_TRANSACTIONS) while the last one's
markers are not all written; a committed transaction's offsets that could not
be written are driven on until they land; a coordinator that stood down
writes nothing and serves nothing until it takes over again, then reads the
records its predecessor wrote; records of earlier builds (without the last
outcome) still load. docs/kafka.md, "Transactions and read_committed" and
"Clusters".
"""

from __future__ import annotations

import asyncio

from kio.schema.errors import ErrorCode

from broker.api import TopicConfig
from broker.errors import BrokerShuttingDownError
from broker.kafka.consumer_groups.coordinator import GroupCoordinator, OffsetCommitItem
from broker.kafka.consumer_groups.offsets import CommittedOffset, OffsetStore, TopicPartition
from broker.kafka.producer_ids import ProducerIds
from broker.kafka.txns.producers import TxnProducers
from broker.kafka.txns.records import TxnProducer
from broker.segments.entry import EntryKind
from broker.txn.coordinator import TxnCoordinator, TxnState
from ledger.records import dump_record
from tests.support.wait import wait_for_async
from tests.unit.broker.conftest import BrokerEnv
from txnbuffer.api import TxnId
from txnbuffer.txn_ids import txn_id_hex


class _HeldMarkers:
    """Markers that wait until ``release`` (a segment owner that is slow to answer)."""

    def __init__(self) -> None:
        self.released = asyncio.Event()

    async def __call__(self, segment: str, txn_id: TxnId, kind: EntryKind) -> None:
        del segment, txn_id, kind
        await self.released.wait()


async def _producers(env: BrokerEnv, markers: _HeldMarkers | None = None,
                     ) -> tuple[TxnCoordinator, GroupCoordinator, TxnProducers]:
    topics = env.manager()
    coordinator = TxnCoordinator(topics, clock=env.clock, markers=markers)
    await coordinator.start()
    groups = GroupCoordinator(topics, OffsetStore(topics))
    await groups.start()
    producers = TxnProducers(topics, coordinator, ProducerIds(env.store), groups)
    await producers.start()
    return coordinator, groups, producers


async def test_the_next_transaction_waits_for_the_last_ones_markers(env: BrokerEnv) -> None:
    markers = _HeldMarkers()
    coordinator, _, producers = await _producers(env, markers)
    try:
        _, producer_id, epoch = await producers.init("tid", 60_000, -1, -1)
        assert await producers.begin("tid", producer_id, epoch) == ErrorCode.none
        txn_id = producers.append_check("tid", producer_id, epoch)[1]
        assert txn_id is not None
        await coordinator.register_segment(txn_id, "out/0")  # a partition owner's first batch
        ending = asyncio.ensure_future(producers.end("tid", producer_id, epoch, True))
        await wait_for_async(
            lambda: _is(coordinator, txn_id, TxnState.COMMITTING), "the commit decided")
        assert not ending.done()  # its markers are held
        markers.released.set()
        assert await ending == ErrorCode.none
        # Answered; the record says so. Had the markers still been on their way (an
        # abort answered before them), the next transaction would wait:
        (record,) = producers.described()
        assert record.last_txn_id == txn_id and record.last_end == "commit"
        markers.released.clear()
        assert await producers.begin("tid", producer_id, epoch) == ErrorCode.none
        second = producers.append_check("tid", producer_id, epoch)[1]
        assert second is not None
        await coordinator.register_segment(second, "out/0")
        deciding = asyncio.ensure_future(coordinator.commit([second]))
        await wait_for_async(
            lambda: _is(coordinator, second, TxnState.COMMITTING), "the second decided")
        # As if EndTxn had answered before the markers (an abort past its wait):
        record.txn_id, record.last_txn_id, record.last_markers_written = None, second, False
        assert await producers.begin("tid", producer_id, epoch) == (
            ErrorCode.concurrent_transactions)
        markers.released.set()
        await deciding
        await wait_for_async(lambda: _is(coordinator, second, TxnState.COMMITTED),
                             "the second committed")
        assert await producers.begin("tid", producer_id, epoch) == ErrorCode.none
    finally:
        markers.released.set()
        await coordinator.close()


async def _is(coordinator: TxnCoordinator, txn_id: TxnId, state: TxnState) -> bool:
    return coordinator.status(txn_id).state is state


async def test_committed_offsets_that_failed_are_written_by_the_drive(env: BrokerEnv) -> None:
    coordinator, groups, producers = await _producers(env)
    try:
        await env.manager().create_topic("in", 1, TopicConfig())
        failures = [BrokerShuttingDownError("the group's broker did not answer")]
        writes: list[str] = []

        async def flaky(group: str, items: list[OffsetCommitItem],
                        ) -> dict[TopicPartition, ErrorCode]:
            writes.append(group)
            if failures:  # maybe applied: the same offsets come again
                raise failures.pop()
            errors = {(item.topic, item.partition): ErrorCode.none for item in items}
            return await groups.write_offsets(group, items, errors)

        producers.route_offsets(flaky)
        _, producer_id, epoch = await producers.init("tid", 60_000, -1, -1)
        await producers.begin("tid", producer_id, epoch, "g")
        await producers.add_offsets("tid", producer_id, epoch, "g", -1, "",
                                    [OffsetCommitItem("in", 0, CommittedOffset(3))])
        # Decided; its offsets not written: retriable, and the coordinator drives them on.
        assert await producers.end("tid", producer_id, epoch, True) == (
            ErrorCode.coordinator_not_available)

        async def written() -> bool:
            offset = groups.store.offset("g", ("in", 0))
            return offset is not None and offset.offset == 3
        await wait_for_async(written, "the offsets written by the drive")
        assert writes == ["g", "g"]
        await wait_for_async(
            lambda: _cleared(producers), "the record cleared once they landed")
        # The client's EndTxn retry answers success: the outcome just reached.
        assert await producers.end("tid", producer_id, epoch, True) == ErrorCode.none
    finally:
        await coordinator.close()


async def _cleared(producers: TxnProducers) -> bool:
    (record,) = producers.described()
    return record.txn_id is None and not record.offsets


async def test_a_coordinator_that_stood_down_serves_nothing_until_it_takes_over(
        env: BrokerEnv) -> None:
    coordinator, _, producers = await _producers(env)
    try:
        _, producer_id, epoch = await producers.init("tid", 60_000, -1, -1)
        producers.stand_down()
        assert not producers.loaded
        assert producers.described() == []
        code, _, _ = await producers.init("other", 60_000, -1, -1)
        assert code is ErrorCode.not_coordinator  # nothing written where it moved
        await producers.take_over()
        assert producers.loaded
        assert producers.check("tid", producer_id, epoch)[0] is ErrorCode.none
    finally:
        await coordinator.close()


def test_a_record_of_an_earlier_build_loads_without_the_last_outcome() -> None:
    txn_id: TxnId = (1, 2)
    value = dump_record(1, {"producer_id": 7, "epoch": 2, "timeout_ms": 60_000,
                            "txn_id": txn_id_hex(txn_id), "offsets": []}, legacy_key="v")
    record = TxnProducer.decode("t/tid", value)
    assert (record.producer_id, record.epoch, record.last_end, record.last_txn_id) == (
        7, 2, None, None)
    assert record.txn_id == txn_id
    record.last_end, record.last_txn_id = "abort", (3, 4)
    again = TxnProducer.decode("t/tid", record.encode())
    assert (again.txn_id, again.last_end, again.last_txn_id) == (txn_id, "abort", (3, 4))
