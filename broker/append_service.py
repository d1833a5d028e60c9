"""The ``folio.v1.Append`` servicer: many writers' flows multiplexed on one stream.

Each command is answered on the stream with the ``request_id`` it carried (see
``proto/folio/v1/append.proto``). Blocks without ``end`` are held per flow and
written with its next ``end`` block as one entry (a transaction, PDP-44),
within the bounds of ``broker.held``; a failure in the middle of such a
sequence drops it whole: its later held blocks go unanswered and its ``end``
block gets the same failure (a new ``SetupAppend`` on the flow starts afresh).
Held blocks of a stream that ends are dropped. Work is per block: a block is checked
once by protobuf's C parser (``broker.block_limits``), and its bytes go to the segment
untouched. Commands are not awaited one by one: every append starts
as soon as it is read, so the blocks of many flows (and of one flow) meet in
the ledger's group commit; replies of one flow still leave in command order,
because each waits for the flow's previous reply before it is queued.

**Shutdown.** When the broker stops, each stream stops reading commands, lets
the appends it started finish and sends their replies, then ends with
UNAVAILABLE (``BrokerShuttingDownError``). A writer reconnects (elsewhere),
and ``SetupAppend`` tells it which of its blocks to resend. Appends cut short
by a hard kill are resent the same way; the ones that did reach the ledger
are answered as duplicates.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import grpc

from broker._servicer import abort_with
from broker.api import Block, SegmentHandle, Topics
from broker.block_limits import check_block_size, check_blocks
from broker.clip import clip, clip_message
from broker.errors import (
    BrokerError,
    BrokerShuttingDownError,
    EventTooLargeError,
    InvalidArgumentError,
    InvalidEventNumberError,
    NoSuchSegmentError,
    SegmentSealedError,
    TopicNotFoundError,
    WrongHostError,
)
from broker.held import DEFAULT_MAX_HELD_BYTES, DEFAULT_MAX_HELD_MS, HeldBudget, HeldRun
from broker.metrics import flows_bound, observe_error
from broker.request_names import MAX_SEGMENT_NAME_CHARS
from broker.segment_txn import TXN_ID_BYTES
from broker.status import error_number, is_retriable, status_for
from folio.api.v1 import append_pb2, append_pb2_grpc
from ledger.errors import LedgerError, LedgerFencedError

if TYPE_CHECKING:
    from broker.txn_coordinator import TxnCoordinator

__all__ = ["AppendServicer"]

log = logging.getLogger(__name__)

_Context = grpc.aio.ServicerContext[Any, Any]
_Reply = append_pb2.AppendReply

#: Commands of one stream being worked on at once; reading pauses beyond it.
MAX_COMMANDS_IN_FLIGHT = 1024
#: Flows one stream may bind.
MAX_FLOWS = 65536
#: Longest writer id.
MAX_WRITER_ID_CHARS = 128


@dataclass(slots=True, eq=False)
class _Flow:
    """One writer on one segment, as bound by ``SetupAppend``."""

    segment_name: str
    writer_id: str
    segment: asyncio.Future[SegmentHandle]
    held: HeldRun = field(default_factory=HeldRun)
    # The transaction the flow appends in (16 bytes), or b"".
    txn_id: bytes = b""
    # Why the block sequence under way failed: its later blocks are dropped
    # and its end block gets this failure.
    failed: BrokerError | None = None
    # Done once the flow's latest reply is queued: the next reply waits on it.
    tail: asyncio.Future[None] | None = None


class AppendServicer(append_pb2_grpc.AppendServicer):
    """Serves the Append stream over ``Topics``.

    Args:
        topics: the broker's topics.
        stopping: set when the broker shuts down; streams then wind down.
        max_held_bytes: blocks without ``end`` held over all streams, at most.
        max_held_ms: how long a flow may hold blocks, from the first.
        clock: monotonic seconds (injectable for tests).
    """

    def __init__(self, topics: Topics, stopping: asyncio.Event, *,
                 max_held_bytes: int = DEFAULT_MAX_HELD_BYTES,
                 max_held_ms: int = DEFAULT_MAX_HELD_MS,
                 clock: Callable[[], float] = time.monotonic,
                 coordinator: TxnCoordinator | None = None) -> None:
        self._topics = topics
        self._stopping = stopping
        self._coordinator = coordinator
        self.held = HeldBudget(max_held_bytes, max_held_ms, clock)

    async def Append(
        self, request_iterator: AsyncIterator[append_pb2.AppendCommand], context: _Context
    ) -> AsyncIterator[_Reply]:
        stream = _AppendStream(self._topics, self._stopping, self.held, self._coordinator)
        pump = asyncio.create_task(stream.pump(request_iterator))
        try:
            while (reply := await stream.next_reply()) is not None:
                yield reply
            stopped = await pump
        except BrokerError as error:
            await abort_with(context, error)
        finally:
            pump.cancel()
            flows_bound(-len(stream._flows))
        if stopped:
            await abort_with(context, BrokerShuttingDownError("the broker is stopping"))


class _AppendStream:
    """One Append stream: reads commands, starts their work, queues replies in flow order."""

    def __init__(self, topics: Topics, stopping: asyncio.Event, held: HeldBudget,
                 coordinator: TxnCoordinator | None = None) -> None:
        self._coordinator = coordinator
        self._topics = topics
        self._stopping = stopping
        self._held = held
        self._flows: dict[int, _Flow] = {}
        self._out: asyncio.Queue[_Reply | BaseException | None] = asyncio.Queue()
        self._slots = asyncio.Semaphore(MAX_COMMANDS_IN_FLIGHT)
        self._tasks: set[asyncio.Task[None]] = set()

    async def next_reply(self) -> _Reply | None:
        """The next reply to send; None once the stream is done. Raises a fatal error."""
        item = await self._out.get()
        if isinstance(item, BaseException):
            raise item
        return item

    async def pump(self, commands: AsyncIterator[append_pb2.AppendCommand]) -> bool:
        """Read and start every command, then wait for their replies.

        Returns True if it stopped because the broker is stopping, False when
        the client half-closed. The reply queue then ends with None.
        """
        stop: asyncio.Future[Any] = asyncio.ensure_future(self._stopping.wait())
        try:
            stopped = await self._read_commands(commands.__aiter__(), stop)
        except BrokerError as error:
            self._out.put_nowait(error)
            return False
        finally:
            stop.cancel()
            self.drop_held()
        if self._tasks:
            await asyncio.wait(self._tasks)
        self._out.put_nowait(None)
        return stopped

    def drop_held(self) -> None:
        """Drop every flow's held blocks (the stream ended, or died)."""
        for flow in self._flows.values():
            self._held.drop(flow.held)

    async def _read_commands(
        self, commands: AsyncIterator[append_pb2.AppendCommand], stop: asyncio.Future[Any]
    ) -> bool:
        while True:
            await self._slots.acquire()
            read = asyncio.ensure_future(anext(commands, None))
            await asyncio.wait((read, stop), return_when=asyncio.FIRST_COMPLETED)
            if not read.done():
                read.cancel()
                with contextlib.suppress(asyncio.CancelledError, grpc.aio.AioRpcError):
                    await read
                return True
            command = read.result()
            if command is None:
                return False
            kind = command.WhichOneof("command")
            if kind is None:
                raise InvalidArgumentError(f"AppendCommand {command.request_id} sets no command")
            self._dispatch(command, kind)

    def _dispatch(self, command: append_pb2.AppendCommand, kind: str) -> None:
        request_id = command.request_id
        flow_id = request_id >> 32
        work: Awaitable[_Reply]
        if kind == "setup_append":
            flow, work = self._bind(request_id, flow_id, command.setup_append)
        else:
            flow = self._flows.get(flow_id)
            block = command.append_block
            if flow is None:
                work = _ready(_Reply(
                    request_id=request_id, no_such_segment=append_pb2.NoSuchSegment(
                        message=f"no SetupAppend on flow {flow_id} of this stream")))
            else:
                answer = self._block(request_id, flow, block)
                if answer is None:
                    self._slots.release()
                    return
                work = answer
        task = asyncio.create_task(self._answer(flow, work))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _bind(
        self, request_id: int, flow_id: int, setup: append_pb2.SetupAppend
    ) -> tuple[_Flow | None, Awaitable[_Reply]]:
        """Bind the flow now, before the next command is read, and answer it later."""
        old = self._flows.get(flow_id)
        if len(setup.segment) > MAX_SEGMENT_NAME_CHARS:
            return old, _ready(_refusal(request_id, clip(setup.segment), InvalidArgumentError(
                f"segment name must be 1 to {MAX_SEGMENT_NAME_CHARS} characters, "
                f"got {len(setup.segment)}")))
        if not 1 <= len(setup.writer_id) <= MAX_WRITER_ID_CHARS:
            return old, _ready(_refusal(request_id, setup.segment, InvalidArgumentError(
                f"writer_id must be 1 to {MAX_WRITER_ID_CHARS} characters, "
                f"got {len(setup.writer_id)}")))
        if setup.txn_id and (len(setup.txn_id) != TXN_ID_BYTES or self._coordinator is None):
            return old, _ready(_refusal(request_id, setup.segment, InvalidArgumentError(
                f"txn_id must be {TXN_ID_BYTES} bytes (got {len(setup.txn_id)}) on a broker "
                "with transactions")))
        if old is None and len(self._flows) >= MAX_FLOWS:
            return old, _ready(_refusal(request_id, setup.segment, EventTooLargeError(
                len(self._flows) + 1, MAX_FLOWS, what="flow count")))
        if old is not None:
            self._held.drop(old.held)
        else:
            flows_bound(1)
        segment = asyncio.ensure_future(self._topics.writable_segment(
            setup.segment, "a transactional Append" if setup.txn_id else "Append"))
        flow = _Flow(setup.segment, setup.writer_id, segment,
                     tail=old.tail if old is not None else None, txn_id=setup.txn_id)
        self._flows[flow_id] = flow
        return flow, self._setup(request_id, flow)

    async def _answer(self, flow: _Flow | None, work: Awaitable[_Reply]) -> None:
        previous = flow.tail if flow is not None else None
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if flow is not None:
            flow.tail = done
        try:
            reply = await work
            if previous is not None:
                await previous
            self._out.put_nowait(reply)
        finally:
            done.set_result(None)
            self._slots.release()

    # ------------------------------------------------------------- commands

    async def _setup(self, request_id: int, flow: _Flow) -> _Reply:
        try:
            handle = await flow.segment
            last = await handle.last_event_number(flow.writer_id)
        except (BrokerError, LedgerError) as error:
            return _refusal(request_id, flow.segment_name, error)
        return _Reply(request_id=request_id, append_setup=append_pb2.AppendSetup(
            segment=flow.segment_name, last_event_number=last))

    def _block(
        self, request_id: int, flow: _Flow, command: append_pb2.AppendBlock
    ) -> Awaitable[_Reply] | None:
        """Hold the block, or start writing it with the held ones; None: nothing to answer."""
        block = Block(command.data, command.event_count)
        end = command.end
        if flow.failed is not None:  # the rest of a failed sequence
            if not end:
                return None
            error, flow.failed = flow.failed, None
            return _ready(_refusal(request_id, flow.segment_name, error))
        try:
            check_block_size(len(block.data))  # a held block too: refused before it is kept
            self._held.admit(flow.held, block, command.last_event_number, end)
        except BrokerError as error:
            self._held.drop(flow.held)
            if not end:
                flow.failed = error
            return _ready(_refusal(request_id, flow.segment_name, error))
        if not end:
            return None
        blocks = [*self._held.take(flow.held), block]
        return self._append(request_id, flow, blocks, command.last_event_number)

    async def _append(
        self, request_id: int, flow: _Flow, blocks: list[Block], last_event_number: int
    ) -> _Reply:
        try:
            segment = await flow.segment
            check_blocks(blocks, segment.config.max_event_bytes)
            if flow.txn_id and self._coordinator is not None:
                # Registers the segment with the transaction before writing to it.
                async with self._coordinator.writing(flow.txn_id, flow.segment_name):
                    result = await segment.append(blocks, flow.writer_id, last_event_number,
                                                  txn_id=flow.txn_id)
            else:
                result = await segment.append(blocks, flow.writer_id, last_event_number)
        except (BrokerError, LedgerError) as error:
            return _refusal(request_id, flow.segment_name, error)
        return _Reply(request_id=request_id, data_appended=append_pb2.DataAppended(
            event_number=result.event_number, offset=result.offset,
            event_count=result.event_count, duplicate=result.duplicate))


async def _ready(reply: _Reply) -> _Reply:
    return reply


def _refusal(request_id: int, segment: str, error: BrokerError | LedgerError) -> _Reply:
    """The failure reply the protocol has for ``error`` (counted in ``folio_errors_total``)."""
    observe_error(error)
    if isinstance(error, (NoSuchSegmentError, TopicNotFoundError)):
        return _Reply(request_id=request_id, no_such_segment=append_pb2.NoSuchSegment(
            segment=segment, message=clip_message(str(error))))
    if isinstance(error, SegmentSealedError):
        return _Reply(request_id=request_id, segment_is_sealed=append_pb2.SegmentIsSealed(
            segment=segment, end_offset=error.end_offset))
    if isinstance(error, (WrongHostError, LedgerFencedError)):
        owner = error.owner if isinstance(error, WrongHostError) else ""
        return _Reply(request_id=request_id, wrong_host=append_pb2.WrongHost(
            segment=segment, owner=owner))
    if isinstance(error, InvalidEventNumberError):
        return _Reply(request_id=request_id, invalid_event_number=append_pb2.InvalidEventNumber(
            expected_above=error.expected_above, message=clip_message(str(error))))
    return _failed(request_id, error)


def _failed(request_id: int, error: BaseException) -> _Reply:
    code, message = status_for(error)
    return _Reply(request_id=request_id, append_failed=append_pb2.AppendFailed(
        code=code.value[0], message=message, error=type(error).__name__,
        retriable=is_retriable(error), error_code=error_number(error)))
