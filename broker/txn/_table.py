"""The transaction table: the coordinator's transactions in memory and their log writes.

Kafka's ``TransactionStateManager`` in small. ``TxnTable`` holds the known
transactions by id and by label and the labels closed by
``abort_labelled(close=True)``, and writes records to the transaction log
(``_txnlog``, a ``CompactedTopic`` it is given): a transaction's record, a
commit group's, a tombstone. Writes given at once share one log append.
A write that fails may still have landed (unknown outcome): the callers
(the finisher, ``register_segment`` below) say what that means for them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from broker.errors import TxnLabelClosedError, TxnNotFoundError
from broker.system.compacted_topic import CompactedTopic
from broker.topics.internal import refuse_internal_segment
from broker.txn.states import Txn
from txnbuffer.api import TxnId
from txnbuffer.txn_ids import txn_id_hex

__all__ = ["TxnTable"]


class TxnTable:
    """Transactions by id and label, closed labels, and the log they are written to."""

    def __init__(self, log: CompactedTopic) -> None:
        self._log = log
        self._txns: dict[TxnId, Txn] = {}
        #: Ids of the known transactions of each label.
        self._labelled: dict[str, set[TxnId]] = {}
        #: Labels closed by ``abort_labelled(close=True)``: when (ms since the epoch).
        self._closed_labels: dict[str, int] = {}

    def add(self, txn: Txn) -> None:
        """Know ``txn`` (in memory only: its record is written by ``save``)."""
        self._txns[txn.txn_id] = txn
        if txn.label:
            self._labelled.setdefault(txn.label, set()).add(txn.txn_id)

    def remove(self, txn: Txn) -> None:
        """Forget ``txn`` in memory."""
        del self._txns[txn.txn_id]
        same = self._labelled.get(txn.label)
        if same is not None:
            same.discard(txn.txn_id)
            if not same:
                del self._labelled[txn.label]

    def get(self, txn_id: TxnId) -> Txn:
        """The transaction ``txn_id``; ``TxnNotFoundError`` if it is not known."""
        txn = self._txns.get(txn_id)
        if txn is None:
            raise TxnNotFoundError(txn_id_hex(txn_id))
        return txn

    def find(self, txn_id: TxnId) -> Txn | None:
        """The transaction ``txn_id``, None if it is not known."""
        return self._txns.get(txn_id)

    def transactions(self) -> list[Txn]:
        """Every known transaction (a copy: the caller may add or remove meanwhile)."""
        return list(self._txns.values())

    def labelled(self, label: str) -> list[Txn]:
        """The known transactions of ``label``, by txn id."""
        return [self._txns[txn_id] for txn_id in sorted(self._labelled.get(label, ()))]

    def close_label(self, label: str, now_ms: int) -> None:
        """Refuse ``label`` from now on (``check_not_closed``); closed first at ``now_ms``."""
        self._closed_labels.setdefault(label, now_ms)

    def is_closed(self, label: str) -> bool:
        """Whether ``label`` is closed (``begin`` refuses it)."""
        return label in self._closed_labels

    def check_not_closed(self, label: str) -> None:
        """``TxnLabelClosedError`` if ``label`` is closed."""
        if label and self.is_closed(label):
            raise TxnLabelClosedError(label)

    def forget_closed_labels(self, horizon_ms: int) -> None:
        """Open again the labels closed at or before ``horizon_ms``."""
        for label in [k for k, closed in self._closed_labels.items() if closed <= horizon_ms]:
            del self._closed_labels[label]

    def clear(self) -> None:
        """Forget every transaction and closed label (the log keeps them)."""
        self._txns.clear()
        self._labelled.clear()
        self._closed_labels.clear()

    def save(self, txn: Txn) -> Coroutine[Any, Any, None]:
        """Write ``txn``'s record (durable once awaited; unknown if it raises)."""
        return self._log.write(txn.name, txn.record())

    def write(self, key: str, value: bytes | None) -> Coroutine[Any, Any, None]:
        """Write a record of the log by key (a commit group's), None: a tombstone."""
        return self._log.write(key, value)

    async def register_segment(self, txn: Txn, segment: str) -> None:
        """Log ``segment`` as touched by ``txn`` before its first entry there.

        One lock per (transaction, segment): registrations of several segments
        run at once (their log writes share one append), while appends to one
        segment pass in their call order (FIFO lock; taking a free lock does
        not yield), so none overtakes an earlier one of the same flow.
        """
        # The broker's own state never joins a transaction (only the public
        # Append path gets here, and it refuses system segments already).
        refuse_internal_segment(segment, "a transactional Append")
        lock = txn.locks.get(segment)
        if lock is None:
            lock = txn.locks[segment] = asyncio.Lock()
        async with lock:
            if segment in txn.segments:
                return
            txn.segments.append(segment)
            try:
                await self.save(txn)
            except BaseException:
                # Unknown outcome: the record may name the segment. Harmless:
                # a marker there finds no entry of this transaction.
                txn.segments.remove(segment)
                raise
