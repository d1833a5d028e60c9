"""Finding the ledger entry that holds an offset: per-ledger state and its compact index.

Each ledger of a segment's chain is a ``LedgerSpan``: its first offset (from
the segment record) and, once known, the base offsets of its entries in an
``array('q')`` (8 bytes per entry). The open ledger's index is complete (every
append adds one base); a closed ledger's index grows as it is read from its
start or scanned on recovery. Offsets the index does not cover are found by
``ReadHints`` (where the previous reads stopped) or by a binary search over
entry headers (``broker.segments.reads``).
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from broker.segments.records import LedgerRecord

if TYPE_CHECKING:
    from ledger.api import WriteHandle

__all__ = ["LedgerSpan", "ReadHints"]


@dataclass(slots=True, eq=False)
class LedgerSpan:
    """One ledger of a segment's chain, as the broker holding the segment sees it.

    The in-memory, mutable view: it is saved as a ``LedgerRecord`` (in the
    segment record) and shown to clients as a ``broker.api.SegmentLedger``.

    Attributes:
        ledger_id: the ledger.
        first_offset: the offset of its first event.
        length_bytes: its final length once closed (-1 while written).
        last_entry_ms: the time of its newest entry (-1: none yet).
        created_ms: when this broker started writing it (the open ledger only).
        handle: the writer handle (open ledger) or a reader handle, once opened.
        writing: whether appends go to it.
        last_entry_id: the last confirmed entry of the open ledger.
        submitted_bytes: bytes handed to the open ledger (confirmed or not).
        bases: base offsets of entries ``0 .. len(bases) - 1``.
        indexed_end: the end offset of the last entry in ``bases``.
    """

    ledger_id: int
    first_offset: int
    length_bytes: int = -1
    last_entry_ms: int = -1
    created_ms: int = 0
    handle: WriteHandle | None = None
    writing: bool = False
    last_entry_id: int = -1
    submitted_bytes: int = 0
    bases: array[int] = field(default_factory=lambda: array("q"))
    indexed_end: int = -1

    @classmethod
    def from_record(cls, record: LedgerRecord) -> LedgerSpan:
        """A closed ledger as the segment record lists it."""
        return cls(record.ledger_id, record.first_offset, record.length_bytes,
                   record.last_entry_ms)

    def to_record(self) -> LedgerRecord:
        """The ledger as the segment record lists it."""
        if self.writing:
            return LedgerRecord(self.ledger_id, self.first_offset)
        return LedgerRecord(self.ledger_id, self.first_offset, self.length_bytes,
                            self.last_entry_ms)

    def note_entry(self, entry_id: int, base_offset: int, end_offset: int) -> None:
        """Index entry ``entry_id`` if it is the next one the index lacks."""
        if entry_id == len(self.bases):
            self.bases.append(base_offset)
            self.indexed_end = end_offset

    def lookup(self, offset: int) -> int | None:
        """The entry holding ``offset`` if the index covers it, else None."""
        if offset < self.indexed_end:
            return bisect_right(self.bases, offset) - 1
        return None

    def confirmed_length(self) -> int:
        """Bytes held now: the final length, or what the writer has confirmed."""
        if self.writing and self.handle is not None:
            return self.handle.length
        return max(self.length_bytes, 0)


class ReadHints:
    """Where recent reads stopped: offset -> (ledger_id, entry_id) of the next entry.

    A reader that continues where it stopped (the usual case) finds its entry
    here without searching. Bounded, least recently used dropped first.
    """

    def __init__(self, capacity: int = 256) -> None:
        self._capacity = capacity
        self._hints: OrderedDict[int, tuple[int, int]] = OrderedDict()

    def get(self, offset: int, ledger_id: int) -> int | None:
        """The entry id of ``ledger_id`` known to begin at ``offset``, if any."""
        hint = self._hints.get(offset)
        if hint is None or hint[0] != ledger_id:
            return None
        self._hints.move_to_end(offset)
        return hint[1]

    def put(self, offset: int, ledger_id: int, entry_id: int) -> None:
        """Remember that entry ``entry_id`` of ``ledger_id`` begins at ``offset``."""
        self._hints[offset] = (ledger_id, entry_id)
        self._hints.move_to_end(offset)
        if len(self._hints) > self._capacity:
            self._hints.popitem(last=False)

    def clear(self) -> None:
        """Forget every hint (after a truncation)."""
        self._hints.clear()
