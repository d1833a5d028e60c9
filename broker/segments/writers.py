"""A segment's writer attributes: writer id -> last event number and last append time.

Writers number their events consecutively, so an append of ``n`` events whose
last number is ``last`` holds the numbers ``last - (n - 1)`` to ``last``.
Against the number recorded for the writer (-1: none):

* ``last <= recorded``: written before; a duplicate, not written again;
* ``first <= recorded < last``: overlaps what was written; refused
  (``InvalidEventNumberError``, expected above ``recorded``);
* otherwise written, and ``last`` becomes the recorded number.

A writer that promises *contiguous* numbers (a Kafka idempotent producer: its
sequences) is held to them: its first append must begin at 0 and each later
one at ``recorded + 1``; an append that skips numbers is refused
(``InvalidEventNumberError``, nothing written). Without the check, a later
batch written after an earlier one failed would make the earlier one's
resend look like a duplicate, answered as written although it is stored
nowhere. Other writers may skip numbers.

Each writer's last ``RECENT_APPENDS`` appends (first and last number, base
offset) are kept with its state, so that a duplicate of one of them is
answered with the offset its first copy got (-1 for an older one).

``last == -1`` means no numbering (unary Produce): never de-duplicated.
Constant work per append; the table is persisted by the segment (entry
headers and record snapshots, see ``broker.segments.segment``), so none of
this depends on which broker, or which load of the segment, took the append.
"""

from __future__ import annotations

from collections.abc import Mapping

from broker.errors import InvalidEventNumberError
from broker.segments.records import RECENT_APPENDS, WriterState

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
        return self.duplicate_of(writer_id, last_event_number, event_count) is not None

    def duplicate_of(self, writer_id: str, last_event_number: int, event_count: int, *,
                     contiguous: bool = False) -> int | None:
        """None if the append is new; for a duplicate, the base offset its first copy got.

        The offset is -1 unless the append is one of the writer's last
        ``RECENT_APPENDS`` (same first and last number). Raises
        ``InvalidEventNumberError`` if it overlaps what was written, or, with
        ``contiguous``, if it does not begin right after it (at 0 for a
        writer the segment does not know).
        """
        if last_event_number < 0:
            return None
        state = self._states.get(writer_id)
        first = last_event_number - event_count + 1
        if state is not None and last_event_number <= state.last_event_number:
            return next((base for low, high, base in state.recent
                         if (low, high) == (first, last_event_number)), -1)
        recorded = -1 if state is None else state.last_event_number
        if first < 0:
            raise InvalidEventNumberError(
                f"{event_count} events ending at number {last_event_number} would begin at "
                f"{first}: event numbers start at 0", recorded)
        if first <= recorded:
            raise InvalidEventNumberError(
                f"events numbered {first} to {last_event_number} overlap what writer "
                f"{writer_id!r} wrote (up to {recorded}): a writer numbers its events "
                "consecutively and never packs them again differently", recorded)
        if contiguous and first != recorded + 1:
            raise InvalidEventNumberError(
                f"events numbered {first} to {last_event_number} skip past {recorded + 1}, "
                f"the next number of writer {writer_id!r}: its numbers are contiguous",
                recorded)
        return None

    def note(self, writer_id: str, last_event_number: int, time_ms: int, *,
             base_offset: int = -1, event_count: int = 0) -> None:
        """Record an append handed to the ledger (numbered ones only).

        With ``base_offset`` and ``event_count`` it is also one of the
        writer's recent appends.
        """
        if last_event_number < 0:
            return
        state = self._states.get(writer_id)
        recent = () if state is None else state.recent
        if base_offset >= 0 and event_count > 0:
            append = (last_event_number - event_count + 1, last_event_number, base_offset)
            recent = (*recent, append)[-RECENT_APPENDS:]
        self._states[writer_id] = WriterState(last_event_number, time_ms, recent)

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
