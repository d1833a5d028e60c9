"""A segment's leader-epoch history: the offset each ownership's appends started at.

Kafka's broker keeps, per partition, the start offset of every leader epoch
(its ``leader-epoch-checkpoint`` file, ``LeaderEpochFileCache``), and answers
OffsetForLeaderEpoch from it: a consumer that read records of epoch E asks
where E's records end, and a position past that end means its log was
truncated under it (KIP-101, KIP-320). Folio's leader epoch is the epoch of
the segment's container's ownership (``broker.cluster.leader_epochs``), so a
segment keeps, in its record (``broker.segments.records``, key
``leader_epochs``), one ``(epoch, start_offset)`` pair per ownership that
loaded it: the owner adds its epoch when it loads the segment, at the end
offset recovery found, in the same compare-and-set that records its new
ledger (``LedgerSegment.load``), before any append of that epoch. An epoch is
added only above the newest one kept (a reload in the same ownership, or by a
broker that writes to the segment without owning it, adds nothing).

``EpochHistory`` is the value: oldest first, epochs and start offsets
growing. The rules are Kafka's:

- ``assign``: a new epoch at an offset; entries at or after that offset go
  (Kafka drops them too; offsets never go back in Folio, so none do).
- ``truncated``: the log's head moved to ``start_offset`` (retention,
  truncation, Kafka's DeleteRecords): the entries that start at or before it
  go, the newest of them kept with its start moved up to it (Kafka's
  ``truncateFromStart``).
- at most ``MAX_EPOCHS`` entries: the oldest go first (Kafka keeps all;
  Folio's record is rewritten at every rollover, so it stays small). An
  epoch older than every entry is answered as Kafka answers one, with the
  start of the oldest kept: an end at or after the true one.
- ``end_offset_for``: Kafka's ``endOffsetFor``: the requested epoch, or the
  largest one kept below it, and the start offset of the first epoch above
  it (the log end for the newest epoch); (-1, -1) for an epoch above them
  all, or -1.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

__all__ = ["MAX_EPOCHS", "UNDEFINED", "EpochEntry", "EpochHistory"]

#: The entries kept: the oldest go first beyond it.
MAX_EPOCHS: Final = 100
#: Kafka's UNDEFINED_EPOCH and UNDEFINED_EPOCH_OFFSET.
UNDEFINED: Final = -1
#: One entry: (leader epoch, the offset of its first event).
EpochEntry = tuple[int, int]


@dataclass(frozen=True, slots=True)
class EpochHistory:
    """A segment's ``(epoch, start_offset)`` entries, oldest first (module docstring)."""

    entries: tuple[EpochEntry, ...] = ()

    @classmethod
    def of(cls, pairs: Iterable[Iterable[int]]) -> EpochHistory:
        """From stored pairs, sorted by epoch (``ValueError``/``TypeError`` for malformed ones)."""
        entries: list[EpochEntry] = []
        for pair in pairs:
            epoch, start = (int(value) for value in pair)
            if epoch < 0 or start < 0:
                raise ValueError(f"leader epoch entry ({epoch}, {start}) is negative")
            entries.append((epoch, start))
        return cls(tuple(sorted(entries))[-MAX_EPOCHS:])

    @property
    def latest(self) -> int:
        """The newest epoch kept; -1 if none."""
        return self.entries[-1][0] if self.entries else UNDEFINED

    def assign(self, epoch: int, start_offset: int) -> EpochHistory:
        """With ``epoch`` starting at ``start_offset``; unchanged unless above ``latest``."""
        if epoch < 0 or epoch <= self.latest:
            return self
        kept = tuple(entry for entry in self.entries if entry[1] < start_offset)
        return EpochHistory((*kept, (epoch, start_offset))[-MAX_EPOCHS:])

    def truncated(self, start_offset: int) -> EpochHistory:
        """The history of the log from ``start_offset`` on (Kafka's ``truncateFromStart``)."""
        before = [entry for entry in self.entries if entry[1] <= start_offset]
        if not before:
            return self
        truncated = ((before[-1][0], start_offset), *self.entries[len(before):])
        return self if truncated == self.entries else EpochHistory(truncated)

    def end_offset_for(self, requested: int, log_end: int) -> EpochEntry:
        """(epoch, end offset) of ``requested``: Kafka's answer (module docstring)."""
        if requested == UNDEFINED or not self.entries:
            return UNDEFINED, UNDEFINED
        if requested == self.latest:
            return requested, log_end
        higher = next((entry for entry in self.entries if entry[0] > requested), None)
        if higher is None:
            return UNDEFINED, UNDEFINED
        floor = [entry for entry in self.entries if entry[0] <= requested]
        if not floor:
            return requested, higher[1]
        return floor[-1][0], higher[1]

    def to_list(self) -> list[list[int]]:
        """The stored form: ``[[epoch, start_offset], ...]``."""
        return [[epoch, start] for epoch, start in self.entries]
