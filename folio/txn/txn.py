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
import concurrent.futures
import contextlib
import logging
import threading
import time
import uuid
from bisect import bisect_right
from collections.abc import Callable, Mapping
from enum import Enum
from types import TracebackType
from typing import TYPE_CHECKING, Final, Generic, TypeVar

from folio._transport.append_stream import Backoff
from folio.api.v1.block import EVENT_OVERHEAD_BYTES, HEADER_OVERHEAD_BYTES, encode_block
from folio.api.v1.routing import routing_point
from folio.errors import (
    EventTooLargeError,
    FolioError,
    FolioUnavailableError,
    InvalidArgumentError,
    MaxTransactionSizeExceededError,
    SegmentSealedError,
    TimeoutError,
    TxnFailedError,
    TxnStateError,
    WriterClosedError,
)
from folio.models import SegmentRange, TopicInfo
from folio.serializers import BytesSerializer, Serializer
from folio.txn._txn_flow import MAX_TRANSACTION_BYTES, TransactionResult, TxnCommit, TxnFlow

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

#: A transaction's events are packed into blocks of about this size.
TXN_BLOCK_BYTES: Final = 1024 * 1024
#: Framing counted per block (format version, packed column prefixes).
_BLOCK_OVERHEAD_BYTES: Final = 32
_NO_HEADERS: Final[Mapping[str, bytes]] = {}


class _TxnState(Enum):
    OPEN = "open"
    COMMITTED = "committed"  # commit called: handed to the flow
    ABORTED = "aborted"
    TIMED_OUT = "timed_out"


class SingleRoutingKeyTransaction(Generic[T]):
    """Events of one routing key, written atomically on ``commit``; made by ``begin``.

    Thread-safe. A context manager: leaving the block commits the transaction
    if it is still open, or aborts it if the block raised.
    """

    def __init__(self, writer: SingleRoutingKeyTransactionWriter[T], deadline: float) -> None:
        """Made by ``SingleRoutingKeyTransactionWriter.begin``."""
        self._writer = writer
        self._deadline = deadline
        self._lock = threading.Lock()
        self._state = _TxnState.OPEN
        self._finished = threading.Event()  # set when it stops being open
        self._blocks: list[tuple[bytes, int]] = []
        self._payloads: list[bytes] = []
        self._timestamps: list[int] = []
        self._headers: list[Mapping[str, bytes]] | None = None
        self._any_headers = False  # whether some block has a headers column
        self._block_size = 0
        self._size = 0
        self._count = 0
        self._future: concurrent.futures.Future[TransactionResult] | None = None

    # -- the API ------------------------------------------------------------------

    @property
    def size(self) -> int:
        """Bytes the transaction's events count against ``MAX_TRANSACTION_BYTES``."""
        return self._size

    @property
    def event_count(self) -> int:
        """How many events were written to it."""
        return self._count

    @property
    def state(self) -> str:
        """``"open"``, ``"committed"`` (commit called), ``"aborted"`` or ``"timed_out"``."""
        return self._state.value

    def write_event(self, event: T, headers: Mapping[str, bytes] | None = None) -> None:
        """Adds one event (with the writer's routing key); nothing is sent yet.

        Args:
            event: the value, serialized with the writer's serializer.
            headers: application headers, names to bytes values.

        Raises:
            MaxTransactionSizeExceededError: the event would take the
                transaction past 16 MiB; it is not added (the transaction
                stays usable).
            EventTooLargeError: the event is above the topic's ``max_event_bytes``.
            TxnFailedError: the transaction timed out (it was aborted).
            TxnStateError: it was committed or aborted already.
            Exception: whatever the serializer raises.
        """
        writer = self._writer
        if writer._raw and type(event) is bytes:
            payload: bytes = event  # type: ignore[assignment]  # T is bytes here
        else:
            payload = writer._serialize(event)
        payload_size = len(payload)
        if payload_size > writer._max_event_bytes:
            raise EventTooLargeError(
                f"an event of {payload_size} bytes exceeds topic {writer.topic!r}'s "
                f"max_event_bytes of {writer._max_event_bytes} bytes",
                size=payload_size, limit=writer._max_event_bytes)
        size = payload_size + writer._event_overhead
        if headers:
            size += sum(len(name) + len(value) + HEADER_OVERHEAD_BYTES
                        for name, value in headers.items())
        now_ms = time.time_ns() // 1_000_000
        with self._lock:
            # The deadline is enforced by the writer's timer (and by commit);
            # a clock read per event would cost more than the rest of this.
            if self._state is not _TxnState.OPEN:
                self._check_open_locked()
            block_size = self._block_size
            cut = block_size > 0 and block_size + size > TXN_BLOCK_BYTES
            added = size + (_BLOCK_OVERHEAD_BYTES if cut or not block_size else 0)
            total = self._size + added
            if total > MAX_TRANSACTION_BYTES:
                raise MaxTransactionSizeExceededError(
                    f"the event of {payload_size} bytes would take the transaction to "
                    f"{total} bytes, above the limit of {MAX_TRANSACTION_BYTES} bytes; it was "
                    "not added", size=total, limit=MAX_TRANSACTION_BYTES)
            if cut:
                self._cut_locked()
            self._payloads.append(payload)
            self._timestamps.append(now_ms)
            if headers:
                if self._headers is None:
                    self._headers = [_NO_HEADERS] * (len(self._payloads) - 1)
                self._headers.append(dict(headers))
            elif self._headers is not None:
                self._headers.append(_NO_HEADERS)
            self._block_size += added
            self._size = total
            self._count += 1

    def commit(self, timeout: float | None = None) -> TransactionResult:
        """Writes the transaction's events atomically and waits until they are durable.

        Retries across reconnects by itself (see ``folio.txn._txn_flow``): the
        transaction is written whole exactly once, or not at all.

        Args:
            timeout: seconds to wait; None for as long as it takes. On expiry
                the commit goes on in the background (its outcome is then
                unknown to the caller).

        Returns:
            Where the events went.

        Raises:
            TxnFailedError: the transaction timed out before the commit, or
                the broker refused it for good (its ``__cause__`` says why):
                nothing of it was written.
            TxnStateError: it was committed or aborted already.
            TimeoutError: ``timeout`` passed first.
            WriterClosedError: the writer was closed before the commit was
                acknowledged (the transaction may or may not be written, whole).
        """
        future = self.commit_async()
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            if future.done():
                raise
            raise TimeoutError(f"the commit was not acknowledged within {timeout} s "
                               "(it goes on)") from None

    def commit_async(self) -> concurrent.futures.Future[TransactionResult]:
        """Hands the transaction to the writer's flow and returns at once.

        The writer may ``begin`` the next transaction right away. The future
        gives a :class:`TransactionResult`, or raises as ``commit`` does.

        Raises:
            TxnFailedError: the transaction timed out (it was aborted).
            TxnStateError: it was committed or aborted already.
        """
        with self._lock:
            self._check_open_locked()
            self._cut_locked()
            blocks, self._blocks = self._blocks, []
            commit = TxnCommit(blocks, self._count, self._size)
            commit.has_headers = self._any_headers
            self._state = _TxnState.COMMITTED
            self._future = commit.future
        self._finished.set()
        self._writer._finished(self, commit)
        return commit.future

    def abort(self) -> None:
        """Drops the transaction's events; nothing is sent. Idempotent.

        Raises:
            TxnStateError: ``commit`` was called already.
        """
        with self._lock:
            if self._state is _TxnState.COMMITTED:
                raise TxnStateError("the transaction is committed; it cannot be aborted")
            if self._state is not _TxnState.OPEN:
                return
            self._state = _TxnState.ABORTED
            self._release_locked()
        self._finished.set()
        self._writer._finished(self, None)

    def wait_finished(self, timeout: float | None = None) -> bool:
        """Waits until the transaction is no longer open (committed, aborted or timed out)."""
        return self._finished.wait(timeout)

    def __enter__(self) -> SingleRoutingKeyTransaction[T]:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        if self._state is not _TxnState.OPEN:
            return
        if exc_type is None:
            self.commit()
        else:
            self.abort()

    def __repr__(self) -> str:
        return (f"<SingleRoutingKeyTransaction {self._writer.topic!r} "
                f"key={self._writer.routing_key!r} {self._state.value} "
                f"{self._count} events, {self._size} bytes>")

    # -- internals ----------------------------------------------------------------

    def _check_open_locked(self) -> None:
        state = self._state
        if state is _TxnState.OPEN and self._writer._clock() >= self._deadline:
            self._expire_locked()
            state = self._state
        if state is _TxnState.OPEN:
            return
        if state is _TxnState.TIMED_OUT:
            raise TxnFailedError(
                f"the transaction was not committed within txn_timeout_ms "
                f"({self._writer._timeout_ms} ms) and was aborted")
        raise TxnStateError(f"the transaction is {state.value} already")

    def _cut_locked(self) -> None:
        """Packs the buffered events into one block."""
        if not self._payloads:
            return
        key = self._writer.routing_key
        count = len(self._payloads)
        data = encode_block(self._payloads, [key] * count, self._timestamps, self._headers)
        if self._headers is not None:
            self._any_headers = True
        self._blocks.append((data, count))
        self._payloads = []
        self._timestamps = []
        self._headers = None
        self._block_size = 0

    def _release_locked(self) -> None:
        self._blocks = []
        self._payloads = []
        self._timestamps = []
        self._headers = None
        self._block_size = 0

    def _expire_locked(self) -> None:
        self._state = _TxnState.TIMED_OUT
        self._release_locked()
        self._finished.set()
        log.info("a transaction of %d events to %s (key %r) timed out after %d ms; aborted",
                 self._count, self._writer.topic, self._writer.routing_key,
                 self._writer._timeout_ms)

    def _expire_if_due(self) -> bool:
        """Aborts the transaction if it is open past its deadline; True if it did."""
        with self._lock:
            if self._state is not _TxnState.OPEN or self._writer._clock() < self._deadline:
                return False
            self._expire_locked()
        self._writer._finished(self, None)
        return True


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
        index = bisect_right([s.key_high for s in ranges], routing_point(routing_key))
        self.segment = ranges[min(index, len(ranges) - 1)].name
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
        self._flow = TxnFlow(self.segment, writer_id=self.writer_id, io=io, source=source,
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
            if self._open is not None and self._open._state is _TxnState.OPEN:
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

        Idempotent. Commits still unacknowledged after ``timeout`` fail with
        ``WriterClosedError`` (outcome unknown, but whole or nothing).

        Raises:
            TimeoutError: ``timeout`` passed with commits unresolved (the
                writer is closed anyway).
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
            current = self._open
        if current is not None:
            with contextlib.suppress(TxnStateError):  # committed meanwhile
                current.abort()
        try:
            self.flush(timeout)
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
        self.close()

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
            if current is None or current._state is not _TxnState.OPEN or self._closed:
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
        self._flow = TxnFlow(target.name, writer_id=self.writer_id, io=self._io,
                             source=self._source, on_done=self._commit_done,
                             successor=self._successor)
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
