"""Calls that change state when their outcome may be unknown: try, read back, reconcile.

Every remote call has three outcomes: yes, no (the broker's refusal), and
unknown: a cut connection after the request may have been sent
(``FolioUnavailableError``, a WrongHost not followed within the call), a
``DEADLINE_EXCEEDED`` (``folio.errors.TimeoutError``) or the IO thread's own
wait ending first (``builtins.TimeoutError``). After an unknown outcome the
broker may have applied the call, so nothing that is only safe if it failed
may follow. ``settle`` makes the attempt again, with backoff, until a
deadline; each caller's ``attempt(after_unknown)`` says how a repeat is
safe: an idempotent call is simply made again, and a refusal that a repeat of
an applied call gets (the topic exists, is gone, is sealed, the transaction
is decided) is read back as that earlier call's success when
``after_unknown``. Only when the deadline passes with the outcome still
unknown does the caller get :class:`OutcomeUnknownError` (its ``__cause__``
the last attempt's error).
"""

from __future__ import annotations

import asyncio
import builtins
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Final, TypeVar

from folio._transport.append_stream import Backoff
from folio.errors import (
    FolioUnavailableError,
    NoBrokerAvailableError,
    OutcomeUnknownError,
    TlsError,
    WrongEndpointError,
)

__all__ = ["DEFAULT_SETTLE_TIMEOUT_S", "UNKNOWN", "is_unknown", "settle", "settle_async"]

log = logging.getLogger(__name__)

R = TypeVar("R")

#: How long a call goes on after unknown outcomes (as a transaction's decision
#: and Kafka's ``max.block.ms``): a coordinator or owner moving after a broker
#: was stopped or killed (a session timeout, then a replay) is followed.
DEFAULT_SETTLE_TIMEOUT_S: Final = 60.0
#: The longest wait between two attempts.
_BACKOFF_MAX_S: Final = 2.0
#: What leaves a call's outcome unknown (``folio.errors.TimeoutError`` is a
#: ``builtins.TimeoutError`` too, as is the IO thread's own).
UNKNOWN: Final = (FolioUnavailableError, builtins.TimeoutError)
#: ``folio._transport.probe``'s reasons a connection was not made.
_UNSENT_REASONS: Final = frozenset({"refused", "unresolved", "no_answer", "unreachable"})


def is_unknown(error: BaseException) -> bool:
    """Whether ``error`` leaves a call's outcome unknown and worth another attempt.

    Not a wrong address or TLS setup (they fail the same way every time), nor
    an ``OutcomeUnknownError`` an attempt raised after its own read-back.
    """
    return isinstance(error, UNKNOWN) and \
        not isinstance(error, WrongEndpointError | TlsError | OutcomeUnknownError)


def _unsent(error: BaseException) -> bool:
    """Whether ``error`` says the call never left: no broker could be connected to.

    ``NoBrokerAvailableError`` (a write is handed to the next broker only when
    gRPC could not connect) and the connect diagnosis (``reason``: refused,
    unresolved, no answer, unreachable). Raised at once on a first attempt, as
    before (``folio topic create`` against nothing says so at once); after an
    unknown outcome it decides nothing, and the attempts go on.
    """
    return isinstance(error, NoBrokerAvailableError) or (
        isinstance(error, FolioUnavailableError) and
        error.context.get("reason") in _UNSENT_REASONS)


def settle(operation: str, attempt: Callable[[bool], R], *,
           timeout_s: float = DEFAULT_SETTLE_TIMEOUT_S, unsent_is_final: bool = True) -> R:
    """``attempt(after_unknown)`` until its outcome is known, or ``OutcomeUnknownError``.

    ``after_unknown`` is False on the first attempt and True once any attempt
    had an unknown outcome (then a refusal that only a repeat of an applied
    call gets means success: ``attempt`` decides). An attempt under way ends
    by the client's own call timeout; another is begun only if it ends, with
    its backoff, before ``timeout_s`` from the first. ``unsent_is_final``
    False: a first attempt that never left is tried again too (a transaction's
    decision: an application is not to see a coordinator that moves).

    Raises:
        OutcomeUnknownError: every attempt until the deadline had an unknown
            outcome; the call may or may not have been applied.
        FolioError: the broker's refusal (``attempt`` lets it through).
    """
    deadline = time.monotonic() + max(0.0, timeout_s)
    backoff = Backoff(_BACKOFF_MAX_S)
    after_unknown = False
    while True:
        try:
            return attempt(after_unknown)
        except UNKNOWN as error:
            _check_unknown(error, after_unknown, unsent_is_final)
            last: Exception = error
        after_unknown = True
        time.sleep(_next_delay(operation, backoff, deadline, timeout_s, last))


async def settle_async(operation: str, attempt: Callable[[bool], Awaitable[R]], *,
                       timeout_s: float = DEFAULT_SETTLE_TIMEOUT_S,
                       unsent_is_final: bool = True) -> R:
    """``settle`` for a coroutine ``attempt``, waiting its backoff on the running loop.

    The same rules and errors as ``settle``; ``folio.admin.AdminCore`` (both
    faces of the client) makes its state-changing calls through it. Cancelling
    it cancels the attempt under way: that attempt's outcome is unknown, as
    any call cancelled after it was sent.
    """
    deadline = time.monotonic() + max(0.0, timeout_s)
    backoff = Backoff(_BACKOFF_MAX_S)
    after_unknown = False
    while True:
        try:
            return await attempt(after_unknown)
        except UNKNOWN as error:
            _check_unknown(error, after_unknown, unsent_is_final)
            last: Exception = error
        after_unknown = True
        await asyncio.sleep(_next_delay(operation, backoff, deadline, timeout_s, last))


def _check_unknown(error: Exception, after_unknown: bool, unsent_is_final: bool) -> None:
    """Raises ``error`` (in its ``except``) unless another attempt is worth making."""
    if not is_unknown(error) or (unsent_is_final and not after_unknown and _unsent(error)):
        raise error


def _next_delay(operation: str, backoff: Backoff, deadline: float, timeout_s: float,
                last: Exception) -> float:
    """The wait before the next attempt; ``OutcomeUnknownError`` if it ends past ``deadline``."""
    delay = backoff.next_delay()
    if time.monotonic() + delay >= deadline:
        raise OutcomeUnknownError(
            f"{operation}: the outcome is unknown after {timeout_s:g} s of attempts "
            f"(last: {type(last).__name__}: {last}); it may have been applied: read the "
            f"state back once the broker is reachable", operation=operation) from last
    log.info("%s: outcome unknown (%s: %s); trying again in %.2f s",
             operation, type(last).__name__, last, delay)
    return delay
