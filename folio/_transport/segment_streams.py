"""Read streams of a changing set of segments, decoded on the caller's thread.

What reader groups and batch reads share: segments are added (at an offset)
and removed at any time; each has one ``Read`` server stream on the IO thread
(on a channel of the client's pool) that puts whole responses — many blocks —
on one queue, at most ``_BUFFERED_RESPONSES`` per segment ahead of the caller.
The caller takes responses off the queue and unpacks their blocks by column,
one tight loop per block (``folio._transport.unpack``); each ``Event`` object
is made as it is returned. Every stream carries a token: when a segment is
removed (and maybe added again later), responses its old stream
had queued are recognised by their stale token and dropped, so nothing is
returned twice or out of order. A segment whose last response carried
``end_of_segment`` is *finished* once all its events were returned.

A payload the serializer cannot decode is an ``UndecodedEvent`` among the
unpacked events (``folio._transport.unpack``). The fast path returns events
only up to the next one of those (``_clean``); there the reader's policy
decides: ``"raise"`` raises its ``DeserializationError`` and stays on it (the
positions name its offset, the next call raises again, the events after it
stay buffered) until ``skip(error)``; ``"skip"`` logs it and steps over;
``"raw"`` returns it. The response it came in is never dropped: its credit was
given back and the stream read on past it, so dropping it would lose the
events after it for good.

A stream that breaks, or that hears nothing from its broker (not even the
empty response due every ``max_wait_ms`` at the tail) for ``max_wait_ms`` plus
the progress deadline (``folio._transport.liveness``), is opened again from the
next offset after backoff, or as soon as its channel turns READY again
(``liveness.wait_to_reconnect``, as the Append stream); a status the broker
did not give (gRPC's own, e.g. from a cut connection) gets a few retries
too. In a cluster, each stream runs on a channel of its segment's owner
(``folio._transport.brokers``); a WrongHost answer moves it to the owner it
names, or to the one ``LookupSegment`` finds (looked up with backoff for as
long as the segment is held), from the next offset. The event reader
(``folio.read.reader``), reader groups and batch reads are all built on this
one engine.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import queue
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Final, Generic, NoReturn, TypeVar

import grpc

from folio._status import error_from_rpc
from folio._transport.append_stream import Backoff
from folio._transport.liveness import (
    PROGRESS_TIMEOUT_S,
    wait_to_reconnect,
    with_progress_deadline,
)
from folio._transport.moving import MOVE_BACKOFF_MAX_S
from folio._transport.read_policies import check_policy
from folio._transport.read_stream_state import Credit, ReadStreamState, SignallingQueue
from folio._transport.read_view import ReadView, open_read
from folio._transport.unpack import EMPTY, UnpackedEvents, unpack_response
from folio.api.v1 import read_pb2
from folio.errors import (
    DeserializationError,
    FolioError,
    FolioUnavailableError,
    InvalidArgumentError,
    InvalidBlockError,
    WrongHostError,
)
from folio.models import DeserializationPolicy, Event, UndecodedEvent

if TYPE_CHECKING:
    from grpc import aio

    from folio._transport.io_thread import IoThread
    from folio._transport.pool import ReadChannels
    from folio.api.v1.read_pb2_grpc import ReadAsyncStub
    from folio.metrics import TopicMetrics

__all__ = ["DEFAULT_MAX_BYTES", "DEFAULT_MAX_WAIT_MS", "SegmentStreams"]

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Bytes of blocks per Read response asked for.
DEFAULT_MAX_BYTES: Final = 1024 * 1024
#: How long the broker waits at the tail before an empty (heartbeat) response.
DEFAULT_MAX_WAIT_MS: Final = 500
#: Responses of one segment buffered before its stream waits for the caller.
_BUFFERED_RESPONSES: Final = 4
#: Retries of a read stream failing with statuses the broker did not give.
_UNEXPLAINED_RETRIES: Final = 5

# (segment, token, response, error); segment None wakes the caller.
_Item = tuple[str | None, int, read_pb2.ReadResponse | ReadView | None, FolioError | None]


class SegmentStreams(Generic[T]):
    """One Read stream per segment held; ``next_event`` returns their events. One caller thread."""

    def __init__(self, *, io: IoThread, channels: ReadChannels | None = None,
                 stub: ReadAsyncStub | None = None,
                 deserialize: Callable[[bytes], T] | None,
                 isolation: read_pb2.ReadRequest.Isolation.ValueType = (
                     read_pb2.ReadRequest.READ_COMMITTED),
                 max_bytes: int = DEFAULT_MAX_BYTES, max_wait_ms: int = DEFAULT_MAX_WAIT_MS,
                 metrics: TopicMetrics | None = None,
                 on_deserialization_error: DeserializationPolicy = "raise",
                 backoff: Callable[[], Backoff] = Backoff) -> None:
        """Streams take a channel of ``channels`` (the client's pool) each, or use ``stub``.

        ``backoff`` makes each stream's reconnect backoff (tests give long
        ones). A stream on ``channels`` waits for its channel to turn READY
        rather than for the whole backoff; on ``stub`` it waits the backoff.
        """
        if (channels is None) == (stub is None):
            raise ValueError("give the streams either channels or a stub")
        check_policy(on_deserialization_error)
        self._policy = on_deserialization_error
        self._io = io
        self._channels = channels
        self._stub = stub
        self._backoff = backoff
        #: Reopenings that did not wait the backoff out: the channel turned READY first.
        self.ready_wakeups = 0
        #: The most responses of one segment queued and not yet taken at once.
        self.peak_queued = 0
        #: Read calls opened, every segment's (a reconnect or a move opens one more).
        self.read_calls = 0
        self._max_bytes = max_bytes
        self._max_wait_ms = max_wait_ms
        self._metrics = metrics
        self._deserialize = deserialize
        self._isolation = isolation
        #: What the caller takes from (the asyncio face's reader signals on it: ``signal_to``).
        self.items = self._queue = SignallingQueue[_Item]()
        self._streams: dict[str, ReadStreamState] = {}
        self._tokens = itertools.count(1)
        #: The events of the response being returned, the next one's index, how many.
        self._events: UnpackedEvents = EMPTY
        self._index = 0
        self._count = 0
        self._make: Callable[[], Event[T]] = EMPTY.take
        #: Indexes of the undecoded events at or after ``_index``, and the first
        #: of them (else the end): events before it are returned without a look.
        self._undecoded: list[int] = []
        self._clean = 0
        self._closed = False
        #: Set when a segment's last response came; cleared by ``finished``.
        self.ended = False
        #: The segment the last failure dropped, with the offset of its next event.
        self.dropped: tuple[str, int] | None = None

    # -- membership ---------------------------------------------------------

    def add(self, segment: str, offset: int) -> None:
        """Start reading ``segment`` at ``offset`` (replacing any stream of it)."""
        self.remove(segment)
        stream = ReadStreamState(next(self._tokens), offset)
        self._streams[segment] = stream
        stream.task = self._io.submit(self._run(segment, stream.token, offset, stream))

    def remove(self, segment: str) -> int | None:
        """Stop reading ``segment``; returns the offset of its next unreturned event."""
        stream = self._streams.pop(segment, None)
        if stream is None:
            return None
        position = stream.position
        if self._index < self._count and self._events.segment == segment:
            position = self._events.offsets[self._index]
            self._set_events(EMPTY)
        if stream.task is not None:
            stream.task.cancel()
        return position

    @property
    def segments(self) -> list[str]:
        """The segments being read."""
        return list(self._streams)

    def position(self, segment: str) -> int:
        """The offset of ``segment``'s next event to return (-1 if not held)."""
        if self._index < self._count and self._events.segment == segment:
            return self._events.offsets[self._index]
        stream = self._streams.get(segment)
        return -1 if stream is None else stream.position

    def positions(self) -> dict[str, int]:
        """The offset of the next event to return, per segment held."""
        positions = {segment: stream.position for segment, stream in self._streams.items()}
        if self._index < self._count:
            positions[self._events.segment] = self._events.offsets[self._index]
        return positions

    def finished(self) -> list[str]:
        """Segments read to their end: sealed, and every event returned."""
        pending = self._events.segment if self._index < self._count else None
        held = self._streams.get(pending) if pending is not None else None
        self.ended = held is not None and held.ended  # signalled again once returned
        return [segment for segment, stream in self._streams.items()
                if stream.ended and segment != pending]

    # -- reading ------------------------------------------------------------

    def next_buffered(self) -> Event[T] | None:
        """The next event already unpacked, or None: no wait, no lock, no clock (the hot path)."""
        index = self._index
        if index < self._clean:
            self._index = index + 1
            return self._make()
        return None

    def take_buffered(self, limit: int) -> list[Event[T]]:
        """Up to ``limit`` events already unpacked, at once (``next_buffered``'s, many)."""
        index = self._index
        count = max(0, min(self._clean - index, limit))
        self._index = index + count
        return self._events.take_many(count)

    def next_event(self, timeout: float | None) -> Event[T] | None:
        """The next event, waiting up to ``timeout`` seconds; None on timeout, close or an end.

        Returns None early when a segment finished, so the caller can act on it.
        After ``close``, returns the events unpacked before it, then None.

        Raises:
            DeserializationError: the next event's payload cannot be decoded
                (policy ``"raise"``); the streams stay on it: the next call
                raises again until ``skip``.
            FolioError: a segment's stream failed for good (e.g. NOT_FOUND,
                OUT_OF_RANGE), or its response held an invalid block
                (``InvalidBlockError``); the segment is dropped from the set,
                ``dropped`` saying at which offset (none of the response's
                events returned: nothing skipped).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            index = self._index
            if index < self._clean:
                self._index = index + 1
                return self._make()
            if index < self._count:
                undecoded = self._at_undecoded(index)
                if undecoded is not None:
                    return undecoded
                continue
            if self._closed:
                return None
            try:
                if deadline is None:
                    item = self._queue.get()
                else:
                    item = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                return None
            if self._take(item):
                return None

    def _take(self, item: _Item) -> bool:
        """Handle one queued item; True when the caller should look up (an end, a wake-up)."""
        segment, token, response, error = item
        if segment is None:
            return True
        stream = self._streams.get(segment)
        if stream is None or stream.token != token:
            return False  # queued by a stream of a removed segment
        if error is not None:
            self._drop(segment, stream, error)
        if stream.credit is not None:
            self._io.call_soon(stream.give_back)
        if response is None:
            return False
        if response.blocks:
            try:
                events, stream.position = unpack_response(
                    segment, stream.position, response, self._deserialize)
            except InvalidBlockError as invalid:
                # Its stream has read on past this response: reading on from the
                # next one would skip the response's events. Stop the segment at
                # the offset before them instead, as a stream failed for good.
                self._drop(segment, stream, invalid)
            self._set_events(events)
            if self._metrics is not None:
                self._metrics.received(len(events), events.data_bytes)
                for undecodable in events.undecodable.values():  # once each, whatever
                    self._metrics.failed(undecodable.error)      # the policy
        # Only a response without blocks moves past left-out entries (aborted
        # transactions, markers). This broker follows read.proto (a split read
        # step's earlier responses claim no offset a later one serves), but
        # brokers before it gave every response of a split step the step's
        # next_offset: trusting it there would skip the blocks still to come.
        # A left-out tail is learnt from the next blockless response instead
        # (at once when a read finds only left-out entries, else the heartbeat).
        skipped = not response.blocks and response.next_offset > stream.position
        if skipped:
            stream.position = response.next_offset
        if response.end_of_segment:
            stream.ended = True
            self.ended = True
            return self._index >= self._count
        return skipped  # the caller may be waiting for that offset

    def _drop(self, segment: str, stream: ReadStreamState, error: FolioError) -> NoReturn:
        """Stops reading ``segment`` at its position (``dropped``) and raises ``error``."""
        del self._streams[segment]
        self.dropped = (segment, stream.position)
        if stream.task is not None:
            stream.task.cancel()
        if self._metrics is not None:
            self._metrics.failed(error)
        raise error

    # -- undecodable payloads -------------------------------------------------

    def _set_events(self, events: UnpackedEvents) -> None:
        self._events, self._index, self._count = events, 0, len(events)
        self._make = events.take
        self._undecoded = events.undecoded
        self._clean = events.undecoded[0] if events.undecoded else self._count

    def _undecodable_at(self, index: int) -> UndecodedEvent:
        event = self._events.undecodable.get(index)
        if event is None:  # _undecoded lists only those
            raise TypeError(f"event {index} of the buffer is decoded")
        return event

    def _step_over(self, index: int) -> None:
        """Past the undecoded event at ``index`` (the first one left), to the next one."""
        self._index = index + 1
        self._make()  # (makes its plain event, which nobody gets)
        self._undecoded.pop(0)
        self._clean = self._undecoded[0] if self._undecoded else self._count

    def _at_undecoded(self, index: int) -> Event[T] | None:
        """The policy at the undecoded event ``index``: raise, or step over it (None), or
        return it."""
        event = self._undecodable_at(index)
        error = event.error
        if self._policy == "raise":
            # A fresh traceback each time: raised again on every call until skipped.
            raise error.with_traceback(None)
        self._step_over(index)
        if self._policy == "skip":
            log.warning("skipped an event the serializer cannot decode: %s", error)
            return None
        return event  # type: ignore[return-value]  # raw: an Event[bytes] for any T

    def skip(self, error: DeserializationError) -> None:
        """Step over the undecoded event ``error`` names: the one the streams are on.

        Raises:
            InvalidArgumentError: the streams are not on that event (it was
                skipped already, or its segment was handed over meanwhile).
        """
        index = self._index
        event = (self._events.undecodable.get(index) if index == self._clean < self._count
                 else None)
        if event is None or (event.segment, event.offset) != (error.segment, error.offset):
            raise InvalidArgumentError(
                f"the reader is not on the event at segment {error.segment} offset "
                f"{error.offset} (skipped already, or its segment is no longer read here): "
                f"skip takes the DeserializationError the last read raised")
        self._step_over(index)

    def wake(self) -> None:
        """Make a waiting ``next_event`` return None now (any thread)."""
        self._queue.put((None, 0, None, None))

    def close(self) -> None:
        """Stop every stream; the events unpacked already are still returned. Idempotent.

        ``positions`` goes on saying where each segment is, as those are returned.
        """
        if self._closed:
            return
        self._closed = True
        for stream in self._streams.values():
            if stream.task is not None:
                stream.task.cancel()
                stream.task = None
        self.wake()

    # -- the IO side --------------------------------------------------------

    async def _run(self, segment: str, token: int, offset: int, stream: ReadStreamState) -> None:
        channels = self._channels
        if channels is None:
            assert self._stub is not None  # checked in __init__
            await self._read(self._stub, segment, token, offset, stream)
            return
        next_offset: int | None = offset
        moves = Backoff(MOVE_BACKOFF_MAX_S)
        while next_offset is not None:
            try:
                lease = channels.lease_read(segment)
            except FolioError as error:  # the client is closed
                self._queue.put((segment, token, None, error))
                return
            try:
                next_offset = await self._read(lease.stub, segment, token, next_offset, stream,
                                               moves=moves, channel=lease.channel)
            finally:
                lease.release()
            if next_offset is not None and channels.owner_of(segment) is None:
                # WrongHost without an owner: look it up (any broker, with
                # backoff) for as long as the stream is held.
                try:
                    await channels.find_owner(segment, None)
                except FolioError as error:
                    self._queue.put((segment, token, None, error))
                    return

    async def _read(self, stub: ReadAsyncStub, segment: str, token: int, offset: int,
                    stream: ReadStreamState, *, moves: Backoff | None = None,
                    channel: aio.Channel | None = None) -> int | None:
        """Reads ``segment`` from ``offset`` until its end or a failure for good.

        Returns:
            None when done (end of segment, or a failure queued); with
            ``moves`` (the backoff between moves), the offset to read on from
            at the segment's owner after a WrongHost or, in a cluster, after
            its broker could not be reached (the owner is then recorded, or
            to be looked up).
        """
        # One credit for the stream's whole life: responses a broken or moved
        # call queued still hold theirs (given back into this same window).
        if stream.credit is None:
            stream.credit = Credit(_BUFFERED_RESPONSES)
        credit = stream.credit
        backoff = self._backoff()
        next_offset = offset
        unexplained = 0
        served = False
        woke_on_ready = False  # the last call was opened because the channel turned READY
        while True:
            answered = False
            self.read_calls += 1
            call = open_read(stub, channel, read_pb2.ReadRequest(
                segment=segment, offset=next_offset, max_bytes=self._max_bytes,
                max_wait_ms=self._max_wait_ms, isolation=self._isolation))
            try:
                async for response in with_progress_deadline(
                        call, f"Read stream of {segment}",
                        PROGRESS_TIMEOUT_S + self._max_wait_ms / 1000):
                    backoff.reset()
                    answered = True
                    unexplained = 0
                    if moves is not None and not served:
                        served = True
                        moves.reset()  # served here: a later move starts its backoff over
                    for block in response.blocks:
                        next_offset = max(next_offset, block.offset + block.event_count)
                    if not response.blocks:  # (see _take: safe with every broker)
                        next_offset = max(next_offset, response.next_offset)
                    await credit.acquire()
                    self._queue.put((segment, token, response, None))
                    stream.queued += 1
                    self.peak_queued = max(self.peak_queued, stream.queued)
                    if response.end_of_segment:
                        return None
            except grpc.RpcError as rpc_error:
                error = error_from_rpc(rpc_error)
                channels = self._channels
                if moves is not None and channels is not None and (
                        isinstance(error, WrongHostError) or (
                            channels.cluster and error.error_name is None
                            and isinstance(error, FolioUnavailableError))):
                    # Cluster: another broker serves the segment (or this one is
                    # gone: ask the others who does); read on there from the
                    # next offset not yet received.
                    owner = error.owner if isinstance(error, WrongHostError) else None
                    log.info("read stream of %s: %s; reading on at offset %d at %s", segment,
                             error, next_offset, owner or "the owner a lookup finds")
                    channels.moved(segment, owner)
                    # Moves without a response between back off (50 ms doubling
                    # to 0.5 s, as writers' lookups): a stale owner named back and
                    # forth makes no tight loop, and the new owner is found soon.
                    await asyncio.sleep(moves.next_delay())
                    return next_offset
                # A status the broker did not give (no folio-error: gRPC's own,
                # e.g. INTERNAL from a cut connection) gets a few retries too.
                unexplained = unexplained + 1 if error.error_name is None else 0
                if not error.retriable and not 0 < unexplained <= _UNEXPLAINED_RETRIES:
                    self._queue.put((segment, token, None, error))
                    return None
                log.info("read stream of %s broke (%s); reopening at offset %d",
                         segment, error, next_offset)
            finally:
                call.cancel()
            # As the Append stream: at once when the channel is back, the whole
            # backoff after a call the channel woke that broke unanswered.
            woke_on_ready = await wait_to_reconnect(
                channel, backoff.next_delay(), on_ready=answered or not woke_on_ready)
            if woke_on_ready:
                self.ready_wakeups += 1
