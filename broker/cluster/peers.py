"""``PeerClients``: one cluster broker calling another over the internal protocol.

The calls of ``proto/broker/v1/internal.proto`` (``folio.broker.v1.BrokerInternal``)
and ``kafka_internal.proto`` (``KafkaInternal``: a Kafka batch for a heir),
served on every broker's normal port with the same TLS. Each peer gets one
``grpc.aio`` channel, opened on first use; with TLS the channel trusts
``PeerSecurity.tls``'s CA and presents its certificate (mutual TLS), and with a
token file every call carries ``authorization: Bearer <token>`` (a role the
brokers list as a super-user).

A refusal comes back as the broker error it was (``WrongHostError`` with the
owner it names, ``TxnStateError``, ``TxnNotFoundError``, ``NoSuchSegmentError``
...), rebuilt from the trailing metadata every broker answers with
(``broker.status``). A peer that does not answer (down, cut, past the
deadline) raises ``BrokerShuttingDownError`` naming it (retriable,
UNAVAILABLE to a client whose append needed the call); so does any other
status without an error this module rebuilds.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass
from typing import Any, Final

import grpc

from broker._proto.v1 import (
    internal_pb2,
    internal_pb2_grpc,
    kafka_internal_pb2,
    kafka_internal_pb2_grpc,
)
from broker.cluster.kafka_txns import TxnOffset
from broker.errors import (
    BrokerError,
    BrokerShuttingDownError,
    InvalidArgumentError,
    NoSuchSegmentError,
    PermissionDeniedError,
    TopicNotFoundError,
    TxnNotFoundError,
    TxnStateError,
    WrongHostError,
)
from folio.api.v1 import transactions_pb2, transactions_pb2_grpc
from ledger.security.tls import ClientTls, ReloadingChannelCredentials
from ledger.security.tokens import TokenFile
from txnbuffer.api import TxnId
from txnbuffer.txn_ids import txn_id_from_bytes, txn_id_to_bytes

__all__ = ["CALL_TIMEOUT_S", "PeerClients", "PeerSecurity", "offset_message", "offset_of"]

log = logging.getLogger(__name__)

#: Deadline of one internal call (a marker waits for appends in flight and a ledger write).
CALL_TIMEOUT_S: Final = 15.0

_OPTIONS: Final[tuple[tuple[str, Any], ...]] = (
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    # The ping's answer is awaited for http2.ping_timeout_ms (one minute by
    # default), not keepalive_timeout_ms: a silent peer is left after 10 s.
    ("grpc.http2.ping_timeout_ms", 10_000),
)


@dataclass(frozen=True)
class PeerSecurity:
    """How a broker reaches the others: TLS (None: plain text) and a token file ("": none)."""

    tls: ClientTls | None = None
    token_file: str = ""


def _rebuild(error: grpc.aio.AioRpcError, address: str) -> BrokerError:
    """The broker error a peer answered with (``broker.status``'s metadata)."""
    metadata: dict[str, str] = {}
    for item in tuple(error.trailing_metadata() or ()):
        # (key, value) pairs: plain tuples from grpc.aio.
        if isinstance(item, tuple) and len(item) == 2 and isinstance(item[1], str):
            metadata[str(item[0])] = item[1]
    name = metadata.get("folio-error", "")
    try:
        context = json.loads(metadata.get("folio-error-context", "{}"))
    except ValueError:
        context = {}
    if not isinstance(context, dict):
        context = {}
    details = error.details() or ""
    try:
        if name == "WrongHostError":
            return WrongHostError(str(context["segment"]), str(context.get("owner", "")))
        if name == "TxnStateError":
            return TxnStateError(str(context["txn_id"]), str(context["expected"]),
                                 str(context["actual"]))
        if name == "TxnNotFoundError":
            return TxnNotFoundError(str(context["txn_id"]))
    except KeyError:
        pass
    if name == "NoSuchSegmentError":
        return NoSuchSegmentError(str(context.get("segment", "")), f"broker {address}: {details}")
    if name == "TopicNotFoundError":
        return TopicNotFoundError(str(context.get("topic", "")))
    code = error.code()
    if code is grpc.StatusCode.INVALID_ARGUMENT:
        return InvalidArgumentError(f"broker {address}: {details}")
    if code in (grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED):
        return PermissionDeniedError(f"broker {address} refused the internal call "
                                     f"({code.name}): {details}")
    return BrokerShuttingDownError(f"broker {address} did not answer the internal call "
                                   f"({code.name}): {details}")


class PeerClients:
    """Clients of the other brokers, by address (see the module docstring).

    Raises (at construction): ``ValueError`` for a TLS or token file that
    cannot be read.
    """

    def __init__(self, security: PeerSecurity | None = None) -> None:
        security = security or PeerSecurity()
        self._tls = ReloadingChannelCredentials(security.tls) if security.tls else None
        self._token = TokenFile(security.token_file) if security.token_file else None
        self._channels: dict[str, tuple[grpc.aio.Channel, int]] = {}
        self._closed = False

    def _stub(self, address: str) -> internal_pb2_grpc.BrokerInternalAsyncStub:
        stub: internal_pb2_grpc.BrokerInternalAsyncStub = \
            internal_pb2_grpc.BrokerInternalStub(self._channel(address))
        return stub

    def _channel(self, address: str) -> grpc.aio.Channel:
        if self._closed:
            raise BrokerShuttingDownError("the broker is stopping: no internal calls")
        held = self._channels.get(address)
        generation = 0
        credentials = None
        if self._tls is not None:
            credentials, generation = self._tls.current()
        if held is not None and held[1] != generation:  # new TLS files: a new channel
            task = asyncio.ensure_future(held[0].close(CALL_TIMEOUT_S))
            task.add_done_callback(lambda done: done.exception())
            held = None
        if held is None:
            if credentials is None or self._tls is None:
                channel = grpc.aio.insecure_channel(address, options=_OPTIONS)
            else:
                channel = grpc.aio.secure_channel(
                    address, credentials, options=_OPTIONS + self._tls.tls.channel_options())
            held = self._channels[address] = (channel, generation)
        return held[0]

    def _metadata(self) -> tuple[tuple[str, str], ...] | None:
        if self._token is None:
            return None
        return (("authorization", f"Bearer {self._token()}"),)

    async def register_txn_segment(self, address: str, txn_id: TxnId, segment: str) -> None:
        """``RegisterTxnSegment`` on the broker at ``address`` (the coordinator's)."""
        request = internal_pb2.RegisterTxnSegmentRequest(txn_id=txn_id_to_bytes(txn_id),
                                                         segment=segment)
        try:
            await self._stub(address).RegisterTxnSegment(
                request, timeout=CALL_TIMEOUT_S, metadata=self._metadata())
        except grpc.aio.AioRpcError as error:
            raise _rebuild(error, address) from None

    async def write_txn_marker(self, address: str, segment: str, txn_id: TxnId,
                               commit: bool) -> None:
        """``WriteTxnMarker`` on the broker at ``address`` (the segment's owner)."""
        outcome = internal_pb2.TXN_OUTCOME_COMMIT if commit else internal_pb2.TXN_OUTCOME_ABORT
        request = internal_pb2.WriteTxnMarkerRequest(
            segment=segment, txn_id=txn_id_to_bytes(txn_id), outcome=outcome)
        try:
            await self._stub(address).WriteTxnMarker(
                request, timeout=CALL_TIMEOUT_S, metadata=self._metadata())
        except grpc.aio.AioRpcError as error:
            raise _rebuild(error, address) from None

    async def append_kafka_batch(
        self, address: str, request: kafka_internal_pb2.AppendKafkaBatchRequest
    ) -> kafka_internal_pb2.AppendKafkaBatchResponse:
        """``AppendKafkaBatch`` on the broker at ``address`` (``broker.kafka.forwarding``).

        ``BrokerShuttingDownError`` (no answer): the outcome is unknown.
        """
        stub: kafka_internal_pb2_grpc.KafkaInternalAsyncStub = \
            kafka_internal_pb2_grpc.KafkaInternalStub(self._channel(address))
        try:
            response: kafka_internal_pb2.AppendKafkaBatchResponse = \
                await stub.AppendKafkaBatch(request, timeout=CALL_TIMEOUT_S,
                                            metadata=self._metadata())
        except grpc.aio.AioRpcError as error:
            raise _rebuild(error, address) from None
        return response

    async def offset_for_time(
        self, address: str, request: kafka_internal_pb2.OffsetForTimeRequest
    ) -> kafka_internal_pb2.OffsetForTimeResponse:
        """``OffsetForTime`` on the broker at ``address`` (``broker.kafka.offset_times``).

        A read: ``BrokerShuttingDownError`` (no answer) may be asked again.
        """
        stub: kafka_internal_pb2_grpc.KafkaInternalAsyncStub = \
            kafka_internal_pb2_grpc.KafkaInternalStub(self._channel(address))
        try:
            response: kafka_internal_pb2.OffsetForTimeResponse = \
                await stub.OffsetForTime(request, timeout=CALL_TIMEOUT_S,
                                         metadata=self._metadata())
        except grpc.aio.AioRpcError as error:
            raise _rebuild(error, address) from None
        return response

    async def share_state(
        self, address: str, request: kafka_internal_pb2.ShareStateRequest
    ) -> kafka_internal_pb2.ShareStateResponse:
        """``ShareState`` on the broker at ``address`` (``broker.kafka.share_groups.admin``).

        Every action is idempotent: ``BrokerShuttingDownError`` (no answer) may be
        asked again.
        """
        stub: kafka_internal_pb2_grpc.KafkaInternalAsyncStub = \
            kafka_internal_pb2_grpc.KafkaInternalStub(self._channel(address))
        try:
            response: kafka_internal_pb2.ShareStateResponse = \
                await stub.ShareState(request, timeout=CALL_TIMEOUT_S,
                                      metadata=self._metadata())
        except grpc.aio.AioRpcError as error:
            raise _rebuild(error, address) from None
        return response

    async def find_kafka_txn(self, address: str, transactional_id: str, producer_id: int,
                             epoch: int) -> tuple[int, TxnId | None]:
        """``FindKafkaTxn`` on the Kafka transaction coordinator at ``address``."""
        request = internal_pb2.FindKafkaTxnRequest(
            transactional_id=transactional_id, producer_id=producer_id, producer_epoch=epoch)
        try:
            answer = await self._stub(address).FindKafkaTxn(
                request, timeout=CALL_TIMEOUT_S, metadata=self._metadata())
        except grpc.aio.AioRpcError as error:
            raise _rebuild(error, address) from None
        return answer.error_code, txn_id_from_bytes(answer.txn_id) if answer.txn_id else None

    async def check_kafka_txn_partition(self, address: str, transactional_id: str,
                                        producer_id: int, epoch: int,
                                        partition: tuple[str, int], add: bool) -> int:
        """``FindKafkaTxn`` with a partition (KIP-890's check, or add) at ``address``.

        Raises ``BrokerShuttingDownError`` when unanswered: maybe added (the
        add is idempotent, the caller asks again).
        """
        request = internal_pb2.FindKafkaTxnRequest(
            transactional_id=transactional_id, producer_id=producer_id, producer_epoch=epoch,
            topic=partition[0], partition=partition[1], add_partition=add)
        try:
            answer = await self._stub(address).FindKafkaTxn(
                request, timeout=CALL_TIMEOUT_S, metadata=self._metadata())
        except grpc.aio.AioRpcError as error:
            raise _rebuild(error, address) from None
        return int(answer.error_code)

    async def add_kafka_txn_offsets(self, address: str, transactional_id: str,
                                    producer_id: int, epoch: int, group_id: str,
                                    offsets: list[TxnOffset],
                                    begin: bool = False) -> list[TxnOffset]:
        """``AddKafkaTxnOffsets`` on the Kafka transaction coordinator at ``address``."""
        request = internal_pb2.AddKafkaTxnOffsetsRequest(
            transactional_id=transactional_id, producer_id=producer_id, producer_epoch=epoch,
            group_id=group_id, offsets=[offset_message(item) for item in offsets],
            begin_txn=begin)
        try:
            answer = await self._stub(address).AddKafkaTxnOffsets(
                request, timeout=CALL_TIMEOUT_S, metadata=self._metadata())
        except grpc.aio.AioRpcError as error:
            raise _rebuild(error, address) from None
        return [offset_of(item) for item in answer.offsets]

    async def commit_kafka_txn_offsets(self, address: str, group_id: str,
                                       offsets: list[TxnOffset]) -> list[TxnOffset]:
        """``CommitKafkaTxnOffsets`` on the group's coordinator at ``address``."""
        request = internal_pb2.CommitKafkaTxnOffsetsRequest(
            group_id=group_id, offsets=[offset_message(item) for item in offsets])
        try:
            answer = await self._stub(address).CommitKafkaTxnOffsets(
                request, timeout=CALL_TIMEOUT_S, metadata=self._metadata())
        except grpc.aio.AioRpcError as error:
            raise _rebuild(error, address) from None
        return [offset_of(item) for item in answer.offsets]

    async def abort_txn(self, address: str, txn_id: TxnId) -> None:
        """``Transactions.AbortTxn`` on the transaction coordinator at ``address``.

        Raises ``TxnStateError`` (decided already), ``TxnNotFoundError``,
        ``WrongHostError`` (the coordinator is elsewhere), and
        ``BrokerShuttingDownError`` when the outcome is unknown.
        """
        stub: transactions_pb2_grpc.TransactionsAsyncStub = \
            transactions_pb2_grpc.TransactionsStub(self._channel(address))
        try:
            await stub.AbortTxn(transactions_pb2.AbortTxnRequest(txn_id=txn_id_to_bytes(txn_id)),
                                timeout=CALL_TIMEOUT_S, metadata=self._metadata())
        except grpc.aio.AioRpcError as error:
            raise _rebuild(error, address) from None

    async def pending_kafka_txn_offsets(self, address: str,
                                        group_id: str) -> list[tuple[str, int]]:
        """``PendingKafkaTxnOffsets`` on the Kafka transaction coordinator at ``address``."""
        request = internal_pb2.PendingKafkaTxnOffsetsRequest(group_id=group_id)
        try:
            answer = await self._stub(address).PendingKafkaTxnOffsets(
                request, timeout=CALL_TIMEOUT_S, metadata=self._metadata())
        except grpc.aio.AioRpcError as error:
            raise _rebuild(error, address) from None
        return [(item.topic, item.partition) for item in answer.offsets]

    async def close(self) -> None:
        """Close every channel (calls under way fail)."""
        self._closed = True
        channels, self._channels = list(self._channels.values()), {}
        for channel, _generation in channels:
            await channel.close(None)


def offset_message(item: TxnOffset) -> internal_pb2.KafkaTxnOffset:
    """``item`` on the wire."""
    message = internal_pb2.KafkaTxnOffset(
        topic=item.topic, partition=item.partition, offset=item.offset,
        leader_epoch=item.leader_epoch, error_code=item.error_code)
    if item.metadata is not None:
        message.metadata = item.metadata
    return message


def offset_of(message: internal_pb2.KafkaTxnOffset) -> TxnOffset:
    """A ``TxnOffset`` from the wire."""
    return TxnOffset(message.topic, message.partition, message.offset, message.leader_epoch,
                     message.metadata if message.HasField("metadata") else None,
                     message.error_code)
