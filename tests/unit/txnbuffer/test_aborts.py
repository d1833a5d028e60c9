"""AbortedTxns: ordered by marker position, indexed by txn id, trimmed by ledger."""

from __future__ import annotations

from txnbuffer import AbortedTxns, OngoingTxns, Position


def test_orders_by_marker_position_and_keeps_first_marker() -> None:
    aborts = AbortedTxns()
    assert aborts.add((0, 3), Position(2, 0))
    assert aborts.add((0, 1), Position(1, 5))
    assert aborts.add((0, 2), Position(1, 7))
    assert not aborts.add((0, 1), Position(3, 0))  # a second marker changes nothing
    assert [txn for _, txn in aborts.items()] == [(0, 1), (0, 2), (0, 3)]
    assert aborts.position_of((0, 1)) == Position(1, 5)
    assert (0, 2) in aborts
    assert (9, 9) not in aborts


def test_remove_through_ledger_drops_a_prefix() -> None:
    aborts = AbortedTxns()
    aborts.update([((0, i), Position(i // 3, i % 3)) for i in range(9)])
    assert aborts.remove_through_ledger(1) == 6
    assert [txn for _, txn in aborts.items()] == [(0, 6), (0, 7), (0, 8)]
    assert (0, 0) not in aborts
    assert aborts.remove_through_ledger(1) == 0
    assert len(aborts) == 3


def test_ongoing_earliest() -> None:
    ongoing = OngoingTxns()
    assert ongoing.earliest() is None
    ongoing.begin((0, 2), Position(0, 4))
    ongoing.begin((0, 1), Position(0, 2))
    assert not ongoing.begin((0, 1), Position(0, 9))
    assert ongoing.earliest() == Position(0, 2)
    assert ongoing.end((0, 1))
    assert not ongoing.end((0, 1))
    assert ongoing.earliest() == Position(0, 4)
