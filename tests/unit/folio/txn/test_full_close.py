"""``abort_open``: a transactional writer closes within one deadline, naming what it left."""

from __future__ import annotations

import pytest

from folio.errors import FolioUnavailableError, TimeoutError, TxnNotFoundError, TxnStateError
from folio.txn._full_close import abort_open


class _Txn:
    def __init__(self, number: int, error: Exception | None = None) -> None:
        self.txn_id = bytes([number]) * 16
        self.error = error
        self.timeouts: list[float | None] = []

    def abort(self, timeout: float | None = None) -> None:
        self.timeouts.append(timeout)
        if self.error is not None:
            raise self.error


def test_decided_and_forgotten_transactions_need_nothing() -> None:
    txns = [_Txn(1), _Txn(2, TxnStateError("committed")), _Txn(3, TxnNotFoundError("gone"))]
    abort_open(txns, timeout_s=10, topic="t", txn_timeout_ms=60_000)
    assert all(len(txn.timeouts) == 1 for txn in txns)
    assert all(0 < (txn.timeouts[0] or 0) <= 10 for txn in txns)


def test_undecided_aborts_are_named_with_the_brokers_timeout() -> None:
    unreachable = FolioUnavailableError("the broker is away")
    txns = [_Txn(1), _Txn(2, unreachable), _Txn(3)]
    with pytest.raises(TimeoutError) as raised:
        abort_open(txns, timeout_s=10, topic="orders", txn_timeout_ms=60_000)
    assert raised.value.context["txn_ids"] == [txns[1].txn_id.hex()]
    assert raised.value.__cause__ is unreachable
    assert not raised.value.retriable
    assert "'orders'" in str(raised.value) and "txn_timeout_ms (60000 ms)" in str(raised.value)


def test_past_the_deadline_none_is_tried() -> None:
    txns = [_Txn(1), _Txn(2)]
    with pytest.raises(TimeoutError) as raised:
        abort_open(txns, timeout_s=0, topic="t", txn_timeout_ms=1_000)
    assert raised.value.context["txn_ids"] == [txn.txn_id.hex() for txn in txns]
    assert all(not txn.timeouts for txn in txns)
