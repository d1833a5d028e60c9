"""Single-routing-key transactions (PDP-44): several events of one key, written atomically.

Made by ``Client.single_routing_key_txn_writer(topic, routing_key, serializer)``::

    with client.single_routing_key_txn_writer("orders", "customer-7") as writer:
        txn = writer.begin()
        txn.write_event(b"order created")
        txn.write_event(b"order paid")
        txn.commit()            # both events, contiguous, or (on failure) neither

All events of a transaction have the writer's routing key, so they go to one
segment and need no coordination: the events are buffered in the client
(packed into blocks of about 1 MiB as they come), and ``commit`` sends the
blocks on the writer's flow of the shared Append stream, every block but the
last with ``end = false``. The broker holds them and writes them together,
when the last arrives, as one ledger entry: readers see all of the
transaction's events, at consecutive offsets, or none of them. How commits
are numbered, retried across reconnects (never half, never twice) and handed
to a successor segment after scaling is in ``folio.txn._txn_flow``.

Rules:

- One open transaction per writer: ``begin`` while one is open raises
  :class:`TxnStateError`. Once ``commit``/``commit_async`` or ``abort`` is
  called the writer can begin the next one (a commit still on its way does
  not block ``begin``; commits of one writer are written in commit order).
- Size: at most :data:`MAX_TRANSACTION_BYTES` (16 MiB) of events as packed
  (payload, routing key, headers, and ~20 bytes of framing per event). The
  ``write_event`` that would pass it raises
  :class:`MaxTransactionSizeExceededError`; the event is not added and the
  transaction stays usable.
- Time: a transaction not committed within ``txn_timeout_ms`` of ``begin``
  is aborted and its buffer released (a timer on the IO thread, and checked
  on every call); ``write_event``/``commit`` then raise :class:`TxnFailedError`.
- ``abort`` drops the buffer; nothing was sent.
- ``commit_async`` returns at once with a ``concurrent.futures.Future`` of a
  :class:`TransactionResult`; several transactions (of one writer, or of
  many) can so be in flight while the caller fills the next one. Its
  callbacks run on the SDK's IO thread: keep them short and never call
  blocking Folio methods from them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Generic, TypeVar

from folio._exits import clean_up
from folio._transport.append_stream import Backoff
from folio.api.v1.block import EVENT_OVERHEAD_BYTES
from folio.api.v1.routing import routing_point, segment_index
from folio.errors import (
    FolioError,
    FolioUnavailableError,
    InvalidArgumentError,
    SegmentSealedError,
    TimeoutError,
    TxnFailedError,
    TxnStateError,
    WriterClosedError,
)
from folio.models import SegmentRange, TopicInfo
from folio.serializers import BytesSerializer, Serializer
from folio.txn._txn_buffer import TXN_BLOCK_BYTES
from folio.txn._txn_commit import MAX_TRANSACTION_BYTES, TransactionResult, TxnCommit
from folio.txn._txn_flow import TxnFlow
from folio.txn._txn_transaction import SingleRoutingKeyTransaction, TxnState

if TYPE_CHECKING:
    from folio._transport.append_stream import FlowSource
    from folio._transport.io_thread import IoThread
    from folio._transport.scaling import SuccessorLookup

__all__ = [
    "MAX_TRANSACTION_BYTES",
    "TXN_BLOCK_BYTES",
    "SingleRoutingKeyTransaction",
    "SingleRoutingKeyTransactionWriter",
    "TransactionResult",
]

log = logging.getLogger(__name__)

T = TypeVar("T")



class SingleRoutingKeyTransactionWriter(Generic[T]):
    """Begins transactions of one routing key on one topic; made by
    ``Client.single_routing_key_txn_writer``.

    Reusable: one open transaction at a time, then the next. Thread-safe.
    A context manager: leaving it closes the writer.
    """

    def __init__(self, topic: TopicInfo, routing_key: str, serializer: Serializer[T], *,
                 io: IoThread, source: FlowSource, txn_timeout_ms: int,
                 writer_id: str | None,
                 on_close: Callable[[SingleRoutingKeyTransactionWriter[T]], None] | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 successors: SuccessorLookup | None = None) -> None:
        """Made by ``Client.single_routing_key_txn_writer``, which documents the arguments.

        ``clock`` (monotonic seconds) is for tests. ``successors`` looks up a
        sealed segment's successors (None: commits to a sealed segment fail).
        """
        if txn_timeout_ms <= 0:
            raise InvalidArgumentError(f"txn_timeout_ms must be > 0, not {txn_timeout_ms}")
        if writer_id is not None and not 1 <= len(writer_id) <= 128:
            raise InvalidArgumentError("writer_id must be 1 to 128 characters")
        if not isinstance(routing_key, str):
            raise InvalidArgumentError("a transaction writer needs a routing key (a str)")
        ranges = sorted((s for s in topic.segments if not s.sealed), key=lambda s: s.key_low)
        if not ranges:
            raise SegmentSealedError(f"topic {topic.name!r} is sealed: it has no open segment "
                                     "to write to")
        self.segment = ranges[segment_index([s.key_high for s in ranges], routing_key)].name
        self.topic = topic.name
        self.routing_key = routing_key
        self.writer_id = writer_id or uuid.uuid4().hex
        #: Bytes counted per event beyond its payload and headers.
        self._event_overhead = len(routing_key.encode("utf-8")) + EVENT_OVERHEAD_BYTES
        self._serialize = serializer.serialize
        self._raw = isinstance(serializer, BytesSerializer)
        self._max_event_bytes = topic.config.max_event_bytes
        self._timeout_ms = txn_timeout_ms
        self._timeout_s = txn_timeout_ms / 1000.0
        self._clock = clock
        self._io = io
        self._on_close = on_close
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._open: SingleRoutingKeyTransaction[T] | None = None
        self._unfinished = 0  # commits handed to the flow, not yet resolved
        self._handoff: list[TxnCommit] = []  # committed, not yet given to the flow
        self._handoff_scheduled = False
        self._timer_armed = False
        self._closed = False
        self._source = source
        self._lookup = successors
        #: Commits handed off while following a seal (IO thread), else None.
        self._parked: list[TxnCommit] | None = None
        self._tasks: set[asyncio.Future[None]] = set()
        self._flow = TxnFlow(self.segment, writer_id=self.writer_id, source=source,
                             on_done=self._commit_done, successor=self._successor)
        io.call_soon(self._flow.start)

    def begin(self) -> SingleRoutingKeyTransaction[T]:
        """Starts a transaction; it must be committed within ``txn_timeout_ms``.

        Raises:
            TxnStateError: a transaction of this writer is open (commit or
                abort it first).
            WriterClosedError: the writer is closed.
        """
        with self._lock:
            current = self._open
        if current is not None:
            current._expire_if_due()
        with self._lock:
            if self._closed:
                raise WriterClosedError("the transaction writer is closed")
            if self._open is not None and self._open._state is TxnState.OPEN:
                raise TxnStateError(
                    "this writer has an open transaction; commit or abort it before "
                    "beginning the next (one open transaction per writer)")
            deadline = self._clock() + self._timeout_s
            txn: SingleRoutingKeyTransaction[T] = SingleRoutingKeyTransaction(self, deadline)
            self._open = txn
            arm = not self._timer_armed
            self._timer_armed = True
        if arm:
            self._io.call_soon(self._arm_timer, self._timeout_s)
        return txn

    def flush(self, timeout: float | None = None) -> None:
        """Waits until every commit handed over so far is acknowledged or failed.

        Raises:
            TimeoutError: commits still unresolved after ``timeout``.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self._unfinished:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise TimeoutError(f"{self._unfinished} commits still unacknowledged after "
                                       f"{timeout} s")
                self._cond.wait(1.0 if remaining is None else min(remaining, 1.0))

    def close(self, timeout: float | None = None) -> None:
        """Aborts the open transaction, waits for the commits on their way, ends the flow.

        Idempotent, and bounded: while the broker is unreachable a commit is
        retried until the writer is closed, so closing waits at most
        ``timeout`` seconds (None: the writer's ``txn_timeout_ms``, as
        ``TransactionalWriter.close``). The open transaction is only in this
        process (nothing of it was sent): aborting it is local and never waits.

        Raises:
            TimeoutError: the deadline passed with commits unacknowledged (its
                ``context["unsettled"]`` counts them). The writer is closed
                anyway and each of those commits' futures fails with
                ``WriterClosedError``: its outcome is unknown, but whole or
                nothing (crash window: its end block may still reach the broker
                after this, which then writes all of its blocks as one entry;
                blocks held without their end are never written, dropped with
                their stream or after ``--max-held-ms``), so read the segment
                back before committing its events again. Not ``retriable``.
                Nothing acknowledged is affected.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
            current = self._open
        if current is not None:
            with contextlib.suppress(TxnStateError):  # committed meanwhile
                current.abort()
        timeout_s = self._timeout_s if timeout is None else timeout
        try:
            self.flush(timeout_s)
        except TimeoutError as error:
            unsettled = self._unfinished
            closed = TimeoutError(
                f"closing the transaction writer of topic {self.topic!r} (routing key "
                f"{self.routing_key!r}): {unsettled} commits to {self.segment} still "
                f"unacknowledged after {timeout_s} s (the broker unreachable?); each fails "
                "with WriterClosedError, written whole or not at all: read the segment back "
                "before committing its events again", topic=self.topic,
                segment=self.segment, unsettled=unsettled, timeout_s=timeout_s)
            closed.retriable = False
            raise closed from error
        finally:
            self._io.call_soon(self._flow.release)
            if self._on_close is not None:
                self._on_close(self)

    @property
    def closed(self) -> bool:
        """Whether ``close`` was called."""
        return self._closed

    def __enter__(self) -> SingleRoutingKeyTransactionWriter[T]:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        """Closes the writer; a failure of ``close`` never takes the place of the body's error.

        When the body raised, its exception propagates and what ``close``
        raised is added to it as a note (``folio._exits``).
        """
        clean_up(exc, self.close, f"closing the transaction writer of topic {self.topic!r} "
                                  f"(routing key {self.routing_key!r})")

    def __repr__(self) -> str:
        return (f"<SingleRoutingKeyTransactionWriter topic={self.topic!r} "
                f"key={self.routing_key!r} segment={self.segment!r} "
                f"writer_id={self.writer_id!r}>")

    # -- internals ----------------------------------------------------------------

    def _finished(self, txn: SingleRoutingKeyTransaction[T], commit: TxnCommit | None) -> None:
        """``txn`` stopped being open; ``commit`` is what to send (None: aborted or expired)."""
        with self._lock:
            if self._open is txn:
                self._open = None
            if commit is None:
                return
            if commit.event_count == 0:
                commit.done = True
                commit.future.set_result(TransactionResult(self.segment, -1, 0))
                return
            self._unfinished += 1
            # One wake-up of the IO thread for however many commits arrive
            # before it runs: a cross-thread call per commit costs more than
            # the commit of a small transaction does.
            self._handoff.append(commit)
            if self._handoff_scheduled:
                return
            self._handoff_scheduled = True
        self._io.call_soon(self._hand_over)

    def _hand_over(self) -> None:
        """IO thread: give the flow every commit handed off since the last call."""
        with self._lock:
            commits, self._handoff = self._handoff, []
            self._handoff_scheduled = False
        if self._parked is not None:  # following a seal: wait for the successor
            self._parked.extend(commits)
            return
        for commit in commits:
            self._flow.submit(commit)

    def _commit_done(self, commit: TxnCommit) -> None:
        with self._cond:
            self._unfinished -= 1
            self._cond.notify_all()

    def _arm_timer(self, delay: float) -> None:
        """IO thread: check the open transaction's deadline after ``delay``."""
        self._io.loop.call_later(max(delay, 0.0), self._check_timeout)

    def _check_timeout(self) -> None:
        """IO thread: expire the open transaction if due; re-arm while one is open.

        One timer per writer, whatever the number of transactions: a later
        transaction's deadline is later, so the timer re-arms for it.
        """
        with self._lock:
            current = self._open
        if current is not None:
            current._expire_if_due()
        with self._lock:
            current = self._open
            if current is None or current._state is not TxnState.OPEN or self._closed:
                self._timer_armed = False
                return
            delay = current._deadline - self._clock()
        self._arm_timer(delay)

    def _successor(self, flow: TxnFlow, error: SegmentSealedError,
                   moving: list[TxnCommit]) -> bool:
        """IO thread: ``flow``'s segment is sealed; take its unfinished commits over.

        Commits handed off from now on wait (``_parked``) until the successor
        owning the routing key is known; then the moved commits, then the
        parked ones, go to its flow in commit order, each whole. False (no
        way to look successors up): the commits fail.
        """
        if self._lookup is None:
            return False
        self._parked = []
        task = asyncio.ensure_future(self._follow(flow.segment, error, moving))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return True

    async def _follow(self, sealed: str, error: SegmentSealedError,
                      moving: list[TxnCommit]) -> None:
        assert self._lookup is not None
        backoff = Backoff()
        point = routing_point(self.routing_key)
        failure: FolioError | None = None
        target: SegmentRange | None = None
        while not self._closed:
            try:
                successors = await self._lookup(sealed)
            except FolioUnavailableError as lookup_error:
                delay = backoff.next_delay()
                log.info("successors of %s not found (%s); asking again in %.2f s",
                         sealed, lookup_error, delay)
                await asyncio.sleep(delay)
                continue
            except FolioError as lookup_error:
                failure = lookup_error
                break
            target = next((s for s in successors if s.owns(point)), None)
            if target is None:
                failure = error if not successors else FolioError(
                    f"no successor of {sealed!r} owns routing key {self.routing_key!r}")
            break
        parked, self._parked = self._parked or [], None
        commits = moving + parked
        if target is None:
            why = failure or WriterClosedError("the writer was closed")
            for commit in commits:
                self._fail_commit(commit, TxnFailedError(
                    f"the transaction to {sealed} was not committed: {why}",
                    segment=sealed), why)
            return
        log.info("transaction writer %s: segment %s is sealed; key %r goes to %s",
                 self.writer_id, sealed, self.routing_key, target.name)
        self.segment = target.name
        self._flow = TxnFlow(target.name, writer_id=self.writer_id, source=self._source,
                             on_done=self._commit_done, successor=self._successor)
        self._flow.start()
        for commit in commits:
            self._flow.submit(commit)

    def _fail_commit(self, commit: TxnCommit, error: FolioError, cause: BaseException) -> None:
        if commit.done:
            return
        commit.done = True
        commit.blocks = []
        error.__cause__ = cause
        commit.future.set_exception(error)
        self._commit_done(commit)
