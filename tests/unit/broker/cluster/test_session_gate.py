"""The pause/resume state machine of a cluster broker's ownership, and its refusal on the wire."""

from __future__ import annotations

import grpc
import pytest
from prometheus_client import REGISTRY

from broker.cluster.session_gate import (
    GRACE_PASSED,
    TRANSITIONS,
    OwnershipPhase,
    SessionGate,
    SessionGateError,
)
from broker.errors import WrongHostError
from broker.status import is_retriable, status_for, trailing_metadata_for
from folio import _status
from folio import errors as e
from folio.api.v1.errors_pb2 import ErrorCode
from ledger.api import SessionState

_C, _S, _L = SessionState.CONNECTED, SessionState.SUSPENDED, SessionState.LOST


def _gauge(phase: OwnershipPhase) -> float | None:
    return REGISTRY.get_sample_value("folio_broker_ownership_phase", {"phase": phase.value})


def test_suspended_pauses_and_connected_resumes_without_stopping() -> None:
    gate = SessionGate("b1:7070")
    assert gate.phase is OwnershipPhase.SERVING and not gate.paused
    assert gate.move(_S) is OwnershipPhase.PAUSED
    assert gate.paused
    assert _gauge(OwnershipPhase.PAUSED) == 1 and _gauge(OwnershipPhase.SERVING) == 0
    assert gate.move(_S) is OwnershipPhase.PAUSED  # reported again: still paused
    assert gate.move(_C) is OwnershipPhase.SERVING
    assert not gate.paused
    assert _gauge(OwnershipPhase.SERVING) == 1 and _gauge(OwnershipPhase.PAUSED) == 0


@pytest.mark.parametrize("ending", [_L, GRACE_PASSED])
def test_lost_or_the_grace_passing_stops_until_connected_again(ending: object) -> None:
    gate = SessionGate("b1:7070")
    gate.move(_S)
    assert gate.move(ending) is OwnershipPhase.STOPPED  # type: ignore[arg-type]
    assert not gate.paused  # nothing is served at all: WrongHost, not a pause
    assert _gauge(OwnershipPhase.STOPPED) == 1
    assert gate.move(_S) is OwnershipPhase.STOPPED  # cut again before reconnecting
    assert gate.move(_L) is OwnershipPhase.STOPPED
    assert gate.move(_C) is OwnershipPhase.SERVING


def test_lost_while_serving_stops_at_once() -> None:
    gate = SessionGate()
    assert gate.move(_L) is OwnershipPhase.STOPPED


@pytest.mark.parametrize("phase", [OwnershipPhase.SERVING, OwnershipPhase.STOPPED])
def test_the_grace_timer_outside_a_pause_is_a_bad_move(phase: OwnershipPhase) -> None:
    gate = SessionGate("b1:7070")
    if phase is OwnershipPhase.STOPPED:
        gate.move(_L)
    with pytest.raises(SessionGateError, match="no move from"):
        gate.move(GRACE_PASSED)
    assert gate.phase is phase  # unchanged


def test_every_store_report_is_allowed_in_every_phase() -> None:
    for phase in OwnershipPhase:
        for state in SessionState:
            assert (phase, state) in TRANSITIONS


def test_the_refusal_is_a_retriable_wrong_host_without_owner_for_the_sdk() -> None:
    error = SessionGate("10.0.0.1:7070").refusal("orders/3")
    assert type(error) is WrongHostError and is_retriable(error)
    assert error.context() == {"segment": "orders/3", "owner": ""}
    code, message = status_for(error)
    assert code is grpc.StatusCode.UNAVAILABLE
    assert message.startswith("broker 10.0.0.1:7070 lost its metadata-store connection; retry")
    metadata = dict(trailing_metadata_for(error))
    assert metadata["folio-error-code"] == str(ErrorCode.ERROR_CODE_WRONG_HOST)
    assert metadata["folio-error"] == "WrongHostError"
    sdk_error = _status.error_from_status(code, message, tuple(metadata.items()))
    # The SDK looks the owner up (none named) and tries again with backoff.
    assert type(sdk_error) is e.WrongHostError and sdk_error.retriable
    assert sdk_error.segment == "orders/3" and sdk_error.owner is None
    assert "lost its metadata-store connection" in str(sdk_error)
