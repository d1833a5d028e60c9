"""The ``folio.broker.v1.BrokerInternal`` servicer: what other brokers of a cluster call.

Decode, call the domain, encode (proto/broker/v1/internal.proto says what
each call means): ``RegisterTxnSegment`` goes to the transaction coordinator
(only where it runs: ``gate`` raises WrongHost elsewhere),
``WriteTxnMarker`` to the segment owner's ``TxnParticipant`` (only for a
segment this broker serves: WrongHost elsewhere), the three Kafka
transaction calls to the Kafka front-end's ``KafkaTxnService`` (WrongHost
where no Kafka listener runs). Served on the broker's
port in cluster mode only; with token authentication only super-user roles
may call it (``broker.auth.rpc_table``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import grpc

from broker._proto.v1 import internal_pb2, internal_pb2_grpc
from broker.cluster.containers import COORDINATOR_SEGMENT
from broker.cluster.kafka_txns import KafkaTxnService
from broker.cluster.peers import offset_message, offset_of
from broker.errors import BrokerError, InvalidArgumentError, WrongHostError
from broker.segments.entry import EntryKind
from broker.segments.transactions import check_txn_id
from broker.services._servicer import abort_with
from broker.txn.coordinator import TxnCoordinator
from ledger.errors import LedgerError
from txnbuffer.txn_ids import txn_id_to_bytes

__all__ = ["BrokerInternalServicer"]

_Context = grpc.aio.ServicerContext[Any, Any]
_Refusals = (BrokerError, LedgerError)
_KINDS = {internal_pb2.TXN_OUTCOME_COMMIT: EntryKind.COMMIT_MARKER,
          internal_pb2.TXN_OUTCOME_ABORT: EntryKind.ABORT_MARKER}

#: Writes a marker in a segment this broker serves (``ClusterTxnRoutes.participant``).
WriteMarker = Callable[[str, Any, EntryKind], Awaitable[None]]
#: The Kafka transactions of this broker (None: no Kafka listener, or not started yet).
KafkaTxns = Callable[[], KafkaTxnService | None]


class BrokerInternalServicer(internal_pb2_grpc.BrokerInternalServicer):
    """Serves the internal calls of the other brokers.

    Args:
        coordinator: this broker's transaction coordinator.
        gate: raises ``WrongHostError`` unless the coordinator runs here now.
        write_marker: the participant's ``write_marker(segment, txn_id, kind)``.
        kafka: this broker's Kafka transactions, once its listener started.
    """

    def __init__(self, coordinator: TxnCoordinator, gate: Callable[[], None],
                 write_marker: WriteMarker, kafka: KafkaTxns = lambda: None) -> None:
        self._coordinator = coordinator
        self._gate = gate
        self._write_marker = write_marker
        self._kafka = kafka

    def _kafka_txns(self) -> KafkaTxnService:
        kafka = self._kafka()
        if kafka is None:  # no Kafka listener here: not the Kafka transaction coordinator
            raise WrongHostError(COORDINATOR_SEGMENT, "")
        return kafka

    async def FindKafkaTxn(
        self, request: internal_pb2.FindKafkaTxnRequest, context: _Context
    ) -> internal_pb2.FindKafkaTxnResponse:
        try:
            if request.topic:  # KIP-890: the batch's partition checked (or added)
                code, txn_id = await self._kafka_txns().check_txn_partition(
                    request.transactional_id, request.producer_id, request.producer_epoch,
                    request.topic, request.partition, request.add_partition), None
            else:
                code, txn_id = await self._kafka_txns().find_txn(
                    request.transactional_id, request.producer_id, request.producer_epoch)
        except _Refusals as error:
            await abort_with(context, error)
        return internal_pb2.FindKafkaTxnResponse(
            error_code=code, txn_id=b"" if txn_id is None else txn_id_to_bytes(txn_id))

    async def AddKafkaTxnOffsets(
        self, request: internal_pb2.AddKafkaTxnOffsetsRequest, context: _Context
    ) -> internal_pb2.AddKafkaTxnOffsetsResponse:
        try:
            if not request.group_id:
                raise InvalidArgumentError("AddKafkaTxnOffsets needs a group_id")
            answers = await self._kafka_txns().add_offsets(
                request.transactional_id, request.producer_id, request.producer_epoch,
                request.group_id, [offset_of(item) for item in request.offsets],
                request.begin_txn)
        except _Refusals as error:
            await abort_with(context, error)
        return internal_pb2.AddKafkaTxnOffsetsResponse(
            offsets=[offset_message(item) for item in answers])

    async def CommitKafkaTxnOffsets(
        self, request: internal_pb2.CommitKafkaTxnOffsetsRequest, context: _Context
    ) -> internal_pb2.CommitKafkaTxnOffsetsResponse:
        try:
            if not request.group_id:
                raise InvalidArgumentError("CommitKafkaTxnOffsets needs a group_id")
            answers = await self._kafka_txns().commit_offsets(
                request.group_id, [offset_of(item) for item in request.offsets])
        except _Refusals as error:
            await abort_with(context, error)
        return internal_pb2.CommitKafkaTxnOffsetsResponse(
            offsets=[offset_message(item) for item in answers])

    async def PendingKafkaTxnOffsets(
        self, request: internal_pb2.PendingKafkaTxnOffsetsRequest, context: _Context
    ) -> internal_pb2.PendingKafkaTxnOffsetsResponse:
        try:
            if not request.group_id:
                raise InvalidArgumentError("PendingKafkaTxnOffsets needs a group_id")
            pending = await self._kafka_txns().pending_offsets(request.group_id)
        except _Refusals as error:
            await abort_with(context, error)
        return internal_pb2.PendingKafkaTxnOffsetsResponse(offsets=[
            internal_pb2.KafkaTxnOffset(topic=topic, partition=partition)
            for topic, partition in pending])

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
