"""The first offset whose timestamp is at or after a time (ListOffsets by timestamp).

A binary search over the segment's offsets: each probe reads the block
holding the middle offset and looks at its batch's max timestamp
(``broker.kafka.batches.max_timestamp``, the header only), O(log events)
reads. The block where it ends is decoded (kafka-python) to find the first
record at or after the time, as Kafka's broker does with its time index and
one batch. Like Kafka's time index this assumes timestamps that grow with
offsets (CreateTime set by producers usually does); with timestamps out of
order the answer is an offset at which the time has been reached, not
necessarily the first one.
"""

from __future__ import annotations

from typing import Any

from broker.api import Isolation, ReadBlock, SegmentHandle
from broker.kafka.batches import max_timestamp
from broker.kafka.blocks import batch_of_block

__all__ = ["offset_for_time"]


async def offset_for_time(segment: SegmentHandle, time_ms: int,
                          isolation: Isolation) -> tuple[int, int]:
    """(offset, timestamp) of the first record at or after ``time_ms``; (-1, -1) if none."""
    info = segment.info().segment
    low = info.start_offset
    high = segment.committed_end if isolation is Isolation.READ_COMMITTED else info.end_offset
    found: ReadBlock | None = None
    while low < high:
        middle = (low + high) // 2
        block = await _block_at(segment, middle, isolation)
        if block is None:  # only left-out entries there: look after them
            low = middle + 1
            continue
        if max_timestamp(batch_of_block(block)) >= time_ms:
            found = block
            high = block.offset
        else:
            low = block.offset + block.event_count
    if found is None:
        return -1, -1
    return _first_record_at(batch_of_block(found), time_ms)


async def _block_at(segment: SegmentHandle, offset: int,
                    isolation: Isolation) -> ReadBlock | None:
    batch = await segment.read(offset, 1, isolation)
    for block in batch.blocks:
        if block.offset + block.event_count > offset:
            return block
    return None


def _first_record_at(batch: bytes, time_ms: int) -> tuple[int, int]:
    from kafka.record.default_records import DefaultRecordBatch  # noqa: PLC0415

    records: Any = DefaultRecordBatch(batch)
    for record in records:
        if record.timestamp >= time_ms:
            return int(record.offset), int(record.timestamp)
    return -1, -1
