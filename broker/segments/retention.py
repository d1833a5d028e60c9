"""Which ledgers at the head of a segment's chain may go: truncation and retention rules.

Pure functions over the chain (oldest first); the segment deletes what they
name. Whole ledgers are the unit, and the ledger being written never goes.
"""

from __future__ import annotations

from collections.abc import Sequence

from broker.api import TopicConfig
from broker.segments.offset_index import LedgerSpan

__all__ = ["ledgers_before", "ledgers_past_retention"]


def _closed_prefix(spans: Sequence[LedgerSpan]) -> int:
    count = 0
    while count < len(spans) and not spans[count].writing:
        count += 1
    return count


def ledgers_before(spans: Sequence[LedgerSpan], end_offset: int, offset: int) -> int:
    """How many head ledgers hold only events before ``offset`` (truncation).

    ``end_offset`` is the segment's end, the end of the last ledger.
    """
    closed = _closed_prefix(spans)
    count = 0
    while count < closed:
        ledger_end = spans[count + 1].first_offset if count + 1 < len(spans) else end_offset
        if ledger_end > offset:
            break
        count += 1
    return count


def ledgers_past_retention(spans: Sequence[LedgerSpan], now_ms: int, config: TopicConfig) -> int:
    """How many head ledgers the topic's retention deletes.

    By time: closed ledgers whose newest entry is more than ``retention_ms``
    old (an empty one has none to keep). By size: then the oldest closed
    ledgers while the chain holds more than ``retention_bytes``.
    """
    closed = _closed_prefix(spans)
    count = 0
    if config.retention_ms > 0:
        while count < closed and now_ms - spans[count].last_entry_ms > config.retention_ms:
            count += 1
    if config.retention_bytes > 0:
        total = sum(span.confirmed_length() for span in spans[count:])
        while count < closed and total > config.retention_bytes:
            total -= spans[count].confirmed_length()
            count += 1
    return count
