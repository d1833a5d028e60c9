"""A segment's writer attributes: writer id -> last event number and last append time.

Writers number their events consecutively, so an append of ``n`` events whose
last number is ``last`` holds the numbers ``last - (n - 1)`` to ``last``.
Against the number recorded for the writer (-1: none):

* ``last <= recorded``: written before; a duplicate, not written again;
* ``first <= recorded < last``: overlaps what was written; refused
  (``InvalidEventNumberError``, expected above ``recorded``);
* otherwise written, and ``last`` becomes the recorded number.

``last == -1`` means no numbering (unary Produce): never de-duplicated.
Constant work per append; the table is persisted by the segment (entry
headers and record snapshots, see ``broker.segments.segment``).
"""

from __future__ import annotations

from collections.abc import Mapping

from broker.errors import InvalidEventNumberError
from broker.segments.records import WriterState

__all__ = ["DEFAULT_WRITER_EXPIRY_MS", "WriterTable"]

#: Writers idle longer than this are forgotten (Kafka's producer-id expiry).
DEFAULT_WRITER_EXPIRY_MS = 7 * 24 * 3600 * 1000


class WriterTable:
    """The writers of one segment.

    Args:
        states: the recovered states (taken over, not copied).
        expiry_ms: writers idle longer than this are dropped by ``expire``.
    """

    def __init__(self, states: dict[str, WriterState],
                 expiry_ms: int = DEFAULT_WRITER_EXPIRY_MS) -> None:
        if expiry_ms <= 0:
            raise ValueError(f"writer_expiry_ms must be positive, got {expiry_ms}")
        self._states = states
        self.expiry_ms = expiry_ms

    def __len__(self) -> int:
        return len(self._states)

    def last_event_number(self, writer_id: str) -> int:
        """The writer's recorded number, -1 if none."""
        state = self._states.get(writer_id)
        return -1 if state is None else state.last_event_number

    def is_duplicate(self, writer_id: str, last_event_number: int, event_count: int) -> bool:
        """Whether the append was written before; raises if it overlaps what was written."""
        if last_event_number < 0:
            return False
        recorded = self.last_event_number(writer_id)
        if last_event_number <= recorded:
            return True
        first = last_event_number - event_count + 1
        if first < 0:
            raise InvalidEventNumberError(
                f"{event_count} events ending at number {last_event_number} would begin at "
                f"{first}: event numbers start at 0", recorded)
        if first <= recorded:
            raise InvalidEventNumberError(
                f"events numbered {first} to {last_event_number} overlap what writer "
                f"{writer_id!r} wrote (up to {recorded}): a writer numbers its events "
                "consecutively and never packs them again differently", recorded)
        return False

    def note(self, writer_id: str, last_event_number: int, time_ms: int) -> None:
        """Record an append handed to the ledger (numbered ones only)."""
        if last_event_number >= 0:
            self._states[writer_id] = WriterState(last_event_number, time_ms)

    def expire(self, now_ms: int) -> int:
        """Forget writers idle longer than ``expiry_ms``; returns how many."""
        oldest = now_ms - self.expiry_ms
        stale = [w for w, state in self._states.items() if state.last_update_ms < oldest]
        for writer_id in stale:
            del self._states[writer_id]
        return len(stale)

    def snapshot(self) -> dict[str, WriterState]:
        """A copy of the table, to persist."""
        return dict(self._states)

    def matches(self, snapshot: Mapping[str, WriterState]) -> bool:
        """Whether ``snapshot`` holds exactly this table."""
        return self._states == snapshot
