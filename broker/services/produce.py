"""The ``folio.v1.Produce`` servicer: unary writes for clients that want no stream of their own.

This is the one place the broker touches single events, because the client
gave them one by one: it routes each by its key (``broker.topics.routing``), packs
the events of each segment into blocks (``folio.v1.EventBlock``) and appends
them as one entry per segment. A run of keyed and a run of keyless events
make two blocks of that entry (a block's key column is all or nothing), so
the events keep their request order within the segment. Produce writes
without a writer id: it is not de-duplicated (the proto says so).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from typing import Any

import grpc

from broker.api import AppendResult, Block, SegmentRange, Topics
from broker.errors import BrokerError, EventTooLargeError, InvalidArgumentError, TopicSealedError
from broker.segments.block_limits import check_block_size
from broker.services._servicer import abort_with
from broker.topics.routing import segment_for_key
from folio.api.v1 import append_pb2, append_pb2_grpc, events_pb2
from ledger.errors import LedgerError

__all__ = ["MAX_PRODUCE_BYTES", "ProduceServicer"]

_Context = grpc.aio.ServicerContext[Any, Any]

#: Payload bytes one Produce may carry in all.
MAX_PRODUCE_BYTES = 4 * 1024 * 1024
#: The block format version the broker packs (events.proto).
BLOCK_FORMAT_VERSION = 1


class ProduceServicer(append_pb2_grpc.ProduceServicer):
    """Routes, packs and appends the events of unary Produce calls."""

    def __init__(self, topics: Topics) -> None:
        self._topics = topics
        self._rotation = itertools.count()

    async def Produce(
        self, request: append_pb2.ProduceRequest, context: _Context
    ) -> append_pb2.ProduceResponse:
        try:
            return await self._produce(request)
        except (BrokerError, LedgerError) as error:
            await abort_with(context, error)

    async def _produce(self, request: append_pb2.ProduceRequest) -> append_pb2.ProduceResponse:
        topic = await self._topics.get_topic(request.topic)
        events = request.events
        if not events:
            raise InvalidArgumentError("a Produce request must carry at least one event")
        limit = topic.config.max_event_bytes
        total = 0
        for event in events:
            size = len(event.payload)
            if size > limit:
                raise EventTooLargeError(size, limit)
            total += size
        if total > MAX_PRODUCE_BYTES:
            raise EventTooLargeError(total, MAX_PRODUCE_BYTES, what="Produce request")
        segments = list(topic.segments)
        if not segments:
            # A sealed topic has no open segment: nothing to route to (keyed or not).
            raise TopicSealedError(topic.name)
        lows = [segment.key_low for segment in segments]
        keyless = next(self._rotation) % len(segments)
        groups: dict[int, list[int]] = {}
        for index, event in enumerate(events):
            target = (segment_for_key(lows, event.routing_key)
                      if event.HasField("routing_key") else keyless)
            groups.setdefault(target, []).append(index)
        now_ms = int(time.time() * 1000)
        # Packed (and size-checked) before anything is written: a refusal writes nothing.
        packed = [_blocks([events[i] for i in indexes], now_ms) for indexes in groups.values()]
        results = await asyncio.gather(*(
            self._append(segments[target], blocks)
            for target, blocks in zip(groups, packed, strict=True)))
        placed = [append_pb2.ProducedEvent() for _ in events]
        for (target, indexes), result in zip(groups.items(), results, strict=True):
            name = segments[target].name
            for position, index in enumerate(indexes):
                placed[index].segment = name
                placed[index].offset = result.offset + position
        return append_pb2.ProduceResponse(events=placed)

    async def _append(self, target: SegmentRange, blocks: list[Block]) -> AppendResult:
        segment = await self._topics.writable_segment(target.name, "Produce")
        return await segment.append(blocks, "", -1)


def _blocks(events: list[append_pb2.ProduceEvent], now_ms: int) -> list[Block]:
    """One segment's events in blocks (a keyed and a keyless run never share one)."""
    blocks = [_pack(list(run), now_ms) for _, run in
              itertools.groupby(events, key=lambda event: event.HasField("routing_key"))]
    for block in blocks:
        check_block_size(len(block.data))
    return blocks


def _pack(events: list[append_pb2.ProduceEvent], now_ms: int) -> Block:
    block = events_pb2.EventBlock(
        format_version=BLOCK_FORMAT_VERSION,
        payloads=[event.payload for event in events],
        timestamps_ms=[event.timestamp_ms or now_ms for event in events],
    )
    if events[0].HasField("routing_key"):
        block.routing_keys.extend(event.routing_key for event in events)
    if any(event.headers for event in events):
        for event in events:
            block.headers.add().entries.update(event.headers)
    return Block(block.SerializeToString(deterministic=True), len(events))
