"""The offsets of idempotent producers' last batches, to answer a retried batch.

A producer that lost a response resends the batch; the segment drops it as a
duplicate (writer id and event numbers) without writing it again, and the
answer should carry the offset the first copy got, as Kafka's broker gives
from its last five batches per producer. This keeps the last
``BATCHES_PER_PRODUCER`` (last sequence -> base offset) per producer and
segment, in memory: after a restart, or for an older batch, a duplicate is
still a success, answered with offset -1 (unknown) as Kafka does for
duplicates it no longer remembers.
"""

from __future__ import annotations

from collections import OrderedDict

__all__ = ["BATCHES_PER_PRODUCER", "MAX_PRODUCERS", "RecentBatches"]

#: Kafka's broker remembers 5 batches per producer (max.in.flight is at most 5).
BATCHES_PER_PRODUCER = 5
#: Producer-segment pairs remembered; the least recently used go first.
MAX_PRODUCERS = 10_000


class RecentBatches:
    """(writer id, segment) -> the base offsets of its last batches, by last sequence."""

    def __init__(self, max_producers: int = MAX_PRODUCERS) -> None:
        self._max = max_producers
        self._batches: OrderedDict[tuple[str, str], OrderedDict[int, int]] = OrderedDict()

    def note(self, writer_id: str, segment: str, last_sequence: int, base_offset: int) -> None:
        """Remember that the batch ending at ``last_sequence`` got ``base_offset``."""
        key = (writer_id, segment)
        batches = self._batches.get(key)
        if batches is None:
            batches = OrderedDict()
            self._batches[key] = batches
            if len(self._batches) > self._max:
                self._batches.popitem(last=False)
        else:
            self._batches.move_to_end(key)
        batches[last_sequence] = base_offset
        if len(batches) > BATCHES_PER_PRODUCER:
            batches.popitem(last=False)

    def offset_of(self, writer_id: str, segment: str, last_sequence: int) -> int:
        """The base offset of that batch, -1 if it is not remembered."""
        batches = self._batches.get((writer_id, segment))
        if batches is None:
            return -1
        return batches.get(last_sequence, -1)
