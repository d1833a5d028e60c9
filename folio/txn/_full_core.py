"""One full transaction's state, buffers and flows, without waits: the part both faces hold.

``folio.txn.txn_full.Transaction`` (blocking) and
``folio.aio._txn_full.AsyncFullTransaction`` hold a :class:`TxnCore` each: it
routes and buffers events (``write_event``), hands the packed blocks to one
``SegmentFlow`` per segment (``send``: the full-transaction policy on the flow
engine, ``folio.txn._full_flow``) and releases them (``end``). Each face
waits for the blocks' futures and decides (``CommitTxn``/``AbortTxn``) in its
own way: the blocking one on the caller's thread, the asyncio one on the
caller's loop. Thread-safe (the blocking face may write from several threads).
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any

from folio.api.v1.block import EVENT_OVERHEAD_BYTES, HEADER_OVERHEAD_BYTES
from folio.errors import (
    EventTooLargeError,
    FolioError,
    InvalidArgumentError,
    SegmentSealedError,
    TxnFailedError,
    TxnStateError,
)
from folio.txn._full_buffer import SegmentBuffer
from folio.txn._full_flow import SegmentFlow
from folio.txn._full_routes import TopicRoutes

if TYPE_CHECKING:
    from folio._transport.append_stream import FlowSource
    from folio._transport.io_thread import IoThread

__all__ = ["Local", "TxnCore", "TxnShared", "check_txn_timeout_ms", "failed_error"]


class Local(Enum):
    """A transaction's state as this client knows it."""

    OPEN = "OPEN"
    COMMITTED = "COMMITTED"
    ABORTED = "ABORTED"
    FAILED = "FAILED"  # aborted by the SDK after a failed append
    DETACHED = "DETACHED"  # flushed and handed over: committed or aborted by id elsewhere


@dataclass(frozen=True)
class TxnShared:
    """What every transaction of one writer shares (made by the writer of either face)."""

    topic: str
    routes: TopicRoutes
    serialize: Callable[[Any], bytes]
    raw: bool
    max_event_bytes: int
    io: IoThread
    source: FlowSource
    #: A flow gives up once its stream was down this long (the transaction's timeout).
    give_up_s: float
    #: Told when a transaction ends (its writer forgets it).
    forget: Callable[[TxnCore], None]


class TxnCore:
    """One transaction's events, per segment, and its flows. No waits; thread-safe."""

    def __init__(self, shared: TxnShared, txn_id: bytes) -> None:
        self._shared = shared
        #: The broker's transaction id, 16 bytes.
        self.txn_id = txn_id
        self.writer_id = uuid.uuid4().hex
        self._lock = threading.Lock()
        self._state = Local.OPEN
        self._buffers: dict[str, SegmentBuffer] = {}
        self._flows: dict[str, SegmentFlow] = {}
        #: Every flow the transaction had (for ``resent_blocks``), kept after it ends.
        self._every_flow: list[SegmentFlow] = []
        #: The futures of batches sent and not known to be written.
        self._sent: list[concurrent.futures.Future[None]] = []
        self._count = 0

    @property
    def state(self) -> Local:
        """The local state."""
        return self._state

    @property
    def event_count(self) -> int:
        """How many events were written to it."""
        return self._count

    @property
    def resent_blocks(self) -> int:
        """Blocks sent again after reconnects (each landed once all the same)."""
        return sum(flow.resent for flow in self._every_flow)

    def write_event(self, event: object, routing_key: str | None,
                    headers: Mapping[str, bytes] | None) -> None:
        """Buffers one event (``Transaction.write_event`` documents it)."""
        shared = self._shared
        if shared.raw and type(event) is bytes:
            payload: bytes = event
        else:
            payload = shared.serialize(event)
        if len(payload) > shared.max_event_bytes:
            raise EventTooLargeError(
                f"an event of {len(payload)} bytes exceeds topic {shared.topic!r}'s "
                f"max_event_bytes of {shared.max_event_bytes} bytes",
                size=len(payload), limit=shared.max_event_bytes)
        segment = shared.routes.segment_for(routing_key)
        size = len(payload) + EVENT_OVERHEAD_BYTES + len(routing_key or "")
        if headers:
            size += sum(len(name) + len(value) + HEADER_OVERHEAD_BYTES
                        for name, value in headers.items())
        now_ms = time.time_ns() // 1_000_000
        with self._lock:
            self._check_open_locked()
            buffer = self._buffers.get(segment)
            if buffer is None:
                buffer = self._buffers[segment] = SegmentBuffer()
            buffer.add(payload, routing_key, now_ms, headers, size)
            self._count += 1

    def check_open(self) -> None:
        """``TxnStateError`` unless OPEN."""
        with self._lock:
            self._check_open_locked()

    def send(self, *, only_if_open: bool = False) -> list[concurrent.futures.Future[None]]:
        """Hands every buffer's blocks to its flow; the futures of every batch sent and not
        known to be written, those of earlier calls too.

        Earlier ones too: a ``flush`` whose wait ended first (its timeout, a
        cancelled coroutine) leaves its blocks on their way, and a ``commit``
        after it must not decide before they are written (a block arriving
        after ``CommitTxn`` is refused, and a committed transaction would miss
        it), nor miss that one of them failed.

        Raises ``TxnStateError`` unless OPEN (``only_if_open``: sends
        nothing then instead, as ``commit`` of a transaction no longer open,
        whose decision the broker then refuses).
        """
        with self._lock:
            if only_if_open and self._state is not Local.OPEN:
                return []
            self._check_open_locked()
            return self._send_locked()

    def drop_buffered(self) -> None:
        """Forgets the events not sent yet (an abort: they never will be)."""
        with self._lock:
            for buffer in self._buffers.values():
                buffer.payloads, buffer.blocks = [], []

    def fail_open(self) -> None:
        """OPEN becomes FAILED (a block failed; the SDK aborts it)."""
        with self._lock:
            if self._state is Local.OPEN:
                self._state = Local.FAILED

    def set_state(self, state: Local) -> None:
        """Records the local outcome (after a decision)."""
        with self._lock:
            self._state = state

    def end(self, state: Local | None) -> None:
        """Releases the flows; sets ``state`` (if given) when still open."""
        with self._lock:
            if state is not None and self._state is Local.OPEN:
                self._state = state
            flows, self._flows = list(self._flows.values()), {}
        for flow in flows:
            self._shared.io.call_soon(flow.release)
        self._shared.forget(self)

    def _check_open_locked(self) -> None:
        if self._state is not Local.OPEN:
            raise TxnStateError(
                f"transaction {self.txn_id.hex()} is {self._state.value}, expected OPEN",
                txn_id=self.txn_id.hex(), expected="OPEN", actual=self._state.value)

    def _send_locked(self) -> list[concurrent.futures.Future[None]]:
        futures: list[concurrent.futures.Future[None]] = []
        shared = self._shared
        for segment, buffer in self._buffers.items():
            buffer.cut()
            if not buffer.blocks:
                continue
            flow = self._flows.get(segment)
            if flow is None:
                flow = self._flows[segment] = SegmentFlow(
                    segment, writer_id=self.writer_id, txn_id=self.txn_id,
                    source=shared.source, give_up_s=shared.give_up_s)
                self._every_flow.append(flow)
            future: concurrent.futures.Future[None] = concurrent.futures.Future()
            shared.io.call_soon(flow.submit, buffer.blocks, future)
            buffer.blocks = []
            futures.append(future)
        self._sent = [*(f for f in self._sent if not _written(f)), *futures]
        return list(self._sent)


def _written(future: concurrent.futures.Future[None]) -> bool:
    return future.done() and not future.cancelled() and future.exception() is None


def check_txn_timeout_ms(txn_timeout_ms: int) -> None:
    """``InvalidArgumentError`` unless a writer's ``txn_timeout_ms`` is in (0, one day]."""
    if not 0 < txn_timeout_ms <= 86_400_000:
        raise InvalidArgumentError(
            f"txn_timeout_ms must be > 0 and at most one day, not {txn_timeout_ms}")


def failed_error(txn_id: bytes, cause: FolioError) -> tuple[TxnFailedError, bool]:
    """The ``TxnFailedError`` a failed block ends a transaction with, and whether the
    writer must refresh its routes (the cause was a sealed segment: the topic was
    scaled, the next transaction routes to the successors)."""
    error = TxnFailedError(
        f"transaction {txn_id.hex()} failed and was aborted (nothing of it is "
        f"visible); begin a new one and write its events again: {cause}",
        txn_id=txn_id.hex())
    error.retriable = cause.retriable
    sealed = isinstance(cause, SegmentSealedError)
    if sealed:
        error.retriable = True
    return error, sealed
