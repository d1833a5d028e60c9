"""The one state machine of every append flow: an ``Enum`` and its transition table.

A *flow* is one writer's traffic to one segment on a shared Append stream
(PDP-36). Every flow runs on the one engine, ``folio._flow.FlowEngine``,
whatever its policy (an event writer's pipelined blocks, a single-routing-key
transaction writer's commits, a full transaction's blocks); the engine alone
moves the state, and every move goes through :func:`move`.

The table is tight: each state lists exactly the moves the engine makes from
it, and any other move raises :class:`FlowStateError`.

- NEW -> DISCONNECTED: registered on a stream (``FlowEngine.start``).
- DISCONNECTED -> SETTING_UP: the stream opened, ``SetupAppend`` sent; ->
  DISCONNECTED again: the stream broke once more (or a send found it gone);
  -> MOVING: in a cluster, a stream lost to a broker that cannot be reached.
- SETTING_UP -> READY: ``AppendSetup`` answered (SEALED instead when the
  setup only learnt what a sealed segment holds); -> SETTING_UP: set up once
  more (a seal learnt from the setup's refusal); -> RESETTING: a retriable
  refusal; -> MOVING: ``WrongHost``; -> DISCONNECTED: the stream broke.
- READY -> SETTING_UP: a seal (learn what the sealed segment holds); ->
  RESETTING, MOVING, DISCONNECTED as from SETTING_UP. A flow is READY (may
  send blocks) only after the broker answered its setup.
- RESETTING (backoff after a retriable refusal: no answer is routed to the
  flow meanwhile) -> SETTING_UP when the backoff is over; -> DISCONNECTED.
- SEALED (the sealed segment told what it holds; the rest is handed over)
  -> DISCONNECTED only: it never sends again.
- MOVING (off its stream, the owner being found) -> DISCONNECTED: registered
  on the owner's stream, it sets up there as after a reconnect; -> NEW: the
  lookup gave up (an event writer's flow registers again later).
- Every state but CLOSED -> CLOSED: released, or failed for good. CLOSED is
  final: no move leaves it.

``move`` raises :class:`FlowStateError` on any other move: a bug in the SDK,
never a broker answer, so it is not a ``FolioError``.
"""

from __future__ import annotations

from enum import Enum
from typing import Final

__all__ = ["TRANSITIONS", "FlowState", "FlowStateError", "move"]


class FlowState(Enum):
    """Where an append flow is. Its engine's event loop only."""

    NEW = "new"                    # not registered on a stream (yet, or after a failed move)
    DISCONNECTED = "disconnected"  # waiting for the stream to come (back)
    SETTING_UP = "setting_up"      # SetupAppend sent, AppendSetup awaited
    RESETTING = "resetting"        # after a retriable failure, waiting to set up again
    READY = "ready"                # set up: may send blocks
    SEALED = "sealed"              # the segment is sealed: waiting for the hand-over
    MOVING = "moving"              # WrongHost: off its stream, finding the segment's owner
    CLOSED = "closed"              # released or failed for good; final


_S = FlowState

#: state -> the states it may move to (the module docstring says when).
TRANSITIONS: Final[dict[FlowState, frozenset[FlowState]]] = {
    _S.NEW: frozenset({_S.DISCONNECTED, _S.CLOSED}),
    _S.DISCONNECTED: frozenset({_S.DISCONNECTED, _S.SETTING_UP, _S.MOVING, _S.CLOSED}),
    _S.SETTING_UP: frozenset({_S.SETTING_UP, _S.READY, _S.SEALED, _S.RESETTING,
                              _S.DISCONNECTED, _S.MOVING, _S.CLOSED}),
    _S.READY: frozenset({_S.SETTING_UP, _S.RESETTING, _S.DISCONNECTED, _S.MOVING,
                         _S.CLOSED}),
    _S.RESETTING: frozenset({_S.SETTING_UP, _S.DISCONNECTED, _S.CLOSED}),
    _S.SEALED: frozenset({_S.DISCONNECTED, _S.CLOSED}),
    _S.MOVING: frozenset({_S.DISCONNECTED, _S.NEW, _S.CLOSED}),
    _S.CLOSED: frozenset(),
}


class FlowStateError(RuntimeError):
    """A flow was asked to make a move its transition table does not allow (an SDK bug)."""

    def __init__(self, segment: str, current: FlowState, to: FlowState) -> None:
        super().__init__(f"append flow to {segment!r}: no move from {current.name} to {to.name}")
        self.segment = segment
        self.current = current
        self.to = to


def move(current: FlowState, to: FlowState, segment: str) -> FlowState:
    """``to`` if the table allows ``current -> to``; else raises :class:`FlowStateError`."""
    if to not in TRANSITIONS[current]:
        raise FlowStateError(segment, current, to)
    return to
