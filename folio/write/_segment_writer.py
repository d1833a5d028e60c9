"""One writer's appends to one segment: batching on the caller's side, a flow on the IO side.

**Caller side** (any thread, under ``_lock``): ``append`` adds an event to the
open batch, column by column. The batch becomes a block — encoded whole with
``encode_block`` — when it reaches ``batch_size_bytes``, when ``linger_s``
passes (a timer on the IO thread), when the last block in flight is
acknowledged (nothing else is on its way, so lingering on would only add
latency: the batch fills while its predecessor is in flight, and batches
grow with the rate), when a keyless event meets a keyed batch or
the other way round (a block's key column is all or nothing), or on flush.
The block goes to the IO thread with one ``call_soon`` per block. At most
``max_in_flight`` blocks are unacknowledged; a caller whose batch is full then
waits on ``_cond`` (backpressure; made when someone waits and dropped when
the last waiter leaves, so an idle writer's segments cost little).

**IO side** (IO thread only): the segment's *flow* on an Append stream shared
with other flows, registered with the first block on the stream the client's
connection pool picks (the least busy channel, ``folio._transport.pool``).
``SetupAppend`` answers the last event number the segment recorded for this
writer; blocks are numbered from there, sent in order, and kept in
``_unacked`` until ``DataAppended``. When the stream breaks, or the broker
answers a retriable failure, the flow stops sending, sets up again (after
backoff) and resends in order every unacknowledged block numbered above what
the broker recorded; those at or below it were written (the broker answers
duplicates the same way). A block that failed retriably while a later block
of the flow was written cannot be resent without breaking the order: it fails
with its error. Blocks still unacknowledged ``delivery_timeout_s`` after they
were made fail with ``DeliveryTimeoutError``. ``NoSuchSegment`` ends the
flow: its blocks fail, and later ones at once.

**Sealed segment** (scaling). With an ``on_sealed`` callback, ``SegmentIsSealed``
does not fail anything: the flow stops sending and sets up once more, and the
sealed segment's record of this writer's last event number (its writer
attribute) tells which blocks were written before the seal; those are
acknowledged, and ``on_sealed`` is called. The event writer then looks up the
successors and calls ``hand_over``, which, under the caller-side lock, sends
every event of the remaining blocks and of the open batch again through the
writer's routing (to the successor owning its key), in order, forwards their
outcomes, and from then on passes every ``append`` on. Without the callback
(or with no successors, ``fail``) the blocks fail with ``SegmentSealedError``.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Mapping
from enum import Enum
from typing import TYPE_CHECKING, Final

from folio._status import error_from_reply
from folio._transport.append_stream import Backoff
from folio.api.v1 import append_pb2
from folio.api.v1.block import EVENT_OVERHEAD_BYTES, MAX_BLOCK_BYTES, decode_block, encode_block
from folio.errors import (
    DeliveryTimeoutError,
    FolioError,
    LedgerUnavailableError,
    NoSuchSegmentError,
    PermissionDeniedError,
    SegmentSealedError,
    WriterClosedError,
)
from folio.write._write_future import BlockOutcome, WriteFuture

if TYPE_CHECKING:
    from folio._transport.append_stream import AppendStream, FlowSource
    from folio._transport.io_thread import IoThread
    from folio.metrics import TopicMetrics

__all__ = ["LEDGER_UNAVAILABLE_GIVE_UP_S", "MAX_BATCH_BYTES", "SegmentWriter"]

log = logging.getLogger(__name__)

#: A batch is cut before its estimate passes this: the broker's block limit
#: less a margin for what the per-event estimate does not count exactly.
MAX_BATCH_BYTES: Final = MAX_BLOCK_BYTES - 63 * 1024
#: How long a writer retries while the broker says its ledger service (bookies)
#: is unavailable before failing the unacknowledged blocks with that message.
LEDGER_UNAVAILABLE_GIVE_UP_S: Final = 5.0

_NO_HEADERS: Final[Mapping[str, bytes]] = {}
class _FlowState(Enum):
    NEW = "new"                    # not registered on the stream yet
    DISCONNECTED = "disconnected"  # waiting for the stream to come back
    SETTING_UP = "setting_up"      # SetupAppend sent, AppendSetup awaited
    RESETTING = "resetting"        # after a retriable failure, waiting to set up again
    READY = "ready"                # sending blocks
    SEALED = "sealed"              # sealed: waiting for hand_over (or fail)


#: Passes one event on (after a seal): payload, key, headers, timestamp, size, force.
Forward = Callable[[bytes, "str | None", "Mapping[str, bytes] | None", int, int, bool],
                   WriteFuture]


class _Batch:
    """The events of the block being filled, by column."""

    __slots__ = ("count", "headers", "keyless", "keys", "lingered", "outcome", "payloads",
                 "size", "timestamps")

    def __init__(self, segment: str, keyless: bool) -> None:
        self.payloads: list[bytes] = []
        self.keys: list[str] = []
        self.timestamps: list[int] = []
        self.headers: list[Mapping[str, bytes]] | None = None
        self.count = 0
        self.size = 0
        self.keyless = keyless
        self.lingered = False
        self.outcome = BlockOutcome(segment)


class _Block:
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


class SegmentWriter:
    """Batches and sends one writer's events to one segment (see the module docstring)."""

    __slots__ = ("_backoff", "_batch", "_batch_size_bytes", "_closed", "_cond", "_dead",
                 "_delivery_timeout_s", "_flow_id", "_handing", "_in_flight", "_io",
                 "_last_error", "_ledger_down_since", "_linger_s", "_lock", "_max_in_flight",
                 "_metrics",
                 "_next_event_number",
                 "_notified", "_on_error", "_on_sealed", "_pending", "_redirect", "_sealing",
                 "_source", "_state", "_stream", "_unacked", "_waiters", "_writer_id",
                 "segment")

    def __init__(self, segment: str, *, writer_id: str, io: IoThread, stream: FlowSource,
                 batch_size_bytes: int, linger_s: float, max_in_flight: int,
                 delivery_timeout_s: float,
                 on_error: Callable[[BaseException], None],
                 on_sealed: Callable[[SegmentWriter], None] | None = None,
                 metrics: TopicMetrics | None = None) -> None:
        """Args:
        segment: the segment's name.
        writer_id: the writer's identity on the broker.
        io: the client's IO thread.
        stream: where the flow registers (the client's connection pool, or
            one ``AppendStream``; used on the IO thread only).
        batch_size_bytes: cut a block once a batch holds this many bytes.
        linger_s: cut a block this long after its first event at the latest.
        max_in_flight: most unacknowledged blocks before ``append`` waits.
        delivery_timeout_s: give up on a block this long after it was cut.
        on_error: called (on the IO thread) with each block's failure.
        on_sealed: called (on the IO thread) once the segment is found sealed
            and the blocks written before the seal are acknowledged; None:
            a seal fails the blocks.
        metrics: where acknowledged and failed blocks are counted (``folio.metrics``).
        """
        self.segment = segment
        self._writer_id = writer_id
        self._io = io
        self._source = stream
        self._stream: AppendStream | None = None  # once registered
        self._batch_size_bytes = batch_size_bytes
        self._linger_s = linger_s
        self._max_in_flight = max_in_flight
        self._delivery_timeout_s = delivery_timeout_s
        self._on_error = on_error
        self._on_sealed = on_sealed
        self._metrics = metrics
        #: Where appends go once the segment's events were handed over.
        self._redirect: Forward | None = None
        #: Set (under _lock) once the hand-over is decided: no more blocks are cut.
        self._handing = False
        # Caller side, under _lock.
        self._lock = threading.Lock()
        self._cond: threading.Condition | None = None  # while someone waits
        self._waiters = 0
        self._batch: _Batch | None = None
        self._in_flight = 0
        self._closed = False
        # IO side, IO thread only.
        self._state = _FlowState.NEW
        self._flow_id = 0
        self._unacked: list[_Block] = []  # at most max_in_flight
        #: Sequence -> the command's block (None: the setup); None when empty.
        self._pending: dict[int, _Block | None] | None = None
        self._next_event_number = 0
        self._dead: FolioError | None = None
        self._backoff: Backoff | None = None  # made by the first retry
        self._last_error: FolioError | None = None
        self._ledger_down_since: float | None = None
        self._sealing = False
        self._notified = False

    # == caller side =========================================================

    @property
    def has_open_batch(self) -> bool:
        """Whether a batch is being filled (False right after a block was cut)."""
        return self._batch is not None

    def append(self, payload: bytes, routing_key: str | None,
               headers: Mapping[str, bytes] | None, timestamp_ms: int,
               size: int, force: bool = False) -> WriteFuture:
        """Adds one event to the open batch; may cut a block, or wait for room.

        Args:
            payload: the serialized payload.
            routing_key: its key, or None.
            headers: its headers, or None.
            timestamp_ms: its time in ms since the epoch.
            size: its estimated size in the block (payload and key bytes).
            force: never wait for room (the IO thread handing events over):
                cut the batch even beyond ``max_in_flight``.

        Raises:
            WriterClosedError: the writer is closed.
        """
        keyless = routing_key is None
        estimate = size + EVENT_OVERHEAD_BYTES
        with self._lock:
            while self._redirect is None:
                batch = self._batch
                if batch is not None and (batch.keyless is not keyless
                                          or batch.size >= self._batch_size_bytes
                                          or batch.size + estimate > MAX_BATCH_BYTES):
                    if self._handing:
                        # No more blocks here: the batch goes over event by event.
                        if not force:
                            self._wait_on_locked(1.0)
                            continue
                    elif force or self._in_flight < self._max_in_flight:
                        self._cut_locked()
                        continue
                    else:
                        if self._closed:
                            raise WriterClosedError("the writer is closed")
                        self._wait_on_locked(1.0)
                        continue
                if self._closed:
                    raise WriterClosedError("the writer is closed")
                if batch is None:
                    batch = self._batch = _Batch(self.segment, keyless)
                    self._io.call_soon(self._arm_linger, batch)
                index = batch.count
                batch.payloads.append(payload)
                if not keyless:
                    batch.keys.append(routing_key)  # type: ignore[arg-type]
                batch.timestamps.append(timestamp_ms)
                if headers:
                    if batch.headers is None:
                        batch.headers = [_NO_HEADERS] * index
                    batch.headers.append(dict(headers))
                    estimate += sum(len(name) + len(value) + 4 for name, value in headers.items())
                elif batch.headers is not None:
                    batch.headers.append(_NO_HEADERS)
                batch.count = index + 1
                batch.size += estimate
                if batch.size >= self._batch_size_bytes and self._in_flight < self._max_in_flight:
                    self._cut_locked()
                return WriteFuture(batch.outcome, index)
            redirect = self._redirect
        # Handed over to the successors (outside the lock: the target may wait for room).
        return redirect(payload, routing_key, headers, timestamp_ms, size, force)

    def cut_now(self, deadline: float | None) -> bool:
        """Cuts the open batch into a block (waiting for room); False if ``deadline`` passed."""
        with self._lock:
            while self._batch is not None:
                if self._in_flight < self._max_in_flight:
                    self._cut_locked()
                    break
                if not self._wait_locked(deadline):
                    return False
            return True

    def wait_idle(self, deadline: float | None) -> bool:
        """Waits until every block cut so far is done; False if ``deadline`` passed."""
        with self._lock:
            while self._in_flight > 0 or self._batch is not None:
                if self._batch is not None and self._in_flight < self._max_in_flight \
                        and not self._handing:
                    self._cut_locked()
                    continue
                if not self._wait_locked(deadline):
                    return False
            return True

    def close(self) -> None:
        """Refuses new events and releases the flow; unsent blocks fail (WriterClosedError)."""
        with self._lock:
            self._closed = True
            batch, self._batch = self._batch, None
            self._notify_locked()
        if batch is not None:
            batch.outcome.set_error(WriterClosedError("the writer was closed before the "
                                                      "event was sent"))
        self._io.call_soon(self._release)

    def _wait_on_locked(self, timeout: float) -> None:
        """Waits on ``_cond`` (made if need be) up to ``timeout``; holds ``_lock``."""
        cond = self._cond
        if cond is None:
            cond = self._cond = threading.Condition(self._lock)
        self._waiters += 1
        try:
            cond.wait(timeout)
        finally:
            self._waiters -= 1
            if not self._waiters:
                self._cond = None

    def _notify_locked(self) -> None:
        if self._cond is not None:
            self._cond.notify_all()

    def _wait_locked(self, deadline: float | None) -> bool:
        if deadline is None:
            self._wait_on_locked(1.0)
            return True
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        self._wait_on_locked(min(remaining, 1.0))
        return True

    def _cut_locked(self) -> None:
        """Encodes the open batch and hands the block to the IO thread (holds ``_lock``)."""
        batch = self._batch
        if batch is None or self._handing:
            return
        self._batch = None
        try:
            data = encode_block(batch.payloads, None if batch.keyless else batch.keys,
                                batch.timestamps, batch.headers)
        except (FolioError, TypeError, ValueError) as error:
            # A header value that is not bytes, say: fail the block's events.
            self._io.call_soon(self._fail_unsent, batch.outcome, error)
            return
        block = _Block(data, batch.count, batch.outcome,
                       time.monotonic() + self._delivery_timeout_s)
        self._in_flight += 1
        # call_soon keeps the order of cuts, whichever thread cut.
        self._io.call_soon(self._enqueue, block)

    # == IO side =============================================================

    def _arm_linger(self, batch: _Batch) -> None:
        self._io.loop.call_later(self._linger_s, self._linger_expired, batch)

    def _linger_expired(self, batch: _Batch) -> None:
        with self._lock:
            if self._batch is not batch:
                return
            if self._in_flight < self._max_in_flight:
                self._cut_locked()
            else:
                batch.lingered = True  # cut as soon as a block is acknowledged

    def _fail_unsent(self, outcome: BlockOutcome, error: BaseException) -> None:
        self._on_error(error)
        outcome.set_error(error)

    def _enqueue(self, block: _Block) -> None:
        if self._dead is not None:
            self._complete(block, error=self._dead)
            return
        if self._state is _FlowState.NEW:
            if self._closed:
                self._complete(block, error=WriterClosedError("the writer is closed"))
                return
            try:
                self._stream, self._flow_id = self._source.open_flow(self)
            except FolioError as error:
                self._complete(block, error=error)
                return
            self._unacked.append(block)
            self._state = _FlowState.DISCONNECTED
            return
        self._unacked.append(block)
        if self._state is _FlowState.READY:
            self._send(block)

    def _send(self, block: _Block) -> None:
        if block.last_event_number is None:
            self._next_event_number += block.event_count
            block.last_event_number = self._next_event_number - 1
        command = append_pb2.AppendCommand(append_block=append_pb2.AppendBlock(
            data=block.data, event_count=block.event_count,
            last_event_number=block.last_event_number, end=True))
        stream = self._stream
        sequence = None if stream is None else stream.send(self._flow_id, command)
        if sequence is None:
            self._state = _FlowState.DISCONNECTED
            return
        block.rejected = None
        self._expect(sequence, block)

    def _send_setup(self) -> None:
        command = append_pb2.AppendCommand(setup_append=append_pb2.SetupAppend(
            segment=self.segment, writer_id=self._writer_id))
        stream = self._stream
        sequence = None if stream is None else stream.send(self._flow_id, command)
        if sequence is None:
            self._state = _FlowState.DISCONNECTED
            return
        self._state = _FlowState.SETTING_UP
        self._expect(sequence, None)

    def _expect(self, sequence: int, block: _Block | None) -> None:
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
        """The stream broke: every sent command is in doubt until the next setup."""
        self._state = _FlowState.DISCONNECTED
        self._pending = None
        self._last_error = error

    def on_tick(self, now: float) -> None:
        """Fails the blocks past their delivery deadline."""
        if not self._unacked or self._unacked[0].deadline > now:
            return
        expired = [block for block in self._unacked if block.deadline <= now]
        for block in expired:
            self._unacked.remove(block)
            why = f"; last error: {self._last_error}" if self._last_error else ""
            self._complete(block, error=DeliveryTimeoutError(
                f"a block of {block.event_count} events to segment {self.segment!r} was not "
                f"acknowledged within delivery_timeout_ms "
                f"({self._delivery_timeout_s * 1000:.0f} ms); it may or may not have been "
                f"written{why}", segment=self.segment))

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
                self._ledger_down_since = None
                self._remove(block)
                self._complete(block, offset=-1 if appended.duplicate else appended.offset)
        else:
            self._on_failure(block, self._failure(reply))

    def _on_setup(self, last_event_number: int) -> None:
        if self._next_event_number <= last_event_number:
            self._next_event_number = last_event_number + 1
        self._state = _FlowState.SEALED if self._sealing else _FlowState.READY
        for block in list(self._unacked):
            number = block.last_event_number
            if number is not None and number <= last_event_number:
                # Written already: its ack was lost, or a later block was
                # written after this one failed (then it is lost, out of order).
                self._remove(block)
                if block.rejected is not None:
                    self._complete(block, error=block.rejected)
                else:
                    self._complete(block, offset=-1)
            elif self._sealing:
                continue  # not written before the seal: handed over to a successor
            else:
                self._send(block)
                if self._state is not _FlowState.READY:
                    return
        if self._sealing:
            self._notify_sealed()

    def _ledger_down_too_long(self, error: FolioError) -> bool:
        if not isinstance(error, LedgerUnavailableError):
            self._ledger_down_since = None
            return False
        now = time.monotonic()
        if self._ledger_down_since is None:
            self._ledger_down_since = now
        return now - self._ledger_down_since >= LEDGER_UNAVAILABLE_GIVE_UP_S

    def _failure(self, reply: append_pb2.AppendReply) -> FolioError:
        return error_from_reply(reply, self.segment)

    def _on_failure(self, block: _Block | None, error: FolioError) -> None:
        self._last_error = error
        if isinstance(error, SegmentSealedError) and self._on_sealed is not None:
            if self._sealing:
                if block is None:
                    # The setup itself was refused (a broker that does not tell
                    # a sealed segment's writer state): hand every block over.
                    log.warning("segment %s is sealed and did not tell which blocks of "
                                "writer %s it holds; sending them all to its successors",
                                self.segment, self._writer_id)
                    self._state = _FlowState.SEALED
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
        if error.retriable and self._ledger_down_too_long(error):
            # The broker is up and says its ledger service is not: tell the
            # application in seconds, not after delivery_timeout_ms of silence.
            # Later writes try again (the bookies may be back by then).
            failure = LedgerUnavailableError(
                f"{error} (the broker said so for {LEDGER_UNAVAILABLE_GIVE_UP_S:.0f} s; "
                "unacknowledged events may or may not have been written)",
                error_name=error.error_name, context=error.context)
            for pending in list(self._unacked):
                self._complete(pending, error=failure)
            self._unacked.clear()
            self._ledger_down_since = None
        if error.retriable:
            if block is not None:
                block.rejected = error
            if self._state in (_FlowState.READY, _FlowState.SETTING_UP):
                self._state = _FlowState.RESETTING
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

    def hand_over(self, begin: Callable[[], tuple[Forward, Callable[[], None]]]) -> None:
        """Sends the events not written before the seal on to the successors; IO thread.

        No block is cut from now on; then (once the blocks cut before are
        queued here) under the caller-side lock, in order: ``begin()`` gives
        ``forward`` (the new routing) and ``publish`` (making it current);
        every event of the blocks left, then of the open batch, goes through
        ``forward`` and its block's outcome is forwarded to the new futures;
        ``publish`` runs; later ``append`` calls go to ``forward``. Nothing of
        this segment's keys can slip in between.
        """
        with self._lock:
            self._handing = True
        # After the _enqueue of every block cut so far (call_soon keeps order).
        self._io.call_soon(self._move, begin)

    def _move(self, begin: Callable[[], tuple[Forward, Callable[[], None]]]) -> None:
        blocks = [block for block in self._unacked if not block.done]
        self._unacked.clear()
        with self._lock:
            forward, publish = begin()
            for block in blocks:
                block.done = True
                decoded = decode_block(block.data)
                block.outcome.forward(_resend(forward, decoded.payloads, decoded.routing_keys,
                                              decoded.timestamps_ms, decoded.headers))
            batch, self._batch = self._batch, None
            if batch is not None:
                batch.outcome.forward(_resend(
                    forward, batch.payloads, [] if batch.keyless else batch.keys,
                    batch.timestamps, batch.headers or []))
            publish()
            self._redirect = forward
            self._in_flight = 0
            self._notify_locked()
        self._drop_flow()

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
        if self._state is _FlowState.RESETTING and self._dead is None and self._flow_id:
            self._send_setup()

    def _remove(self, block: _Block) -> None:
        if self._unacked and self._unacked[0] is block:
            del self._unacked[0]
        else:
            with contextlib.suppress(ValueError):
                self._unacked.remove(block)

    def _complete(self, block: _Block, *, offset: int = -1,
                  error: BaseException | None = None) -> None:
        if block.done:
            return
        block.done = True
        metrics = self._metrics
        if error is not None:
            self._on_error(error)
            block.outcome.set_error(error)
            if metrics is not None:
                metrics.failed(error)
        else:
            block.outcome.set_result(offset)
            if metrics is not None:  # the deadline is the cut time + the delivery timeout
                metrics.acknowledged(block.event_count, len(block.data), time.monotonic()
                                     - block.deadline + self._delivery_timeout_s)
        with self._lock:
            self._in_flight -= 1
            batch = self._batch
            # With nothing left in flight, lingering only adds latency: cut now.
            if batch is not None and (batch.lingered or batch.size >= self._batch_size_bytes
                                      or not self._in_flight):
                self._cut_locked()
            self._notify_locked()

    def _release(self) -> None:
        self._drop_flow()
        closed = WriterClosedError("the writer was closed before the event was acknowledged")
        for block in list(self._unacked):
            self._complete(block, error=closed)
        self._unacked.clear()
        self._state = _FlowState.NEW


def _resend(forward: Forward, payloads: list[bytes], keys: list[str],
            timestamps: list[int], headers: list[Mapping[str, bytes]] | list[dict[str, bytes]],
            ) -> list[WriteFuture]:
    """Each event again through ``forward`` (never waiting), in order; their futures."""
    futures = []
    for index, payload in enumerate(payloads):
        key = keys[index] if keys else None
        futures.append(forward(payload, key, headers[index] if headers else None,
                               timestamps[index] if timestamps else 0,
                               len(payload) + (len(key) if key else 0), True))
    return futures
