"""Deciding a full transaction: ``CommitTxn``/``AbortTxn`` when answers may be lost.

A broken connection leaves the outcome of a decision unknown: the coordinator
may have taken the call. ``GetTxnStatus`` tells: COMMITTING/COMMITTED (or
ABORTING/ABORTED) means it did; OPEN means the call is made again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from folio.api.v1 import transactions_pb2
from folio.errors import FolioUnavailableError, TxnStateError
from folio.txn.txn_status import TxnStatus

if TYPE_CHECKING:
    from folio._transport.unary import UnaryCaller
    from folio.api.v1.transactions_pb2_grpc import TransactionsAsyncStub

__all__ = ["decide", "txn_status"]

#: CommitTxn/AbortTxn calls made for one decision when answers are lost.
_DECIDE_ATTEMPTS: Final = 5
_COMMITTED_STATES: Final = ("COMMITTING", "COMMITTED")
_ABORTED_STATES: Final = ("ABORTING", "ABORTED", "TIMED_OUT")


def txn_status(call: UnaryCaller, stub: TransactionsAsyncStub, txn_id: bytes) -> TxnStatus:
    """``GetTxnStatus``, tried again on UNAVAILABLE; ``TxnNotFoundError``."""
    response = call(stub.GetTxnStatus, transactions_pb2.GetTxnStatusRequest(txn_id=txn_id),
                    retry=True)
    return TxnStatus.from_wire(response.state)


def decide(call: UnaryCaller, stub: TransactionsAsyncStub, txn_id: bytes, *,
           commit: bool) -> None:
    """``CommitTxn`` or ``AbortTxn``, tried again when the answer is lost.

    Raises:
        TxnStateError: the broker refused (the transaction is not OPEN), or
            it is neither OPEN nor decided the asked way after a lost answer.
        FolioUnavailableError: every attempt lost its answer.
    """
    done = _COMMITTED_STATES if commit else _ABORTED_STATES
    lost: FolioUnavailableError | None = None
    for _attempt in range(_DECIDE_ATTEMPTS):
        try:
            if commit:
                call(stub.CommitTxn, transactions_pb2.CommitTxnRequest(txn_ids=[txn_id]))
            else:
                call(stub.AbortTxn, transactions_pb2.AbortTxnRequest(txn_id=txn_id))
            return
        except FolioUnavailableError as error:
            lost = error
        except TxnStateError as error:
            if error.actual in done:
                # An earlier call whose answer was lost did it: an earlier
                # attempt here, or the first one on a coordinator that took it
                # and then moved (WrongHost, which the call follows to the new
                # coordinator: it replayed the decision). Only this transaction
                # object decides its transaction, so it is our decision.
                return
            raise
        # Tried again itself; raises if the broker stays away.
        state = txn_status(call, stub, txn_id)
        if state in done:
            return
        if state != "OPEN":
            raise TxnStateError(
                f"transaction {txn_id.hex()} is {state}, expected OPEN",
                txn_id=txn_id.hex(), expected="OPEN", actual=state)
    assert lost is not None
    raise lost
