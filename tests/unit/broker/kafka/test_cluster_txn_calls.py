"""A cluster broker's calls to the Kafka transaction coordinator elsewhere, with lost answers.

``ClusterTxns.unstable_offsets`` (OffsetFetch's ``require_stable`` at a
group's coordinator) and ``abort_unknown`` (a transactional batch whose
forwarding hop stayed unanswered) ask the coordinator on another broker
through a fault wrapper at the peers' seam: an answer lost (maybe applied) is
asked again; never answered, the offsets are "not known" (answered
UNSTABLE_OFFSET_COMMIT) and the abort "not made"; a transaction decided
committed already is not reported aborted (docs/kafka.md, "Clusters").
"""

from __future__ import annotations

from typing import Any, cast

import pytest

from broker.errors import BrokerShuttingDownError, TxnStateError, WrongHostError
from broker.kafka.txns import cluster
from broker.kafka.txns.cluster import ClusterTxns
from txnbuffer.api import TxnId

pytestmark = pytest.mark.faults

COORDINATOR = "coordinator:1"
TXN: TxnId = (3, 4)


class _Owners:
    address = "group-broker:1"

    def owner_of(self, segment: str) -> str:
        return COORDINATOR


class _Producers:
    loaded = False

    def stand_down(self) -> None:
        pass


class LossyPeers:
    """The peers' seam: the first ``lose`` calls' answers are lost (or the call refused)."""

    def __init__(self, lose: int = 0, refusal: Exception | None = None) -> None:
        self.lose = lose
        self.refusal = refusal
        self.calls: list[tuple[str, Any]] = []

    def _answer(self, name: str, address: str, argument: Any) -> None:
        self.calls.append((name, argument))
        assert address == COORDINATOR
        if self.lose > 0:
            self.lose -= 1
            raise BrokerShuttingDownError(f"broker {address} did not answer the internal call "
                                          "(DEADLINE_EXCEEDED)")
        if self.refusal is not None:
            raise self.refusal

    async def pending_kafka_txn_offsets(self, address: str,
                                        group_id: str) -> list[tuple[str, int]]:
        self._answer("pending", address, group_id)
        return [("t", 1), ("t", 2)]

    async def abort_txn(self, address: str, txn_id: TxnId) -> None:
        self._answer("abort", address, txn_id)


def _txns(peers: LossyPeers) -> ClusterTxns:
    """A group broker's ``ClusterTxns``: the coordinator runs at ``COORDINATOR``."""
    return ClusterTxns(cast(Any, _Producers()), cast(Any, None), cast(Any, None),
                       cast(Any, None), cast(Any, _Owners()), cast(Any, peers),
                       lambda: False, lambda group: True, 8)


async def test_require_stable_asks_the_coordinator_again_after_a_lost_answer() -> None:
    peers = LossyPeers(lose=2)
    assert await _txns(peers).unstable_offsets("g") == {("t", 1), ("t", 2)}
    assert peers.calls == [("pending", "g")] * 3


async def test_require_stable_never_answered_is_not_known(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cluster, "STABLE_TIMEOUT_S", 0.3)
    peers = LossyPeers(lose=1_000)
    # None: the handler answers every partition UNSTABLE_OFFSET_COMMIT, never "stable".
    assert await _txns(peers).unstable_offsets("g") is None
    assert len(peers.calls) >= 2


async def test_the_coordinators_side_refuses_where_it_does_not_run() -> None:
    with pytest.raises(WrongHostError):
        await _txns(LossyPeers()).pending_offsets("g")


async def test_an_abort_whose_answer_is_lost_is_asked_again() -> None:
    peers = LossyPeers(lose=1)
    assert await _txns(peers).abort_unknown(TXN) is True
    assert peers.calls == [("abort", TXN)] * 2


async def test_an_abort_finds_the_transaction_decided() -> None:
    aborted = LossyPeers(lose=1, refusal=TxnStateError("0" * 32, "OPEN", "ABORTED"))
    assert await _txns(aborted).abort_unknown(TXN) is True  # (the lost call aborted it)
    committed = LossyPeers(refusal=TxnStateError("0" * 32, "OPEN", "COMMITTED"))
    assert await _txns(committed).abort_unknown(TXN) is False
    assert committed.calls == [("abort", TXN)]


async def test_an_abort_never_answered_is_not_made(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cluster, "ABORT_TIMEOUT_S", 0.3)
    peers = LossyPeers(lose=1_000)
    assert await _txns(peers).abort_unknown(TXN) is False
    assert len(peers.calls) >= 2
