"""The one state machine of every append flow: an ``Enum`` and its transition table.

A *flow* is one writer's traffic to one segment on a shared Append stream
(PDP-36): an event writer's segment (``folio.write._segment_flow``), a
single-routing-key transaction writer (``folio.txn._txn_flow``), a full
transaction's segment (``folio.txn._full_flow``). Each goes through the same
states; each uses the subset it needs (only an event writer's flow waits in
SEALED for its hand-over; only a transaction's flows end CLOSED for good).

The rules the table keeps:

- A flow is READY (may send blocks) only after the broker answered its
  ``SetupAppend`` (from SETTING_UP, or from RESETTING when the setup's answer
  arrives after a block's retriable refusal); SEALED likewise.
- RESETTING (backoff after a retriable refusal) follows only a setup or a
  block on its way (SETTING_UP, READY).
- MOVING follows a ``WrongHost`` answer (the broker does not own the segment,
  see "Cluster" in admin.proto) to a setup or a block on its way (SETTING_UP,
  READY, RESETTING, SEALED), and in a cluster a lost stream (DISCONNECTED)
  whose broker cannot be reached: the flow has left its stream and waits for the
  owner to be known (given in the answer, or looked up); once registered on
  the owner's stream it is DISCONNECTED, and sets up there as after a
  reconnect. Giving up on the lookup releases it (NEW).
- The stream can break at any time (DISCONNECTED), and a flow can be released
  (NEW) or end (CLOSED) from any state; CLOSED is final.

``move`` raises :class:`FlowStateError` on any other move: a bug in the SDK,
never a broker answer, so it is not a ``FolioError``.
"""

from __future__ import annotations

from enum import Enum
from typing import Final

__all__ = ["TRANSITIONS", "FlowState", "FlowStateError", "move"]


class FlowState(Enum):
    """Where an append flow is. IO thread only."""

    NEW = "new"                    # not registered on a stream yet (or released)
    DISCONNECTED = "disconnected"  # waiting for the stream to come (back)
    SETTING_UP = "setting_up"      # SetupAppend sent, AppendSetup awaited
    RESETTING = "resetting"        # after a retriable failure, waiting to set up again
    READY = "ready"                # set up: may send blocks
    SEALED = "sealed"              # the segment is sealed: waiting for the hand-over
    MOVING = "moving"              # WrongHost: off its stream, finding the segment's owner
    CLOSED = "closed"              # released or failed for good; final


_ANY_OPEN: Final = frozenset(FlowState) - {FlowState.CLOSED}
#: Always allowed from an open state: the stream breaks, the flow is released or ends.
_ALWAYS: Final = frozenset({FlowState.NEW, FlowState.DISCONNECTED, FlowState.CLOSED})

#: state -> the states it may move to.
TRANSITIONS: Final[dict[FlowState, frozenset[FlowState]]] = {
    FlowState.NEW: _ALWAYS | {FlowState.SETTING_UP},
    # MOVING too: in a cluster, a stream to a broker that cannot be reached
    # makes its flows look their segments' owners up elsewhere.
    FlowState.DISCONNECTED: _ALWAYS | {FlowState.SETTING_UP, FlowState.MOVING},
    FlowState.SETTING_UP: _ANY_OPEN | {FlowState.CLOSED},
    FlowState.RESETTING: _ALWAYS | {FlowState.SETTING_UP, FlowState.READY, FlowState.SEALED,
                                    FlowState.MOVING},
    FlowState.READY: _ANY_OPEN | {FlowState.CLOSED},
    FlowState.SEALED: _ALWAYS | {FlowState.SETTING_UP, FlowState.SEALED, FlowState.MOVING},
    # Registered on the owner's stream (DISCONNECTED until it opens), or given up (NEW).
    FlowState.MOVING: _ALWAYS,
    FlowState.CLOSED: frozenset({FlowState.CLOSED}),
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
