"""An aborted transaction's event numbers stay used (as transactions.proto documents).

Its blocks sent again with the same writer id and numbers in a new transaction
are answered as duplicates and not written; with a new writer id they are.
"""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest

from folio.api.v1 import admin_pb2, admin_pb2_grpc, transactions_pb2, transactions_pb2_grpc
from tests.support.bookies import BookieProcess
from tests.support.standalone import append_payloads, read_available


@pytest.fixture
def channel(server: BookieProcess) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(server.address) as made:
        yield made


def test_a_retry_of_an_aborted_transaction_needs_new_numbers(channel: grpc.Channel) -> None:
    admin_pb2_grpc.AdminStub(channel).CreateTopic(
        admin_pb2.CreateTopicRequest(name="txn-numbers"), timeout=30)
    txns = transactions_pb2_grpc.TransactionsStub(channel)
    blocks = [[b"a", b"b"]]

    aborted = txns.BeginTxn(transactions_pb2.BeginTxnRequest(), timeout=30).txn_id
    first = append_payloads(channel, "txn-numbers/0", "w", blocks, txn_id=aborted)
    assert first[1].data_appended.event_number == 1 and not first[1].data_appended.duplicate
    txns.AbortTxn(transactions_pb2.AbortTxnRequest(txn_id=aborted), timeout=30)

    retry = txns.BeginTxn(transactions_pb2.BeginTxnRequest(), timeout=30).txn_id
    same = append_payloads(channel, "txn-numbers/0", "w", blocks, txn_id=retry)
    assert same[0].append_setup.last_event_number == 1  # the aborted numbers
    assert same[1].data_appended.duplicate  # answered, and NOT written
    fresh = append_payloads(channel, "txn-numbers/0", "w-retry", blocks, txn_id=retry)
    assert not fresh[1].data_appended.duplicate
    txns.CommitTxn(transactions_pb2.CommitTxnRequest(txn_ids=[retry]), timeout=30)
    assert read_available(channel, "txn-numbers/0") == [b"a", b"b"]
