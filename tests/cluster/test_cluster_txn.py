"""The transaction coordinator in a cluster: one broker runs it, and it moves with its container.

Real processes (ZooKeeper, 3 bookies E=3/Qw=2/Qa=2, 3 brokers), raw gRPC stubs.
The coordinator runs on the owner of the container of ``_txnlog/0``; the topic
here is named so that its segment is in that same container (it moves with the
coordinator). Transactions over segments of several brokers:
``tests/cluster/test_cluster_txn_brokers.py``.
"""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from bench._cluster_client import list_brokers, read_segment
from broker.cluster.containers import container_of
from folio.api.v1 import (
    append_pb2,
    append_pb2_grpc,
    events_pb2,
    transactions_pb2,
    transactions_pb2_grpc,
)
from tests.cluster.test_failover import _create_topic_named
from tests.support.bookies import BookieProcesses
from tests.support.cluster_load import COUNT
from tests.support.cluster_load import start_cluster as _cluster
from tests.support.wait import wait_for

COORDINATOR = container_of("_txnlog/0", COUNT)


def _colocated_topic() -> str:
    return next(f"tx{i}" for i in range(1000) if container_of(f"tx{i}/0", COUNT) == COORDINATOR)


def _coordinator(address: str) -> str:
    """The broker owning the coordinator's container, as ``address`` sees it ("" if none)."""
    return next((b.address for b in list_brokers(address).brokers
                 if COORDINATOR in b.containers), "")


def _append(address: str, segment: str, txn_id: bytes, number: int) -> str | None:
    block = events_pb2.EventBlock(format_version=1, payloads=[b"e%d" % number])
    with grpc.insecure_channel(address) as channel:
        replies = append_pb2_grpc.AppendStub(channel).Append(iter([
            append_pb2.AppendCommand(request_id=1 << 32, setup_append=append_pb2.SetupAppend(
                segment=segment, writer_id="txn-writer", txn_id=txn_id)),
            append_pb2.AppendCommand(request_id=(1 << 32) | 1, append_block=append_pb2.AppendBlock(
                data=block.SerializeToString(), event_count=1, last_event_number=number,
                end=True))]), timeout=30)
        return [reply.WhichOneof("reply") for reply in replies][-1]


@pytest.mark.timeout(300)
def test_a_transaction_survives_the_sigkill_of_its_coordinator(
        zk_url: str, bookie_processes: BookieProcesses, tmp_path: Path) -> None:
    _, brokers = _cluster(bookie_processes, zk_url, tmp_path)
    addresses = [b.address for b in brokers]
    topic = _colocated_topic()
    _create_topic_named(addresses[0], topic, 1)
    segment = f"{topic}/0"
    coordinator = _coordinator(addresses[0])
    other = next(a for a in addresses if a != coordinator)
    with grpc.insecure_channel(other) as channel:
        with pytest.raises(grpc.RpcError) as refused:
            transactions_pb2_grpc.TransactionsStub(channel).BeginTxn(
                transactions_pb2.BeginTxnRequest(timeout_ms=60_000), timeout=10)
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
        assert coordinator in (refused.value.details() or "")  # WrongHost names it
    with grpc.insecure_channel(coordinator) as channel:
        txn_id = transactions_pb2_grpc.TransactionsStub(channel).BeginTxn(
            transactions_pb2.BeginTxnRequest(timeout_ms=120_000), timeout=10).txn_id
    assert _append(coordinator, segment, txn_id, 0) == "data_appended"
    next(b for b in brokers if b.address == coordinator).kill()
    survivors = [a for a in addresses if a != coordinator]
    wait_for(lambda: _coordinator(survivors[0]) in survivors, "a new coordinator", 60)
    successor = _coordinator(survivors[0])
    # The successor replayed the log: the transaction is still OPEN and takes more.
    answers: list[transactions_pb2.GetTxnStatusResponse] = []

    def answered() -> bool:
        with grpc.insecure_channel(successor) as channel:
            try:
                answers.append(transactions_pb2_grpc.TransactionsStub(channel).GetTxnStatus(
                    transactions_pb2.GetTxnStatusRequest(txn_id=txn_id), timeout=10))
            except grpc.RpcError as error:  # still taking over: WrongHost
                assert error.code() == grpc.StatusCode.UNAVAILABLE, error
                return False
        return True

    wait_for(answered, "the successor took the transactions over", 60)
    status = answers[-1]
    assert status.state == transactions_pb2.TxnState.Value("OPEN")
    assert _append(successor, segment, txn_id, 1) == "data_appended"
    with grpc.insecure_channel(successor) as channel:
        stub = transactions_pb2_grpc.TransactionsStub(channel)
        stub.CommitTxn(transactions_pb2.CommitTxnRequest(txn_ids=[txn_id]), timeout=30)
        assert stub.GetTxnStatus(transactions_pb2.GetTxnStatusRequest(txn_id=txn_id),
                                 timeout=10).state == transactions_pb2.TxnState.Value(
                                     "COMMITTED")
    assert read_segment(survivors, segment, committed=True) == [b"e0", b"e1"]
