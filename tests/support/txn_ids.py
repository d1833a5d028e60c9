"""A test's fixed transaction ids, typed as the ``TxnId`` they are."""

from __future__ import annotations

from txnbuffer.api import TxnId
from txnbuffer.txn_ids import txn_id_from_bytes


def fixed_txn_id(raw: bytes) -> TxnId:
    """The txn id in 16 wire bytes that are not the no-transaction ones."""
    parsed = txn_id_from_bytes(raw)
    assert parsed is not None, "the all-zero bytes are no transaction"
    return parsed
