"""The IO side of single-routing-key transactions (PDP-44): one flow per (writer, segment).

A :class:`TxnFlow` is the single-routing-key policy of the one flow engine
(``folio._flow.FlowEngine``, which it holds): one transaction writer's flow
on the client's shared Append stream, bound by ``SetupAppend`` to the
segment of the writer's routing key under the writer's own writer id. It
takes committed transactions (:class:`TxnCommit`, already packed into blocks
by the caller's thread) in commit order and sends **one block sequence at a
time**: every block but the last with ``end = false`` (the broker holds
them), the last with ``end = true`` (the broker writes all of them as one
ledger entry and answers that block alone). The next sequence goes out only
once the previous one is answered.

A sequence is one transaction, or several whole transactions of this writer
that were committed while the previous sequence was on its way (coalesced,
at most ``MAX_TRANSACTION_BYTES`` together, as the broker takes): one entry
holding several transactions still gives each of them all or nothing, at
consecutive offsets, in commit order, and costs the broker one entry instead
of many, which is what makes small transactions cheap. After a sequence is
refused for good, its transactions go again one per sequence, so that only
the one at fault fails.

Numbers and reconnects are the engine's (``folio._flow.engine``): a
transaction is numbered on its first send, its blocks' numbers running on
across the sequence. Because only one sequence is ever outstanding, a setup's
``L >=`` a transaction's number means it was written whole (the broker
records the number only with the entry, and drops the held blocks of a dead
stream or a re-bound flow): it is acknowledged (offset -1); otherwise none of
it was written and it is sent again whole, with the same numbers.

Sealed segment (scaling, PDP-44 "Segment Sealed"): ``SegmentIsSealed``
hands every unfinished transaction, in order, to ``successor``
(``TxnFlow._on_sealed``), sent again whole and renumbered to the successor
owning its routing key. A transaction whose end block was sent before the
seal but whose answer was lost is settled first by ``AppendSetup``, which a
sealed segment still answers with this writer's last event number: written
(acknowledged here, never sent again) or not (moved).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Final

from folio._flow.engine import FlowEngine
from folio._transport.flow_state import FlowState
from folio.api.v1 import append_pb2
from folio.errors import (
    FolioError,
    NoSuchSegmentError,
    OutcomeUnknownError,
    SegmentSealedError,
    TxnFailedError,
    WriterClosedError,
)
from folio.txn._txn_commit import (
    MAX_TRANSACTION_BYTES,
    TransactionResult,
    TxnCommit,
    merged_blocks,
)

if TYPE_CHECKING:
    from folio._transport.append_stream import FlowSource

__all__ = ["TxnFlow"]

log = logging.getLogger(__name__)

#: The most transactions coalesced into one sequence.
MAX_COALESCED: Final = 4096


class TxnFlow:
    """Sends one writer's transactions to one segment, one at a time (module docstring).

    The single-routing-key policy of a ``FlowEngine`` (``folio._flow``), which
    it holds. Every method runs on the engine's event loop.
    """

    def __init__(self, segment: str, *, writer_id: str, source: FlowSource,
                 on_done: Callable[[TxnCommit], None],
                 successor: Callable[[TxnFlow, SegmentSealedError, list[TxnCommit]], bool]
                 | None = None) -> None:
        """Args:
        segment: the segment's name.
        writer_id: the transaction writer's identity on the broker.
        source: where the flow registers (the client's connection pool, or
            one ``AppendStream``).
        on_done: called (event loop) after each commit's future is resolved.
        successor: given this flow, the sealed error and the unfinished
            commits in order, takes them over (True: they go to the successor
            segment) or not (False: they fail with the sealed error as cause).
        """
        self._on_done = on_done
        self._successor = successor
        #: Sequences still to send one transaction each (after a refusal).
        self._solo_left = 0
        self.engine: FlowEngine[TxnCommit] = FlowEngine(
            segment, writer_id=writer_id, source=source, policy=self, log=log,
            kind="transaction append")

    @property
    def segment(self) -> str:
        """The segment the flow appends to."""
        return self.engine.segment

    @property
    def last_error(self) -> FolioError | None:
        """Why the last send failed, told with a later failure."""
        return self.engine.last_error

    @property
    def resent(self) -> int:
        """Transactions sent again whole after a reconnect or refusal."""
        return self.engine.resent

    @property
    def settled_by_setup(self) -> int:
        """Transactions found written by ``AppendSetup`` after a reconnect."""
        return self.engine.settled_by_setup

    @property
    def unfinished(self) -> int:
        """Commits queued or on their way."""
        return len(self.engine.units)

    # -- from the writer ---------------------------------------------------------

    def start(self) -> None:
        """Registers the flow; it sets itself up when the stream is open."""
        error = self.engine.start()
        if error is not None:
            self.engine.die(error)

    def submit(self, commit: TxnCommit) -> None:
        """Queues a committed transaction (in commit order)."""
        engine = self.engine
        if engine.dead is not None:
            self._fail(commit, TxnFailedError(
                f"the transaction to {self.segment} was not committed: {engine.dead}",
                segment=self.segment), cause=engine.dead)
            return
        if engine.state is FlowState.CLOSED:
            self._fail(commit, WriterClosedError("the writer is closed"))
            return
        engine.submit((commit,))
        if engine.state is FlowState.NEW:
            self.start()

    def release(self) -> None:
        """Ends the flow; unfinished commits fail with ``WriterClosedError``."""
        closed = WriterClosedError("the writer was closed before the commit was acknowledged: "
                                   "the transaction may or may not have been committed (whole "
                                   "or not at all)")
        for commit in self.engine.release():
            self._fail(commit, closed)

    # -- FlowPolicy ---------------------------------------------------------------

    def sequence(self, queue: Sequence[TxnCommit], outstanding: int) -> int:
        """One sequence at a time: the queue's head and what may join it, whole."""
        if outstanding:
            return 0
        limit = 1 if self._solo_left else MAX_COALESCED
        count = size = 0
        for commit in queue:
            if count and (count >= limit or size + commit.size > MAX_TRANSACTION_BYTES):
                break
            count += 1
            size += commit.size
        if self._solo_left:
            self._solo_left -= 1
        return count

    def frame(self, group: Sequence[TxnCommit]) -> list[tuple[bytes, int]]:
        """The transactions' blocks, consecutive ones merged (``merged_blocks``)."""
        return merged_blocks(list(group))

    def appended(self, group: Sequence[TxnCommit], appended: append_pb2.DataAppended) -> None:
        """The sequence was written, whole: each transaction at its offsets."""
        events = sum(commit.event_count for commit in group)
        if not appended.duplicate and appended.event_count != events:
            # The broker wrote some of the blocks only (it must not: a failure
            # in a sequence drops it whole). Say so loudly.
            log.error("broker wrote %d of the %d events of a transaction sequence to %s",
                      appended.event_count, events, self.segment)
            for commit in group:
                self._fail(commit, TxnFailedError(
                    f"the broker wrote only {appended.event_count} of the {events} events "
                    f"sent to {self.segment} as one entry (a partial transaction: a broker "
                    "bug)", segment=self.segment))
            return
        offset = -1 if appended.duplicate else appended.offset
        for commit in group:
            self._succeed(commit, offset)
            if offset >= 0:
                offset += commit.event_count

    def settled(self, unit: TxnCommit) -> None:
        """Only one sequence was outstanding, so the recorded number is its own: written."""
        self._succeed(unit, -1)

    def refused(self, group: Sequence[TxnCommit] | None, error: FolioError) -> bool:
        """A refusal of the setup (``group`` None) or of a sequence's end block."""
        engine = self.engine
        if isinstance(error, SegmentSealedError):
            self._on_sealed(error)
            return True
        if isinstance(error, NoSuchSegmentError):
            engine.die(error)
            return True
        if engine.state not in (FlowState.READY, FlowState.SETTING_UP):
            return True
        if error.retriable:
            # Set up again: ``AppendSetup`` says whether it was written after
            # all (a fenced add may be), else it goes again whole.
            return False
        if group is None:
            engine.die(error)
            return True
        if len(group) > 1:
            # Refused for good: not written. Send its transactions again one
            # by one, so that only the one at fault fails.
            log.info("a sequence of %d transactions to %s was refused (%s); sending them "
                     "one by one", len(group), self.segment, error)
            self._solo_left = len(group)
            engine.resume()
            return True
        commit = group[0]
        engine.remove(group)
        self._fail(commit, TxnFailedError(
            f"the broker refused the transaction ({len(commit.blocks)} blocks, "
            f"{commit.event_count} events) to {self.segment}: {error}",
            segment=self.segment), cause=error)
        engine.resume()
        return True

    def abandon(self, units: Sequence[TxnCommit], error: FolioError) -> None:
        """The flow can never succeed: every commit fails, in doubt if it was sent."""
        for commit in units:
            # Numbered: sent, unsettled since: may be written, unless the segment is gone.
            sent = commit.last_event_number is not None and \
                not isinstance(error, NoSuchSegmentError)
            self._fail(commit, OutcomeUnknownError(
                f"the transaction to {self.segment} may or may not have been written (sent, "
                f"its answer lost, then: {error}); read the segment before writing it again",
                operation=f"Append {self.segment}") if sent else TxnFailedError(
                f"the transaction to {self.segment} was not committed: {error}",
                segment=self.segment), cause=error)

    def tick(self, now: float) -> None:
        """Nothing expires here: a commit is retried until the writer is closed."""

    def follow_deadline(self) -> float | None:
        """The owner is looked up until the writer is closed, as retries are."""
        return None

    def move_failed(self, error: FolioError) -> None:
        """The segment's owner cannot be found (it was deleted, say)."""
        self.engine.die(error)

    def sealed(self) -> None:
        """Not used: a sealed segment's transactions move on at once (``_on_sealed``)."""

    def _on_sealed(self, error: SegmentSealedError) -> None:
        """The segment is sealed (scaling): its unfinished transactions move on.

        PDP-44: the transactions not written here go whole to the successor
        segment that owns the writer's routing key. A sequence refused with
        ``SegmentIsSealed`` was not written here; one in doubt was settled by
        the setup that preceded this (``AppendSetup`` still answers on a
        sealed segment). So every queued commit moves, renumbered (numbers
        forgotten here; the successor's flow numbers them), to ``successor``.
        """
        moving = self.engine.take()
        for commit in moving:
            commit.reset_numbers()
        if self._successor is None or not self._successor(self, error, moving):
            self.abandon(moving, error)
        self.engine.die(error)

    # -- outcomes -----------------------------------------------------------------

    def _succeed(self, commit: TxnCommit, offset: int) -> None:
        if commit.done:
            return
        commit.done = True
        commit.blocks = []  # the buffer is released with the acknowledgement
        commit.future.set_result(TransactionResult(self.segment, offset, commit.event_count))
        self._on_done(commit)

    def _fail(self, commit: TxnCommit, error: FolioError, *,
              cause: BaseException | None = None) -> None:
        if commit.done:
            return
        commit.done = True
        commit.blocks = []
        if cause is not None:
            error.__cause__ = cause
        commit.future.set_exception(error)
        self._on_done(commit)
