"""The IO side of single-routing-key transactions (PDP-44): one flow per (writer, segment).

A :class:`TxnFlow` is one transaction writer's flow on the client's shared
Append stream (``folio._transport.append_stream``), bound by ``SetupAppend`` to the
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

Event numbers: the writer numbers its events on the segment as an
``EventWriter`` does. ``AppendSetup`` answers the last number ``L`` the
segment recorded for the writer; a transaction is numbered on its first send
from ``max(next, L + 1)``, each block's ``last_event_number`` being the
number of its last event, so the numbers run on across the blocks and
transactions of a sequence, and the sequence's number is its last event's.

Reconnects: when the stream breaks, or the broker answers a retriable
failure, the flow sets up again and reads ``L``. Because only one sequence
is ever outstanding, ``L >=`` a transaction's number means it was written
(whole: the broker records the number only with the entry, and held blocks
of a dead stream or a re-bound flow are dropped) and it is acknowledged (as a
duplicate, offset -1); otherwise none of it was written and it is sent again
whole, with the same numbers: never half, never twice.

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
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from folio._status import error_from_reply
from folio._transport.append_stream import Backoff
from folio._transport.brokers import Brokers
from folio._transport.flow_state import FlowState, move
from folio.api.v1 import append_pb2
from folio.errors import (
    FolioError,
    NoSuchSegmentError,
    OutcomeUnknownError,
    SegmentSealedError,
    TxnFailedError,
    WriterClosedError,
    WrongHostError,
)
from folio.txn._txn_commit import (
    MAX_TRANSACTION_BYTES,
    TransactionResult,
    TxnCommit,
    merged_blocks,
)

if TYPE_CHECKING:
    from folio._transport.append_stream import AppendStream, FlowSource
    from folio._transport.io_thread import IoThread

__all__ = ["TxnFlow"]

log = logging.getLogger(__name__)

#: The most transactions coalesced into one sequence.
MAX_COALESCED: Final = 4096

#: What a pending command is: the setup, or a block of a sequence (end or not).
_Pending = tuple[list[TxnCommit], bool] | None


class TxnFlow:
    """Sends one writer's transactions to one segment, one at a time (module docstring).

    Every method runs on the IO thread.
    """

    def __init__(self, segment: str, *, writer_id: str, io: IoThread, source: FlowSource,
                 on_done: Callable[[TxnCommit], None],
                 successor: Callable[[TxnFlow, SegmentSealedError, list[TxnCommit]], bool]
                 | None = None) -> None:
        """Args:
        segment: the segment's name.
        writer_id: the transaction writer's identity on the broker.
        io: the client's IO thread.
        source: where the flow registers (the client's connection pool, or
            one ``AppendStream``).
        on_done: called (IO thread) after each commit's future is resolved.
        successor: given this flow, the sealed error and the unfinished
            commits in order, takes them over (True: they go to the successor
            segment) or not (False: they fail with the sealed error as cause).
        """
        self.segment = segment
        self._writer_id = writer_id
        self._io = io
        self._source = source
        self._stream: AppendStream | None = None  # once registered
        self._on_done = on_done
        self._successor = successor
        self._state = FlowState.NEW
        self._flow_id = 0
        self._queue: deque[TxnCommit] = deque()
        #: The sequence whose blocks went out on this setup generation, if any.
        self._in_flight: list[TxnCommit] | None = None
        #: Sequences still to send one transaction each (after a refusal).
        self._solo_left = 0
        self._pending: dict[int, _Pending] = {}
        self._next_event_number = 0
        self._dead: FolioError | None = None
        self._backoff = Backoff()
        #: Why the last send failed, told with a later failure.
        self.last_error: FolioError | None = None
        #: Transactions sent again whole after a reconnect or refusal.
        self.resent = 0
        #: Transactions found written by ``AppendSetup`` after a reconnect.
        self.settled_by_setup = 0

    # -- from the writer ---------------------------------------------------------

    def start(self) -> None:
        """Registers the flow; it sets itself up when the stream is open."""
        if self._state is not FlowState.NEW:
            return
        try:
            self._stream, self._flow_id = self._source.open_flow(self)
        except FolioError as error:
            self._die(error)
            return
        self._state = move(self._state, FlowState.DISCONNECTED, self.segment)

    def submit(self, commit: TxnCommit) -> None:
        """Queues a committed transaction (in commit order)."""
        if self._dead is not None:
            self._fail(commit, TxnFailedError(
                f"the transaction to {self.segment} was not committed: {self._dead}",
                segment=self.segment), cause=self._dead)
            return
        if self._state is FlowState.CLOSED:
            self._fail(commit, WriterClosedError("the writer is closed"))
            return
        self._queue.append(commit)
        if self._state is FlowState.NEW:
            self.start()
        self._send_next()

    def release(self) -> None:
        """Ends the flow; unfinished commits fail with ``WriterClosedError``."""
        self._unregister()
        self._state = move(self._state, FlowState.CLOSED, self.segment)
        self._pending.clear()
        closed = WriterClosedError("the writer was closed before the commit was acknowledged: "
                                   "the transaction may or may not have been committed (whole "
                                   "or not at all)")
        while self._queue:
            self._fail(self._queue.popleft(), closed)
        self._in_flight = None

    @property
    def unfinished(self) -> int:
        """Commits queued or on their way."""
        return len(self._queue)

    # -- AppendFlow ---------------------------------------------------------------

    def on_stream_ready(self) -> None:
        """The stream (re)opened: set up (the answer decides what to resend)."""
        if self._flow_id == 0 or self._state is FlowState.CLOSED:
            return
        self._pending.clear()
        self._in_flight = None
        self._send_setup()

    def on_stream_lost(self, error: FolioError) -> None:
        """The stream broke: the commit on its way is in doubt until the next setup."""
        if self._state is FlowState.CLOSED:
            return
        self._state = move(self._state, FlowState.DISCONNECTED, self.segment)
        self._pending.clear()
        self._in_flight = None
        self.last_error = error
        if isinstance(self._source, Brokers) and self._source.cluster and self._flow_id:
            self._follow_owner(self._source, WrongHostError(
                f"the broker of {self.segment!r} cannot be reached: {error}",
                segment=self.segment, owner=""))

    def _follow_owner(self, source: Brokers, error: WrongHostError) -> None:
        """WrongHost (cluster): off to the segment's owner, as after a lost stream.

        The owner's ``AppendSetup`` settles the sequence in doubt; the lookup
        (no owner named) goes on until the writer is closed, as retries do.
        """
        self._state = move(self._state, FlowState.MOVING, self.segment)
        self._pending.clear()
        self._in_flight = None
        stream, flow_id = self._stream, self._flow_id
        self._stream, self._flow_id = None, 0
        source.follow(self, stream, flow_id, error, None)

    def on_moved(self, stream: AppendStream, flow_id: int) -> bool:
        """Registered on the owner's stream; sets up there when it opens."""
        if self._state is not FlowState.MOVING:
            return False
        self._stream, self._flow_id = stream, flow_id
        self._state = move(self._state, FlowState.DISCONNECTED, self.segment)
        return True

    def on_move_failed(self, error: FolioError) -> None:
        """The segment's owner cannot be found (it was deleted, say)."""
        if self._state is FlowState.MOVING:
            self._die(error)

    def on_tick(self, now: float) -> None:
        """Nothing expires here: a commit is retried until the writer is closed."""

    def on_reply(self, reply: append_pb2.AppendReply) -> None:
        """Routes a reply to the command it answers."""
        sequence = reply.request_id & 0xFFFFFFFF
        if sequence not in self._pending:
            return  # answers a command of a setup generation since replaced
        pending = self._pending.pop(sequence)
        kind = reply.WhichOneof("reply")
        if pending is None:
            if kind == "append_setup":
                self._on_setup(reply.append_setup.last_event_number)
            else:
                self._on_failure(None, False, self._failure(reply))
            return
        group, end = pending
        if kind == "data_appended":
            if end:
                self._on_appended(group, reply.data_appended)
            return
        self._on_failure(group, end, self._failure(reply))

    # -- sending ------------------------------------------------------------------

    def _send(self, command: append_pb2.AppendCommand) -> int | None:
        if self._stream is None or not self._flow_id:
            return None
        return self._stream.send(self._flow_id, command)

    def _send_setup(self) -> None:
        command = append_pb2.AppendCommand(setup_append=append_pb2.SetupAppend(
            segment=self.segment, writer_id=self._writer_id))
        sequence = self._send(command)
        if sequence is None:
            self._state = move(self._state, FlowState.DISCONNECTED, self.segment)
            return
        self._state = move(self._state, FlowState.SETTING_UP, self.segment)
        self._pending[sequence] = None

    def _send_next(self) -> None:
        """Sends the next sequence (the queue's head and what may join it) whole."""
        if self._state is not FlowState.READY or self._in_flight is not None or not self._queue:
            return
        group: list[TxnCommit] = []
        size = 0
        limit = 1 if self._solo_left else MAX_COALESCED
        for commit in self._queue:
            if group and (len(group) >= limit or size + commit.size > MAX_TRANSACTION_BYTES):
                break
            group.append(commit)
            size += commit.size
        if self._solo_left:
            self._solo_left -= 1
        for commit in group:
            if commit.last_event_number is not None:
                self.resent += 1
            else:
                commit.first_event_number = self._next_event_number
                self._next_event_number += commit.event_count
                commit.last_event_number = self._next_event_number - 1
        number = group[0].first_event_number
        assert number is not None
        number -= 1
        self._in_flight = group
        pieces = merged_blocks(group)
        last = len(pieces) - 1
        for index, (data, count) in enumerate(pieces):
            number += count
            end = index == last
            command = append_pb2.AppendCommand(append_block=append_pb2.AppendBlock(
                data=data, event_count=count, last_event_number=number, end=end))
            sequence = self._send(command)
            if sequence is None:
                # The stream is gone: the blocks sent so far die with it
                # (the broker drops a dead stream's held blocks); all go again.
                self._state = move(self._state, FlowState.DISCONNECTED, self.segment)
                self._in_flight = None
                self._pending.clear()
                return
            self._pending[sequence] = (group, end)

    # -- answers ------------------------------------------------------------------

    def _on_setup(self, last_event_number: int) -> None:
        self._state = move(self._state, FlowState.READY, self.segment)
        self._in_flight = None
        if self._next_event_number <= last_event_number:
            self._next_event_number = last_event_number + 1
        while self._queue:
            head = self._queue[0]
            first, last = head.first_event_number, head.last_event_number
            if first is None or last is None:
                break
            if last <= last_event_number:
                # Only one sequence was outstanding, so the number the broker
                # recorded is its own: this transaction was written, whole.
                self._queue.popleft()
                self.settled_by_setup += 1
                self._succeed(head, -1)
                continue
            if first <= last_event_number:
                # Cannot happen with one writer per writer id: renumber what
                # is queued above the recorded number, not to be taken for
                # a duplicate.
                log.warning("writer %s on %s: recorded event number %d falls inside a "
                            "transaction numbered %d..%d; renumbering", self._writer_id,
                            self.segment, last_event_number, first, last)
                for commit in self._queue:
                    commit.reset_numbers()
                self._next_event_number = last_event_number + 1
            break
        self._send_next()

    def _on_appended(self, group: list[TxnCommit], appended: append_pb2.DataAppended) -> None:
        self._in_flight = None
        self._backoff.reset()
        self.last_error = None
        for commit in group:
            if self._queue and self._queue[0] is commit:
                self._queue.popleft()
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
        else:
            offset = -1 if appended.duplicate else appended.offset
            for commit in group:
                self._succeed(commit, offset)
                if offset >= 0:
                    offset += commit.event_count
        self._send_next()

    def _failure(self, reply: append_pb2.AppendReply) -> FolioError:
        return error_from_reply(reply, self.segment)

    def _on_failure(self, group: list[TxnCommit] | None, end: bool,
                    error: FolioError) -> None:
        """A refusal of the setup (``group`` None) or of one block of a sequence."""
        self.last_error = error
        if isinstance(error, WrongHostError) and isinstance(self._source, Brokers):
            if self._state is not FlowState.MOVING:
                self._follow_owner(self._source, error)
            return
        if isinstance(error, SegmentSealedError):
            self._on_sealed(error)
            return
        if isinstance(error, NoSuchSegmentError):
            self._die(error)
            return
        if self._state not in (FlowState.READY, FlowState.SETTING_UP):
            return
        if group is None:
            if error.retriable:
                self._reset(error)
            else:
                self._die(error)
            return
        if not end:
            # A held block refused: the broker drops the whole sequence and
            # answers its end block with the same failure, handled then.
            log.info("the broker refused a held block of a transaction to %s: %s",
                     self.segment, error)
            return
        self._in_flight = None
        if error.retriable:
            # Set up again: ``AppendSetup`` says whether it was written after
            # all (a fenced add may be), else it goes again whole.
            self._reset(error)
            return
        if len(group) > 1:
            # Refused for good: not written. Send its transactions again one
            # by one, so that only the one at fault fails.
            log.info("a sequence of %d transactions to %s was refused (%s); sending them "
                     "one by one", len(group), self.segment, error)
            self._solo_left = len(group)
            self._send_next()
            return
        commit = group[0]
        if self._queue and self._queue[0] is commit:
            self._queue.popleft()
        self._fail(commit, TxnFailedError(
            f"the broker refused the transaction ({len(commit.blocks)} blocks, "
            f"{commit.event_count} events) to {self.segment}: {error}",
            segment=self.segment), cause=error)
        self._send_next()

    def _reset(self, error: FolioError) -> None:
        """After a retriable refusal: set up again after backoff (re-binding the flow)."""
        self._state = move(self._state, FlowState.RESETTING, self.segment)
        self._in_flight = None
        self._pending.clear()
        delay = self._backoff.next_delay()
        log.info("transaction append to %s failed (%s); setting up again in %.2f s",
                 self.segment, error, delay)
        self._io.loop.call_later(delay, self._retry_setup)

    def _retry_setup(self) -> None:
        if self._state is FlowState.RESETTING and self._dead is None and self._flow_id:
            self._send_setup()

    def _on_sealed(self, error: SegmentSealedError) -> None:
        """The segment is sealed (scaling): its unfinished transactions move on.

        PDP-44: the transactions not written here go whole to the successor
        segment that owns the writer's routing key. A sequence refused with
        ``SegmentIsSealed`` was not written here; one in doubt was settled by
        the setup that preceded this (``AppendSetup`` still answers on a
        sealed segment). So every queued commit moves, renumbered (numbers
        forgotten here; the successor's flow numbers them), to ``successor``.
        """
        moving = list(self._queue)
        self._queue.clear()
        self._in_flight = None
        for commit in moving:
            commit.reset_numbers()
        if self._successor is None or not self._successor(self, error, moving):
            self._queue.extend(moving)
        self._die(error)

    def _die(self, error: FolioError) -> None:
        """The flow can never succeed: fail every commit, now and later."""
        self._dead = error
        self._state = move(self._state, FlowState.CLOSED, self.segment)
        self._pending.clear()
        self._in_flight = None
        while self._queue:
            commit = self._queue.popleft()
            # Numbered: sent, unsettled since: may be written, unless the segment is gone.
            sent = commit.last_event_number is not None and \
                not isinstance(error, NoSuchSegmentError)
            self._fail(commit, OutcomeUnknownError(
                f"the transaction to {self.segment} may or may not have been written (sent, "
                f"its answer lost, then: {error}); read the segment before writing it again",
                operation=f"Append {self.segment}") if sent else TxnFailedError(
                f"the transaction to {self.segment} was not committed: {error}",
                segment=self.segment), cause=error)
        self._unregister()

    def _unregister(self) -> None:
        if self._flow_id and self._stream is not None:
            self._stream.unregister(self._flow_id)
        self._flow_id = 0

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
