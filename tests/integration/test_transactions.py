"""Transactions through a real ``folio standalone``, with raw gRPC stubs (no SDK).

Begin, transactional appends to two segments, read_committed sees nothing until
the commit and then everything; an abort is never visible; commit after abort
is FAILED_PRECONDITION naming the expected and actual states; a crash between
the COMMITTING record and the markers is finished on restart, exactly once.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import grpc
import pytest

from folio.api.v1 import (
    admin_pb2,
    admin_pb2_grpc,
    read_pb2,
    transactions_pb2,
    transactions_pb2_grpc,
)
from tests.support.bookies import BookieProcesses
from tests.support.standalone import append_payloads, read_available, start_standalone
from tests.support.trailers import trailers

SEGMENTS = ("tx/0", "tx/1")
UNCOMMITTED = read_pb2.ReadRequest.READ_UNCOMMITTED


def _setup(channel: grpc.Channel) -> transactions_pb2_grpc.TransactionsStub:
    admin_pb2_grpc.AdminStub(channel).CreateTopic(
        admin_pb2.CreateTopicRequest(name="tx", segment_count=2), timeout=30)
    return transactions_pb2_grpc.TransactionsStub(channel)


def _write(channel: grpc.Channel, txn_id: bytes, tag: str, writer: str = "w") -> None:
    for segment in SEGMENTS:
        replies = append_payloads(channel, segment, writer,
                                  [[f"{tag}-{segment}-{i}".encode()] for i in range(3)],
                                  txn_id=txn_id)
        assert all(r.HasField("append_setup") or r.HasField("data_appended") for r in replies), \
            replies


def _expected(tag: str, segment: str) -> list[bytes]:
    return [f"{tag}-{segment}-{i}".encode() for i in range(3)]


def _state(stub: transactions_pb2_grpc.TransactionsStub, txn_id: bytes) -> int:
    status = stub.GetTxnStatus(transactions_pb2.GetTxnStatusRequest(txn_id=txn_id), timeout=30)
    return int(status.state)


def test_commit_abort_and_illegal_transition(
    bookie_processes: BookieProcesses, tmp_path: Path
) -> None:
    server = start_standalone(bookie_processes, tmp_path / "data")
    with grpc.insecure_channel(server.address) as channel:
        stub = _setup(channel)
        txn = stub.BeginTxn(transactions_pb2.BeginTxnRequest(timeout_ms=60_000),
                            timeout=30).txn_id
        assert len(txn) == 16
        _write(channel, txn, "c")
        status = stub.GetTxnStatus(transactions_pb2.GetTxnStatusRequest(txn_id=txn), timeout=30)
        assert status.state == transactions_pb2.OPEN
        assert sorted(status.segments) == list(SEGMENTS)
        for segment in SEGMENTS:
            assert read_available(channel, segment) == []
            assert read_available(channel, segment, isolation=UNCOMMITTED) == _expected(
                "c", segment)
        stub.CommitTxn(transactions_pb2.CommitTxnRequest(txn_ids=[txn]), timeout=30)
        assert _state(stub, txn) == transactions_pb2.COMMITTED
        for segment in SEGMENTS:
            assert read_available(channel, segment) == _expected("c", segment)

        aborted = stub.BeginTxn(transactions_pb2.BeginTxnRequest(), timeout=30).txn_id
        _write(channel, aborted, "a", writer="w2")
        stub.AbortTxn(transactions_pb2.AbortTxnRequest(txn_id=aborted), timeout=30)
        assert _state(stub, aborted) == transactions_pb2.ABORTED
        for segment in SEGMENTS:
            assert read_available(channel, segment) == _expected("c", segment)
            assert read_available(channel, segment, isolation=UNCOMMITTED) == [
                *_expected("c", segment), *_expected("a", segment)]
        with pytest.raises(grpc.RpcError) as raised:
            stub.CommitTxn(transactions_pb2.CommitTxnRequest(txn_ids=[aborted]), timeout=30)
        error = raised.value
        assert error.code() == grpc.StatusCode.FAILED_PRECONDITION
        metadata = trailers(error)
        assert metadata["folio-error"] == "TxnStateError"
        context = json.loads(metadata["folio-error-context"])
        assert (context["expected"], context["actual"]) == ("OPEN", "ABORTED")
        # Writing after the end is refused too.
        replies = append_payloads(channel, SEGMENTS[0], "w3", [[b"late"]], txn_id=aborted)
        assert replies[-1].append_failed.error == "TxnStateError"


@pytest.mark.faults
def test_crash_after_committing_is_finished_on_restart(
    bookie_processes: BookieProcesses, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    server = start_standalone(bookie_processes, data_dir,
                              module="tests.support.crash_after_committing")
    with grpc.insecure_channel(server.address) as channel:
        stub = _setup(channel)
        first = stub.BeginTxn(transactions_pb2.BeginTxnRequest(), timeout=30).txn_id
        second = stub.BeginTxn(transactions_pb2.BeginTxnRequest(), timeout=30).txn_id
        _write(channel, first, "f")
        _write(channel, second, "s", writer="w2")
        with pytest.raises(grpc.RpcError):  # the process exits after logging COMMITTING
            stub.CommitTxn(transactions_pb2.CommitTxnRequest(txn_ids=[first, second]),
                           timeout=30)
    server.kill()
    server = start_standalone(bookie_processes, data_dir)
    with grpc.insecure_channel(server.address) as channel:
        stub = transactions_pb2_grpc.TransactionsStub(channel)
        assert _state(stub, first) == _state(stub, second) == transactions_pb2.COMMITTED
        for segment in SEGMENTS:
            # Each event exactly once, where it was written.
            assert read_available(channel, segment) == [
                *_expected("f", segment), *_expected("s", segment)]
        with pytest.raises(grpc.RpcError) as raised:
            stub.CommitTxn(transactions_pb2.CommitTxnRequest(txn_ids=[first]), timeout=30)
        assert raised.value.code() == grpc.StatusCode.FAILED_PRECONDITION


@pytest.mark.parametrize("bad", [b"short", bytes(16)], ids=["short", "all-zero"])
def test_bad_txn_id_bytes_are_invalid_argument_at_every_rpc(
    bookie_processes: BookieProcesses, tmp_path: Path, bad: bytes
) -> None:
    # The servicers turn the 16 wire bytes into a TxnId (the broker's one form
    # inside); bytes that are not one are refused there, naming the rule.
    server = start_standalone(bookie_processes, tmp_path / "data")
    message = "a txn_id must be 16 bytes and not all zero"
    with grpc.insecure_channel(server.address) as channel:
        stub = _setup(channel)
        calls: list[Callable[[], object]] = [
            lambda: stub.CommitTxn(transactions_pb2.CommitTxnRequest(txn_ids=[bad]), timeout=30),
            lambda: stub.AbortTxn(transactions_pb2.AbortTxnRequest(txn_id=bad), timeout=30),
            lambda: stub.GetTxnStatus(transactions_pb2.GetTxnStatusRequest(txn_id=bad),
                                      timeout=30),
            lambda: stub.AbortTxns(transactions_pb2.AbortTxnsRequest(label="job", keep=[bad]),
                                   timeout=30),
        ]
        for call in calls:
            with pytest.raises(grpc.RpcError) as raised:
                call()
            assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert message in str(raised.value.details())
        # On Append the setup of that flow is refused (the stream goes on).
        replies = append_payloads(channel, SEGMENTS[0], "w", [[b"never"]], txn_id=bad)
        assert replies[0].append_failed.code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
        assert message in replies[0].append_failed.message
        assert read_available(channel, SEGMENTS[0], isolation=UNCOMMITTED) == []
