"""Compaction of a keyed system topic: rewrite it without the records later ones cover.

The algorithm (``compact``), on the topic's one segment:

1. Under the write lock (no append under way), roll the segment over to a new
   ledger. Its first offset is the *compaction point* P: every record before
   P lies in closed ledgers, every later append lands at or after P.
2. For each key whose latest record lies before P, in batches: read the
   value, then, under the write lock, append it again unless the key was
   written since (a newer record covers it already). A batch is one entry.
3. Truncate the segment at P: the segment record's start offset moves to P
   (one compare-and-set), then the ledgers before P are deleted.

Crash safety: the "latest record per key" view never changes. Before step 3
the segment only gained copies of records that were the latest of their key
when copied (the check and the append are under the write lock), so the view
is the same with or without them; after the CAS of step 3 every key live
before P has its latest record at or after P (a copy or a newer write) and
the records dropped are all covered or tombstones. A crash between the CAS
and the deletes leaves orphan ledgers, never a missing record. A write racing
compaction is never lost: it lands after P and is never covered by a copy
(copies of its key are skipped once the index names the newer record).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

__all__ = ["Compactable", "CompactionPolicy", "CompactionResult", "TopicSizes", "compact"]


class TopicSizes(Protocol):
    """What the policy reads of a topic's sizes (``compacted_topic.TopicStats``)."""

    @property
    def live_bytes(self) -> int:
        """Bytes of the records a reader sees (the latest per key)."""
        ...

    @property
    def dead_bytes(self) -> int:
        """Bytes of the records later ones cover."""
        ...


class Compactable(Protocol):
    """The steps of a compaction, as a compacted topic offers them (``CompactedTopic``).

    A Protocol, so this module needs nothing of the topic that runs it (the
    topic imports ``compact``; nothing here imports the topic back).
    """

    @property
    def compaction_lock(self) -> asyncio.Lock:
        """Held by a compaction for its whole run."""
        ...

    async def start_compaction(self) -> tuple[int, list[tuple[int, str]], int]:
        """Step 1: roll over; the compaction point, the records before it, their bytes."""
        ...

    def batches(self, records: list[tuple[int, str]]) -> list[list[tuple[int, str]]]:
        """``records`` in groups whose copies fit one entry each."""
        ...

    async def copy_records(self, records: list[tuple[int, str]]) -> int:
        """Step 2: append again those still latest; how many."""
        ...

    async def finish_compaction(self, point: int, bytes_before: int) -> int:
        """Step 3: delete the ledgers before ``point``; the new start offset."""
        ...

MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class CompactionPolicy:
    """When to compact: dead bytes above ``min_dead_bytes`` and above ``dead_ratio`` x live."""

    min_dead_bytes: int = 4 * MIB
    dead_ratio: float = 1.0

    def due(self, stats: TopicSizes) -> bool:
        """Whether a topic with ``stats`` should be compacted now."""
        dead = stats.dead_bytes
        return dead > self.min_dead_bytes and dead > self.dead_ratio * stats.live_bytes


@dataclass(frozen=True, slots=True)
class CompactionResult:
    """What a compaction did: the point it truncated at and the records it copied."""

    point: int
    copied: int
    start_offset: int


async def compact(topic: Compactable,
                  hook: Callable[[str], Awaitable[None]] | None = None) -> CompactionResult:
    """Compact ``topic`` (one compaction at a time per topic).

    ``hook`` (tests) is awaited after each step with its name: ``"rolled"``,
    ``"copied-batch"`` (after each batch), ``"copied"``, ``"truncated"``; an
    exception it raises stops the compaction there, as a crash would.
    """
    async def step(name: str) -> None:
        if hook is not None:
            await hook(name)

    async with topic.compaction_lock:
        point, before, bytes_before = await topic.start_compaction()
        await step("rolled")
        copied = 0
        for batch in topic.batches(before):
            copied += await topic.copy_records(batch)
            await step("copied-batch")
        await step("copied")
        start = await topic.finish_compaction(point, bytes_before)
        await step("truncated")
        return CompactionResult(point, copied, start)
