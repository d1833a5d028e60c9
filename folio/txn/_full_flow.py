"""One full transaction's blocks to one segment: the IO side of ``folio.txn.txn_full``.

A ``SegmentFlow`` is a flow (one ``flow_id``) on the client's shared Append
stream, set up with ``SetupAppend(segment, writer_id, txn_id)``; it pipelines
the blocks ``Transaction.flush`` hands it, resends after a reconnect what the
broker had not acknowledged, and fails every batch on a refusal. It runs on
the IO thread only.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from collections import deque
from typing import TYPE_CHECKING, Final

from folio._status import error_from_reply
from folio._transport.append_stream import Backoff
from folio._transport.brokers import Brokers
from folio._transport.flow_state import FlowState, move
from folio.api.v1 import append_pb2
from folio.errors import FolioError, FolioUnavailableError, WriterClosedError, WrongHostError

if TYPE_CHECKING:
    from folio._transport.append_stream import AppendStream, FlowSource

__all__ = ["SegmentFlow"]

log = logging.getLogger(__name__)

#: Blocks of one flow sent and not yet acknowledged, at most.
_MAX_IN_FLIGHT: Final = 8


class SegmentFlow:
    """Sends one transaction's blocks to one segment. IO thread only (``AppendFlow``).

    Blocks are pipelined (at most ``_MAX_IN_FLIGHT``), each with ``end =
    true`` (each its own transactional entry), numbered from the writer's
    last event number that ``AppendSetup`` answers; a block keeps its number
    for good. A batch (one ``flush``) resolves its future when its last block
    is acknowledged: replies to a flow come in command order.

    When the stream breaks, the blocks sent but not acknowledged go back to
    the front of the queue; once the stream is back the flow sets up again
    (same writer id and transaction) and the broker answers the last event
    number it has of this writer: blocks up to it landed (their batches
    resolve), the others are sent again, so none is lost or written twice.
    A retriable refusal (the ledger service unavailable a moment) sets the
    flow up again after a backoff, as after a break; a refusal for good (the
    transaction is no longer open, say) fails every batch, and so does a
    stream down (or refused) for longer than ``give_up_s``.

    In a cluster, WrongHost (or a stream lost to a broker) moves the flow to
    the segment's owner (``Brokers.follow``) as if its stream had broken:
    the blocks in doubt go back to the queue and the setup on the owner
    settles them; no owner found within ``give_up_s`` fails every batch.
    """

    def __init__(self, segment: str, *, writer_id: str, txn_id: bytes,
                 source: FlowSource, give_up_s: float) -> None:
        self.segment = segment
        self._writer_id = writer_id
        self._txn_id = txn_id
        self._source = source
        self._give_up_s = give_up_s
        self._stream: AppendStream | None = None
        self._flow_id = 0
        self._state = FlowState.NEW
        self._next_number = 0
        #: Blocks to send, in order: (data, event count, its last event number
        #: once numbered else -1, the batch future it ends or None).
        self._queue: deque[_Block] = deque()
        #: Sent, unacknowledged blocks by sequence, in send order.
        self._sent: dict[int, _Block] = {}
        self._setup_sequence: int | None = None
        self._down_since: float | None = None
        self._backoff: Backoff | None = None  # made by the first retriable refusal
        self._error: FolioError | None = None
        #: Counters (tests, logs): blocks sent again after a reconnect, and
        #: blocks a setup answer showed had landed (their acknowledgement lost).
        self.resent = 0
        self.settled_by_setup = 0

    # -- from the transaction (via IoThread.call_soon) -------------------------

    def submit(self, blocks: list[tuple[bytes, int]],
               future: concurrent.futures.Future[None]) -> None:
        """Queues one batch of blocks; ``future`` resolves once all are acknowledged."""
        if self._error is not None:
            future.set_exception(self._error)
            return
        if self._state is FlowState.CLOSED:
            future.set_exception(WriterClosedError("the transaction's flow is closed"))
            return
        if not blocks:
            future.set_result(None)
            return
        for index, (data, count) in enumerate(blocks):
            self._queue.append(_Block(data, count, -1,
                                      future if index == len(blocks) - 1 else None))
        if self._stream is None:
            try:
                self._stream, self._flow_id = self._source.open_flow(self)
            except FolioError as error:
                self._die(error)
                return
        self._pump()

    def release(self) -> None:
        """Ends the flow (after commit or abort)."""
        self._die(WriterClosedError("the transaction ended"), quiet=True)

    # -- AppendFlow --------------------------------------------------------------

    def on_stream_ready(self) -> None:
        if self._state in (FlowState.NEW, FlowState.DISCONNECTED):
            self._send_setup()

    def on_stream_lost(self, error: FolioError) -> None:
        if self._state is FlowState.CLOSED:
            return
        self._requeue()
        self._state = move(self._state, FlowState.DISCONNECTED, self.segment)
        log.info("append stream lost with a transaction's blocks to %s queued (%s); "
                 "resending after reconnect", self.segment, error)
        if isinstance(self._source, Brokers) and self._source.cluster and self._flow_id:
            self._follow_owner(self._source, WrongHostError(
                f"the broker of {self.segment!r} cannot be reached: {error}",
                segment=self.segment, owner=""))

    def _requeue(self) -> None:
        """Sent but unacknowledged: back to the front, in order, numbers kept."""
        self.resent += len(self._sent)
        self._queue.extendleft(reversed(self._sent.values()))
        self._sent.clear()
        self._setup_sequence = None
        if self._down_since is None:
            self._down_since = time.monotonic()

    def _follow_owner(self, source: Brokers, error: WrongHostError) -> None:
        """Off this stream to the segment's owner (MOVING), as after a lost stream."""
        self._requeue()
        self._state = move(self._state, FlowState.MOVING, self.segment)
        stream, flow_id = self._stream, self._flow_id
        self._stream, self._flow_id = None, 0
        source.follow(self, stream, flow_id, error, time.monotonic() + self._give_up_s)

    def on_moved(self, stream: AppendStream, flow_id: int) -> bool:
        """Registered on the owner's stream; sets up there when it opens."""
        if self._state is not FlowState.MOVING:
            return False
        self._stream, self._flow_id = stream, flow_id
        self._state = move(self._state, FlowState.DISCONNECTED, self.segment)
        return True

    def on_move_failed(self, error: FolioError) -> None:
        """No owner found within ``give_up_s``: every batch fails."""
        if self._state is FlowState.MOVING:
            self._die(error)

    def on_tick(self, now: float) -> None:
        """Gives up once the stream has been down for ``give_up_s``."""
        if (self._down_since is not None and self._queue
                and now - self._down_since > self._give_up_s):
            self._die(FolioUnavailableError(
                f"the append stream to {self.segment} has been down for more than "
                f"{self._give_up_s:.0f} s with blocks of the transaction unacknowledged"))

    def on_reply(self, reply: append_pb2.AppendReply) -> None:
        sequence = reply.request_id & 0xFFFFFFFF
        kind = reply.WhichOneof("reply")
        if sequence == self._setup_sequence:
            self._setup_sequence = None
            if kind != "append_setup":
                self._refused(error_from_reply(reply, self.segment))
                return
            self._state = move(self._state, FlowState.READY, self.segment)
            self._down_since = None
            if self._backoff is not None:
                self._backoff.reset()
            self._settle(reply.append_setup.last_event_number)
            self._pump()
            return
        if sequence not in self._sent:
            return
        if kind != "data_appended":
            self._refused(error_from_reply(reply, self.segment))  # fails this block's batch too
            return
        block = self._sent.pop(sequence)
        if block.future is not None and not block.future.done():
            block.future.set_result(None)
        self._pump()

    # -- internals -----------------------------------------------------------------

    def _refused(self, error: FolioError) -> None:
        if isinstance(error, WrongHostError) and isinstance(self._source, Brokers):
            self._follow_owner(self._source, error)
        elif error.retriable and self._state in (FlowState.READY, FlowState.SETTING_UP):
            # Transient (the ledger service or the coordinator unavailable for a
            # moment): set up again after a backoff and resend what the setup's
            # answer says did not land, until ``give_up_s`` (``on_tick``).
            # Replies to the other blocks in flight are ignored from now on.
            self._requeue()
            self._state = move(self._state, FlowState.RESETTING, self.segment)
            if self._backoff is None:
                self._backoff = Backoff()
            delay = self._backoff.next_delay()
            log.info("transactional append to %s refused (%s); setting up again in %.2f s",
                     self.segment, error, delay)
            asyncio.get_running_loop().call_later(delay, self._retry_setup)
        else:
            self._die(error)

    def _retry_setup(self) -> None:
        if self._state is FlowState.RESETTING:
            self._send_setup()

    def _settle(self, last: int) -> None:
        """After (re)setup: queued blocks up to ``last`` landed; number from there on."""
        while self._queue and 0 <= self._queue[0].number <= last:
            landed = self._queue.popleft()
            self.settled_by_setup += 1
            self.resent -= 1  # not sent again after all
            if landed.future is not None and not landed.future.done():
                landed.future.set_result(None)
        self._next_number = max(self._next_number, last + 1)

    def _send(self, command: append_pb2.AppendCommand) -> int | None:
        if self._stream is None or not self._flow_id:
            return None
        return self._stream.send(self._flow_id, command)

    def _send_setup(self) -> None:
        sequence = self._send(append_pb2.AppendCommand(setup_append=append_pb2.SetupAppend(
            segment=self.segment, writer_id=self._writer_id, txn_id=self._txn_id)))
        if sequence is None:
            return  # not connected: on_stream_ready sets up
        self._state = move(self._state, FlowState.SETTING_UP, self.segment)
        self._setup_sequence = sequence

    def _pump(self) -> None:
        if self._state is not FlowState.READY:
            return
        while self._queue and len(self._sent) < _MAX_IN_FLIGHT:
            block = self._queue[0]
            if block.number < 0:
                block.number = self._next_number + block.count - 1
                self._next_number = block.number + 1
            sequence = self._send(append_pb2.AppendCommand(append_block=append_pb2.AppendBlock(
                data=block.data, event_count=block.count, last_event_number=block.number,
                end=True)))
            if sequence is None:
                return  # the stream is down: on_stream_lost requeues, on_stream_ready resends
            self._queue.popleft()
            self._sent[sequence] = block

    def _die(self, error: FolioError, *, quiet: bool = False) -> None:
        if self._state is FlowState.CLOSED:
            return
        if not quiet:
            log.info("transactional append to %s failed: %s", self.segment, error)
            self._error = error
        self._state = move(self._state, FlowState.CLOSED, self.segment)
        futures = [b.future for b in self._sent.values() if b.future is not None]
        futures += [b.future for b in self._queue if b.future is not None]
        self._sent.clear()
        self._queue.clear()
        for future in futures:
            if not future.done():
                future.set_exception(error)
        if self._flow_id and self._stream is not None:
            self._stream.unregister(self._flow_id)
        self._flow_id = 0


class _Block:
    """One block of a flow: bytes, event count, its last event number (-1: not yet)."""

    __slots__ = ("count", "data", "future", "number")

    def __init__(self, data: bytes, count: int, number: int,
                 future: concurrent.futures.Future[None] | None) -> None:
        self.data = data
        self.count = count
        self.number = number
        self.future = future
