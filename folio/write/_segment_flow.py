"""One writer's flow to one segment: the IO side of ``SegmentWriter``.

Runs on the IO thread only. The segment's *flow* is on an Append stream
shared with other flows, registered with the first block on the stream the
client's connection pool picks (the least busy channel, ``folio._transport.pool``).
``SetupAppend`` answers the last event number the segment recorded for this
writer; blocks are numbered from there, sent in order, and kept in
``_unacked`` until ``DataAppended``. When the stream breaks, or the broker
answers a retriable failure, the flow stops sending, sets up again (after
backoff) and resends in order every unacknowledged block numbered above what
the broker recorded. A seal is learnt here (``_on_failure``) and handed to
the caller side (``on_sealed``); ``_complete`` (the caller side's, in
``folio.write._segment_writer``) settles a block and frees room for the next.

In a cluster (the source is the client's ``Brokers``), ``WrongHost`` — or a
stream lost to a broker — moves the flow (state MOVING) to the segment's
owner, named in the answer or looked up; it is then registered on the
owner's stream and goes on exactly as after a reconnect: set up, and resend
what ``AppendSetup`` says was not stored.

**Transient means retried.** Everything retriable — a lost or silent stream,
WrongHost and moves, ``LedgerUnavailableError`` and any other UNAVAILABLE — is
retried until the block's delivery deadline; resending is safe because the
writer id and event numbers de-duplicate on the broker. A block fails only
when its outcome is known to be failure (a refusal for good: not written) or
when the deadline passed: then with ``DeliveryTimeoutError`` (outcome unknown,
not retriable), caused by the last error retried.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from folio._status import error_from_reply
from folio._transport.append_stream import Backoff
from folio._transport.brokers import Brokers
from folio._transport.flow_state import FlowState, move
from folio.api.v1 import append_pb2
from folio.errors import (
    DeliveryTimeoutError,
    FolioError,
    NoSuchSegmentError,
    PermissionDeniedError,
    SegmentSealedError,
    WriterClosedError,
    WrongHostError,
)
from folio.write._write_future import BlockOutcome

if TYPE_CHECKING:
    from folio._transport.append_stream import AppendStream, FlowSource
    from folio._transport.io_thread import IoThread

__all__ = ["Block", "SegmentFlow"]

log = logging.getLogger(__name__)


class Block:
    """An encoded block on its way: numbered when first sent, kept until acknowledged."""

    __slots__ = ("data", "deadline", "done", "event_count", "last_event_number", "outcome",
                 "rejected")

    def __init__(self, data: bytes, event_count: int, outcome: BlockOutcome,
                 deadline: float) -> None:
        self.data = data
        self.event_count = event_count
        self.outcome = outcome
        self.deadline = deadline
        self.last_event_number: int | None = None
        #: The retriable error the broker answered this block's last send with.
        self.rejected: FolioError | None = None
        self.done = False


class SegmentFlow:
    """The IO side of one writer's appends to one segment (see the module docstring).

    A base class: ``SegmentWriter`` sets the attributes below in its
    ``__init__`` and provides ``_complete``.
    """

    __slots__ = ("_backoff", "_dead", "_flow_id", "_last_error", "_next_event_number",
                 "_notified", "_pending", "_sealing", "_state", "_stream", "_unacked")

    segment: str
    _writer_id: str
    _io: IoThread
    _source: FlowSource
    _stream: AppendStream | None
    _flow_id: int
    _state: FlowState
    _closed: bool
    _unacked: list[Block]
    _pending: dict[int, Block | None] | None
    _next_event_number: int
    _dead: FolioError | None
    _backoff: Backoff | None
    _last_error: FolioError | None
    _delivery_timeout_s: float
    _sealing: bool
    _notified: bool
    #: Told (with the SegmentWriter) once the segment is found sealed.
    _on_sealed: Callable[[Any], None] | None

    def _complete(self, block: Block, *, offset: int = -1,
                  error: BaseException | None = None) -> None:
        """Settles ``block`` (its events' futures) and frees its room; the caller side's."""
        raise NotImplementedError

    def _enqueue(self, block: Block) -> None:
        if self._dead is not None:
            self._complete(block, error=self._dead)
            return
        if self._state is FlowState.NEW:
            if self._closed:
                self._complete(block, error=WriterClosedError("the writer is closed"))
                return
            try:
                self._stream, self._flow_id = self._source.open_flow(self)
            except FolioError as error:
                self._complete(block, error=error)
                return
            self._unacked.append(block)
            self._state = move(self._state, FlowState.DISCONNECTED, self.segment)
            return
        self._unacked.append(block)
        if self._state is FlowState.READY:
            self._send(block)

    def _send(self, block: Block) -> None:
        if block.last_event_number is None:
            self._next_event_number += block.event_count
            block.last_event_number = self._next_event_number - 1
        command = append_pb2.AppendCommand(append_block=append_pb2.AppendBlock(
            data=block.data, event_count=block.event_count,
            last_event_number=block.last_event_number, end=True))
        stream = self._stream
        sequence = None if stream is None else stream.send(self._flow_id, command)
        if sequence is None:
            self._state = move(self._state, FlowState.DISCONNECTED, self.segment)
            return
        block.rejected = None
        self._expect(sequence, block)

    def _send_setup(self) -> None:
        command = append_pb2.AppendCommand(setup_append=append_pb2.SetupAppend(
            segment=self.segment, writer_id=self._writer_id))
        stream = self._stream
        sequence = None if stream is None else stream.send(self._flow_id, command)
        if sequence is None:
            self._state = move(self._state, FlowState.DISCONNECTED, self.segment)
            return
        self._state = move(self._state, FlowState.SETTING_UP, self.segment)
        self._expect(sequence, None)

    def _expect(self, sequence: int, block: Block | None) -> None:
        pending = self._pending
        if pending is None:
            pending = self._pending = {}
        pending[sequence] = block

    def on_stream_ready(self) -> None:
        """The stream (re)opened: set the flow up again."""
        if self._flow_id == 0 or self._dead is not None or self._notified:
            return
        self._pending = None
        self._send_setup()

    def on_stream_lost(self, error: FolioError) -> None:
        """The stream broke: every sent command is in doubt until the next setup.

        In a cluster the broker may be gone for good: the flow looks its
        segment's owner up elsewhere (``_follow_owner``) instead of waiting for it.
        """
        self._state = move(self._state, FlowState.DISCONNECTED, self.segment)
        self._pending = None
        self._last_error = error
        source = self._source
        if isinstance(source, Brokers) and source.cluster and self._flow_id \
                and self._dead is None and not self._notified:
            self._follow_owner(source, WrongHostError(
                f"the broker of segment {self.segment!r} cannot be reached: {error}",
                segment=self.segment, owner=""))

    def _follow_owner(self, source: Brokers, error: WrongHostError) -> None:
        """Leaves this stream for the segment's owner (``Brokers.follow``, WrongHost).

        Sent blocks stay in doubt, as after a lost stream: the setup on the
        owner tells which were stored. The lookup (when the owner is not
        named) gives up at the latest delivery deadline of the blocks.
        """
        self._state = move(self._state, FlowState.MOVING, self.segment)
        self._pending = None
        self._last_error = error
        stream, flow_id = self._stream, self._flow_id
        self._stream, self._flow_id = None, 0
        deadline = max((block.deadline for block in self._unacked),
                       default=time.monotonic() + self._delivery_timeout_s)
        source.follow(self, stream, flow_id, error, deadline)

    def on_moved(self, stream: AppendStream, flow_id: int) -> bool:
        """Registered on the owner's stream: sets up there when it opens (``MovingFlow``)."""
        if self._state is not FlowState.MOVING:
            return False  # released (or closed) while moving
        self._stream, self._flow_id = stream, flow_id
        self._state = move(self._state, FlowState.DISCONNECTED, self.segment)
        return True

    def on_move_failed(self, error: FolioError) -> None:
        """No owner found by the blocks' deadline: they fail; later ones start over."""
        if self._state is not FlowState.MOVING:
            return
        self._last_error = error
        self._state = move(self._state, FlowState.NEW, self.segment)
        self.on_tick(time.monotonic())
        if self._unacked:  # written while moving: try again from the start
            try:
                self._stream, self._flow_id = self._source.open_flow(self)
            except FolioError as failure:
                self.fail(failure)
                return
            self._state = move(self._state, FlowState.DISCONNECTED, self.segment)

    def on_tick(self, now: float) -> None:
        """Fails the blocks past their delivery deadline."""
        if not self._unacked or self._unacked[0].deadline > now:
            return
        expired = [block for block in self._unacked if block.deadline <= now]
        last = self._last_error
        for block in expired:
            self._unacked.remove(block)
            why = f"; last error: {last}" if last else ""
            error = DeliveryTimeoutError(
                f"a block of {block.event_count} events to segment {self.segment!r} was not "
                f"acknowledged within delivery_timeout_ms "
                f"({self._delivery_timeout_s * 1000:.0f} ms): the outcome is unknown, the "
                f"events may or may not have been written (read the segment back before "
                f"sending them again){why}", segment=self.segment,
                last_error=type(last).__name__ if last else None)
            if last is not None:
                # Only then: assigning __cause__ (even None) suppresses the context,
                # and close() may raise this while the caller's own error is handled.
                error.__cause__ = last
            self._complete(block, error=error)

    def on_reply(self, reply: append_pb2.AppendReply) -> None:
        """Routes a reply to the command it answers (replies come in command order)."""
        sequence = reply.request_id & 0xFFFFFFFF
        pending = self._pending
        if pending is None or sequence not in pending:
            return  # answers a command sent on a stream generation since replaced
        block = pending.pop(sequence)
        if not pending:
            self._pending = None  # an idle flow keeps no table
        kind = reply.WhichOneof("reply")
        if kind == "append_setup":
            self._on_setup(reply.append_setup.last_event_number)
        elif kind == "data_appended":
            if block is not None:
                appended = reply.data_appended
                if self._backoff is not None:
                    self._backoff.reset()
                self._last_error = None
                self._remove(block)
                self._complete(block, offset=-1 if appended.duplicate else appended.offset)
        else:
            self._on_failure(block, self._failure(reply))

    def _on_setup(self, last_event_number: int) -> None:
        if self._next_event_number <= last_event_number:
            self._next_event_number = last_event_number + 1
        answered = FlowState.SEALED if self._sealing else FlowState.READY
        self._state = move(self._state, answered, self.segment)
        for block in list(self._unacked):
            number = block.last_event_number
            if number is not None and number <= last_event_number:
                # Written already: its ack was lost, or it was refused while its
                # entry still reached the bookies (a ledger that failed under it:
                # the next load's recovery keeps every entry a bookie holds). The
                # broker lands a flow's blocks as a prefix of those sent (after a
                # refusal it refuses the flow's later blocks until a new setup),
                # so a block at or below the writer's last number is stored.
                self._remove(block)
                self._complete(block, offset=-1)
            elif self._sealing:
                continue  # not written before the seal: handed over to a successor
            else:
                self._send(block)
                if self._state is not FlowState.READY:
                    return
        if self._sealing:
            self._notify_sealed()

    def _failure(self, reply: append_pb2.AppendReply) -> FolioError:
        return error_from_reply(reply, self.segment)

    def _on_failure(self, block: Block | None, error: FolioError) -> None:
        self._last_error = error
        if isinstance(error, WrongHostError) and isinstance(self._source, Brokers):
            self._follow_owner(self._source, error)
            return
        if isinstance(error, SegmentSealedError) and self._on_sealed is not None:
            if self._sealing:
                if block is None:
                    # The setup itself was refused (a broker that does not tell
                    # a sealed segment's writer state): hand every block over.
                    log.warning("segment %s is sealed and did not tell which blocks of "
                                "writer %s it holds; sending them all to its successors",
                                self.segment, self._writer_id)
                    self._state = move(self._state, FlowState.SEALED, self.segment)
                    self._notify_sealed()
                return  # a later block, refused the same: handed over with the others
            # Learn from the sealed segment's record of this writer which blocks
            # it holds (its writer attribute); then hand the rest over.
            self._sealing = True
            self._pending = None
            log.info("segment %s is sealed; writer %s follows it to its successors",
                     self.segment, self._writer_id)
            self._send_setup()
            return
        if isinstance(error, (SegmentSealedError, NoSuchSegmentError, PermissionDeniedError)) \
                or (block is None and not error.retriable):
            # The flow can never succeed (a setup refused for good, a system
            # topic's segment): fail everything, now and later.
            self._dead = error
            for pending in list(self._unacked):
                self._complete(pending, error=error)
            self._unacked.clear()
            return
        if error.retriable:
            # Transient (LedgerUnavailableError, a broker shutting down, any
            # UNAVAILABLE): set up again and resend until the blocks' deadline.
            # The setup's answer tells which blocks the broker stored (a block
            # refused while its entry reached the bookies may be), so nothing
            # is written twice.
            if block is not None:
                block.rejected = error
            if self._state in (FlowState.READY, FlowState.SETTING_UP):
                self._state = move(self._state, FlowState.RESETTING, self.segment)
                if self._backoff is None:
                    self._backoff = Backoff()
                delay = self._backoff.next_delay()
                log.info("append to %s failed (%s); setting up again in %.2f s",
                         self.segment, error, delay)
                self._io.loop.call_later(delay, self._retry_setup)
            return
        if block is not None:
            self._remove(block)
            self._complete(block, error=error)

    def _notify_sealed(self) -> None:
        if not self._notified and self._on_sealed is not None:
            self._notified = True
            self._on_sealed(self)

    def fail(self, error: FolioError) -> None:
        """The segment is sealed for good (no successors) or they cannot be found: fail all."""
        self._dead = error
        for block in list(self._unacked):
            self._complete(block, error=error)
        self._unacked.clear()

    def _drop_flow(self) -> None:
        if self._flow_id and self._stream is not None:
            self._stream.unregister(self._flow_id)
        self._stream = None
        self._pending = None
        self._flow_id = 0

    def _retry_setup(self) -> None:
        if self._state is FlowState.RESETTING and self._dead is None and self._flow_id:
            self._send_setup()

    def _remove(self, block: Block) -> None:
        if self._unacked and self._unacked[0] is block:
            del self._unacked[0]
        else:
            with contextlib.suppress(ValueError):
                self._unacked.remove(block)

    def _release(self) -> None:
        self._drop_flow()
        closed = WriterClosedError("the writer was closed before the event was acknowledged")
        for block in list(self._unacked):
            self._complete(block, error=closed)
        self._unacked.clear()
        self._state = move(self._state, FlowState.NEW, self.segment)
