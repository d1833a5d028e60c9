"""One full transaction's blocks to one segment: the IO side of ``folio.txn.txn_full``.

A ``SegmentFlow`` is the full-transaction policy of a ``FlowEngine``
(``folio._flow``), which it holds: a flow (one ``flow_id``) on the client's
shared Append stream, set up with ``SetupAppend(segment, writer_id,
txn_id)``. It runs on the event loop only.
"""

from __future__ import annotations

import concurrent.futures
import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

from folio._flow.engine import FlowEngine
from folio._transport.flow_state import FlowState
from folio.api.v1 import append_pb2
from folio.errors import FolioError, FolioUnavailableError, WriterClosedError

if TYPE_CHECKING:
    from folio._transport.append_stream import FlowSource

__all__ = ["SegmentFlow"]

log = logging.getLogger(__name__)

#: Blocks of one flow sent and not yet acknowledged, at most.
_MAX_IN_FLIGHT: Final = 8


class SegmentFlow:
    """Sends one transaction's blocks to one segment. Event loop only.

    Blocks are pipelined (at most ``_MAX_IN_FLIGHT``), each with ``end =
    true`` (each its own transactional entry), numbered from the writer's
    last event number that ``AppendSetup`` answers; a block keeps its number
    for good. A batch (one ``flush``) resolves its future when its last block
    is acknowledged: replies to a flow come in command order.

    Reconnects, retriable refusals and WrongHost are the engine's: blocks in
    doubt are settled by the next setup (same writer id and transaction) or
    sent again under their numbers, never lost or written twice. A refusal
    for good (the transaction is no longer open, say) fails every batch, and
    so does a stream down, refused or moving for longer than ``give_up_s``.
    """

    def __init__(self, segment: str, *, writer_id: str, txn_id: bytes,
                 source: FlowSource, give_up_s: float) -> None:
        self._give_up_s = give_up_s
        self.engine: FlowEngine[_Block] = FlowEngine(
            segment, writer_id=writer_id, source=source, policy=self, log=log,
            kind="transactional append", txn_id=txn_id)

    @property
    def segment(self) -> str:
        """The segment the flow appends to."""
        return self.engine.segment

    @property
    def resent(self) -> int:
        """Blocks sent again after a reconnect, a refusal or a move."""
        return self.engine.resent

    @property
    def settled_by_setup(self) -> int:
        """Blocks a setup's answer showed had landed (their acknowledgement lost)."""
        return self.engine.settled_by_setup

    # -- from the transaction (via IoThread.call_soon) -------------------------

    def submit(self, blocks: list[tuple[bytes, int]],
               future: concurrent.futures.Future[None]) -> None:
        """Queues one batch of blocks; ``future`` resolves once all are acknowledged."""
        engine = self.engine
        if engine.dead is not None:
            future.set_exception(engine.dead)
            return
        if engine.state is FlowState.CLOSED:
            future.set_exception(WriterClosedError("the transaction's flow is closed"))
            return
        if not blocks:
            future.set_result(None)
            return
        last = len(blocks) - 1
        engine.submit(_Block(data, count, future if index == last else None)
                      for index, (data, count) in enumerate(blocks))
        if engine.state is FlowState.NEW:
            error = engine.start()
            if error is not None:
                engine.die(error)

    def release(self) -> None:
        """Ends the flow (after commit or abort)."""
        _fail(self.engine.release(), WriterClosedError("the transaction ended"))

    def on_reply(self, reply: append_pb2.AppendReply) -> None:
        """A reply to one of the flow's commands (``FlowEngine.on_reply``)."""
        self.engine.on_reply(reply)

    # -- FlowPolicy ---------------------------------------------------------------

    def sequence(self, queue: Sequence[_Block], outstanding: int) -> int:
        """Each block on its own, at most ``_MAX_IN_FLIGHT`` unanswered."""
        return 1 if outstanding < _MAX_IN_FLIGHT else 0

    def frame(self, group: Sequence[_Block]) -> list[tuple[bytes, int]]:
        """The block as packed by the transaction."""
        block = group[0]
        return [(block.data, block.event_count)]

    def appended(self, group: Sequence[_Block], appended: append_pb2.DataAppended) -> None:
        """Written: the batch it ends (if any) resolves."""
        self.settled(group[0])

    def settled(self, unit: _Block) -> None:
        """Written (maybe before a reconnect): the batch it ends (if any) resolves."""
        if unit.future is not None and not unit.future.done():
            unit.future.set_result(None)

    def refused(self, group: Sequence[_Block] | None, error: FolioError) -> bool:
        """Retriable: the engine sets up again (until ``give_up_s``); else every batch fails.

        Transient is the ledger service or the coordinator unavailable for a
        moment; replies to the other blocks in flight are ignored from then on.
        """
        if error.retriable:
            return False
        self.engine.die(error)
        return True

    def abandon(self, units: Sequence[_Block], error: FolioError) -> None:
        """The flow failed: every batch fails with ``error``."""
        log.info("transactional append to %s failed: %s", self.segment, error)
        _fail(units, error)

    def tick(self, now: float) -> None:
        """Gives up once the stream has been down (or refused) for ``give_up_s``."""
        engine = self.engine
        down_since = engine.down_since
        if down_since is not None and engine.units and now - down_since > self._give_up_s:
            engine.die(FolioUnavailableError(
                f"the append stream to {self.segment} has been down for more than "
                f"{self._give_up_s:.0f} s with blocks of the transaction unacknowledged"))

    def follow_deadline(self) -> float | None:
        """An owner must be found within ``give_up_s``."""
        return time.monotonic() + self._give_up_s

    def move_failed(self, error: FolioError) -> None:
        """No owner found within ``give_up_s``: every batch fails."""
        self.engine.die(error)

    def sealed(self) -> None:
        """Not used: a full transaction's flow never learns a seal."""


def _fail(units: Sequence[_Block], error: FolioError) -> None:
    for block in units:
        if block.future is not None and not block.future.done():
            block.future.set_exception(error)


class _Block:
    """One block of a flow: bytes, event count, its last event number (None: not yet)."""

    __slots__ = ("data", "event_count", "future", "last_event_number")

    def __init__(self, data: bytes, event_count: int,
                 future: concurrent.futures.Future[None] | None) -> None:
        self.data = data
        self.event_count = event_count
        self.last_event_number: int | None = None
        self.future = future
