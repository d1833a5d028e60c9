"""Transactions across segments from coroutines, on the caller's loop (``folio.txn.txn_full``).

Made by ``AsyncClient.transactional_writer(topic, serializer)``::

    async with await client.transactional_writer("orders") as writer:
        txn = await writer.begin()                       # BeginTxn
        txn.write_event(b"debit", routing_key="alice")   # buffered: no IO, no await
        txn.write_event(b"credit", routing_key="bob")
        await txn.commit()                               # all visible, or none

The same parts as the blocking face: an :class:`AsyncFullTransaction` holds a
``folio.txn._full_core.TxnCore`` (the events per segment, one flow per
segment on the flow engine with the full-transaction policy,
``folio.txn._full_flow``), made with the caller's loop as its IO; the
decisions are ``folio.txn._full_decide.decide_async`` (the blocking
``decide``'s rules: an unknown outcome read back with ``GetTxnStatus`` and
made again until 60 s), the status is ``AdminCore.transaction_status``.
Names, arguments, states and errors are the blocking face's; only the waits
differ, and there are no ``timeout`` arguments: bound a call with
``asyncio.timeout``, whose expiry (as any cancellation) stops only the wait.

Cancellation leaves no transaction half-open. ``commit`` and ``abort`` run
as tasks the writer owns; cancelling ``await txn.commit()`` stops the wait,
and the commit still ends, committed or (a block failed) aborted, or after
60 s of unknown outcomes ``OutcomeUnknownError``. ``await txn.status()``
asks the coordinator which; ``await txn.commit()`` again waits for the same
commit while it is under way, and once it ended returns if it committed (the
coordinator answers it is decided) or raises ``TxnStateError`` (``actual``
ABORTED) if it was aborted. A cancelled ``flush`` leaves its
blocks on their way, and a later ``commit`` waits for them too. A body of
``async with txn`` that raises, ``CancelledError`` included, aborts it (the
abort a task, finished however often the caller is cancelled). A cancelled
``begin`` whose ``BeginTxn`` was taken aborts the transaction it opened.
``close`` waits for the decisions under way, then aborts what is open.

Crash windows: the writer's tasks live on the loop; a loop stopped under a
decision (the process exits) leaves it as a crashed client does: a
``CommitTxn`` the coordinator took completes (COMMITTING is logged and
replayed), any other open transaction is aborted by the broker when its
``txn_timeout_ms`` passes, and nothing of it is visible to
``read_committed`` readers until then.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from folio._transport.loop_io import LoopIo, as_io_thread
from folio._unknown import settle_async
from folio.api.v1 import transactions_pb2
from folio.errors import FolioError, WriterClosedError
from folio.models import TopicInfo
from folio.serializers import BytesSerializer, Serializer
from folio.txn._full_close import abort_open_async
from folio.txn._full_core import Local, TxnCore, TxnShared, check_txn_timeout_ms, failed_error
from folio.txn._full_decide import decide_async
from folio.txn._full_routes import TopicRoutes
from folio.txn.txn_status import TxnStatus

if TYPE_CHECKING:
    import concurrent.futures

    from folio._transport.brokers import Brokers
    from folio.admin import AdminCore
    from folio.api.v1.transactions_pb2_grpc import TransactionsAsyncStub

__all__ = ["AsyncFullTransaction", "AsyncTransactionalWriter"]

log = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")


class AsyncFullTransaction(Generic[T]):
    """One broker transaction from coroutines: events to any segments, all visible or none.

    Made by ``AsyncTransactionalWriter.begin``; the blocking ``Transaction``'s
    methods, awaited (``write_event`` buffers only and is not). Use from the
    client's loop only. ``async with`` commits it if still open, or aborts it
    if the body raised.
    """

    def __init__(self, writer: AsyncTransactionalWriter[T], txn_id: bytes) -> None:
        self._writer = writer
        self._core = core = TxnCore(writer._shared, txn_id)
        #: The broker's transaction id, 16 bytes.
        self.txn_id = txn_id
        self.writer_id = core.writer_id
        #: The decision under way or last made, and whether it commits.
        self._deciding: asyncio.Task[None] | None = None
        self._deciding_commit = False

    @property
    def event_count(self) -> int:
        """How many events were written to it."""
        return self._core.event_count

    @property
    def resent_blocks(self) -> int:
        """Blocks sent again after reconnects (each landed once all the same)."""
        return self._core.resent_blocks

    def write_event(self, event: T, routing_key: str | None = None,
                    headers: Mapping[str, bytes] | None = None) -> None:
        """Adds one event (buffered until ``flush``/``commit``): ``Transaction.write_event``.

        Raises:
            EventTooLargeError: above the topic's ``max_event_bytes``.
            TxnStateError: the transaction was committed, aborted or failed.
        """
        self._core.write_event(event, routing_key, headers)

    async def flush(self) -> None:
        """Sends every buffered event and waits until the broker has them (uncommitted).

        Cancelling it stops the wait; the blocks go on, and ``commit`` waits for them.

        Raises:
            TxnFailedError: a block could not be written; the transaction
                was aborted (see ``Transaction.flush``).
            TxnStateError: the transaction was committed, aborted or failed.
        """
        await self._wait(self._core.send())

    async def commit(self) -> None:
        """Flushes, waits for every block's acknowledgement, then ``CommitTxn``.

        The commit is a task of the writer: cancelling this call stops the
        wait only, and the commit ends all the same. Called again while it is
        under way, it waits for the same commit.

        Raises:
            As ``Transaction.commit``: ``TxnFailedError`` (aborted, nothing
            visible), ``TxnStateError`` (the broker refused: ``actual``
            ``"ABORTED"``, ``"TIMED_OUT"``...), ``TxnNotFoundError``,
            ``OutcomeUnknownError`` (no known outcome within 60 s: ``status()``
            tells once the broker is back; OPEN means ``commit`` may be
            called again).
        """
        await self._decision(commit=True)

    async def abort(self) -> None:
        """``AbortTxn``: nothing of the transaction ever becomes visible to read_committed.

        A task of the writer, as ``commit``. Raises as ``Transaction.abort``
        (``TxnStateError`` if it was committed, ``OutcomeUnknownError``).
        """
        await self._decision(commit=False)

    async def detach(self) -> bytes:
        """Flushes, then hands the still-open transaction over; returns its id
        (``Transaction.detach``: for ``commit_transactions`` or ``abort_transaction``).

        Raises:
            TxnFailedError: a block could not be written (aborted).
            TxnStateError: the transaction was committed, aborted or failed.
        """
        await self.flush()
        self._core.end(Local.DETACHED)
        return self.txn_id

    async def status(self) -> TxnStatus:
        """The coordinator's state (``TxnStatus``): ``Transaction.status``.

        Raises:
            TxnNotFoundError: the broker does not know the transaction.
            FolioUnavailableError: the broker stayed unreachable.
        """
        return await self._writer._admin.transaction_status(self.txn_id)

    async def __aenter__(self) -> AsyncFullTransaction[T]:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, traceback: TracebackType | None) -> None:
        """Commits, or aborts if the body raised (a cancellation too): an abort's failure
        is a note on the body's error."""
        if self._core.state is not Local.OPEN:
            return
        if exc is None:
            await self.commit()
            return
        try:
            await self.abort()
        except FolioError as error:
            exc.add_note(f"aborting transaction {self.txn_id.hex()} also reported "
                         f"{type(error).__name__}: {error}")

    def __repr__(self) -> str:
        return (f"<AsyncFullTransaction {self.txn_id.hex()} {self._writer.topic!r} "
                f"{self._core.state.value} {self.event_count} events>")

    # -- internals -------------------------------------------------------------

    async def _decision(self, *, commit: bool, timeout_s: float | None = None) -> None:
        """Waits for the decision: the one under way if it decides the same way, else a new
        one (after the other one under way ended), deciding for ``timeout_s`` (None: 60 s)
        after unknown outcomes. Cancelling stops the wait only."""
        task = self._deciding
        if task is not None and not task.done():
            if self._deciding_commit == commit:
                await asyncio.shield(task)
                return
            await asyncio.wait({task})  # its outcome is its own caller's
        self._deciding_commit = commit
        self._deciding = task = self._writer._spawn(
            self._commit() if commit else self._abort(timeout_s))
        await asyncio.shield(task)

    async def _commit(self) -> None:
        await self._wait(self._core.send(only_if_open=True))
        try:
            await self._writer._decide(self.txn_id, commit=True)
        finally:
            self._core.end(None)
        self._core.set_state(Local.COMMITTED)

    async def _abort(self, timeout_s: float | None) -> None:
        self._core.drop_buffered()  # never sent now
        try:
            await self._writer._decide(self.txn_id, commit=False, timeout_s=timeout_s)
        finally:
            self._core.end(Local.ABORTED)

    async def _wait(self, futures: list[concurrent.futures.Future[None]]) -> None:
        """Waits for the batches (shielded: a cancelled wait never cancels a batch); a
        failed one aborts the transaction (a task: finished if the caller is cancelled)."""
        for future in futures:
            try:
                wrapped = asyncio.wrap_future(future)
                wrapped.add_done_callback(_retrieved)  # seen if this wait was cancelled
                await asyncio.shield(wrapped)
            except FolioError as cause:
                await asyncio.shield(self._writer._spawn(self._fail(cause)))

    async def _fail(self, cause: FolioError) -> None:
        """A block failed: abort on the broker (best effort) and raise ``TxnFailedError``."""
        self._core.fail_open()
        with contextlib.suppress(FolioError):  # unknown until its timeout: the broker aborts it
            await self._writer._decide(self.txn_id, commit=False,
                                       timeout_s=self._writer.txn_timeout_ms / 1000)
        self._core.end(None)
        error, sealed = failed_error(self.txn_id, cause)
        if sealed:
            await self._writer._refresh_routes()
        raise error from cause


class AsyncTransactionalWriter(Generic[T]):
    """Begins transactions across a topic's segments, from coroutines.

    Made by ``AsyncClient.transactional_writer`` (``Client.transactional_writer``'s
    arguments). Any number of transactions may be open at once. Use from the
    client's loop only. ``async with`` closes it on the way out.
    """

    def __init__(self, topic: TopicInfo, serializer: Serializer[T], *, io: LoopIo,
                 source: Brokers, admin: AdminCore, txn_timeout_ms: int) -> None:
        """Made by ``AsyncClient.transactional_writer``, which documents the arguments."""
        check_txn_timeout_ms(txn_timeout_ms)
        self.topic = topic.name
        self.txn_timeout_ms = txn_timeout_ms
        self._routes = TopicRoutes(topic)
        self._shared = TxnShared(
            topic=topic.name, routes=self._routes, serialize=serializer.serialize,
            raw=isinstance(serializer, BytesSerializer),
            max_event_bytes=topic.config.max_event_bytes, io=as_io_thread(io), source=source,
            give_up_s=txn_timeout_ms / 1000, forget=self._forget)
        self._admin = admin
        self._open: dict[bytes, AsyncFullTransaction[T]] = {}
        #: The writer's tasks (begins, decisions, aborts of unused transactions).
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closed = False
        self._closing: asyncio.Task[None] | None = None

    @property
    def closed(self) -> bool:
        """Whether ``close`` was called."""
        return self._closed

    async def begin(self, *, label: str = "") -> AsyncFullTransaction[T]:
        """``BeginTxn``: a new open transaction (``TransactionalWriter.begin``).

        A cancelled ``begin`` aborts the transaction its ``BeginTxn`` opened,
        if it did (a task of the writer).

        Raises:
            WriterClosedError: the writer is closed.
            InvalidArgumentError: the label is too long.
            TxnFailedError: the label was closed (``abort_transactions(close=True)``).
            OutcomeUnknownError: no answer for 60 s (an unused transaction may be
                open until its timeout).
        """
        if self._closed:
            raise WriterClosedError("the transactional writer is closed")
        request = transactions_pb2.BeginTxnRequest(timeout_ms=self.txn_timeout_ms, label=label)
        admin = self._admin

        async def attempt(_after_unknown: bool) -> transactions_pb2.BeginTxnResponse:
            # Made again after an unknown outcome: a lost call's transaction is unused,
            # and times out.
            return await admin._call(admin._connection.transactions.BeginTxn, request,
                                     retry=True)

        began = self._spawn(settle_async("BeginTxn", attempt))
        made: AsyncFullTransaction[T] | None = None
        try:
            response = await asyncio.shield(began)
            if self._closed:  # closed meanwhile: the finally aborts it
                raise WriterClosedError("the transactional writer was closed during begin")
            made = AsyncFullTransaction(self, response.txn_id)
            self._open[made.txn_id] = made
            return made
        finally:
            if made is None:  # cancelled (or failed, closed): abort what it opened, if anything
                began.add_done_callback(self._abort_unused)

    async def close(self) -> None:
        """Waits for the decisions under way, then aborts the open transactions, at once,
        each within ``txn_timeout_ms`` (``TransactionalWriter.close``).

        The closing is a task of the writer: cancelling this call (or an
        ``asyncio.timeout`` around it) stops the wait, and the closing goes
        on. Called again while it runs, it waits for it; after it ended, it
        returns.

        Raises:
            TimeoutError: some aborts were still undecided (``txn_ids``): the
                broker aborts each when its ``txn_timeout_ms`` passes.
        """
        closing = self._closing
        if closing is None:
            self._closed = True
            self._closing = closing = self._spawn(self._close())
        elif closing.done():
            return
        await asyncio.shield(closing)

    async def _close(self) -> None:
        this = asyncio.current_task()
        while running := {t for t in self._tasks if not t.done() and t is not this}:
            await asyncio.wait(running)
        still_open = list(self._open)

        async def abort(txn_id: bytes, timeout_s: float) -> None:
            txn = self._open.get(txn_id)
            if txn is not None:
                await txn._decision(commit=False, timeout_s=timeout_s)

        await abort_open_async(still_open, abort, topic=self.topic,
                               txn_timeout_ms=self.txn_timeout_ms,
                               timeout_s=self.txn_timeout_ms / 1000)

    async def __aenter__(self) -> AsyncTransactionalWriter[T]:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, traceback: TracebackType | None) -> None:
        """Closes; when the body raised, a failure to close is a note on its error."""
        if exc is None:
            await self.close()
            return
        try:
            await self.close()
        except FolioError as error:
            exc.add_note(f"closing the transactional writer of topic {self.topic!r} also "
                         f"reported {type(error).__name__}: {error}")

    def __repr__(self) -> str:
        return f"<AsyncTransactionalWriter topic={self.topic!r} segments={self._routes.count}>"

    # -- internals -------------------------------------------------------------

    def _spawn(self, coro: Coroutine[Any, Any, R]) -> asyncio.Task[R]:
        """A task of the writer (held until it ends: the loop keeps weak references only)."""
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(_retrieved)
        return task

    def _stub(self) -> TransactionsAsyncStub:
        return self._admin._connection.transactions

    async def _decide(self, txn_id: bytes, *, commit: bool,
                      timeout_s: float | None = None) -> None:
        await decide_async(self._admin._call, self._stub, txn_id, commit=commit,
                           timeout_s=timeout_s)

    def _abort_unused(self, began: asyncio.Task[transactions_pb2.BeginTxnResponse]) -> None:
        """A ``BeginTxn`` whose caller was gone: abort the transaction it opened."""
        if began.cancelled() or began.exception() is not None:
            return  # nothing opened (or unknown: the broker's timeout aborts it)
        txn_id = began.result().txn_id

        async def abort() -> None:
            try:
                await self._decide(txn_id, commit=False, timeout_s=self.txn_timeout_ms / 1000)
            except FolioError as error:  # its timeout aborts it
                log.info("aborting the unused transaction %s: %s", txn_id.hex(), error)

        self._spawn(abort())

    async def _refresh_routes(self) -> None:
        """After a scale: route by the topic's open segments now (best effort)."""
        try:
            self._routes.set(await self._admin.get_topic(self.topic))
        except FolioError as error:
            log.info("could not refresh the segments of %s: %s", self.topic, error)

    def _forget(self, core: TxnCore) -> None:
        self._open.pop(core.txn_id, None)


def _retrieved(task: asyncio.Future[Any]) -> None:
    """Marks a task's (or a batch's) error seen: a caller that stopped waiting (cancelled)
    learns the outcome when it asks again (``commit`` again, ``status``); asyncio need not
    log it as never retrieved."""
    if not task.cancelled():
        task.exception()
