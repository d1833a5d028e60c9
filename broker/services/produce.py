"""The ``folio.v1.Produce`` servicer: decode the events, call ``Producer``, encode placements.

Routing, packing and appending are ``broker.topics.produce``; here each
``ProduceEvent`` message becomes a domain ``ProduceEvent`` (its key None when
the field is unset: a keyless event) and each event's segment and offset a
``ProducedEvent``.
"""

from __future__ import annotations

from typing import Any

import grpc

from broker.api import Topics
from broker.errors import BrokerError
from broker.services._servicer import abort_with
from broker.topics.produce import MAX_PRODUCE_BYTES, ProduceEvent, Producer
from folio.api.v1 import append_pb2, append_pb2_grpc
from ledger.errors import LedgerError

__all__ = ["MAX_PRODUCE_BYTES", "ProduceServicer"]

_Context = grpc.aio.ServicerContext[Any, Any]


class ProduceServicer(append_pb2_grpc.ProduceServicer):
    """Serves unary Produce calls over ``Topics``."""

    def __init__(self, topics: Topics) -> None:
        self._producer = Producer(topics)

    async def Produce(
        self, request: append_pb2.ProduceRequest, context: _Context
    ) -> append_pb2.ProduceResponse:
        events = [ProduceEvent(event.payload,
                               event.routing_key if event.HasField("routing_key") else None,
                               event.timestamp_ms, event.headers)
                  for event in request.events]
        try:
            placed = await self._producer.produce(request.topic, events)
        except (BrokerError, LedgerError) as error:
            await abort_with(context, error)
        return append_pb2.ProduceResponse(events=[
            append_pb2.ProducedEvent(segment=segment, offset=offset)
            for segment, offset in placed])
