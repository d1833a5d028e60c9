"""Closing a ``TransactionalWriter``: its open transactions aborted, all within one deadline.

A writer closed while the broker is unreachable must not wait for as long as
the broker is away, nor drop its open transactions silently. Each abort is
decided as ``Transaction.abort`` does (an unknown outcome read back and made
again), all within one deadline; once it has passed, those left are not
tried. What is still undecided then is named in a ``TimeoutError``: the
broker aborts each of them by itself when its ``txn_timeout_ms`` passes
(``BeginTxn(timeout_ms)``), and nothing of them is visible to
``read_committed`` readers until then, so no acknowledged event is lost or
doubled either way.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Protocol

from folio.errors import FolioError, TimeoutError, TxnNotFoundError, TxnStateError

__all__ = ["abort_open", "abort_open_async"]


class Abortable(Protocol):
    """An open transaction (``folio.txn.txn_full.Transaction``)."""

    @property
    def txn_id(self) -> bytes:
        """Its 16-byte id."""

    def abort(self, timeout: float | None = None) -> None:
        """``AbortTxn``, decided within ``timeout``."""


def abort_open(txns: Iterable[Abortable], *, timeout_s: float, topic: str,
               txn_timeout_ms: int) -> None:
    """Aborts ``txns`` within ``timeout_s`` seconds.

    Raises:
        TimeoutError: some aborts were still undecided at the deadline
            (``context["txn_ids"]``, hex; not ``retriable``); the last error
            met is its ``__cause__``.
    """
    deadline = time.monotonic() + timeout_s
    undecided: list[str] = []
    last: FolioError | None = None
    for txn in txns:
        remaining = deadline - time.monotonic()
        if remaining <= 0:  # no time left to try: the broker's timeout aborts it
            undecided.append(txn.txn_id.hex())
            continue
        try:
            txn.abort(remaining)
        except (TxnStateError, TxnNotFoundError):
            pass  # decided already (committed, timed out) or forgotten: nothing to do
        except FolioError as unknown:  # unknown at the deadline: its timeout aborts it
            undecided.append(txn.txn_id.hex())
            last = unknown
    _raise_undecided(undecided, last, timeout_s=timeout_s, topic=topic,
                     txn_timeout_ms=txn_timeout_ms)


async def abort_open_async(txn_ids: Iterable[bytes],
                           abort: Callable[[bytes, float], Awaitable[None]], *,
                           timeout_s: float, topic: str, txn_timeout_ms: int) -> None:
    """``abort_open`` on the caller's loop (``folio.aio``): the aborts at once, each
    ``abort(txn_id, timeout_s)``; the same rules and ``TimeoutError``."""
    ids = list(txn_ids)
    outcomes = await asyncio.gather(*(abort(txn_id, timeout_s) for txn_id in ids),
                                    return_exceptions=True)
    undecided: list[str] = []
    last: FolioError | None = None
    for txn_id, outcome in zip(ids, outcomes, strict=True):
        if outcome is None or isinstance(outcome, TxnStateError | TxnNotFoundError):
            continue  # aborted, or decided already (committed, timed out) or forgotten
        if not isinstance(outcome, FolioError):
            raise outcome  # not a Folio error: a bug or a cancellation, never hidden
        undecided.append(txn_id.hex())
        last = outcome
    _raise_undecided(undecided, last, timeout_s=timeout_s, topic=topic,
                     txn_timeout_ms=txn_timeout_ms)


def _raise_undecided(undecided: list[str], last: FolioError | None, *, timeout_s: float,
                     topic: str, txn_timeout_ms: int) -> None:
    if not undecided:
        return
    error = TimeoutError(
        f"closing the transactional writer of topic {topic!r}: the abort of "
        f"{len(undecided)} open transactions ({', '.join(undecided)}) was not answered "
        f"within {timeout_s} s (the broker unreachable?); the broker aborts each by itself "
        f"when its txn_timeout_ms ({txn_timeout_ms} ms) passes, and nothing of them is "
        "visible to read_committed readers until then",
        topic=topic, txn_ids=undecided, timeout_s=timeout_s)
    error.retriable = False
    raise error from last
