"""What the internal calls of Kafka transactions reach on a broker (``KafkaTxnService``).

Kafka transactions in a cluster (docs/kafka.md, "Clusters"): the Kafka
transaction coordinator runs beside Folio's (the owner of the container of
``_txnlog/0``); partition owners ask it for a transactional batch's Folio
transaction (``FindKafkaTxn``) and to check or add the batch's partition
(KIP-890: ``FindKafkaTxn`` with the partition), group coordinators hand it TxnOffsetCommit's
offsets (``AddKafkaTxnOffsets``), and it writes a committed transaction's
offsets at the group's coordinator (``CommitKafkaTxnOffsets``); a group's
coordinator asks it which of a group's partitions have offsets a transaction
still holds (``PendingKafkaTxnOffsets``, for ``require_stable``). The Kafka
front-end (``broker.kafka.txns.cluster``) implements this contract; the
internal servicer and the peer clients (``broker.cluster.peers``) only carry
it, so neither imports the Kafka front-end.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from txnbuffer.api import TxnId

__all__ = ["KafkaTxnService", "TxnOffset"]


@dataclass(frozen=True, slots=True)
class TxnOffset:
    """One partition's offset in a Kafka transaction, and (in answers) its Kafka error code."""

    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = None
    error_code: int = 0


class KafkaTxnService(Protocol):
    """The Kafka transactions' side of the internal calls (proto/broker/v1/internal.proto)."""

    async def find_txn(self, transactional_id: str, producer_id: int,
                       epoch: int) -> tuple[int, TxnId | None]:
        """(Kafka error code, the open Folio transaction); ``WrongHostError`` elsewhere."""
        ...

    async def check_txn_partition(self, transactional_id: str, producer_id: int, epoch: int,
                                  topic: str, partition: int, add: bool) -> int:
        """KIP-890: the partition checked (``add``: added, idempotent); ``WrongHostError``."""
        ...

    async def add_offsets(self, transactional_id: str, producer_id: int, epoch: int,
                          group_id: str, offsets: Sequence[TxnOffset],
                          begin: bool = False) -> list[TxnOffset]:
        """Keep ``offsets`` with the transaction, each with its error; ``WrongHostError``.

        ``begin`` (KIP-890, TxnOffsetCommit v5+): the transaction begun first if
        none is open and transaction version 2 allows it (idempotent).
        """
        ...

    async def commit_offsets(self, group_id: str,
                             offsets: Sequence[TxnOffset]) -> list[TxnOffset]:
        """Write a committed transaction's offsets to the group here; each with its error."""
        ...

    async def pending_offsets(self, group_id: str) -> list[tuple[str, int]]:
        """(topic, partition) of the group's offsets a transaction holds; ``WrongHostError``."""
        ...
