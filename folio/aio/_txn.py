"""Single-routing-key transactions (PDP-44) from coroutines, on the caller's loop.

An :class:`AsyncTxnWriter` holds a ``SingleRoutingKeyTransactionWriter``
(``folio.txn.txn``) made with the caller's loop as its IO: the same buffer,
one flow per key, commits sent whole exactly once across reconnects and
seals, the writer's transaction timer. Only its waits differ: ``commit``
awaits the commit's future instead of blocking, and ``flush`` awaits every
commit handed over.

Cancellation: a transaction handed to the flow (``commit`` called) is
written whole exactly once or not at all whatever the caller does;
cancelling ``await txn.commit()`` stops only the wait (the future is
shielded, never cancelled: the flow settles it). ``flush`` and ``close``
still wait for it; ``close`` cancelled releases the flow at once, and commits
not acknowledged then fail with ``WriterClosedError`` (whole or nothing).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
from collections.abc import Mapping
from types import TracebackType
from typing import Generic, TypeVar

from folio.errors import FolioError, TimeoutError
from folio.txn._txn_commit import TransactionResult
from folio.txn.txn import SingleRoutingKeyTransaction, SingleRoutingKeyTransactionWriter

__all__ = ["AsyncTransaction", "AsyncTxnWriter"]

T = TypeVar("T")


class AsyncTransaction(Generic[T]):
    """One open transaction of an ``AsyncTxnWriter``; ``async with`` commits or aborts."""

    def __init__(self, core: SingleRoutingKeyTransaction[T], writer: AsyncTxnWriter[T]) -> None:
        self._core = core
        self._writer = writer

    @property
    def state(self) -> str:
        """``"open"``, ``"committed"`` (commit called), ``"aborted"`` or ``"timed_out"``."""
        return self._core.state

    def write(self, event: T, headers: Mapping[str, bytes] | None = None) -> None:
        """Adds one event; nothing is sent yet. Raises as ``write_event`` of the blocking face."""
        self._core.write_event(event, headers)

    def commit_nowait(self) -> asyncio.Future[TransactionResult]:
        """Hands the transaction to the flow; its outcome as an ``asyncio.Future``.

        Raises:
            TxnFailedError: it timed out (it was aborted).
            TxnStateError: it was committed or aborted already.
        """
        handed = self._core.commit_async()
        self._writer._track(handed)
        return asyncio.wrap_future(handed)

    async def commit(self) -> TransactionResult:
        """Writes the events atomically; returns once durable. Raises as the blocking ``commit``
        (``TxnFailedError``, ``WriterClosedError``, ``OutcomeUnknownError``...)."""
        return await asyncio.shield(self.commit_nowait())

    def abort(self) -> None:
        """Drops the events; nothing is sent. Idempotent. ``TxnStateError`` after commit."""
        self._core.abort()

    async def __aenter__(self) -> AsyncTransaction[T]:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, traceback: TracebackType | None) -> None:
        """Commits if the body ended normally, else aborts (never hiding the body's error)."""
        if self._core.state != "open":
            return
        if exc is None:
            await self.commit()
            return
        try:
            self.abort()
        except FolioError as error:
            exc.add_note(f"aborting the transaction also failed: {error}")


class AsyncTxnWriter(Generic[T]):
    """Begins transactions of one routing key.

    Made by ``AsyncClient.single_routing_key_txn_writer``. One open
    transaction at a time. Use from the client's loop only. An async context
    manager: leaving it closes the writer.
    """

    def __init__(self, core: SingleRoutingKeyTransactionWriter[T]) -> None:
        self._core = core
        self._handed: set[concurrent.futures.Future[TransactionResult]] = set()

    @property
    def segment(self) -> str:
        """The segment the routing key goes to."""
        return self._core.segment

    @property
    def closed(self) -> bool:
        """Whether ``close`` was called."""
        return self._core.closed

    def begin(self) -> AsyncTransaction[T]:
        """Starts a transaction. Raises as the blocking ``begin`` (``TxnStateError``...)."""
        return AsyncTransaction(self._core.begin(), self)

    def _track(self, handed: concurrent.futures.Future[TransactionResult]) -> None:
        self._handed.add(handed)
        handed.add_done_callback(self._handed.discard)

    async def flush(self) -> None:
        """Waits until every commit handed over is acknowledged or failed (each future
        holds its outcome). Bound it with ``asyncio.timeout``: cancelling stops only the wait."""
        while self._handed:
            waiting = [asyncio.wrap_future(f) for f in list(self._handed)]
            await asyncio.shield(asyncio.gather(*waiting, return_exceptions=True))

    async def close(self) -> None:
        """Aborts the open transaction, waits for the commits under way, ends the flow.

        Idempotent; the flow is released even when the wait fails or is cancelled.
        """
        if self._core.closed:
            return
        try:
            await self.flush()
        finally:
            # Zero: the flush above waited; this aborts what is open and releases.
            with contextlib.suppress(TimeoutError):
                self._core.close(0)

    async def __aenter__(self) -> AsyncTxnWriter[T]:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, traceback: TracebackType | None) -> None:
        await self.close()
