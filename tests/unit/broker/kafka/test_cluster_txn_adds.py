"""KIP-890 across brokers: a partition owner's check (or TV2 add) at the coordinator elsewhere.

The partition owner's ``ClusterTxns.check_partition`` asks the Kafka
transaction coordinator on another broker (``FindKafkaTxn`` with the
partition) through a fault wrapper at the peers' seam whose calls reach a
real coordinator (``TxnProducers`` on a ledger stack, ``BrokerEnv``): an
answer lost after the add was made (maybe applied) is asked again and the
partition is added once, in the one transaction begun; never answered, the
batch is refused retriable (NOT_ENOUGH_REPLICAS, nothing written) and its
resend adds nothing twice; a partition not added is refused (part 1). A
group coordinator's TxnOffsetCommit v5 begins the transaction there
(``AddKafkaTxnOffsets`` with ``begin_txn``): its lost answer is answered
retriable, and the client's resend begins nothing twice.
"""

from __future__ import annotations

from typing import Any, cast

import pytest
from kio.schema.errors import ErrorCode

from broker.cluster.kafka_txns import TxnOffset
from broker.errors import BrokerShuttingDownError
from broker.kafka.consumer_groups.coordinator import OffsetCommitItem
from broker.kafka.consumer_groups.offsets import CommittedOffset
from broker.kafka.txns import cluster
from broker.kafka.txns.cluster import ClusterTxns
from broker.kafka.txns.implicit import check_partition, keep_offsets
from broker.kafka.txns.producers import TxnProducers
from broker.txn.coordinator import TxnState
from tests.unit.broker.conftest import BrokerEnv
from tests.unit.broker.kafka.test_txn_versions import _producers

pytestmark = pytest.mark.faults

COORDINATOR = "coordinator:1"


class _Owners:
    address = "partition-owner:1"

    def owner_of(self, segment: str) -> str:
        return COORDINATOR


class _NotHere:
    loaded = False

    def stand_down(self) -> None:
        pass


class LossyHop:
    """The peers' seam: each call is applied at the coordinator; the first ``lose`` answers lost."""

    def __init__(self, producers: TxnProducers, lose: int = 0) -> None:
        self.producers = producers
        self.lose = lose
        self.calls = 0

    async def check_kafka_txn_partition(self, address: str, transactional_id: str,
                                        producer_id: int, epoch: int,
                                        partition: tuple[str, int], add: bool) -> int:
        assert address == COORDINATOR
        self.calls += 1
        code = await check_partition(self.producers, transactional_id, producer_id, epoch,
                                     partition, add)
        if self.lose > 0:  # applied, answer lost
            self.lose -= 1
            raise BrokerShuttingDownError(f"broker {address} did not answer the internal call "
                                          "(DEADLINE_EXCEEDED)")
        return int(code.value)


    async def add_kafka_txn_offsets(self, address: str, transactional_id: str,
                                    producer_id: int, epoch: int, group_id: str,
                                    offsets: list[TxnOffset], begin: bool) -> list[TxnOffset]:
        assert address == COORDINATOR
        self.calls += 1
        items = [OffsetCommitItem(item.topic, item.partition, CommittedOffset(item.offset))
                 for item in offsets]
        errors = await keep_offsets(self.producers, transactional_id, producer_id, epoch,
                                    group_id, items, begin)
        if self.lose > 0:  # applied, answer lost
            self.lose -= 1
            raise BrokerShuttingDownError(f"broker {address} did not answer the internal call "
                                          "(DEADLINE_EXCEEDED)")
        return [TxnOffset(item.topic, item.partition, item.offset,
                          error_code=errors[(item.topic, item.partition)].value)
                for item in offsets]


def _owner(hop: LossyHop) -> ClusterTxns:
    """A partition owner's ``ClusterTxns``: the coordinator runs at ``COORDINATOR``."""
    return ClusterTxns(cast(Any, _NotHere()), cast(Any, None), cast(Any, None),
                       cast(Any, None), cast(Any, _Owners()), cast(Any, hop),
                       lambda: False, lambda group: True, 8)


def _open(producers: TxnProducers) -> tuple[Any, set[Any]]:
    producer = producers.producer("tid")
    assert producer is not None
    return producer.txn_id, set(producer.partitions)


async def test_an_add_whose_answer_is_lost_is_asked_again_and_made_once(env: BrokerEnv) -> None:
    coordinator, producers = await _producers(env)
    try:
        _, producer_id, epoch = await producers.init("tid", 60_000, -1, -1)
        hop = LossyHop(producers, lose=2)
        owner = _owner(hop)
        assert await owner.check_partition("tid", producer_id, epoch, ("t", 0),
                                           True) is ErrorCode.none
        assert hop.calls == 3
        txn_id, partitions = _open(producers)
        assert txn_id is not None and partitions == {("t", 0)}
        assert coordinator.status(txn_id).state is TxnState.OPEN
        # The next partition joins the same transaction (not a second one begun).
        assert await owner.check_partition("tid", producer_id, epoch, ("t", 1),
                                           True) is ErrorCode.none
        assert _open(producers) == (txn_id, {("t", 0), ("t", 1)})
        # Fenced epochs are refused through the hop as at the coordinator.
        assert await owner.check_partition("tid", producer_id, epoch + 1, ("t", 2),
                                           True) is ErrorCode.producer_fenced
    finally:
        await coordinator.close()


async def test_never_answered_is_refused_retriable_and_the_resend_adds_once(
        env: BrokerEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cluster, "FIND_TIMEOUT_S", 0.3)
    coordinator, producers = await _producers(env)
    try:
        _, producer_id, epoch = await producers.init("tid", 60_000, -1, -1)
        hop = LossyHop(producers, lose=1_000)
        owner = _owner(hop)
        assert await owner.check_partition("tid", producer_id, epoch, ("t", 0),
                                           True) is ErrorCode.not_enough_replicas
        assert hop.calls >= 2
        txn_id, partitions = _open(producers)  # maybe applied: it was
        hop.lose = 0
        assert await owner.check_partition("tid", producer_id, epoch, ("t", 0),
                                           True) is ErrorCode.none
        assert _open(producers) == (txn_id, partitions) == (txn_id, {("t", 0)})
    finally:
        await coordinator.close()


async def test_a_partition_not_added_is_refused_through_the_hop(env: BrokerEnv) -> None:
    coordinator, producers = await _producers(env)
    try:
        _, producer_id, epoch = await producers.init("tid", 60_000, -1, -1)
        owner = _owner(LossyHop(producers, lose=1))
        # No transaction open: part 1 refuses, and adds nothing.
        assert await owner.check_partition("tid", producer_id, epoch, ("t", 0),
                                           False) is ErrorCode.transaction_abortable
        assert _open(producers) == (None, set())
        assert await producers.begin("tid", producer_id, epoch,
                                     partitions=[("t", 0)]) is ErrorCode.none
        assert await owner.check_partition("tid", producer_id, epoch, ("t", 0),
                                           False) is ErrorCode.none
        assert await owner.check_partition("tid", producer_id, epoch, ("t", 1),
                                           False) is ErrorCode.transaction_abortable
        # After an end without a bump (TV1's EndTxn), a v12 batch adds nothing either.
        assert await producers.end("tid", producer_id, epoch, False) is ErrorCode.none
        assert await owner.check_partition("tid", producer_id, epoch, ("t", 0),
                                           True) is ErrorCode.transaction_abortable
        assert _open(producers)[0] is None
    finally:
        await coordinator.close()


async def test_txn_offset_commit_v5_begins_once_though_its_answer_is_lost(
        env: BrokerEnv) -> None:
    coordinator, producers = await _producers(env)
    try:
        _, producer_id, epoch = await producers.init("tid", 60_000, -1, -1)
        hop = LossyHop(producers, lose=1)
        group_broker = _owner(hop)
        items = [OffsetCommitItem("t", 0, CommittedOffset(5))]
        # Applied, its answer lost: retriable to the client, which sends it again.
        assert await group_broker.keep_offsets("tid", producer_id, epoch, "g", items,
                                               begin=True) == {
            ("t", 0): ErrorCode.coordinator_not_available}
        txn_id, _ = _open(producers)
        assert txn_id is not None
        assert await group_broker.keep_offsets("tid", producer_id, epoch, "g", items,
                                               begin=True) == {("t", 0): ErrorCode.none}
        producer = producers.producer("tid")
        assert producer is not None and producer.txn_id == txn_id
        assert producer.offsets == {("g", "t", 0): CommittedOffset(5)}
        # Without ``begin`` (v0-v4) nothing is begun: AddOffsetsToTxn must come first.
        assert await producers.end("tid", producer_id, epoch, False,
                                   bump_epoch=True) is ErrorCode.none
        assert await group_broker.keep_offsets("tid", producer_id, epoch + 1, "g", items) == {
            ("t", 0): ErrorCode.invalid_txn_state}
    finally:
        await coordinator.close()
