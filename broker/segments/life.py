"""Where a loaded segment is in its life on this broker: one part, one table, one set of errors.

``SegmentLife`` is the part of a ``LedgerSegment`` that owns its life cycle and
answers, in one place, whether a call may go on and with which error it fails.
It holds three facts that change independently, each a small state machine:

- **residence** (``Residence``): OPEN on this broker, then CLOSING and CLOSED
  (a graceful close), HANDING_OVER and MOVED (another broker takes it, or this
  one lost it: calls answer ``WrongHostError``), or DELETED. The moves are the
  table ``RESIDENCE_MOVES``; a move not in it raises ``SegmentLifeError``.
  DELETED is the end: nothing moves a deleted segment back.
- **seal** (``SealStage``): UNSEALED, SEALING (appends refused while the
  appends accepted before the seal land and the record is written) and SEALED
  (the record says so and the end offset is final: readers may be told the
  end). Only forward: ``SEAL_MOVES``. A seal whose record write fails stays
  SEALING: sealed in memory, not known to be in the record (the segment fails
  and is loaded again from the record).
- **failure**: why appends fail for good, or None. The first failure stays
  (later errors are consequences of it), except that another broker taking
  the record over (``taken``) always wins: the caller must be sent elsewhere.

They are independent, so they are not folded into one enumeration: a failed
segment is still read (until its owner loads it again), a sealed one still
takes transaction markers and is closed like any other, and a moved one may
have failed or be sealed. Each is still a table; the errors come from
``check_readable`` and ``check_appendable`` only.
"""

from __future__ import annotations

import logging
from enum import Enum

from broker.errors import (
    BrokerShuttingDownError,
    NoSuchSegmentError,
    SegmentSealedError,
    WrongHostError,
)
from ledger.errors import LedgerDeletedError, LedgerError, LedgerFencedError

__all__ = [
    "RESIDENCE_MOVES",
    "SEAL_MOVES",
    "Residence",
    "ResidenceEvent",
    "SealStage",
    "SegmentLife",
    "SegmentLifeError",
]

log = logging.getLogger(__name__)


class Residence(Enum):
    """Where a loaded segment is on this broker."""

    OPEN = "open"
    CLOSING = "closing"  # a graceful close is draining the appends under way
    HANDING_OVER = "handing_over"  # the same, for another broker that takes it
    CLOSED = "closed"
    MOVED = "moved"  # handed over, or lost with the session
    DELETED = "deleted"


class ResidenceEvent(Enum):
    """What moves a segment's residence."""

    CLOSE = "close"  # a graceful close begins (shutdown)
    HAND_OVER = "hand_over"  # a graceful close begins because another broker takes it
    CLOSED = "closed"  # the graceful close finished
    ABANDON = "abandon"  # this broker lost the segment: refuse everything, touch nothing
    DELETE = "delete"  # deleted here or elsewhere, or its record found gone


_ANY_LIVE = (Residence.OPEN, Residence.CLOSING, Residence.HANDING_OVER, Residence.CLOSED,
             Residence.MOVED)

#: ``(residence, event) -> residence``; a pair not here is a bad move.
RESIDENCE_MOVES: dict[tuple[Residence, ResidenceEvent], Residence] = {
    (Residence.OPEN, ResidenceEvent.CLOSE): Residence.CLOSING,
    (Residence.OPEN, ResidenceEvent.HAND_OVER): Residence.HANDING_OVER,
    (Residence.CLOSING, ResidenceEvent.CLOSED): Residence.CLOSED,
    (Residence.HANDING_OVER, ResidenceEvent.CLOSED): Residence.MOVED,
    # Lost while a close was under way: the close still finishes, the segment stays moved.
    (Residence.MOVED, ResidenceEvent.CLOSED): Residence.MOVED,
    # Found deleted while a close was under way (its record gone): it stays deleted.
    (Residence.DELETED, ResidenceEvent.CLOSED): Residence.DELETED,
    **{(state, ResidenceEvent.ABANDON): Residence.MOVED for state in _ANY_LIVE},
    (Residence.DELETED, ResidenceEvent.ABANDON): Residence.DELETED,
    **{(state, ResidenceEvent.DELETE): Residence.DELETED for state in Residence},
}


class SealStage(Enum):
    """How far a segment is sealed."""

    UNSEALED = "unsealed"
    SEALING = "sealing"  # appends refused; the record does not (yet, or knowingly) say sealed
    SEALED = "sealed"  # recorded: the end offset is final


#: The seal only goes forward (a record loaded sealed starts SEALED).
SEAL_MOVES: dict[SealStage, frozenset[SealStage]] = {
    SealStage.UNSEALED: frozenset({SealStage.SEALING}),
    SealStage.SEALING: frozenset({SealStage.SEALED}),
    SealStage.SEALED: frozenset(),
}


class SegmentLifeError(RuntimeError):
    """A move the life cycle's tables do not allow: a bug in the caller, never input."""


class SegmentLife:
    """The life cycle of one loaded segment (see the module docstring).

    Args:
        name: the segment's name, for errors and logs.
        sealed: the segment record says sealed (the segment starts SEALED).
    """

    def __init__(self, name: str, *, sealed: bool) -> None:
        self._name = name
        self._residence = Residence.OPEN
        self._seal = SealStage.SEALED if sealed else SealStage.UNSEALED
        self._failure: Exception | None = None

    @property
    def residence(self) -> Residence:
        """Where the segment is on this broker."""
        return self._residence

    @property
    def is_open(self) -> bool:
        """OPEN on this broker (failed or sealed, perhaps: see ``usable``)."""
        return self._residence is Residence.OPEN

    @property
    def seal_stage(self) -> SealStage:
        """How far the segment is sealed."""
        return self._seal

    @property
    def sealed(self) -> bool:
        """Appends are refused for good: SEALING or SEALED."""
        return self._seal is not SealStage.UNSEALED

    @property
    def end_final(self) -> bool:
        """Sealed, and every append accepted before the seal durable: the end is final."""
        return self._seal is SealStage.SEALED

    @property
    def failure(self) -> Exception | None:
        """Why appends fail for good (``WrongHostError``: another broker took it), or None."""
        return self._failure

    @property
    def usable(self) -> bool:
        """OPEN and not failed; otherwise the owner should load it again."""
        return self._residence is Residence.OPEN and self._failure is None

    def move(self, event: ResidenceEvent) -> Residence:
        """Apply ``event`` by ``RESIDENCE_MOVES``; the new residence.

        Raises:
            SegmentLifeError: the table has no such move from the residence now.
        """
        after = RESIDENCE_MOVES.get((self._residence, event))
        if after is None:
            raise SegmentLifeError(f"segment {self._name}: no move {event.value!r} from "
                                   f"{self._residence.value}")
        self._residence = after
        return after

    def advance_seal(self, stage: SealStage) -> None:
        """Move the seal forward to ``stage`` by ``SEAL_MOVES``.

        Raises:
            SegmentLifeError: ``stage`` is not the next stage.
        """
        if stage not in SEAL_MOVES[self._seal]:
            raise SegmentLifeError(f"segment {self._name}: seal cannot go from "
                                   f"{self._seal.value} to {stage.value}")
        self._seal = stage

    def fail(self, error: BaseException) -> None:
        """Appends fail for good from now on; the first failure stays.

        A fenced ledger means another broker recovered the segment: the failure
        is then ``WrongHostError``; a deleted one that the segment was deleted
        elsewhere (its record watch has not fired yet): ``NoSuchSegmentError``.
        """
        if self._failure is not None:
            return
        if isinstance(error, LedgerDeletedError):
            log.info("segment %s: its ledger was deleted; the segment is gone", self._name)
            self._failure = NoSuchSegmentError(self._name)
        elif isinstance(error, LedgerFencedError):
            log.info("segment %s: its ledger was fenced; another broker owns it", self._name)
            self._failure = WrongHostError(self._name)
        else:
            log.warning("segment %s: ledger write failed, no more appends: %s",
                        self._name, error)
            self._failure = error if isinstance(error, Exception) else LedgerError(str(error))

    def taken(self) -> WrongHostError:
        """Another broker wrote the record: fail WrongHost (over any earlier failure)."""
        self._failure = WrongHostError(self._name)
        return WrongHostError(self._name)

    def failure_error(self) -> Exception:
        """The error an append on the failed segment raises (a fresh WrongHost)."""
        failure = self._failure
        if isinstance(failure, WrongHostError):
            return WrongHostError(self._name)
        if isinstance(failure, NoSuchSegmentError):
            return NoSuchSegmentError(self._name)
        return failure or LedgerError(f"segment {self._name} failed")

    def check_readable(self) -> None:
        """Raise unless the segment is OPEN here.

        Raises:
            NoSuchSegmentError: DELETED.
            WrongHostError: HANDING_OVER or MOVED (another broker has it).
            BrokerShuttingDownError: CLOSING or CLOSED.
        """
        residence = self._residence
        if residence is Residence.OPEN:
            return
        if residence is Residence.DELETED:
            raise NoSuchSegmentError(self._name)
        if residence in (Residence.HANDING_OVER, Residence.MOVED):
            raise WrongHostError(self._name)
        raise BrokerShuttingDownError(f"segment {self._name} is closed")

    def check_appendable(self, end_offset: int) -> None:
        """Raise unless an append may go on: readable, not sealed, not failed.

        Raises:
            what ``check_readable`` raises; ``SegmentSealedError`` (with
            ``end_offset``) when sealed; the failure (``failure_error``).
        """
        self.check_readable()
        if self._seal is not SealStage.UNSEALED:
            raise SegmentSealedError(self._name, end_offset)
        if self._failure is not None:
            raise self.failure_error()
