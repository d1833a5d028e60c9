"""The in-flight records of one share partition: offset ranges with a state (KIP-932).

A share partition (one group reading one topic partition) keeps its
share-partition start offset (SPSO, ``start``: every record before it is
done with) and, above it up to ``end`` (the next offset never fetched yet),
runs: contiguous offset ranges whose records share a state, a delivery
count and, while acquired, the member holding them and its lock's deadline.
The runs cover ``[start, end)`` without holes; offsets that hold no record
(an aborted transaction's data for read_committed, control entries) lie in
ARCHIVED runs.

The states and their moves are ``MOVES`` (a bad move raises
``RecordStateError``, never an ``assert``)::

    AVAILABLE -> ACQUIRED                      (a fetch hands it to a member)
    ACQUIRED  -> AVAILABLE                     (RELEASE, lock expired, member gone)
    ACQUIRED  -> ACKNOWLEDGED                  (ACCEPT)
    ACQUIRED  -> ARCHIVED                      (REJECT, GAP; RELEASE or expiry at the
                                                delivery-count limit)

RENEW (KIP-1222) is no move: an ACQUIRED run stays so, its lock's deadline
later.

Work is per run, not per record: a fetch acquires whole blocks as one run
each, an acknowledgement of a range splits at most two runs and sets the
state of those between; runs in a terminal state next to each other merge,
and the start moves past the leading terminal runs. A run is split per
record only when a client acknowledges record by record with different
types.
"""

from __future__ import annotations

import bisect
import enum
from dataclasses import dataclass

__all__ = ["MOVES", "AckType", "RecordState", "RecordStateError", "Run", "ShareRecords",
           "share_lag"]


class RecordState(enum.Enum):
    """A record's state in a share partition (the codes are Kafka's persisted ones)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AckType(enum.IntEnum):
    """ShareFetch / ShareAcknowledge acknowledge types."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    #: KIP-1222 (ShareFetch / ShareAcknowledge v2): the member's lock starts again; the
    #: state, the delivery count and the written state stay as they are.
    RENEW = 4


MOVES: dict[RecordState, frozenset[RecordState]] = {
    RecordState.AVAILABLE: frozenset({RecordState.ACQUIRED}),
    RecordState.ACQUIRED: frozenset({RecordState.AVAILABLE, RecordState.ACKNOWLEDGED,
                                     RecordState.ARCHIVED}),
    RecordState.ACKNOWLEDGED: frozenset(),
    RecordState.ARCHIVED: frozenset(),
}
_TERMINAL = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


class RecordStateError(Exception):
    """A move ``MOVES`` does not allow, or offsets not acquired by the member."""


@dataclass(slots=True)
class Run:
    """Records ``first..last`` (inclusive) in one state."""

    first: int
    last: int
    state: RecordState
    delivery_count: int = 0
    member_id: str | None = None
    #: The lock's deadline (the event loop's clock), while ACQUIRED.
    deadline: float = 0.0

    def move(self, state: RecordState) -> None:
        if state not in MOVES[self.state]:
            raise RecordStateError(f"records {self.first}-{self.last} are {self.state.name}, "
                                   f"cannot become {state.name}")
        self.state = state
        if state is not RecordState.ACQUIRED:
            self.member_id = None
            self.deadline = 0.0


class ShareRecords:
    """The runs of one share partition (module docstring).

    Args:
        start: the SPSO.
        runs: the runs above it (loaded), contiguous from ``start``.
    """

    def __init__(self, start: int, runs: list[Run] | None = None) -> None:
        self.start = start
        self.runs: list[Run] = runs or []
        self.end = self.runs[-1].last + 1 if self.runs else start
        self._compact()

    # ------------------------------------------------------------ reading the state

    def in_flight(self) -> int:
        """Offsets between the start and the end (what ``max_in_flight`` bounds)."""
        return self.end - self.start

    def available(self) -> list[Run]:
        """The AVAILABLE runs, oldest first."""
        return [run for run in self.runs if run.state is RecordState.AVAILABLE]

    def next_deadline(self) -> float | None:
        """The earliest lock deadline, None if nothing is acquired."""
        deadlines = [run.deadline for run in self.runs if run.state is RecordState.ACQUIRED]
        return min(deadlines) if deadlines else None

    # ------------------------------------------------------------ moves

    def move_start(self, offset: int) -> None:
        """Records before ``offset`` are gone from the log (truncated): done with."""
        if offset <= self.start:
            return
        self.runs = [run for run in self.runs if run.last >= offset]
        if self.runs and self.runs[0].first < offset:
            self.runs[0].first = offset
        self.start = offset
        self.end = max(self.end, offset)

    def acquire(self, run: Run, member_id: str, deadline: float) -> None:
        """Hand an AVAILABLE run to ``member_id``; its delivery count grows."""
        run.move(RecordState.ACQUIRED)
        run.member_id = member_id
        run.deadline = deadline
        run.delivery_count += 1

    def add(self, first: int, last: int, member_id: str | None, deadline: float) -> None:
        """Records fetched for the first time, ``first..last`` from ``end`` on: acquired by
        ``member_id`` (None: no record there, ARCHIVED). An offset before ``end`` is ignored."""
        first = max(first, self.end)
        if last < first:
            return
        if first > self.end:  # nothing stored between: no record to deliver
            self.runs.append(Run(self.end, first - 1, RecordState.ARCHIVED))
        if member_id is None:
            self.runs.append(Run(first, last, RecordState.ARCHIVED))
        else:
            self.runs.append(Run(first, last, RecordState.ACQUIRED, 1, member_id, deadline))
        self.end = last + 1
        self._compact()

    def split_at(self, offset: int) -> None:
        """Split the run holding ``offset`` so that one starts there (a fetch that takes
        only the head of a run: record-limit mode)."""
        self._split(offset)

    def acknowledge(self, member_id: str, first: int, last: int, ack: AckType,
                    limit: int, deadline: float = 0.0) -> None:
        """Apply ``ack`` to ``first..last``, all acquired by ``member_id``.

        Raises ``RecordStateError`` (and changes nothing) when any of them is not
        acquired by the member. RELEASE makes them AVAILABLE again, ARCHIVED once
        delivered ``limit`` times; RENEW keeps them ACQUIRED with the lock's new
        ``deadline``.
        """
        if first > last or first < self.start or last >= self.end:
            raise RecordStateError(f"offsets {first}-{last} are not in flight "
                                   f"[{self.start}, {self.end})")
        low, high = self._split(first), self._split(last + 1)
        touched = self.runs[low:high]
        for run in touched:
            if run.state is not RecordState.ACQUIRED or run.member_id != member_id:
                self._compact()
                raise RecordStateError(f"offsets {run.first}-{run.last} are {run.state.name}, "
                                       "not acquired by this member")
        for run in touched:
            if ack is AckType.RENEW:
                run.deadline = deadline
            else:
                run.move(_target(ack, run.delivery_count, limit))
        self._compact()

    def release(self, limit: int, *, member_id: str | None = None,
                now: float | None = None) -> bool:
        """Give back acquired runs: the member's (``member_id``) or those whose lock
        expired by ``now``. True if any became AVAILABLE or ARCHIVED."""
        changed = False
        for run in self.runs:
            if run.state is not RecordState.ACQUIRED:
                continue
            if (member_id is not None and run.member_id == member_id) or (
                    now is not None and run.deadline <= now):
                run.move(RecordState.ARCHIVED if run.delivery_count >= limit
                         else RecordState.AVAILABLE)
                changed = True
        if changed:
            self._compact()
        return changed

    # ------------------------------------------------------------ internals

    def _split(self, offset: int) -> int:
        """The index of the run starting at ``offset``, splitting the one holding it."""
        firsts = [run.first for run in self.runs]
        index = bisect.bisect_right(firsts, offset) - 1
        if index < 0:
            return 0
        run = self.runs[index]
        if run.first == offset:
            return index
        if offset > run.last:
            return index + 1
        tail = Run(offset, run.last, run.state, run.delivery_count, run.member_id, run.deadline)
        run.last = offset - 1
        self.runs.insert(index + 1, tail)
        return index + 1

    def _compact(self) -> None:
        """Merge neighbouring runs alike; move the start past the leading terminal runs."""
        merged: list[Run] = []
        for run in self.runs:
            previous = merged[-1] if merged else None
            if previous is not None and previous.last + 1 == run.first and \
                    previous.state is run.state and \
                    (run.state in _TERMINAL or (
                        previous.delivery_count == run.delivery_count
                        and previous.member_id == run.member_id
                        and previous.deadline == run.deadline)):
                previous.last = run.last
                previous.delivery_count = max(previous.delivery_count, run.delivery_count)
                continue
            merged.append(run)
        while merged and merged[0].state in _TERMINAL:
            self.start = merged.pop(0).last + 1
        self.runs = merged


def _target(ack: AckType, delivery_count: int, limit: int) -> RecordState:
    if ack is AckType.ACCEPT:
        return RecordState.ACKNOWLEDGED
    if ack is AckType.RELEASE and delivery_count < limit:
        return RecordState.AVAILABLE
    return RecordState.ARCHIVED


def share_lag(records: ShareRecords, end_offset: int) -> int:
    """Records from the share partition's start offset to ``end_offset`` not yet
    acknowledged or archived (Kafka's share lag, DescribeShareGroupOffsets v1)."""
    done = sum(run.last - run.first + 1 for run in records.runs
               if run.state in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED))
    return max(end_offset - records.start - done, 0)
