"""Unary writes (``Produce``): route single events to segments, pack them, append.

This is the one place the broker touches single events, because the client
gave them one by one: it routes each by its key (``broker.topics.routing``),
packs the events of each segment into blocks (``folio.v1.EventBlock``, the
wire format every client packs) and appends them as one entry per segment. A
run of keyed and a run of keyless events make two blocks of that entry (a
block's key column is all or nothing), so the events keep their request order
within the segment. Keyless events of one call go to one open segment, the
next call's to the next. Produce writes without a writer id: it is not
de-duplicated (the proto says so). Everything is checked and packed before
anything is written: a refusal writes nothing.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from broker.api import Block, Topics
from broker.errors import EventTooLargeError, InvalidArgumentError, TopicSealedError
from broker.segments.block_limits import BLOCK_FORMAT_VERSION, check_block_size
from broker.topics.routing import segment_for_key
from folio.api.v1 import events_pb2

__all__ = ["MAX_PRODUCE_BYTES", "ProduceEvent", "Producer"]

#: Payload bytes one Produce may carry in all.
MAX_PRODUCE_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class ProduceEvent:
    """One event of a Produce call.

    Attributes:
        payload: the event's bytes.
        routing_key: its key; None: no key (any open segment).
        timestamp_ms: its time; 0: the broker's time when it packs it.
        headers: its headers.
    """

    payload: bytes
    routing_key: str | None = None
    timestamp_ms: int = 0
    headers: Mapping[str, bytes] = field(default_factory=dict)


class Producer:
    """Routes, packs and appends the events of unary Produce calls on ``topics``."""

    def __init__(self, topics: Topics) -> None:
        self._topics = topics
        self._rotation = itertools.count()

    async def produce(self, topic_name: str,
                      events: Sequence[ProduceEvent]) -> list[tuple[str, int]]:
        """Write ``events`` to ``topic_name``; each event's segment and offset, in order.

        Raises ``TopicNotFoundError``, ``InvalidArgumentError`` (no event),
        ``EventTooLargeError`` (an event above the topic's ``max_event_bytes``,
        the call above ``MAX_PRODUCE_BYTES``, a block too large),
        ``TopicSealedError``, ``InternalTopicError`` (a system topic), and what
        an append raises (``BrokerError``, ``LedgerError``).
        """
        topic = await self._topics.get_topic(topic_name)
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
                      if event.routing_key is not None else keyless)
            groups.setdefault(target, []).append(index)
        now_ms = int(time.time() * 1000)
        # Packed (and size-checked) before anything is written: a refusal writes nothing.
        packed = [_blocks([events[i] for i in indexes], now_ms) for indexes in groups.values()]
        # Every target segment first (in a cluster: WrongHost unless this broker
        # serves them all), so that a refusal still writes nothing.
        loaded = await asyncio.gather(*(
            self._topics.writable_segment(segments[target].name, "Produce")
            for target in groups))
        results = await asyncio.gather(*(
            segment.append(blocks, "", -1)
            for segment, blocks in zip(loaded, packed, strict=True)))
        placed: list[tuple[str, int]] = [("", 0)] * len(events)
        for (target, indexes), result in zip(groups.items(), results, strict=True):
            name = segments[target].name
            for delta, index in enumerate(indexes):
                placed[index] = (name, result.offset + delta)
        return placed


def _blocks(events: list[ProduceEvent], now_ms: int) -> list[Block]:
    """One segment's events in blocks (a keyed and a keyless run never share one)."""
    blocks = [_pack(list(run), now_ms) for _, run in
              itertools.groupby(events, key=lambda event: event.routing_key is not None)]
    for block in blocks:
        check_block_size(len(block.data))
    return blocks


def _pack(events: list[ProduceEvent], now_ms: int) -> Block:
    block = events_pb2.EventBlock(
        format_version=BLOCK_FORMAT_VERSION,
        payloads=[event.payload for event in events],
        timestamps_ms=[event.timestamp_ms or now_ms for event in events],
    )
    if events[0].routing_key is not None:
        block.routing_keys.extend(event.routing_key or "" for event in events)
    if any(event.headers for event in events):
        for event in events:
            block.headers.add().entries.update(event.headers)
    return Block(block.SerializeToString(deterministic=True), len(events))
