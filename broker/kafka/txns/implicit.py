"""KIP-890's checks and implicit adds at the Kafka transaction coordinator, on one broker or many.

Called where the coordinator runs: by the Produce hook on one broker, and by
``ClusterTxns`` for a partition owner or group coordinator on another broker
(``FindKafkaTxn`` with the partition, ``AddKafkaTxnOffsets`` with
``begin_txn``). Both are idempotent, so a call whose answer was lost (maybe
applied) is made again safely: a partition or group added again changes
nothing, and no second transaction is begun while one is open.

- ``check_partition``: a transactional batch's partition. ``add`` (Produce
  v12+, transaction version 2): added, the transaction begun if none is
  open, unless the last one ended without a bump
  (``versions.adds_by_producing``); else (or without ``add``) it must have
  been added (part 1, ``TxnProducers.verify``).
- ``keep_offsets``: TxnOffsetCommit's offsets; ``begin`` (v5+) begins the
  transaction first as AddOffsetsToTxn would, under the same rule.

Answered as ``TxnProducers.begin`` and ``verify`` answer
(``versions.produce_error`` says it as Produce does).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.kafka.consumer_groups.coordinator import OffsetCommitItem
from broker.kafka.consumer_groups.offsets import TopicPartition
from broker.kafka.txns.producers import TxnProducers
from broker.kafka.txns.records import AddedPartition
from broker.kafka.txns.versions import adds_by_producing

__all__ = ["check_partition", "keep_offsets"]


async def check_partition(producers: TxnProducers, transactional_id: str | None,
                          producer_id: int, epoch: int, partition: AddedPartition,
                          add: bool) -> ErrorCode:
    """The coordinator's answer to a batch's partition (module docstring)."""
    if add and adds_by_producing(producers.producer(transactional_id)):
        return await producers.begin(transactional_id, producer_id, epoch,
                                     partitions=[partition])
    return producers.verify(transactional_id, producer_id, epoch, [partition])[partition]


async def keep_offsets(producers: TxnProducers, transactional_id: str, producer_id: int,
                       epoch: int, group_id: str, items: list[OffsetCommitItem],
                       begin: bool) -> dict[TopicPartition, ErrorCode]:
    """TxnOffsetCommit's offsets kept with the transaction (``begin``: v5+ begins it)."""
    if begin and adds_by_producing(producers.producer(transactional_id)):
        code = await producers.begin(transactional_id, producer_id, epoch, group_id)
        if code is not ErrorCode.none:
            return {(item.topic, item.partition): code for item in items}
    return await producers.keep_offsets(transactional_id, producer_id, epoch, group_id, items)
