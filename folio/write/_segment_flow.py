"""One writer's flow to one segment: the pipelined policy of the flow engine.

``SegmentWriter`` (the caller side, ``folio.write._segment_writer``) holds
one :class:`SegmentFlow`, which holds a ``FlowEngine`` (``folio._flow``):
the engine registers the flow on the stream the client's connection pool
picks (the least busy channel, ``folio._transport.pool``), sets it up,
numbers blocks from the ``AppendSetup`` answer, resends after a lost
stream, a retriable refusal or a move, and follows WrongHost. This policy
says what an event writer does its own way:

- **Pipelined blocks**: each block is its own sequence and goes out as soon
  as it is queued; the caller side bounds how many are unacknowledged
  (``max_in_flight``), so no window here.
- **Transient means retried.** Everything retriable — a lost or silent
  stream, WrongHost and moves, ``LedgerUnavailableError`` and any other
  UNAVAILABLE — is retried until the block's delivery deadline; resending is
  safe because the writer id and event numbers de-duplicate on the broker. A
  block fails only when its outcome is known to be failure (a refusal for
  good: not written) or when the deadline passed: then with
  ``DeliveryTimeoutError`` (outcome unknown, not retriable), caused by the
  last error retried.
- **A seal** is learnt here: with ``on_sealed``, ``SegmentIsSealed`` makes
  the flow set up once more to learn which blocks the sealed segment holds
  (``FlowEngine.learn_sealed``); those are acknowledged, the rest is handed
  over by the caller side. Without it, and for ``NoSuchSegment`` or a
  refused permission, the flow ends: its blocks fail, and later ones at once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from folio._flow.engine import FlowEngine
from folio._transport.flow_state import FlowState
from folio.api.v1 import append_pb2
from folio.errors import (
    DeliveryTimeoutError,
    FolioError,
    NoSuchSegmentError,
    PermissionDeniedError,
    SegmentSealedError,
    WriterClosedError,
)
from folio.write._write_future import BlockOutcome

if TYPE_CHECKING:
    from folio._transport.append_stream import FlowSource

__all__ = ["Block", "SegmentFlow"]

log = logging.getLogger(__name__)

#: Settles a block: its offset (-1: unknown, a duplicate) or its error.
Complete = Callable[..., None]


class Block:
    """An encoded block on its way: numbered when first sent, kept until acknowledged."""

    __slots__ = ("data", "deadline", "done", "event_count", "last_event_number", "outcome")

    def __init__(self, data: bytes, event_count: int, outcome: BlockOutcome,
                 deadline: float) -> None:
        self.data = data
        self.event_count = event_count
        self.outcome = outcome
        self.deadline = deadline
        self.last_event_number: int | None = None
        self.done = False


class SegmentFlow:
    """The pipelined policy of one writer's flow to one segment (module docstring).

    Event-loop only. ``complete(block, offset=..., error=...)`` is the
    caller side's: it settles a block's events and frees its room.
    """

    __slots__ = ("_complete", "_delivery_timeout_s", "_on_sealed", "engine")

    def __init__(self, segment: str, *, writer_id: str, source: FlowSource,
                 delivery_timeout_s: float, complete: Complete,
                 on_sealed: Callable[[], None] | None) -> None:
        self._complete = complete
        self._delivery_timeout_s = delivery_timeout_s
        self._on_sealed = on_sealed
        self.engine: FlowEngine[Block] = FlowEngine(
            segment, writer_id=writer_id, source=source, policy=self, log=log)

    # -- the writer's calls -----------------------------------------------------

    def submit(self, block: Block, *, closing: bool) -> FolioError | None:
        """Queues ``block`` (registering the flow first); the error refusing it, if any.

        ``closing``: the writer is being closed (a flow not registered yet is
        not registered for it).
        """
        engine = self.engine
        if engine.dead is not None:
            return engine.dead
        if engine.state is FlowState.NEW:
            if closing:
                return WriterClosedError("the writer is closed")
            error = engine.start()
            if error is not None:
                return error
        elif engine.state is FlowState.CLOSED:
            return WriterClosedError("the writer is closed")
        engine.submit((block,))
        return None

    def fail(self, error: FolioError) -> None:
        """The segment is sealed for good (no successors) or they cannot be found: fail all."""
        self.engine.die(error)

    def release(self) -> None:
        """Ends the flow; the blocks not acknowledged fail (``WriterClosedError``)."""
        closed = WriterClosedError("the writer was closed before the event was acknowledged")
        for block in self.engine.release():
            self._complete(block, error=closed)

    def take_over(self) -> list[Block]:
        """Ends the flow for a hand-over; the blocks not settled, in order."""
        return [block for block in self.engine.release() if not block.done]

    # -- FlowPolicy ---------------------------------------------------------------

    def sequence(self, queue: Sequence[Block], outstanding: int) -> int:
        """Every block goes out on its own, at once (the caller side bounds them)."""
        return 1

    def frame(self, group: Sequence[Block]) -> list[tuple[bytes, int]]:
        """The block as encoded by the caller side."""
        block = group[0]
        return [(block.data, block.event_count)]

    def appended(self, group: Sequence[Block], appended: append_pb2.DataAppended) -> None:
        """Acknowledged: settle it (offset -1 for a duplicate)."""
        self._complete(group[0], offset=-1 if appended.duplicate else appended.offset)

    def settled(self, unit: Block) -> None:
        """Written before (its acknowledgement lost): settled as a duplicate."""
        self._complete(unit, offset=-1)

    def refused(self, group: Sequence[Block] | None, error: FolioError) -> bool:
        """A seal, a refusal for good, or a retriable one (left to the engine)."""
        engine = self.engine
        if isinstance(error, SegmentSealedError) and self._on_sealed is not None:
            if engine.sealing:
                if group is None:
                    # The setup itself was refused (a broker that does not tell
                    # a sealed segment's writer state): hand every block over.
                    log.warning("segment %s is sealed and did not tell which blocks it "
                                "holds; sending them all to its successors", engine.segment)
                    engine.enter_sealed()
                return True
            # Learn from the sealed segment's record of this writer which blocks
            # it holds (its writer attribute); then hand the rest over.
            log.info("segment %s is sealed; its writer follows it to its successors",
                     engine.segment)
            engine.learn_sealed()
            return True
        if isinstance(error, (SegmentSealedError, NoSuchSegmentError, PermissionDeniedError)) \
                or (group is None and not error.retriable):
            # The flow can never succeed (a setup refused for good, a system
            # topic's segment): fail everything, now and later.
            engine.die(error)
            return True
        if error.retriable or group is None:
            return False
        engine.remove(group)
        self._complete(group[0], error=error)
        return True

    def abandon(self, units: Sequence[Block], error: FolioError) -> None:
        """The flow ended for good: every block fails with ``error``."""
        for block in units:
            self._complete(block, error=error)

    def tick(self, now: float) -> None:
        """Fails the blocks past their delivery deadline (outcome unknown)."""
        engine = self.engine
        units = engine.units
        if not units or units[0].deadline > now:
            return
        expired = [block for block in units if block.deadline <= now]
        engine.remove(expired)
        last = engine.last_error
        why = f"; last error: {last}" if last else ""
        for block in expired:
            error = DeliveryTimeoutError(
                f"a block of {block.event_count} events to segment {engine.segment!r} was "
                f"not acknowledged within delivery_timeout_ms "
                f"({self._delivery_timeout_s * 1000:.0f} ms): the outcome is unknown, the "
                f"events may or may not have been written (read the segment back before "
                f"sending them again){why}", segment=engine.segment,
                last_error=type(last).__name__ if last else None)
            if last is not None:
                # Only then: assigning __cause__ (even None) suppresses the context,
                # and close() may raise this while the caller's own error is handled.
                error.__cause__ = last
            self._complete(block, error=error)

    def follow_deadline(self) -> float | None:
        """The latest delivery deadline of the blocks (they give up then)."""
        return max((block.deadline for block in self.engine.units),
                   default=time.monotonic() + self._delivery_timeout_s)

    def move_failed(self, error: FolioError) -> None:
        """No owner found by the deadline: those blocks fail; later ones start over."""
        engine = self.engine
        engine.detach()
        self.tick(time.monotonic())
        if engine.units:  # written while moving: try again from the start
            failure = engine.start()
            if failure is not None:
                self.fail(failure)

    def sealed(self) -> None:
        """The blocks written before the seal are acknowledged: the writer hands over."""
        if self._on_sealed is not None:
            self._on_sealed()
