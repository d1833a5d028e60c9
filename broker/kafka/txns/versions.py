"""KIP-890's rules for a transactional id's state: partitions in the transaction, epoch bumps.

Kafka's ``transaction.version`` feature (TV): at 2 a client ends each
transaction with EndTxn v5, whose answer carries the producer id and epoch
the coordinator bumped (a new producer id, epoch 0, once the epoch is
exhausted), adds partitions by producing (Produce v12+) and offsets by
TxnOffsetCommit v5+ alone. ``TxnProducers`` calls these pure rules with its
lock held; they read and change one ``TxnProducer`` and never write it (the
caller saves the record):

- ``end_retry``: an EndTxn v5 that carries the (id, epoch) the last one
  ended with is its retry (its answer was lost): answered with the
  outcome, never fenced, as Kafka's coordinator answers it.
- ``bump``: the (id, epoch) after an EndTxn v5.
- ``adds_by_producing``: whether a Produce v12+ may add its partition (and
  begin the transaction): not after a transaction that ended at the same
  epoch without a bump (EndTxn below v5), whose late batch would otherwise
  open a transaction no one ends (KIP-890's hanging transaction).
- ``verified``: KIP-890 part 1's check of a transactional batch (Produce
  before v12) and AddPartitionsToTxn v4+ ``verify_only``: a partition not
  added to the open transaction is refused; ``produce_error`` says it as
  Produce does.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Final

from kio.schema.errors import ErrorCode

from broker.kafka.txns.records import AddedPartition, TxnProducer
from broker.txn.coordinator import TxnState
from txnbuffer.api import TxnId

__all__ = ["EXHAUSTED_EPOCH", "TRANSACTION_VERSION", "adds_by_producing", "bump", "end_retry",
           "produce_error", "unadded", "verified"]

#: The ``transaction.version`` feature level served (ApiVersions' finalized features).
TRANSACTION_VERSION: Final = 2
#: An epoch from which a bump takes a new producer id (Kafka: ``Short.MaxValue - 1``).
EXHAUSTED_EPOCH: Final = 32766


def end_retry(producer: TxnProducer, producer_id: int, epoch: int,
              commit: bool) -> ErrorCode | None:
    """The answer to an EndTxn v5 that repeats the last one; None if it is not a retry."""
    if producer.txn_id is not None or producer.ended_with != (producer_id, epoch):
        return None
    outcome = "commit" if commit else "abort"
    return ErrorCode.none if producer.last_end == outcome else ErrorCode.invalid_txn_state


async def bump(producer: TxnProducer, next_producer_id: Callable[[], Awaitable[int]]) -> None:
    """Bump the epoch after an EndTxn v5 sent with the current (id, epoch).

    An exhausted epoch takes a new producer id at epoch 0 (the Folio writer
    id ``kafka:<id>:<epoch>`` is new either way: the producer's sequences
    start again at 0, as Kafka's do after a bump).
    """
    producer.ended_with = (producer.producer_id, producer.epoch)
    if producer.epoch >= EXHAUSTED_EPOCH:
        producer.producer_id, producer.epoch = await next_producer_id(), 0
    else:
        producer.epoch += 1


def adds_by_producing(producer: TxnProducer | None) -> bool:
    """Whether a Produce v12+ of ``producer`` may add its partition (module docstring)."""
    return producer is not None and (producer.last_end is None
                                     or producer.ended_with is not None)


def unadded(producer: TxnProducer, partitions: Iterable[AddedPartition]) -> list[AddedPartition]:
    """The partitions not added to the producer's open transaction (all, if none is open)."""
    if producer.txn_id is None:
        return list(partitions)
    return [partition for partition in partitions if partition not in producer.partitions]


def verified(producer: TxnProducer | None, code: ErrorCode, partitions: list[AddedPartition],
             state: Callable[[TxnId], TxnState | None]) -> dict[AddedPartition, ErrorCode]:
    """Each partition's answer to a check (AddPartitionsToTxn v4+ ``verify_only``, Produce).

    As Kafka's coordinator answers: the producer's error (``code``: unknown
    id, fenced epoch) for all; CONCURRENT_TRANSACTIONS while the transaction
    is being decided (its ``state``); then NONE if the partition is in the
    open transaction, else TRANSACTION_ABORTABLE.
    """
    if producer is None or code is not ErrorCode.none:
        return dict.fromkeys(partitions, code)
    if producer.txn_id is not None and state(producer.txn_id) in (TxnState.COMMITTING,
                                                                  TxnState.ABORTING):
        return dict.fromkeys(partitions, ErrorCode.concurrent_transactions)
    missing = set(unadded(producer, partitions))
    return {partition: ErrorCode.transaction_abortable if partition in missing
            else ErrorCode.none for partition in partitions}


def produce_error(code: ErrorCode, version: int) -> ErrorCode:
    """The coordinator's answer to a transactional batch's check, as Produce ``version`` says it.

    As Kafka's partition leader maps its coordinator's answers: a fenced
    epoch is INVALID_PRODUCER_EPOCH; a partition not in the transaction (or
    the transaction ended) is TRANSACTION_ABORTABLE from v11 (KIP-890), else
    INVALID_TXN_STATE; a coordinator busy or away is NOT_ENOUGH_REPLICAS,
    which producers retry (nothing was written).
    """
    if code is ErrorCode.producer_fenced:
        return ErrorCode.invalid_producer_epoch
    if code in (ErrorCode.transaction_abortable, ErrorCode.invalid_txn_state):
        return ErrorCode.transaction_abortable if version >= 11 else ErrorCode.invalid_txn_state
    if code in (ErrorCode.concurrent_transactions, ErrorCode.coordinator_not_available,
                ErrorCode.not_coordinator, ErrorCode.coordinator_load_in_progress):
        return ErrorCode.not_enough_replicas
    return code
