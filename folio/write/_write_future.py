"""Write futures: one shared outcome per block, one tiny future per event.

A ``concurrent.futures.Future`` per event would cost more than the rest of
``write_event`` together. Instead every event of a block shares the block's
:class:`BlockOutcome` (one ``threading.Event``, set once, from the IO thread,
when the broker acknowledges or the writer gives up), and each event's
:class:`WriteFuture` is a two-slot object: that outcome and the event's index
in the block, from which its offset follows.

When a writer moves a block's events to the successors of a sealed segment,
the block's outcome is *forwarded*: it keeps each event's new future and is
done once all of them are, and each event's future answers with its new one.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from folio.errors import TimeoutError
from folio.models import WriteResult

__all__ = ["BlockOutcome", "WriteFuture"]

log = logging.getLogger(__name__)


class BlockOutcome:
    """The outcome of one block: the offset of its first event, or an error."""

    __slots__ = ("_callbacks", "_done", "_lock", "error", "forwarded", "offset", "segment")

    def __init__(self, segment: str) -> None:
        self.segment = segment
        #: Offset of the block's first event; -1 for a duplicate (offset unknown).
        self.offset = -1
        self.error: BaseException | None = None
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._callbacks: list[tuple[Callable[[WriteFuture], None], WriteFuture]] | None = None
        #: Each event's future in the block it was moved to (after a seal), else None.
        self.forwarded: list[WriteFuture] | None = None

    @property
    def done(self) -> bool:
        """Whether the outcome is known."""
        return self._done.is_set()

    def wait(self, timeout: float | None) -> bool:
        """Waits for the outcome; False if ``timeout`` passed first."""
        return self._done.wait(timeout)

    def set_result(self, offset: int) -> None:
        """The block is durable; its first event has ``offset`` (-1: a duplicate)."""
        self.offset = offset
        self._finish()

    def set_error(self, error: BaseException) -> None:
        """The block failed for good with ``error``."""
        self.error = error
        self._finish()

    def forward(self, futures: list[WriteFuture]) -> None:
        """The block's events were sent again elsewhere: event ``i`` is now ``futures[i]``.

        Done once every one of them is; ``error`` is then the first failure among them.
        """
        self.forwarded = futures
        outcomes = list({id(f._outcome): f._outcome for f in futures}.values())
        if not outcomes:
            self._finish()
            return
        remaining = [len(outcomes)]

        def one_done(_: WriteFuture) -> None:
            with self._lock:
                remaining[0] -= 1
                last = remaining[0] == 0
            if last:
                self.error = next((f.exception(0) for f in futures
                                   if f.exception(0) is not None), None)
                self._finish()

        for outcome in outcomes:
            outcome.add_callback(one_done, WriteFuture(outcome, 0))

    def outcome_of(self, index: int) -> WriteResult | BaseException:
        """Once done: event ``index``'s result, or its error (never waits)."""
        if self.forwarded is not None:
            future = self.forwarded[index]
            error = future.exception(0)
            return error if error is not None else future.result(0)
        if self.error is not None:
            return self.error
        return WriteResult(self.segment, self.offset + index if self.offset >= 0 else -1)

    def add_callback(self, callback: Callable[[WriteFuture], None], future: WriteFuture) -> None:
        """Calls ``callback(future)`` once the outcome is known (at once if it is)."""
        with self._lock:
            if not self._done.is_set():
                if self._callbacks is None:
                    self._callbacks = []
                self._callbacks.append((callback, future))
                return
        _run_callback(callback, future)

    def _finish(self) -> None:
        with self._lock:
            self._done.set()
            callbacks, self._callbacks = self._callbacks, None
        for callback, future in callbacks or ():
            _run_callback(callback, future)


def _run_callback(callback: Callable[[WriteFuture], None], future: WriteFuture) -> None:
    try:
        callback(future)
    except Exception:
        log.exception("write future callback %r raised", callback)


class WriteFuture:
    """The outcome of one ``write_event``: where the event went, or why it failed.

    Cheap by design (see the module docstring); the API follows
    ``concurrent.futures.Future`` for the methods it has.
    """

    __slots__ = ("_index", "_outcome")

    def __init__(self, outcome: BlockOutcome, index: int) -> None:
        self._outcome = outcome
        self._index = index

    @property
    def block(self) -> tuple[BlockOutcome, int]:
        """The outcome of the event's block and its index there (one callback per block
        serves all its events: the asyncio face's way)."""
        return self._outcome, self._index

    def done(self) -> bool:
        """Whether the event was acknowledged or failed for good."""
        return self._outcome._done.is_set()

    def result(self, timeout: float | None = None) -> WriteResult:
        """Waits for the acknowledgement and returns where the event went.

        Args:
            timeout: seconds to wait, None for as long as it takes (at most
                about the writer's ``delivery_timeout_ms``).

        Returns:
            The event's segment and offset (-1 if the broker answered its block
            as a duplicate; see ``WriteResult``).

        Raises:
            TimeoutError: ``timeout`` passed first (the write goes on).
            FolioError: the write failed (``DeliveryTimeoutError``,
                ``SegmentSealedError``, ``EventTooLargeError``, ...).
        """
        outcome = self._outcome
        if not outcome._done.wait(timeout):
            raise TimeoutError(f"the write was not acknowledged within {timeout} s")
        if outcome.forwarded is not None:
            return outcome.forwarded[self._index].result(0)
        if outcome.error is not None:
            raise outcome.error
        offset = outcome.offset
        return WriteResult(outcome.segment, offset + self._index if offset >= 0 else -1)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        """Waits like ``result`` and returns the failure, or None on success.

        Raises:
            TimeoutError: ``timeout`` passed first.
        """
        outcome = self._outcome
        if not outcome._done.wait(timeout):
            raise TimeoutError(f"the write was not acknowledged within {timeout} s")
        if outcome.forwarded is not None:
            return outcome.forwarded[self._index].exception(0)
        return outcome.error

    def add_done_callback(self, fn: Callable[[WriteFuture], None]) -> None:
        """Calls ``fn(self)`` when the write is done; at once if it is.

        ``fn`` runs on the SDK's IO thread (or the caller's, if already done):
        keep it short and never call blocking Folio methods from it.
        """
        self._outcome.add_callback(fn, self)

    def __repr__(self) -> str:
        state = "done" if self.done() else "pending"
        return f"<WriteFuture {self._outcome.segment}#{self._index} {state}>"
