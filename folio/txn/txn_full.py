"""Transactions across segments (and routing keys): the broker's ``Transactions`` service.

Made by ``Client.transactional_writer(topic, serializer)``::

    with client.transactional_writer("orders") as writer:
        txn = writer.begin()                       # BeginTxn: a 16-byte id
        txn.write_event(b"debit", routing_key="alice")
        txn.write_event(b"credit", routing_key="bob")  # maybe another segment
        txn.commit()                               # all events visible, or none

How it works: ``begin`` asks the broker's coordinator for a transaction id
(``BeginTxn(timeout_ms)``). ``write_event`` routes each event as an
``EventWriter`` does (the routing key's hash picks the segment; keyless events
rotate over the open segments) and buffers it per segment, packed into blocks
of about 1 MiB. ``flush`` (and ``commit``) send every buffered block on one
flow per (segment, transaction) of the client's shared Append stream, set up
with ``SetupAppend(segment, writer_id, txn_id)``: the broker registers the
segment with the transaction and writes the blocks as transactional entries,
which ``read_committed`` readers see only once the transaction commits (and
never if it aborts); ``read_uncommitted`` readers see them at once. Each
transaction appends under its own writer id (a new UUID), so concurrent
transactions of one writer never race on a segment's event numbers.
``commit`` waits until every block is acknowledged (``DataAppended``), then
calls ``CommitTxn([txn_id])``; ``abort`` calls ``AbortTxn``; ``status`` reads
the coordinator's state name (``GetTxnStatus``).

Failures. When the Append stream breaks (a broker restart, a cut
connection), the client reconnects and each flow resends the blocks the
broker had not acknowledged: the flow sets up again under the same writer id
and transaction, the broker answers the last event number it holds of that
writer, and only the blocks after it are sent again (the broker de-duplicates
by event number too), so every event lands once. When the broker refuses a
block or the setup (the transaction timed out or was aborted meanwhile, say),
or the stream stays down longer than the transaction's timeout, the
transaction is aborted on the broker (best effort; else its timeout aborts
it) and ``flush``/``commit`` raise :class:`TxnFailedError` whose
``retriable`` is the cause's: nothing of it becomes visible, and the caller
may ``begin`` a new transaction and write its events again. A refused
``CommitTxn`` raises the broker's typed error; one whose answer is lost is
read back and made again until its timeout, then ``OutcomeUnknownError``.

Handing over. ``detach`` flushes and returns the id of a transaction still
open, for another process to commit (``Client.commit_transactions``, several
atomically) or abort. ``begin(label=...)`` names transactions begun for one
job: ``Client.abort_transactions(label, keep)`` then aborts those whose ids
never reached the job, instead of leaving them open until their timeout.
Thread-safe: a writer may have many open transactions (one per thread, say),
and one transaction may be written from several threads.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Generic, TypeVar

from folio._exits import clean_up
from folio._unknown import settle
from folio.api.v1 import transactions_pb2
from folio.errors import (
    FolioError,
    TimeoutError,
    WriterClosedError,
)
from folio.models import TopicInfo
from folio.serializers import BytesSerializer, Serializer
from folio.txn._full_buffer import TXN_FULL_BLOCK_BYTES
from folio.txn._full_close import abort_open
from folio.txn._full_core import Local, TxnCore, TxnShared, check_txn_timeout_ms, failed_error
from folio.txn._full_decide import decide, txn_status
from folio.txn._full_routes import TopicRoutes
from folio.txn.txn_status import TxnStatus

if TYPE_CHECKING:
    from folio._transport.append_stream import FlowSource
    from folio._transport.io_thread import IoThread
    from folio._transport.unary import UnaryCaller
    from folio.api.v1.transactions_pb2_grpc import TransactionsAsyncStub

__all__ = ["TXN_FULL_BLOCK_BYTES", "Transaction", "TransactionalWriter"]

log = logging.getLogger(__name__)

T = TypeVar("T")


class Transaction(Generic[T]):
    """One broker transaction: events to any segments of the topic, all visible or none.

    Made by ``TransactionalWriter.begin``. Thread-safe. A context manager:
    leaving the block commits it if still open, or aborts it if the block raised.
    Its events, state and flows are a ``folio.txn._full_core.TxnCore``.
    """

    def __init__(self, writer: TransactionalWriter[T], txn_id: bytes) -> None:
        self._writer = writer
        self._core = core = TxnCore(writer._shared, txn_id)
        #: The broker's transaction id, 16 bytes.
        self.txn_id = txn_id
        self.writer_id = core.writer_id

    @property
    def event_count(self) -> int:
        """How many events were written to it."""
        return self._core.event_count

    def write_event(self, event: T, routing_key: str | None = None,
                    headers: Mapping[str, bytes] | None = None) -> None:
        """Adds one event to the transaction (buffered until ``flush``/``commit``).

        Args:
            event: the value, serialized with the writer's serializer.
            routing_key: picks the segment as an ``EventWriter`` does; None:
                the writer's next segment in rotation.
            headers: application headers, names to bytes values.

        Raises:
            EventTooLargeError: above the topic's ``max_event_bytes``.
            TxnStateError: the transaction was committed, aborted or failed.
        """
        self._core.write_event(event, routing_key, headers)

    def flush(self, timeout: float | None = None) -> None:
        """Sends every buffered event and waits until the broker has them (uncommitted).

        Raises:
            TxnFailedError: a block could not be written; the transaction
                was aborted (``retriable`` when the cause was, e.g. a broken
                stream: begin a new one and write its events again).
            TxnStateError: the transaction was committed, aborted or failed.
            TimeoutError: ``timeout`` passed first (the blocks go on).
        """
        self._wait(self._core.send(), timeout)

    def commit(self, timeout: float | None = None) -> None:
        """Flushes, waits for every block's acknowledgement, then ``CommitTxn``.

        ``timeout`` bounds the whole call (None: no limit for the blocks, 60 s
        to decide): a ``CommitTxn`` whose outcome is unknown is read back and
        made again until then (``folio.txn._full_decide``).

        Raises:
            TxnFailedError: a block could not be written; the transaction
                was aborted, nothing of it is visible (see ``flush``).
            TxnStateError: the broker refused the commit (``expected``
                ``"OPEN"``, ``actual`` e.g. ``"ABORTED"`` or ``"TIMED_OUT"``).
            TxnNotFoundError: the broker does not know the transaction.
            TimeoutError: ``timeout`` passed while blocks were unacknowledged,
                or with the outcome unknown (as below).
            FolioUnavailableError: the outcome stayed unknown until the
                deadline (the broker unreachable, its answers lost): it may
                have committed. Ask ``status()`` (or
                ``Client.transaction_status(txn_id)``) once it is back:
                ``status().committed`` means committed; OPEN means nothing was
                decided and ``commit`` may be called again; ABORTED or
                TIMED_OUT means nothing of it is visible.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        self._wait(self._core.send(only_if_open=True), timeout)
        try:
            self._decide(commit=True, deadline=deadline)
        finally:
            self._core.end(None)
        self._core.set_state(Local.COMMITTED)

    def detach(self, timeout: float | None = None) -> bytes:
        """Flushes, then hands the still-open transaction over; returns its id.

        For a transaction committed by another process (a Spark task writes,
        its driver commits every task's transactions at once): the id goes
        to ``Client.commit_transactions`` or ``Client.abort_transaction``.
        This object then takes no more events, and closing the writer leaves
        the transaction open (its timeout aborts it if nobody decides).

        Raises:
            TxnFailedError: a block could not be written; the transaction was
                aborted (see ``flush``).
            TxnStateError: the transaction was committed, aborted or failed.
            TimeoutError: ``timeout`` passed first.
        """
        self.flush(timeout)
        self._core.end(Local.DETACHED)
        return self.txn_id

    def abort(self, timeout: float | None = None) -> None:
        """``AbortTxn``: nothing of the transaction ever becomes visible to read_committed.

        Decides as ``commit`` does (and Kafka's ``abortTransaction``): an
        unknown outcome is read back and the call made again until ``timeout``
        (None: 60 s).

        Raises:
            TxnStateError: the broker refused (it was committed, say).
            TxnNotFoundError: the broker does not know the transaction.
            FolioUnavailableError, TimeoutError: the outcome was still unknown
                when ``timeout`` passed (``status()`` tells).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        self._core.drop_buffered()  # never sent now
        try:
            self._decide(commit=False, deadline=deadline)
        finally:
            self._core.end(Local.ABORTED)

    @property
    def resent_blocks(self) -> int:
        """Blocks sent again after reconnects (each landed once all the same)."""
        return self._core.resent_blocks

    def _decide(self, *, commit: bool, deadline: float | None) -> None:
        """``CommitTxn``/``AbortTxn`` until ``deadline`` (monotonic; None: the default)."""
        timeout = None if deadline is None else deadline - time.monotonic()
        decide(self._writer._call, self._writer._stub, self.txn_id, commit=commit,
               timeout=timeout)

    def status(self) -> TxnStatus:
        """The coordinator's state (``TxnStatus``, a ``str`` enum: ``"COMMITTED"`` ...).

        The way to learn the outcome of a ``commit`` that raised
        ``FolioUnavailableError``: COMMITTING or COMMITTED (``.committed``)
        means the broker took the commit.

        Raises:
            TxnNotFoundError: the broker does not know the transaction.
            FolioUnavailableError: the broker stayed unreachable.
        """
        return txn_status(self._writer._call, self._writer._stub, self.txn_id)

    def __enter__(self) -> Transaction[T]:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        """Commits, or aborts if the body raised: an abort's failure is a note on its error."""
        if self._core.state is not Local.OPEN:
            return
        if exc is None:
            self.commit()
        else:
            clean_up(exc, self.abort, f"aborting transaction {self.txn_id.hex()}")

    def __repr__(self) -> str:
        return (f"<Transaction {self.txn_id.hex()} {self._writer.topic!r} "
                f"{self._core.state.value} {self.event_count} events>")

    # -- internals -------------------------------------------------------------

    def _wait(self, futures: list[concurrent.futures.Future[None]],
              timeout: float | None) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        for future in futures:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                future.result(remaining)
            except concurrent.futures.TimeoutError:
                raise TimeoutError(f"blocks of transaction {self.txn_id.hex()} still "
                                   f"unacknowledged after {timeout} s") from None
            except FolioError as cause:
                self._fail(cause)

    def _fail(self, cause: FolioError) -> None:
        """A block failed: abort on the broker (best effort) and raise ``TxnFailedError``."""
        self._core.fail_open()
        with contextlib.suppress(FolioError):  # unknown until its timeout: the broker aborts it
            decide(self._writer._call, self._writer._stub, self.txn_id, commit=False,
                   timeout=self._writer.txn_timeout_ms / 1000)
        self._core.end(None)
        error, sealed = failed_error(self.txn_id, cause)
        if sealed:
            self._writer._refresh_routes()
        raise error from cause


class TransactionalWriter(Generic[T]):
    """Begins transactions across a topic's segments; made by ``Client.transactional_writer``.

    Thread-safe; any number of transactions may be open at once. A context
    manager: leaving it closes the writer.
    """

    def __init__(self, topic: TopicInfo, serializer: Serializer[T], *, io: IoThread,
                 source: FlowSource, stub: TransactionsAsyncStub, call: UnaryCaller,
                 txn_timeout_ms: int,
                 on_close: Callable[[TransactionalWriter[T]], None] | None = None,
                 describe: Callable[[], TopicInfo] | None = None) -> None:
        """Made by ``Client.transactional_writer``, which documents the arguments."""
        check_txn_timeout_ms(txn_timeout_ms)
        self.topic = topic.name
        self._describe = describe
        self._lock = threading.Lock()
        self._routes = TopicRoutes(topic)
        self.txn_timeout_ms = txn_timeout_ms
        self._shared = TxnShared(
            topic=topic.name, routes=self._routes, serialize=serializer.serialize,
            raw=isinstance(serializer, BytesSerializer),
            max_event_bytes=topic.config.max_event_bytes, io=io, source=source,
            give_up_s=txn_timeout_ms / 1000, forget=self._forget)
        self._io = io
        self._stub = stub
        self._call = call
        self._on_close = on_close
        self._open: dict[bytes, Transaction[T]] = {}
        self._closed = False

    def begin(self, *, label: str = "") -> Transaction[T]:
        """``BeginTxn``: a new open transaction (the broker aborts it after ``txn_timeout_ms``).

        Args:
            label: names the transaction with related ones (at most 256 bytes
                of UTF-8), so ``Client.abort_transactions(label)`` can abort
                those still open, e.g. a job's tasks whose ids never reached
                the job. Empty: none.

        Raises:
            WriterClosedError: the writer is closed.
            InvalidArgumentError: the label is too long.
            TxnFailedError: the label was closed (``abort_transactions(close=True)``).
            OutcomeUnknownError: no answer for 60 s (an unused transaction may be open).
        """
        if self._closed:
            raise WriterClosedError("the transactional writer is closed")
        # Made again after an unknown outcome: a lost call's transaction is unused, times out.
        request = transactions_pb2.BeginTxnRequest(timeout_ms=self.txn_timeout_ms, label=label)
        response = settle("BeginTxn", lambda _after: self._call(self._stub.BeginTxn, request,
                                                                 retry=True))
        txn: Transaction[T] = Transaction(self, response.txn_id)
        with self._lock:
            self._open[txn.txn_id] = txn
        return txn

    def close(self, timeout: float | None = None) -> None:
        """Aborts the open ones within ``timeout`` (None: txn_timeout_ms): ``_full_close``."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            still_open = list(self._open.values())
        if self._on_close is not None:
            self._on_close(self)
        abort_open(still_open, topic=self.topic, txn_timeout_ms=self.txn_timeout_ms,
                   timeout_s=self.txn_timeout_ms / 1000 if timeout is None else timeout)

    @property
    def closed(self) -> bool:
        """Whether ``close`` was called."""
        return self._closed

    def __enter__(self) -> TransactionalWriter[T]:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        clean_up(exc, self.close, f"closing the transactional writer of topic {self.topic!r}")

    def __repr__(self) -> str:
        return f"<TransactionalWriter topic={self.topic!r} segments={self._routes.count}>"

    # -- internals -------------------------------------------------------------

    def _refresh_routes(self) -> None:
        """After a scale: route by the topic's open segments now (best effort)."""
        if self._describe is None:
            return
        try:
            self._routes.set(self._describe())
        except FolioError as error:
            log.info("could not refresh the segments of %s: %s", self.topic, error)

    def _forget(self, core: TxnCore) -> None:
        with self._lock:
            self._open.pop(core.txn_id, None)
