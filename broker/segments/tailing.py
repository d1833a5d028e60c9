"""Following a segment from an offset: batches of whole blocks, then long polls at the tail.

``follow`` is what one ``Read`` stream does, in domain terms: it reads
(``SegmentHandle.read``) from the offset on and yields each batch as a
``ReadStep``; at the tail it waits on the segment's wake-up (never a timer
loop) and yields an empty step after ``max_wait_s`` without data, so the
client sees the stream is alive. Entries left out by the isolation level
(aborted transactions, markers) move ``next_offset`` on; when only such
entries lie before the tail, an empty step says so at once rather than at
the next heartbeat (a reader of a range ending in them is done). No event is
unpacked: constant work per batch and per block.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass

from broker.api import Isolation, ReadBlock, SegmentHandle
from broker.errors import BrokerShuttingDownError

__all__ = ["ReadStep", "follow"]


@dataclass(frozen=True, slots=True)
class ReadStep:
    """One step of a followed segment.

    Attributes:
        blocks: whole blocks from the offset on (empty: a heartbeat, or the end).
        end_offset: the segment's end as the read saw it.
        next_offset: where the reader continues.
        end_of_segment: the segment is sealed and the reader reached its end.
    """

    blocks: list[ReadBlock]
    end_offset: int
    next_offset: int
    end_of_segment: bool = False


async def follow(segment: SegmentHandle, offset: int, max_bytes: int, isolation: Isolation,
                 max_wait_s: float, stopping: asyncio.Event) -> AsyncIterator[ReadStep]:
    """Steps of ``segment`` from ``offset`` until its end, or until ``stopping`` is set.

    Raises ``BrokerShuttingDownError`` once ``stopping`` is set, and what
    ``SegmentHandle.read`` raises.
    """
    reported = offset  # the next_offset the client knows
    while not stopping.is_set():
        batch = await segment.read(offset, max_bytes, isolation)
        if batch.blocks:
            last = batch.blocks[-1]
            offset = max(last.offset + last.event_count, batch.next_offset)
            ended = batch.end_of_segment and offset >= batch.end_offset
            yield ReadStep(batch.blocks, batch.end_offset, offset, ended)
            reported = offset
            if ended:
                return
            continue
        if batch.end_of_segment:
            yield ReadStep([], batch.end_offset, max(offset, batch.next_offset), True)
            return
        if batch.next_offset > offset:  # only left-out entries (aborted, markers)
            offset = batch.next_offset
            continue
        if offset > reported:
            # At the tail past left-out entries: say so now, not at the next
            # heartbeat (a reader of a range ending in them is done).
            yield ReadStep([], batch.end_offset, offset)
            reported = offset
        if not await _wait(segment.wait_for_data(offset, max_wait_s, isolation), stopping):
            yield ReadStep([], batch.end_offset, offset)
    raise BrokerShuttingDownError("the broker is stopping")


async def _wait(waiting: Awaitable[bool], stopping: asyncio.Event) -> bool:
    """``waiting`` (a wait for data), cut short when the broker stops."""
    wait = asyncio.ensure_future(waiting)
    stop = asyncio.ensure_future(stopping.wait())
    try:
        await asyncio.wait((wait, stop), return_when=asyncio.FIRST_COMPLETED)
    finally:
        stop.cancel()
        if not wait.done():
            wait.cancel()
    return wait.done() and not wait.cancelled() and bool(wait.result())
