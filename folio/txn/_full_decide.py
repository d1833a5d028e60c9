"""Deciding a full transaction: ``CommitTxn``/``AbortTxn`` when answers may be lost.

Every decision call has three outcomes: yes, no (the broker's refusal), and
unknown: a broken connection, a WrongHost or unreachable coordinator the call
could not follow within its own deadline, ``DEADLINE_EXCEEDED``, or the IO
thread's own wait that ended first (``TimeoutError: no answer within ...``).
After an unknown outcome the coordinator may have taken the call, so it is
never reported as a failure: ``GetTxnStatus`` reads it back.
COMMITTING/COMMITTED (or ABORTING/ABORTED/TIMED_OUT) means it did; OPEN, or a
read-back that is unknown too, means the call is made again, with backoff,
until the decision's deadline (a repeated call is harmless: a coordinator that
took the first one refuses the second as already decided, which is success).
Only when the deadline passes with the outcome still unknown does the caller
get ``OutcomeUnknownError``; the loop is ``folio._unknown.settle``'s, as every
state-changing call's.

The deadline is the caller's ``timeout``, by default
``DEFAULT_DECIDE_TIMEOUT_S`` (Kafka's producer blocks ``commitTransaction``
and ``abortTransaction`` up to ``max.block.ms``, 60 s by default): a
coordinator moving after a broker was stopped or killed (a session timeout,
then its log replayed) is followed, not reported.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final, Protocol, TypeVar

from google.protobuf.message import Message
from grpc import aio

from folio._unknown import UNKNOWN, settle, settle_async
from folio.api.v1 import transactions_pb2
from folio.errors import TxnStateError
from folio.txn.txn_status import TxnStatus

if TYPE_CHECKING:
    from folio._transport.unary import UnaryCaller
    from folio.api.v1.transactions_pb2_grpc import TransactionsAsyncStub

__all__ = ["DEFAULT_DECIDE_TIMEOUT_S", "AsyncUnaryCaller", "decide", "decide_async",
           "txn_status"]

Req = TypeVar("Req", bound=Message)
Resp = TypeVar("Resp", bound=Message)

#: How long a commit or abort goes on deciding after unknown outcomes, by default.
DEFAULT_DECIDE_TIMEOUT_S: Final = 60.0
_COMMITTED_STATES: Final = ("COMMITTING", "COMMITTED")
_ABORTED_STATES: Final = ("ABORTING", "ABORTED", "TIMED_OUT")


class AsyncUnaryCaller(Protocol):
    """One unary call awaited on the caller's loop (``folio.admin.AdminCore._call``)."""

    def __call__(self, method: aio.UnaryUnaryMultiCallable[Req, Resp], request: Req, *,
                 retry: bool = False) -> Awaitable[Resp]:
        """The call's answer, or its typed ``FolioError``."""


def txn_status(call: UnaryCaller, stub: TransactionsAsyncStub, txn_id: bytes) -> TxnStatus:
    """``GetTxnStatus``, tried again on UNAVAILABLE; ``TxnNotFoundError``."""
    response = call(stub.GetTxnStatus, transactions_pb2.GetTxnStatusRequest(txn_id=txn_id),
                    retry=True)
    return TxnStatus.from_wire(response.state)


def decide(call: UnaryCaller, stub: TransactionsAsyncStub, txn_id: bytes, *,
           commit: bool, timeout: float | None = None) -> None:
    """``CommitTxn`` or ``AbortTxn``; an unknown outcome is read back and tried again.

    Args:
        timeout: seconds to go on after unknown outcomes (None:
            ``DEFAULT_DECIDE_TIMEOUT_S``). One attempt is always made, and an
            attempt under way ends by the client's own call timeout.

    Raises:
        TxnStateError: the broker refused (the transaction is not OPEN), or
            it is neither OPEN nor decided the asked way after a lost answer.
        TxnNotFoundError: the broker does not know the transaction.
        OutcomeUnknownError: (a ``FolioUnavailableError`` and a
            ``TimeoutError``) the outcome was still unknown when ``timeout``
            passed (``status`` tells once the coordinator is back).
    """
    done = _COMMITTED_STATES if commit else _ABORTED_STATES

    def attempt(after_unknown: bool) -> None:
        try:
            call(*_request(stub, txn_id, commit))
            return
        except TxnStateError as error:
            _refused(error, done)
            return
        except UNKNOWN as error:
            unknown: Exception = error
        # Unknown: the coordinator may have taken it. Read it back (itself tried
        # again on UNAVAILABLE); a read-back that is unknown too decides nothing.
        try:
            state = txn_status(call, stub, txn_id)
        except UNKNOWN:
            raise unknown from None
        _read_back(state, done, txn_id, unknown)

    settle(_operation(txn_id, commit), attempt, timeout_s=_timeout_s(timeout),
           unsent_is_final=False)


async def decide_async(call: AsyncUnaryCaller, stub: Callable[[], TransactionsAsyncStub],
                       txn_id: bytes, *, commit: bool, timeout_s: float | None = None) -> None:
    """``decide`` as a coroutine on the caller's loop (``folio.aio``): the same rules and errors.

    ``timeout_s`` is ``decide``'s ``timeout``. ``call`` is
    ``folio.admin.AdminCore._call``; ``stub`` gives the admin
    broker's ``Transactions`` stub now (it changes on failover). Cancelling it
    cancels the attempt under way, whose outcome is then unknown (the owner,
    ``folio.aio._txn_full``, never cancels a decision it began).
    """
    done = _COMMITTED_STATES if commit else _ABORTED_STATES

    async def attempt(after_unknown: bool) -> None:
        try:
            method, request = _request(stub(), txn_id, commit)
            await call(method, request)
            return
        except TxnStateError as error:
            _refused(error, done)
            return
        except UNKNOWN as error:
            unknown: Exception = error
        try:
            response = await call(stub().GetTxnStatus,
                                  transactions_pb2.GetTxnStatusRequest(txn_id=txn_id), retry=True)
        except UNKNOWN:
            raise unknown from None
        _read_back(TxnStatus.from_wire(response.state), done, txn_id, unknown)

    await settle_async(_operation(txn_id, commit), attempt, timeout_s=_timeout_s(timeout_s),
                       unsent_is_final=False)


def _operation(txn_id: bytes, commit: bool) -> str:
    return f"{'CommitTxn' if commit else 'AbortTxn'} of transaction {txn_id.hex()}"


def _timeout_s(timeout: float | None) -> float:
    return DEFAULT_DECIDE_TIMEOUT_S if timeout is None else max(0.0, timeout)


def _request(stub: TransactionsAsyncStub, txn_id: bytes, commit: bool) -> tuple[Any, Message]:
    """The decision's method and request."""
    if commit:
        return stub.CommitTxn, transactions_pb2.CommitTxnRequest(txn_ids=[txn_id])
    return stub.AbortTxn, transactions_pb2.AbortTxnRequest(txn_id=txn_id)


def _refused(error: TxnStateError, done: tuple[str, ...]) -> None:
    """A refusal: success when the transaction is decided the asked way already, else raised.

    An earlier call whose answer was lost did it: an earlier attempt here, or
    the first one on a coordinator that took it and then moved (WrongHost,
    which the call follows to the new coordinator: it replayed the decision).
    Only this transaction object decides its transaction, so it is our decision.
    """
    if error.actual not in done:
        raise error


def _read_back(state: TxnStatus, done: tuple[str, ...], txn_id: bytes,
               unknown: Exception) -> None:
    """After an unknown outcome: returns if decided the asked way, ``TxnStateError`` if
    decided otherwise, ``unknown`` (made again after the backoff) if still OPEN."""
    if state in done:
        return
    if state != "OPEN":
        raise TxnStateError(f"transaction {txn_id.hex()} is {state}, expected OPEN",
                            txn_id=txn_id.hex(), expected="OPEN", actual=state)
    raise unknown  # not taken: made again after the backoff
