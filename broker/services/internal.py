"""The ``folio.broker.v1.BrokerInternal`` servicer: what other brokers of a cluster call.

Decode, call the domain, encode (proto/broker/v1/internal.proto says what
each call means): ``RegisterTxnSegment`` goes to the transaction coordinator
(only where it runs: ``gate`` raises WrongHost elsewhere),
``WriteTxnMarker`` to the segment owner's ``TxnParticipant`` (only for a
segment this broker serves: WrongHost elsewhere). Served on the broker's
port in cluster mode only; with token authentication only super-user roles
may call it (``broker.auth.rpc_table``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import grpc

from broker._proto.v1 import internal_pb2, internal_pb2_grpc
from broker.errors import BrokerError, InvalidArgumentError
from broker.segments.entry import EntryKind
from broker.segments.transactions import check_txn_id
from broker.services._servicer import abort_with
from broker.txn.coordinator import TxnCoordinator
from ledger.errors import LedgerError

__all__ = ["BrokerInternalServicer"]

_Context = grpc.aio.ServicerContext[Any, Any]
_Refusals = (BrokerError, LedgerError)
_KINDS = {internal_pb2.TXN_OUTCOME_COMMIT: EntryKind.COMMIT_MARKER,
          internal_pb2.TXN_OUTCOME_ABORT: EntryKind.ABORT_MARKER}

#: Writes a marker in a segment this broker serves (``ClusterTxnRoutes.participant``).
WriteMarker = Callable[[str, Any, EntryKind], Awaitable[None]]


class BrokerInternalServicer(internal_pb2_grpc.BrokerInternalServicer):
    """Serves the internal calls of the other brokers.

    Args:
        coordinator: this broker's transaction coordinator.
        gate: raises ``WrongHostError`` unless the coordinator runs here now.
        write_marker: the participant's ``write_marker(segment, txn_id, kind)``.
    """

    def __init__(self, coordinator: TxnCoordinator, gate: Callable[[], None],
                 write_marker: WriteMarker) -> None:
        self._coordinator = coordinator
        self._gate = gate
        self._write_marker = write_marker

    async def RegisterTxnSegment(
        self, request: internal_pb2.RegisterTxnSegmentRequest, context: _Context
    ) -> internal_pb2.RegisterTxnSegmentResponse:
        try:
            txn_id = check_txn_id(request.txn_id)
            if not request.segment:
                raise InvalidArgumentError("RegisterTxnSegment needs a segment")
            self._gate()
            await self._coordinator.register_segment(txn_id, request.segment)
        except _Refusals as error:
            await abort_with(context, error)
        return internal_pb2.RegisterTxnSegmentResponse()

    async def WriteTxnMarker(
        self, request: internal_pb2.WriteTxnMarkerRequest, context: _Context
    ) -> internal_pb2.WriteTxnMarkerResponse:
        try:
            txn_id = check_txn_id(request.txn_id)
            kind = _KINDS.get(request.outcome)
            if kind is None:
                raise InvalidArgumentError(
                    f"WriteTxnMarker needs outcome COMMIT or ABORT, got {request.outcome}")
            if not request.segment:
                raise InvalidArgumentError("WriteTxnMarker needs a segment")
            await self._write_marker(request.segment, txn_id, kind)
        except _Refusals as error:
            await abort_with(context, error)
        return internal_pb2.WriteTxnMarkerResponse()
