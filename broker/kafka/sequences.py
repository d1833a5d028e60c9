"""Idempotent producers' sequences: the offsets of their last batches, and gaps.

A producer that lost a response resends the batch; the segment drops it as a
duplicate (writer id and event numbers) without writing it again, and the
answer should carry the offset the first copy got, as Kafka's broker gives
from its last five batches per producer. This keeps the last
``BATCHES_PER_PRODUCER`` (last sequence -> base offset) per producer and
segment, in memory: after a restart, or for an older batch, a duplicate is
still a success, answered with offset -1 (unknown) as Kafka does for
duplicates it no longer remembers.

It also keeps the last sequence each producer *submitted* to each segment,
so that a batch that skips sequences (its predecessor was refused before it
reached the segment, say, and the producer sent the next one anyway) is
answered OUT_OF_ORDER_SEQUENCE_NUMBER, as Kafka's broker does, instead of
being written: the segment would otherwise take the later batch and then
drop the predecessor's resend as a duplicate. Unknown producers (new, or
after a restart, or after a failed append) are not checked.
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
        self._submitted: OrderedDict[tuple[str, str], int] = OrderedDict()

    def gap(self, writer_id: str, segment: str, base_sequence: int) -> int | None:
        """The sequence expected next if ``base_sequence`` skips past it, else None."""
        last = self._submitted.get((writer_id, segment))
        if last is None or base_sequence <= last + 1:
            return None
        return last + 1

    def submitted(self, writer_id: str, segment: str, last_sequence: int) -> None:
        """A batch ending at ``last_sequence`` was handed to the segment."""
        key = (writer_id, segment)
        self._submitted[key] = max(last_sequence, self._submitted.get(key, -1))
        self._submitted.move_to_end(key)
        if len(self._submitted) > self._max:
            self._submitted.popitem(last=False)

    def forget(self, writer_id: str, segment: str) -> None:
        """An append of the producer failed: what it submitted is no longer known."""
        self._submitted.pop((writer_id, segment), None)

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
