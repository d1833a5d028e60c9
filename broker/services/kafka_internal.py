"""The ``folio.broker.v1.KafkaInternal`` servicer: Kafka batches other brokers forward here,
offsets by time they ask of the partitions owned here, and the share partitions' states
kept here that a share group's coordinator asks for.

Decode, call the Kafka listener, encode (proto/broker/v1/kafka_internal.proto
says what the call means; ``broker.kafka.forwarding`` does it). The gRPC
server starts before the Kafka listener, so the listener sets its handler
(and its ``offset_for_time``) in ``KafkaForwardSlot`` once it serves and
clears them when it stops; until
then (and on a broker without a Kafka listener) the call is refused with
``BrokerShuttingDownError`` (UNAVAILABLE: the caller asks again).
Served on the broker's port in cluster mode only; with token authentication
only super-user roles may call it (``broker.auth.rpc_table``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc

from broker._proto.v1 import kafka_internal_pb2, kafka_internal_pb2_grpc
from broker.errors import BrokerError, BrokerShuttingDownError
from broker.services._servicer import abort_with
from ledger.errors import LedgerError

__all__ = ["KafkaForwardSlot", "KafkaInternalServicer"]

Request = TypeVar("Request")
Response = TypeVar("Response")

_Context = grpc.aio.ServicerContext[Any, Any]

#: The Kafka listener's side of ``AppendKafkaBatch`` (``broker.kafka.forwarding.serve``).
AppendKafkaBatch = Callable[[kafka_internal_pb2.AppendKafkaBatchRequest],
                            Awaitable[kafka_internal_pb2.AppendKafkaBatchResponse]]
#: The Kafka listener's side of ``OffsetForTime`` (``broker.kafka.offset_times.serve``).
OffsetForTime = Callable[[kafka_internal_pb2.OffsetForTimeRequest],
                         Awaitable[kafka_internal_pb2.OffsetForTimeResponse]]

#: The Kafka listener's side of ``ShareState`` (``broker.kafka.share_groups.admin.serve``).
ShareState = Callable[[kafka_internal_pb2.ShareStateRequest],
                      Awaitable[kafka_internal_pb2.ShareStateResponse]]


@dataclass
class KafkaForwardSlot:
    """Where the servicer finds the Kafka listener's handlers (None: no listener now)."""

    handler: AppendKafkaBatch | None = None
    offset_for_time: OffsetForTime | None = None
    share_state: ShareState | None = None


class KafkaInternalServicer(kafka_internal_pb2_grpc.KafkaInternalServicer):
    """Serves ``AppendKafkaBatch``, ``OffsetForTime`` and ``ShareState`` through the Kafka
    listener's handlers in ``slot``."""

    def __init__(self, slot: KafkaForwardSlot) -> None:
        self._slot = slot

    async def AppendKafkaBatch(
        self, request: kafka_internal_pb2.AppendKafkaBatchRequest, context: _Context
    ) -> kafka_internal_pb2.AppendKafkaBatchResponse:
        return await _serve(self._slot.handler, request, context)

    async def OffsetForTime(
        self, request: kafka_internal_pb2.OffsetForTimeRequest, context: _Context
    ) -> kafka_internal_pb2.OffsetForTimeResponse:
        return await _serve(self._slot.offset_for_time, request, context)

    async def ShareState(
        self, request: kafka_internal_pb2.ShareStateRequest, context: _Context
    ) -> kafka_internal_pb2.ShareStateResponse:
        return await _serve(self._slot.share_state, request, context)


async def _serve(handler: Callable[[Request], Awaitable[Response]] | None, request: Request,
                 context: _Context) -> Response:
    """``handler``'s answer to ``request``; its errors (and no listener: None) as statuses."""
    try:
        if handler is None:
            raise BrokerShuttingDownError("this broker has no Kafka listener serving now")
        return await handler(request)
    except (BrokerError, LedgerError) as error:
        await abort_with(context, error)
