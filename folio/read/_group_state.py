"""A reader group's state and its rules, as pure functions of the state.

The broker keeps the state (``folio.v1.ReaderGroupState``) and changes it only
by compare-and-set; the SDK reads it into a :class:`GroupState`, applies one
of the transitions below to a copy and writes it back with the version it
read (``folio.read.groups``). Groups.proto states the rules every client follows;
this module is them, and nothing here does IO.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from folio.api.v1 import groups_pb2
from folio.errors import InvalidArgumentError, ReaderIdInUseError, ReaderNotInGroupError
from folio.read.cuts import Checkpoint, FutureSegment

__all__ = ["FORMAT", "MAX_COMPLETED", "GroupState", "Successor"]

#: ``ReaderGroupState.format`` written and understood.
FORMAT = 1
#: Completed checkpoints kept in the state.
MAX_COMPLETED = 16


@dataclass(frozen=True, slots=True)
class Successor:
    """A segment created when another was sealed, with all its predecessors."""

    segment: str
    start_offset: int
    predecessors: tuple[str, ...]


@dataclass(slots=True)
class Pending:
    """A checkpoint in progress."""

    name: str
    waiting: set[str]
    positions: dict[str, int]
    future: dict[str, FutureSegment]


@dataclass(slots=True)
class GroupState:
    """A reader group's state; see groups.proto for the meaning of each part."""

    group: str
    topics: list[str]
    readers: dict[str, dict[str, int]] = field(default_factory=dict)
    unassigned: dict[str, int] = field(default_factory=dict)
    future: dict[str, FutureSegment] = field(default_factory=dict)
    pending: list[Pending] = field(default_factory=list)
    completed: list[Checkpoint] = field(default_factory=list)
    finished: set[str] = field(default_factory=set)
    #: reader -> the session id it joined with (tells a reader that took over
    #: a dead member's id from that member).
    sessions: dict[str, str] = field(default_factory=dict)
    #: 0: the broker's default (10 s).
    session_timeout_ms: int = 0

    # -- encoding -----------------------------------------------------------

    @classmethod
    def from_proto(cls, group: str, message: groups_pb2.ReaderGroupState) -> GroupState:
        """Decode; ``InvalidArgumentError`` for a format this SDK does not know."""
        if message.format != FORMAT:
            raise InvalidArgumentError(
                f"reader group {group!r} has state format {message.format}; this SDK knows "
                f"{FORMAT}")
        return cls(
            group=group,
            topics=list(message.topics),
            readers={r.reader_id: {s.segment: s.offset for s in r.segments}
                     for r in message.readers},
            unassigned={s.segment: s.offset for s in message.unassigned},
            future={f.segment: FutureSegment.from_proto(f) for f in message.future},
            pending=[Pending(p.name, set(p.waiting_readers),
                             {s.segment: s.offset for s in p.positions},
                             {f.segment: FutureSegment.from_proto(f) for f in p.future})
                     for p in message.pending_checkpoints],
            completed=[Checkpoint.from_proto(c) for c in message.completed_checkpoints],
            finished=set(message.finished),
            sessions={r.reader_id: r.session_id for r in message.readers},
            session_timeout_ms=message.session_timeout_ms,
        )

    def to_proto(self) -> groups_pb2.ReaderGroupState:
        """Encode (sorted, so equal states encode equally)."""
        return groups_pb2.ReaderGroupState(
            format=FORMAT,
            topics=self.topics,
            readers=[groups_pb2.ReaderAssignment(reader_id=reader, segments=_offsets(held),
                                                 session_id=self.sessions.get(reader, ""))
                     for reader, held in sorted(self.readers.items())],
            unassigned=_offsets(self.unassigned),
            future=[f.to_proto() for _, f in sorted(self.future.items())],
            pending_checkpoints=[
                groups_pb2.PendingCheckpoint(
                    name=p.name, waiting_readers=sorted(p.waiting),
                    positions=_offsets(p.positions),
                    future=[f.to_proto() for _, f in sorted(p.future.items())])
                for p in self.pending],
            completed_checkpoints=[c.to_proto() for c in self.completed],
            finished=sorted(self.finished),
            session_timeout_ms=self.session_timeout_ms,
        )

    def copy(self) -> GroupState:
        """A deep copy to change."""
        return GroupState.from_proto(self.group, self.to_proto())

    # -- starting -----------------------------------------------------------

    @classmethod
    def starting_at(cls, group: str, topics: Iterable[str], positions: Mapping[str, int],
                    future: Iterable[FutureSegment] = (),
                    finished: Iterable[str] = (), session_timeout_ms: int = 0) -> GroupState:
        """A group with no readers and every starting segment free at its offset."""
        return cls(group=group, topics=sorted(set(topics)), unassigned=dict(positions),
                   future={f.segment: f for f in future}, finished=set(finished),
                   session_timeout_ms=session_timeout_ms)

    # -- queries ------------------------------------------------------------

    def held(self, reader: str) -> dict[str, int]:
        """The segments ``reader`` holds. ``ReaderNotInGroupError`` if it is not a member."""
        try:
            return self.readers[reader]
        except KeyError:
            raise ReaderNotInGroupError(
                f"reader {reader!r} is not a member of reader group {self.group!r} (declared "
                "offline, or the group was reset or deleted)", reader_id=reader,
                group=self.group) from None

    def check_session(self, reader: str, session: str) -> None:
        """``ReaderNotInGroupError`` unless ``reader`` is a member in session ``session``."""
        self.held(reader)
        if self.sessions.get(reader, "") != session:
            raise ReaderNotInGroupError(
                f"reader {reader!r} of reader group {self.group!r} was declared offline and its "
                "id taken by a new reader", reader_id=reader, group=self.group)

    def known(self, segment: str) -> bool:
        """Whether the group still has ``segment`` to read (held, free or waiting)."""
        return (segment in self.unassigned or segment in self.future
                or any(segment in held for held in self.readers.values()))

    def checkpoint_for(self, reader: str) -> str | None:
        """The oldest checkpoint ``reader`` has not passed yet, if any."""
        for pending in self.pending:
            if reader in pending.waiting:
                return pending.name
        return None

    def _share(self, reader: str) -> int:
        """How many segments ``reader`` may hold now (fair share, ``q`` or ``q + 1``)."""
        total = len(self.unassigned) + sum(len(h) for h in self.readers.values())
        base, extra = divmod(total, max(1, len(self.readers)))
        above = sum(1 for other, held in self.readers.items()
                    if other != reader and len(held) > base)
        return base + (1 if above < extra else 0)

    # -- transitions (each changes this state in place) ---------------------

    def add_reader(self, reader: str, session: str = "") -> None:
        """A new member holding nothing. ``ReaderIdInUseError`` if the id is taken."""
        if not reader or not isinstance(reader, str):
            raise InvalidArgumentError("a reader id must be a non-empty string")
        if reader in self.readers:
            raise ReaderIdInUseError(
                f"reader {reader!r} is already a member of reader group {self.group!r}; a "
                "reader that crashed is declared offline by the broker after the group's "
                "session timeout (or at once by reader_offline)", reader_id=reader,
                group=self.group)
        self.readers[reader] = {}
        self.sessions[reader] = session

    def remove_reader(self, reader: str, positions: Mapping[str, int] | None) -> dict[str, int]:
        """The reader leaves; its segments become free at ``positions`` (else as recorded).

        It stands in for itself in the checkpoints it had not passed. Returns
        the offsets its segments were freed at.
        """
        held = self.held(reader)
        freed = {segment: (positions or {}).get(segment, offset)
                 for segment, offset in held.items()}
        del self.readers[reader]
        self.sessions.pop(reader, None)
        self.unassigned.update(freed)
        for pending in list(self.pending):
            if reader in pending.waiting:
                pending.positions.update(freed)
                pending.waiting.discard(reader)
        self._complete_checkpoints()
        return freed

    def acquire(self, reader: str) -> dict[str, int]:
        """Free segments ``reader`` takes up to its fair share; returns them with their offsets."""
        held = self.held(reader)
        want = self._share(reader) - len(held)
        taken: dict[str, int] = {}
        for segment in sorted(self.unassigned)[:max(0, want)]:
            taken[segment] = self.unassigned.pop(segment)
        held.update(taken)
        return taken

    def rebalance(self, reader: str, positions: Mapping[str, int]) -> dict[str, int]:
        """Give back segments beyond ``reader``'s fair share others are short of; returns them.

        When membership grows, the newcomers hold fewer than
        ``floor(segments / readers)``; if the free segments do not cover that
        shortfall, a reader above its fair share frees its excess (up to the
        uncovered shortfall) at ``positions`` (where it has read to), else at
        the offsets recorded. Readers sync one at a time (compare-and-set), so
        the next one sees what this one freed and frees no more than needed.
        """
        held = self.held(reader)
        total = len(self.unassigned) + sum(len(h) for h in self.readers.values())
        floor = total // max(1, len(self.readers))
        shortfall = sum(max(0, floor - len(h)) for other, h in self.readers.items()
                        if other != reader)
        count = min(len(held) - self._share(reader), shortfall - len(self.unassigned))
        released: dict[str, int] = {}
        for segment in sorted(held, reverse=True)[:max(0, count)]:
            recorded = held.pop(segment)
            released[segment] = positions.get(segment, recorded)
        self.unassigned.update(released)
        return released

    def pass_checkpoint(self, reader: str, name: str,
                        positions: Mapping[str, int]) -> dict[str, int]:
        """``reader`` passes checkpoint ``name`` at ``positions`` and gives back its excess.

        Records the offsets of the segments it holds, leaves the checkpoint's
        waiting readers (completing it when none are left) and frees segments
        beyond its fair share (rebalancing), which it returns.
        """
        held = self.held(reader)
        for segment in held:
            if segment in positions:
                held[segment] = positions[segment]
        pending = next(p for p in self.pending if p.name == name)
        pending.positions.update(held)
        pending.waiting.discard(reader)
        released: dict[str, int] = {}
        excess = len(held) - self._share(reader)
        for segment in sorted(held, reverse=True)[:max(0, excess)]:
            released[segment] = held.pop(segment)
        self.unassigned.update(released)
        self._complete_checkpoints()
        return released

    def finish_segment(self, reader: str, segment: str,
                       successors: Iterable[Successor]) -> list[str]:
        """``reader`` read ``segment`` to its end; its successors join the group.

        A successor not yet known waits for all its predecessors not read
        yet; ``segment`` is then crossed off every waiting list, and the
        successors waiting for nothing become free. Returns those.
        """
        held = self.held(reader)
        held.pop(segment, None)
        for successor in successors:
            if self.known(successor.segment) or successor.segment in self.finished:
                continue
            waiting = tuple(sorted(set(successor.predecessors) - self.finished))
            self.future[successor.segment] = FutureSegment(
                successor.segment, successor.start_offset, waiting)
        ready: list[str] = []
        for name, entry in list(self.future.items()):
            left = tuple(p for p in entry.waiting_for if p != segment)
            if left:
                self.future[name] = FutureSegment(name, entry.start_offset, left)
            else:
                del self.future[name]
                self.unassigned[name] = entry.start_offset
                ready.append(name)
        return ready

    def initiate_checkpoint(self, name: str) -> None:
        """Begin checkpoint ``name``: it waits for every reader. Names must be new."""
        if not name:
            raise InvalidArgumentError("a checkpoint needs a non-empty name")
        if any(p.name == name for p in self.pending) or \
                any(c.name == name for c in self.completed):
            raise InvalidArgumentError(
                f"reader group {self.group!r} already has a checkpoint named {name!r}")
        self.pending.append(Pending(name, set(self.readers), dict(self.unassigned),
                                    dict(self.future)))
        self._complete_checkpoints()

    def completed_checkpoint(self, name: str) -> Checkpoint | None:
        """The completed checkpoint ``name``, if it is (still) kept."""
        return next((c for c in self.completed if c.name == name), None)

    def _complete_checkpoints(self) -> None:
        for pending in list(self.pending):
            if pending.waiting:
                continue
            self.pending.remove(pending)
            self.completed.append(Checkpoint(
                self.group, pending.name, pending.positions,
                tuple(f for _, f in sorted(pending.future.items())), tuple(self.topics)))
        del self.completed[:-MAX_COMPLETED]


def _offsets(positions: Mapping[str, int]) -> list[groups_pb2.SegmentOffset]:
    return [groups_pb2.SegmentOffset(segment=s, offset=o) for s, o in sorted(positions.items())]
