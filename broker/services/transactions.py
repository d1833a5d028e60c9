"""The ``folio.v1.Transactions`` servicer: decode, call the ``TxnCoordinator``, encode.

Txn ids cross here: the request's 16 bytes become a ``TxnId``
(``check_txn_id``: bad bytes get INVALID_ARGUMENT) and back for the reply.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc

from broker.errors import BrokerError, InvalidArgumentError
from broker.segments.transactions import check_txn_id
from broker.services._servicer import abort_with
from broker.txn.commit_keys import CommitKeys
from broker.txn.coordinator import TxnCoordinator
from folio.api.v1 import transactions_pb2, transactions_pb2_grpc
from ledger.errors import LedgerError
from txnbuffer.txn_ids import txn_id_to_bytes

__all__ = ["TransactionsServicer"]

_Context = grpc.aio.ServicerContext[Any, Any]
_Refusals = (BrokerError, LedgerError)


class TransactionsServicer(transactions_pb2_grpc.TransactionsServicer):
    """Begin, commit, abort and describe transactions."""

    def __init__(self, coordinator: TxnCoordinator,
                 commit_keys: CommitKeys | None = None,
                 gate: Callable[[], None] | None = None) -> None:
        self._coordinator = coordinator
        self._commit_keys = commit_keys
        #: A cluster broker's check that the coordinator runs here (WrongHostError).
        self._gate = gate or (lambda: None)

    async def BeginTxn(
        self, request: transactions_pb2.BeginTxnRequest, context: _Context
    ) -> transactions_pb2.BeginTxnResponse:
        try:
            self._gate()
            txn_id = await self._coordinator.begin(request.timeout_ms, request.label)
        except _Refusals as error:
            await abort_with(context, error)
        return transactions_pb2.BeginTxnResponse(txn_id=txn_id_to_bytes(txn_id))

    async def CommitTxn(
        self, request: transactions_pb2.CommitTxnRequest, context: _Context
    ) -> transactions_pb2.CommitTxnResponse:
        try:
            self._gate()
            txn_ids = [check_txn_id(raw) for raw in request.txn_ids]
            if request.commit_key:
                if self._commit_keys is None:
                    raise InvalidArgumentError("this broker does not keep commit keys")
                committed = await self._commit_keys.commit(
                    request.commit_key, request.commit_sequence, txn_ids)
                return transactions_pb2.CommitTxnResponse(duplicate=not committed)
            await self._coordinator.commit(txn_ids)
        except _Refusals as error:
            await abort_with(context, error)
        return transactions_pb2.CommitTxnResponse()

    async def AbortTxn(
        self, request: transactions_pb2.AbortTxnRequest, context: _Context
    ) -> transactions_pb2.AbortTxnResponse:
        try:
            self._gate()
            await self._coordinator.abort(check_txn_id(request.txn_id))
        except _Refusals as error:
            await abort_with(context, error)
        return transactions_pb2.AbortTxnResponse()

    async def AbortTxns(
        self, request: transactions_pb2.AbortTxnsRequest, context: _Context
    ) -> transactions_pb2.AbortTxnsResponse:
        try:
            self._gate()
            keep = [check_txn_id(raw) for raw in request.keep]
            aborted = await self._coordinator.abort_labelled(request.label, keep,
                                                             close=request.close)
        except _Refusals as error:
            await abort_with(context, error)
        return transactions_pb2.AbortTxnsResponse(
            aborted=[txn_id_to_bytes(txn_id) for txn_id in aborted])

    async def GetTxnStatus(
        self, request: transactions_pb2.GetTxnStatusRequest, context: _Context
    ) -> transactions_pb2.GetTxnStatusResponse:
        try:
            self._gate()
            status = await self._coordinator.durable_status(check_txn_id(request.txn_id))
        except _Refusals as error:
            await abort_with(context, error)
        return transactions_pb2.GetTxnStatusResponse(
            state=transactions_pb2.TxnState.Value(status.state.name),
            segments=status.segments, deadline_ms=status.deadline_ms)
