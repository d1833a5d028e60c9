"""Deciding a full transaction whose earlier decision was taken by a coordinator that moved.

Issue 22, the nemesis (seed 4): a commit was taken (COMMITTING logged), then
the coordinator lost its container before answering; the call followed
WrongHost to the new coordinator, which had replayed COMMITTING and refused
the commit as "COMMITTING, expected OPEN" on the first attempt. The
application got a TxnStateError for a transaction that committed.
"""

from __future__ import annotations

import builtins
from typing import Any

import pytest

import folio.errors
from folio.api.v1 import transactions_pb2
from folio.errors import FolioUnavailableError, TxnStateError, WrongHostError
from folio.txn._full_decide import decide

TXN_ID = bytes(range(16))


class _Stub:
    CommitTxn = "CommitTxn"
    AbortTxn = "AbortTxn"
    GetTxnStatus = "GetTxnStatus"


def _refusing(actual: str) -> Any:
    calls: list[str] = []

    def call(method: str, request: object, *, retry: bool = False) -> object:
        calls.append(method)
        raise TxnStateError(f"transaction {TXN_ID.hex()} is {actual}, expected OPEN",
                            txn_id=TXN_ID.hex(), expected="OPEN", actual=actual)
    call.calls = calls  # type: ignore[attr-defined]
    return call


@pytest.mark.parametrize(("commit", "actual"), [
    (True, "COMMITTING"), (True, "COMMITTED"), (False, "ABORTING"), (False, "ABORTED")])
def test_a_decision_already_taken_the_asked_way_is_done(commit: bool, actual: str) -> None:
    call = _refusing(actual)
    decide(call, _Stub(), TXN_ID, commit=commit)  # type: ignore[arg-type]
    assert call.calls == ["CommitTxn" if commit else "AbortTxn"]


@pytest.mark.parametrize(("commit", "actual"), [(True, "ABORTED"), (False, "COMMITTED")])
def test_a_decision_taken_the_other_way_is_refused(commit: bool, actual: str) -> None:
    with pytest.raises(TxnStateError) as refused:
        decide(_refusing(actual), _Stub(), TXN_ID, commit=commit)  # type: ignore[arg-type]
    assert refused.value.actual == actual


# -- unknown outcomes (issue 22, the nemesis seed 25: an abort raised the IO
# thread's "TimeoutError: no answer within 35.0 s" to the application) ---------


def _scripted(*steps: object, status: str = "OPEN") -> Any:
    """A caller whose decision calls raise (or answer) ``steps`` in turn, then answer."""
    calls: list[str] = []
    script = list(steps)

    def call(method: str, request: object, *, retry: bool = False) -> object:
        calls.append(method)
        if method == "GetTxnStatus":
            return _Status(status)
        step = script.pop(0) if script else None
        if isinstance(step, BaseException):
            raise step
        return None
    call.calls = calls  # type: ignore[attr-defined]
    return call


class _Status:
    def __init__(self, state: str) -> None:
        self.state = transactions_pb2.TxnState.Value(state)


@pytest.mark.parametrize("lost", [
    builtins.TimeoutError("no answer within 35.0 s"),  # the IO thread's own wait
    folio.errors.TimeoutError("Deadline Exceeded"),  # DEADLINE_EXCEEDED
], ids=["io-thread-wait", "deadline-exceeded"])
def test_a_timed_out_abort_is_read_back_not_raised(lost: Exception) -> None:
    call = _scripted(lost, status="ABORTING")  # the coordinator took it
    decide(call, _Stub(), TXN_ID, commit=False)  # type: ignore[arg-type]
    assert call.calls == ["AbortTxn", "GetTxnStatus"]


def test_a_timed_out_commit_still_open_is_made_again() -> None:
    call = _scripted(folio.errors.TimeoutError("Deadline Exceeded"))  # not taken: OPEN
    decide(call, _Stub(), TXN_ID, commit=True)  # type: ignore[arg-type]
    assert call.calls == ["CommitTxn", "GetTxnStatus", "CommitTxn"]


def test_a_coordinator_away_longer_than_five_attempts_is_waited_for() -> None:
    # AbortTxn follows WrongHost to no coordinator for longer than the five
    # attempts there were; the first read-back is lost too. The deadline, not
    # a count of attempts, ends the wait.
    aborts = [WrongHostError("no coordinator yet", segment="_txnlog/0") for _ in range(6)]
    reads: list[Exception] = [FolioUnavailableError("connection reset")]
    calls: list[str] = []

    def call(method: str, request: object, *, retry: bool = False) -> object:
        calls.append(method)
        if method == "GetTxnStatus":
            if reads:
                raise reads.pop()
            return _Status("OPEN")
        if aborts:
            raise aborts.pop()
        return None

    decide(call, _Stub(), TXN_ID, commit=False, timeout=60)  # type: ignore[arg-type]
    assert calls == ["AbortTxn", "GetTxnStatus"] * 6 + ["AbortTxn"]


@pytest.mark.parametrize(("lost", "raised"), [
    (builtins.TimeoutError("no answer within 35.0 s"), folio.errors.TimeoutError),
    (FolioUnavailableError("connection reset"), FolioUnavailableError),
])
def test_an_outcome_still_unknown_at_the_deadline_says_so(
        lost: Exception, raised: type[Exception]) -> None:
    calls: list[str] = []

    def call(method: str, request: object, *, retry: bool = False) -> object:
        calls.append(method)
        raise lost

    with pytest.raises(raised) as caught:
        decide(call, _Stub(), TXN_ID, commit=True, timeout=0)  # type: ignore[arg-type]
    assert calls == ["CommitTxn", "GetTxnStatus"]  # one attempt, read back once
    text = str(caught.value) + " ".join(getattr(caught.value, "__notes__", []))
    assert "outcome is unknown" in text
