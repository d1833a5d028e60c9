"""Open transactions of one segment and the position of their first entry.

The earliest of them bounds ``max_read_position``; a sorted map by first
position answers "which is the earliest?" in O(1) and a dict answers "is this
one open?" for every transactional entry.
"""

from __future__ import annotations

from sortedcontainers import SortedDict  # type: ignore[import-untyped]

from txnbuffer.api import Position, TxnId

__all__ = ["OngoingTxns"]


class OngoingTxns:
    """Open transactions keyed both by id and by the position of their first entry."""

    __slots__ = ("_by_position", "_by_txn")

    def __init__(self) -> None:
        self._by_position = SortedDict()
        self._by_txn: dict[TxnId, Position] = {}

    def __len__(self) -> int:
        return len(self._by_txn)

    def __contains__(self, txn_id: object) -> bool:
        return txn_id in self._by_txn

    def begin(self, txn_id: TxnId, position: Position) -> bool:
        """Record ``txn_id`` as open from ``position`` unless it already is.

        Returns:
            True if the transaction became open with this entry.
        """
        if txn_id in self._by_txn:
            return False
        self._by_txn[txn_id] = position
        self._by_position[position] = txn_id
        return True

    def end(self, txn_id: TxnId) -> bool:
        """Forget ``txn_id`` (its commit or abort marker was written).

        Returns:
            True if it was open.
        """
        position = self._by_txn.pop(txn_id, None)
        if position is None:
            return False
        del self._by_position[position]
        return True

    def first_position_of(self, txn_id: TxnId) -> Position | None:
        """The position of the first entry of ``txn_id``, or None if it is not open."""
        return self._by_txn.get(txn_id)

    def earliest(self) -> Position | None:
        """The first entry's position of the earliest open transaction, None when none is."""
        if not self._by_txn:
            return None
        position: Position = self._by_position.peekitem(0)[0]
        return position
