"""The append flows' one state machine: the table allows the flows' moves, refuses the rest."""

from __future__ import annotations

import pytest

from folio._transport.flow_state import TRANSITIONS, FlowState, FlowStateError, move

S = FlowState


def test_every_state_has_a_row() -> None:
    assert set(TRANSITIONS) == set(FlowState)


@pytest.mark.parametrize(("current", "to"), [
    (S.NEW, S.DISCONNECTED),           # registered on a stream
    (S.DISCONNECTED, S.SETTING_UP),    # the stream is open: SetupAppend
    (S.NEW, S.SETTING_UP),             # a full transaction's flow sets up on first open
    (S.SETTING_UP, S.READY),           # AppendSetup answered
    (S.READY, S.RESETTING),            # a retriable refusal
    (S.SETTING_UP, S.RESETTING),
    (S.RESETTING, S.READY),            # the setup's answer after a block's refusal
    (S.RESETTING, S.SETTING_UP),       # backoff over
    (S.READY, S.SETTING_UP),           # a seal: set up once more to learn what landed
    (S.SETTING_UP, S.SEALED),
    (S.SEALED, S.SEALED),
    (S.READY, S.DISCONNECTED),         # the stream broke
    (S.SEALED, S.NEW),                 # released
    (S.READY, S.CLOSED),               # failed for good
    (S.CLOSED, S.CLOSED),
    (S.READY, S.MOVING),               # WrongHost: off to the segment's owner
    (S.SETTING_UP, S.MOVING),
    (S.RESETTING, S.MOVING),
    (S.SEALED, S.MOVING),              # the sealing setup answered by a broker that lost it
    (S.MOVING, S.DISCONNECTED),        # registered on the owner's stream
    (S.MOVING, S.NEW),                 # the lookup gave up: released
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
])
def test_other_moves_raise(current: FlowState, to: FlowState) -> None:
    with pytest.raises(FlowStateError, match=f"orders/0.*{current.name} to {to.name}") as caught:
        move(current, to, "orders/0")
    error = caught.value
    assert (error.segment, error.current, error.to) == ("orders/0", current, to)


def test_only_closed_moves_out_of_closed() -> None:
    assert TRANSITIONS[S.CLOSED] == frozenset({S.CLOSED})
