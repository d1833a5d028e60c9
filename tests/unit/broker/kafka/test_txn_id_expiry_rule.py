"""``phases.expired``: which transactional ids ``transactional.id.expiration.ms`` forgets.

Kafka's rule: only an id whose last transaction ended, its expiration after
its last update; an open, deciding or finishing transaction never; a timed-out
one counts from its deadline.
"""

from __future__ import annotations

import pytest

from broker.kafka.txns.phases import expired
from broker.kafka.txns.records import TxnProducer
from broker.txn.coordinator import TxnState, TxnStatus
from txnbuffer.api import TxnId

EXPIRATION_MS = 1_000
NOW_MS = 1_000_000
OPEN_TXN: TxnId = (1, 1)
LAST_TXN: TxnId = (1, 2)


def _producer(last_update_ms: int, txn: TxnId | None = None,
              last: TxnId | None = None) -> TxnProducer:
    return TxnProducer("tid", 7, 0, 60_000, txn, last_txn_id=last,
                       last_update_ms=last_update_ms)


def test_an_idle_id_expires_after_its_last_update() -> None:
    def status(_: TxnId) -> TxnStatus | None:
        return None

    assert not expired(_producer(NOW_MS - EXPIRATION_MS + 1), status, NOW_MS, EXPIRATION_MS)
    assert expired(_producer(NOW_MS - EXPIRATION_MS), status, NOW_MS, EXPIRATION_MS)


@pytest.mark.parametrize("state", [TxnState.OPEN, TxnState.COMMITTING, TxnState.COMMITTED,
                                   TxnState.ABORTING])
def test_a_transaction_not_ended_never_expires(state: TxnState) -> None:
    def status(_: TxnId) -> TxnStatus | None:
        return TxnStatus(state, (), 0)

    assert not expired(_producer(0, OPEN_TXN), status, NOW_MS, EXPIRATION_MS)
    # The last one's markers still being written: not yet either.
    if state in (TxnState.COMMITTING, TxnState.ABORTING):
        assert not expired(_producer(0, None, LAST_TXN), status, NOW_MS, EXPIRATION_MS)


def test_a_timed_out_transaction_counts_from_its_deadline() -> None:
    deadline_ms = NOW_MS - EXPIRATION_MS + 5

    def status(_: TxnId) -> TxnStatus | None:
        return TxnStatus(TxnState.TIMED_OUT, (), deadline_ms)

    assert not expired(_producer(0, OPEN_TXN), status, NOW_MS, EXPIRATION_MS)
    assert expired(_producer(0, OPEN_TXN), status, NOW_MS + 5, EXPIRATION_MS)
