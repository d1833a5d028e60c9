"""A single-routing-key transaction (PDP-44): events buffered until ``commit``.

``SingleRoutingKeyTransactionWriter.begin`` (``folio.txn.txn``) makes one;
it packs its events with a ``TxnBuffer`` and, on ``commit_async``, hands
them to its writer as one ``TxnCommit``. It knows its writer only as a
``TxnOwner`` (below), so this module does not import ``folio.txn.txn``.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable, Mapping
from enum import Enum
from types import TracebackType
from typing import Generic, Protocol, TypeVar

from folio._exits import clean_up
from folio.api.v1.block import HEADER_OVERHEAD_BYTES
from folio.errors import (
    EventTooLargeError,
    TimeoutError,
    TxnFailedError,
    TxnStateError,
)
from folio.txn._txn_buffer import TxnBuffer
from folio.txn._txn_commit import TransactionResult, TxnCommit

__all__ = ["SingleRoutingKeyTransaction", "TxnOwner", "TxnState"]

log = logging.getLogger(__name__)

T = TypeVar("T")


class TxnOwner(Protocol[T]):
    """What a transaction needs of its writer (``SingleRoutingKeyTransactionWriter``)."""

    topic: str
    routing_key: str
    #: Whether the serializer passes bytes through (then they are not serialized).
    _raw: bool
    _max_event_bytes: int
    #: Bytes counted per event beyond its payload and headers.
    _event_overhead: int
    _timeout_ms: int
    #: Monotonic seconds.
    _clock: Callable[[], float]

    @property
    def _serialize(self) -> Callable[[T], bytes]:
        """Turns an event into its payload."""

    def _finished(self, txn: SingleRoutingKeyTransaction[T], commit: TxnCommit | None) -> None:
        """``txn`` stopped being open; ``commit`` is what to send (None: aborted or expired)."""


class TxnState(Enum):
    """Where a transaction is, seen from the caller's side."""

    OPEN = "open"
    COMMITTED = "committed"  # commit called: handed to the flow
    ABORTED = "aborted"
    TIMED_OUT = "timed_out"


class SingleRoutingKeyTransaction(Generic[T]):
    """Events of one routing key, written atomically on ``commit``; made by ``begin``.

    Thread-safe. A context manager: leaving the block commits the transaction
    if it is still open, or aborts it if the block raised.
    """

    def __init__(self, writer: TxnOwner[T], deadline: float) -> None:
        """Made by ``SingleRoutingKeyTransactionWriter.begin``."""
        self._writer = writer
        self._deadline = deadline
        self._lock = threading.Lock()
        self._state = TxnState.OPEN
        self._finished = threading.Event()  # set when it stops being open
        self._buffer = TxnBuffer(writer.routing_key)
        self._future: concurrent.futures.Future[TransactionResult] | None = None

    # -- the API ------------------------------------------------------------------

    @property
    def size(self) -> int:
        """Bytes the transaction's events count against ``MAX_TRANSACTION_BYTES``."""
        return self._buffer.size

    @property
    def event_count(self) -> int:
        """How many events were written to it."""
        return self._buffer.count

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
            if self._state is not TxnState.OPEN:
                self._check_open_locked()
            self._buffer.add(payload, size, headers, now_ms)

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
            OutcomeUnknownError: it was sent and its answer lost, then the
                segment could not be set up again to ask (refused for good:
                a permission revoked, say): it may or may not be written, whole.
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
            commit = self._buffer.take()
            self._state = TxnState.COMMITTED
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
            if self._state is TxnState.COMMITTED:
                raise TxnStateError("the transaction is committed; it cannot be aborted")
            if self._state is not TxnState.OPEN:
                return
            self._state = TxnState.ABORTED
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
        """Commits if the body ended normally, else aborts without hiding the body's error.

        The commit waits at most the writer's ``txn_timeout_ms`` (a ``with``
        block never hangs while the broker is away): then ``TimeoutError``,
        and the commit goes on in the background (its future, or the
        writer's ``close``, tells how it ended). A failure of the abort is
        added to the body's exception as a note (``folio._exits``), never
        raised in its place.
        """
        if self._state is not TxnState.OPEN:
            return
        if exc is None:
            self.commit(self._writer._timeout_ms / 1000)
        else:
            clean_up(exc, self.abort, f"aborting the transaction of routing key "
                                      f"{self._writer.routing_key!r}")

    def __repr__(self) -> str:
        return (f"<SingleRoutingKeyTransaction {self._writer.topic!r} "
                f"key={self._writer.routing_key!r} {self._state.value} "
                f"{self._buffer.count} events, {self._buffer.size} bytes>")

    # -- internals ----------------------------------------------------------------

    def _check_open_locked(self) -> None:
        state = self._state
        if state is TxnState.OPEN and self._writer._clock() >= self._deadline:
            self._expire_locked()
            state = self._state
        if state is TxnState.OPEN:
            return
        if state is TxnState.TIMED_OUT:
            raise TxnFailedError(
                f"the transaction was not committed within txn_timeout_ms "
                f"({self._writer._timeout_ms} ms) and was aborted")
        raise TxnStateError(f"the transaction is {state.value} already")

    def _release_locked(self) -> None:
        self._buffer.release()

    def _expire_locked(self) -> None:
        self._state = TxnState.TIMED_OUT
        self._release_locked()
        self._finished.set()
        log.info("a transaction of %d events to %s (key %r) timed out after %d ms; aborted",
                 self._buffer.count, self._writer.topic, self._writer.routing_key,
                 self._writer._timeout_ms)

    def _expire_if_due(self) -> bool:
        """Aborts the transaction if it is open past its deadline; True if it did."""
        with self._lock:
            if self._state is not TxnState.OPEN or self._writer._clock() < self._deadline:
                return False
            self._expire_locked()
        self._writer._finished(self, None)
        return True
