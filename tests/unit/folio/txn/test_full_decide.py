"""Deciding a full transaction whose earlier decision was taken by a coordinator that moved.

Issue 22, the nemesis (seed 4): a commit was taken (COMMITTING logged), then
the coordinator lost its container before answering; the call followed
WrongHost to the new coordinator, which had replayed COMMITTING and refused
the commit as "COMMITTING, expected OPEN" on the first attempt. The
application got a TxnStateError for a transaction that committed.
"""

from __future__ import annotations

from typing import Any

import pytest

from folio.errors import TxnStateError
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
