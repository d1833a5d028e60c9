"""``SessionGate``: what a cluster broker may do with its containers, by its metadata session.

A broker's containers are proved by ephemeral ZooKeeper nodes, so they are
only as good as its session. The store reports the session
(``ledger.api.SessionState``); this gate turns the reports into one of three
``OwnershipPhase`` values, by a transition table (a move not in it is a bug
and raises ``SessionGateError``):

- ``SERVING``: connected; the containers held are served, reads and writes.
- ``PAUSED`` (``SUSPENDED``: the connection is gone, the session perhaps
  alive): writes are refused at once with ``refusal``: a ``WrongHostError``
  without an owner and with a message saying why, which clients retry after
  a lookup (with backoff). Nothing is unloaded: segments, ledgers and
  ownership nodes stay as they are, appends already handed to a ledger
  finish, and reads of loaded segments go on. Why at once: kazoo notices a
  lost connection up to about two thirds of the session timeout after
  ZooKeeper last heard from it, so by then the session may have expired on
  the server and another broker may own the containers. An append of ours
  would then meet the new owner's fence, or (before the new owner loaded the
  segment) be acknowledged by a broker that no longer owns the segment: its
  recovery keeps the entry, so nothing is lost, but only an owner may serve
  a segment. A broker that cannot know stops writing, as Curator's leader
  latch does on SUSPENDED.
- ``STOPPED`` (``LOST``, or ``PAUSED`` for longer than the grace, the session
  timeout: by then the session has expired on the server, and kazoo reports
  ``LOST`` only once reconnected): every container stops being served and its
  loaded segments are dropped; the broker joins the balance anew once connected.

``CONNECTED`` from ``PAUSED`` (reconnected within the session) resumes at
once: nothing was unloaded, so nothing is reloaded. ``CONNECTED`` from
``STOPPED`` is a new session: the containers are claimed again, and their
segments are loaded (recovered) afresh.

Each change is logged (WARNING when writes stop, INFO when they resume) and
shown by the gauge ``folio_broker_ownership_phase{phase}`` (1 for the phase now).
"""

from __future__ import annotations

import logging
from enum import Enum
from typing import Final

from broker.errors import WrongHostError
from broker.metrics import OWNERSHIP_PHASE
from ledger.api import SessionState

__all__ = ["GRACE_PASSED", "TRANSITIONS", "OwnershipPhase", "SessionGate", "SessionGateError"]

log = logging.getLogger(__name__)


class OwnershipPhase(Enum):
    """What the broker does with the containers it holds (see the module docstring)."""

    SERVING = "serving"
    PAUSED = "paused"
    STOPPED = "stopped"


class SessionGateError(Exception):
    """A move the transition table does not allow (a bug, never a store report)."""


#: The event of the grace timer: PAUSED for the whole session timeout.
GRACE_PASSED: Final = "grace_passed"

_S, _P, _X = OwnershipPhase.SERVING, OwnershipPhase.PAUSED, OwnershipPhase.STOPPED
_C, _SU, _L = SessionState.CONNECTED, SessionState.SUSPENDED, SessionState.LOST

#: (phase, event) -> next phase. Every store report is allowed in every phase;
#: the grace timer only while PAUSED (it is cancelled on any other move).
TRANSITIONS: Final[dict[tuple[OwnershipPhase, SessionState | str], OwnershipPhase]] = {
    (_S, _C): _S, (_S, _SU): _P, (_S, _L): _X,
    (_P, _C): _S, (_P, _SU): _P, (_P, _L): _X, (_P, GRACE_PASSED): _X,
    # STOPPED stays STOPPED until connected again (a new session, or the old
    # one that outlived the grace: either way the balance runs anew).
    (_X, _C): _S, (_X, _SU): _X, (_X, _L): _X,
}


class SessionGate:
    """The phase of one broker's ownership (see the module docstring).

    Args:
        broker_id: named in log lines and in the refusals' message.
    """

    def __init__(self, broker_id: str = "") -> None:
        self.broker_id = broker_id
        self.phase = OwnershipPhase.SERVING
        self._show()

    @property
    def paused(self) -> bool:
        """Whether writes must be refused now (one attribute read: per block is fine)."""
        return self.phase is OwnershipPhase.PAUSED

    def refusal(self, name: str) -> WrongHostError:
        """The answer to a write of segment (or topic) ``name`` while paused."""
        return WrongHostError(name, "", message=(
            f"broker {self.broker_id} lost its metadata-store connection; retry (it writes "
            f"nothing until it reconnects, or another broker takes {name!r} over)"))

    def move(self, event: SessionState | str) -> OwnershipPhase:
        """The phase after ``event`` (a store report or ``GRACE_PASSED``); logs a change.

        Raises:
            SessionGateError: ``event`` is not allowed in the phase now.
        """
        before = self.phase
        after = TRANSITIONS.get((before, event))
        if after is None:
            raise SessionGateError(f"broker {self.broker_id}: no move from {before.value} "
                                   f"on {getattr(event, 'value', event)}")
        self.phase = after
        if after is not before:
            self._show()
            why = getattr(event, "value", event)
            if after is OwnershipPhase.PAUSED:
                log.warning("broker %s: metadata-store connection lost (session %s): writes "
                            "paused, containers kept", self.broker_id, why)
            elif after is OwnershipPhase.STOPPED:
                log.warning("broker %s: metadata session %s: containers given up",
                            self.broker_id, "stayed lost for the session timeout"
                            if event == GRACE_PASSED else why)
            else:
                log.info("broker %s: metadata session connected: writes %s", self.broker_id,
                         "resumed, nothing reloaded" if before is OwnershipPhase.PAUSED
                         else "served again once containers are claimed")
        return after

    def _show(self) -> None:
        # One broker per process: the gauge is the process's.
        for phase in OwnershipPhase:
            OWNERSHIP_PHASE.labels(phase.value).set(1 if phase is self.phase else 0)
