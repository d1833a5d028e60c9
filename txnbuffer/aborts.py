"""Aborted transactions of one segment, ordered by the position of their abort marker.

Two indexes over the same pairs: a sorted map ``position -> txn_id`` (a
``sortedcontainers.SortedDict``, a B-tree-like list of sorted lists: O(log n)
insert, ordered iteration, cheap removal of a prefix), which snapshots iterate
and retention trims from the front, and a plain dict ``txn_id -> position`` for
the O(1) "is this transaction aborted?" check made for every transactional
entry a ``read_committed`` reader is served.

Keeping the order of marker positions is what makes chunked snapshots safe
(PIP-178): chunk ``i`` of a newer snapshot always reaches at least as far in
marker positions as chunk ``i`` of an older one, because the newer list is the
older one with a prefix removed and later markers appended.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from sortedcontainers import SortedDict  # type: ignore[import-untyped]

from txnbuffer.api import Position, TxnId

__all__ = ["AbortedTxns"]


class AbortedTxns:
    """Aborted transaction ids with the position of their abort marker.

    A transaction is recorded once, at its first abort marker: a coordinator
    that crashed while writing markers may write a second one later, which
    changes nothing.
    """

    __slots__ = ("_by_position", "_by_txn")

    def __init__(self) -> None:
        self._by_position = SortedDict()
        self._by_txn: dict[TxnId, Position] = {}

    def __len__(self) -> int:
        return len(self._by_txn)

    def __contains__(self, txn_id: object) -> bool:
        return txn_id in self._by_txn

    def add(self, txn_id: TxnId, position: Position) -> bool:
        """Record ``txn_id`` as aborted by the marker at ``position``.

        Args:
            txn_id: the aborted transaction.
            position: where its abort marker is.

        Returns:
            True if it was new; False if it was already recorded (the first
            marker's position is kept).
        """
        if txn_id in self._by_txn:
            return False
        self._by_txn[txn_id] = position
        self._by_position[position] = txn_id
        return True

    def update(self, pairs: Iterable[tuple[TxnId, Position]]) -> None:
        """Add many ``(txn_id, position)`` pairs at once (recovery loads snapshots so).

        Much faster than ``add`` per pair when the map is empty: both indexes
        are built in bulk. A transaction already recorded keeps its position.
        """
        if not self._by_txn:
            by_txn: dict[TxnId, Position] = {}
            for txn_id, position in pairs:
                by_txn.setdefault(txn_id, position)
            self._by_txn = by_txn
            self._by_position = SortedDict(zip(by_txn.values(), by_txn.keys(), strict=True))
            return
        for txn_id, position in pairs:
            self.add(txn_id, position)

    def position_of(self, txn_id: TxnId) -> Position | None:
        """Where the abort marker of ``txn_id`` is, or None if it is not aborted."""
        return self._by_txn.get(txn_id)

    def items(self) -> Iterator[tuple[Position, TxnId]]:
        """``(marker position, txn_id)`` pairs in position order."""
        by_position = self._by_position
        for position in by_position.keys():  # noqa: SIM118 - SortedDict view, ordered
            yield position, by_position[position]

    def sorted_pairs(self) -> tuple[list[Position], list[TxnId]]:
        """All marker positions and txn ids, in position order, as two parallel lists."""
        by_position = self._by_position
        positions: list[Position] = list(by_position.keys())
        txn_ids: list[TxnId] = list(map(by_position.__getitem__, positions))
        return positions, txn_ids

    def remove_through_ledger(self, ledger_id: int) -> int:
        """Drop, in position order, every abort whose marker lies in a ledger <= ``ledger_id``.

        Retention deletes a segment's ledgers from the oldest, so deleting
        ``ledger_id`` means every earlier ledger is gone as well; the aborts
        removed are always a prefix of the position order.

        Returns:
            How many aborts were removed.
        """
        by_position = self._by_position
        stop = by_position.bisect_left(Position(ledger_id + 1, -1))
        if stop == 0:
            return 0
        doomed = list(by_position.islice(0, stop))
        by_txn = self._by_txn
        for position in doomed:
            del by_txn[by_position.pop(position)]
        return len(doomed)
