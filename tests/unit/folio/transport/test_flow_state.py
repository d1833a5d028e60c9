"""The append flows' one state machine: the table allows the engine's moves, refuses the rest.

The table is tight (issue 28): every move not listed raises, which
``test_every_move_not_in_the_table_raises`` checks pair by pair.
"""

from __future__ import annotations

import itertools

import pytest

from folio._transport.flow_state import TRANSITIONS, FlowState, FlowStateError, move

S = FlowState

#: The table as documented in flow_state's docstring: what the engine does, nothing more.
DOCUMENTED = {
    S.NEW: {S.DISCONNECTED, S.CLOSED},
    S.DISCONNECTED: {S.DISCONNECTED, S.SETTING_UP, S.MOVING, S.CLOSED},
    S.SETTING_UP: {S.SETTING_UP, S.READY, S.SEALED, S.RESETTING, S.DISCONNECTED, S.MOVING,
                   S.CLOSED},
    S.READY: {S.SETTING_UP, S.RESETTING, S.DISCONNECTED, S.MOVING, S.CLOSED},
    S.RESETTING: {S.SETTING_UP, S.DISCONNECTED, S.CLOSED},
    S.SEALED: {S.DISCONNECTED, S.CLOSED},
    S.MOVING: {S.DISCONNECTED, S.NEW, S.CLOSED},
    S.CLOSED: set(),
}


def test_every_state_has_a_row() -> None:
    assert set(TRANSITIONS) == set(FlowState)


@pytest.mark.parametrize(("current", "to"), [
    (S.NEW, S.DISCONNECTED),           # registered on a stream
    (S.DISCONNECTED, S.SETTING_UP),    # the stream is open: SetupAppend
    (S.SETTING_UP, S.READY),           # AppendSetup answered
    (S.READY, S.RESETTING),            # a retriable refusal
    (S.SETTING_UP, S.RESETTING),
    (S.RESETTING, S.SETTING_UP),       # backoff over
    (S.READY, S.SETTING_UP),           # a seal: set up once more to learn what landed
    (S.SETTING_UP, S.SEALED),
    (S.READY, S.DISCONNECTED),         # the stream broke
    (S.SEALED, S.CLOSED),              # released after the hand-over
    (S.READY, S.CLOSED),               # failed for good
    (S.READY, S.MOVING),               # WrongHost: off to the segment's owner
    (S.SETTING_UP, S.MOVING),
    (S.MOVING, S.DISCONNECTED),        # registered on the owner's stream
    (S.MOVING, S.NEW),                 # the lookup gave up: registered again later
    (S.DISCONNECTED, S.MOVING),        # a cluster's broker is gone: look the owner up
])
def test_the_moves_flows_make_are_allowed(current: FlowState, to: FlowState) -> None:
    assert move(current, to, "orders/0") is to


@pytest.mark.parametrize(("current", "to"), [
    (S.NEW, S.READY),                  # ready without a setup answer
    (S.DISCONNECTED, S.READY),
    (S.DISCONNECTED, S.SEALED),
    (S.NEW, S.RESETTING),
    (S.RESETTING, S.RESETTING),
    (S.SEALED, S.READY),               # a sealed segment never takes blocks again
    (S.CLOSED, S.NEW),                 # CLOSED is final
    (S.CLOSED, S.SETTING_UP),
    (S.CLOSED, S.READY),
    (S.MOVING, S.READY),               # ready only after a setup on the owner
    (S.MOVING, S.SETTING_UP),          # a setup only once registered on the owner's stream
    (S.NEW, S.MOVING),                 # only an answer on a stream moves a flow
    (S.CLOSED, S.MOVING),
    # Allowed before the one engine (issue 28), never made by it:
    (S.NEW, S.SETTING_UP),             # a flow registers (DISCONNECTED) before it sets up
    (S.RESETTING, S.READY),            # no answer is routed while resetting
    (S.RESETTING, S.MOVING),
    (S.SEALED, S.SEALED),
    (S.SEALED, S.NEW),                 # released is CLOSED
    (S.SEALED, S.MOVING),              # a sealed flow sends nothing more, follows no one
    (S.CLOSED, S.CLOSED),              # release and die are no-ops once CLOSED
    (S.READY, S.NEW),
])
def test_other_moves_raise(current: FlowState, to: FlowState) -> None:
    with pytest.raises(FlowStateError, match=f"orders/0.*{current.name} to {to.name}") as caught:
        move(current, to, "orders/0")
    error = caught.value
    assert (error.segment, error.current, error.to) == ("orders/0", current, to)


def test_no_move_leaves_closed() -> None:
    assert TRANSITIONS[S.CLOSED] == frozenset()


def test_the_table_is_the_documented_one() -> None:
    assert {state: set(moves) for state, moves in TRANSITIONS.items()} == DOCUMENTED


@pytest.mark.parametrize(("current", "to"), [
    pair for pair in itertools.product(FlowState, FlowState) if pair[1] not in DOCUMENTED[pair[0]]
])
def test_every_move_not_in_the_table_raises(current: FlowState, to: FlowState) -> None:
    with pytest.raises(FlowStateError):
        move(current, to, "orders/0")


@pytest.mark.parametrize(("current", "to"), [
    (current, to) for current, moves in DOCUMENTED.items()
    for to in sorted(moves, key=lambda state: state.name)  # one order in every xdist worker
])
def test_every_move_in_the_table_is_made(current: FlowState, to: FlowState) -> None:
    assert move(current, to, "orders/0") is to
