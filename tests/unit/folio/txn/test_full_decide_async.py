"""``decide_async`` (the asyncio face's decision) takes the blocking ``decide``'s steps.

Each scripted caller of ``test_full_decide`` is run through both: the same
calls in the same order, the same outcome or error.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from typing import Any

import pytest

import folio.errors
from folio.errors import FolioUnavailableError, TxnStateError
from folio.txn._full_decide import decide, decide_async
from tests.unit.folio.txn.test_full_decide import TXN_ID, _refusing, _scripted, _Stub


def _awaited(call: Any) -> Any:
    async def awaited(method: str, request: object, *, retry: bool = False) -> object:
        return call(method, request, retry=retry)
    return awaited


async def _both(make: Callable[[], Any], *, commit: bool) -> tuple[list[str], list[str]]:
    """Runs a fresh caller through each face; the calls each made."""
    blocking, awaiting = make(), make()
    decide(blocking, _Stub(), TXN_ID, commit=commit)  # type: ignore[arg-type]
    await decide_async(_awaited(awaiting), _Stub, TXN_ID, commit=commit)  # type: ignore[arg-type]
    return blocking.calls, awaiting.calls


@pytest.mark.parametrize(("commit", "actual"), [
    (True, "COMMITTING"), (True, "COMMITTED"), (False, "ABORTING"), (False, "TIMED_OUT")])
async def test_a_decision_already_taken_the_asked_way_is_done(commit: bool, actual: str) -> None:
    blocking, awaiting = await _both(lambda: _refusing(actual), commit=commit)
    assert blocking == awaiting == ["CommitTxn" if commit else "AbortTxn"]


@pytest.mark.parametrize(("commit", "actual"), [(True, "ABORTED"), (False, "COMMITTED")])
async def test_a_decision_taken_the_other_way_is_refused(commit: bool, actual: str) -> None:
    with pytest.raises(TxnStateError) as refused:
        await decide_async(_awaited(_refusing(actual)), _Stub,  # type: ignore[arg-type]
                           TXN_ID, commit=commit)
    assert refused.value.actual == actual


async def test_a_timed_out_abort_is_read_back() -> None:
    blocking, awaiting = await _both(
        lambda: _scripted(builtins.TimeoutError("no answer"), status="ABORTING"), commit=False)
    assert blocking == awaiting == ["AbortTxn", "GetTxnStatus"]


async def test_a_timed_out_commit_still_open_is_made_again() -> None:
    blocking, awaiting = await _both(
        lambda: _scripted(folio.errors.TimeoutError("Deadline Exceeded")), commit=True)
    assert blocking == awaiting == ["CommitTxn", "GetTxnStatus", "CommitTxn"]


async def test_a_lost_commit_read_back_aborted_is_refused() -> None:
    with pytest.raises(TxnStateError) as refused:
        lost = _scripted(FolioUnavailableError("reset"), status="TIMED_OUT")
        await decide_async(_awaited(lost), _Stub, TXN_ID, commit=True)  # type: ignore[arg-type]
    assert refused.value.actual == "TIMED_OUT"


async def test_an_outcome_still_unknown_at_the_deadline_says_so() -> None:
    calls: list[str] = []

    async def call(method: str, request: object, *, retry: bool = False) -> object:
        calls.append(method)
        raise FolioUnavailableError("connection reset")

    with pytest.raises(folio.errors.OutcomeUnknownError) as caught:
        await decide_async(call, _Stub, TXN_ID, commit=True, timeout_s=0)  # type: ignore[arg-type]
    assert calls == ["CommitTxn", "GetTxnStatus"]
    assert "outcome is unknown" in str(caught.value)
