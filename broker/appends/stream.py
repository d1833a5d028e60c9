"""One Append stream's work: many writers' flows multiplexed, held blocks, replies in flow order.

The servicer (``broker.services.append``) decodes each ``AppendCommand`` into
a ``SetupCommand`` or ``BlockCommand``, hands the stream an iterator of them,
and encodes every ``Outcome`` it gets back; everything between is here.

Each command carries a ``request_id`` (flow id << 32 | sequence) and its
outcome carries the same. ``SetupCommand`` binds a flow to a segment and
writer (and a transaction); blocks without ``end`` are held per flow and
written with its next ``end`` block as one entry (a transaction, PDP-44),
within the bounds of ``broker.appends.held``; a failure in the middle of such a
sequence drops it whole: its later held blocks get no outcome and its ``end``
block gets the same failure (a new setup on the flow starts afresh). Held
blocks of a stream that ends are dropped. Work is per block: a block's size
is checked (``broker.segments.block_limits``) and its bytes go to the
segment untouched. Commands are not awaited one by one: every append starts
as soon as it is read, so the blocks of many flows (and of one flow) meet in
the ledger's group commit; outcomes of one flow still leave in command order,
because each waits for the flow's previous one before it is queued.

**A transactional flow lands a prefix.** The blocks of a flow with a txn id
are pipelined, and the first one to a segment waits for the transaction's
log record naming the segment (``TxnCoordinator.writing``). If that block
fails (its log write failed with another call's cancelled group, say), the
blocks behind it must not land: after a broken connection the client learns
what landed only from ``AppendSetup.last_event_number``, and a later block
landed over an earlier missing one would make it count the missing one as
written (a committed transaction without those events). So the first
failure of a transactional flow refuses every later block of the flow with
that same failure, until a new ``SetupAppend`` (append.proto says so).
A plain flow does the same after a retriable refusal (a failed ledger, a
failed rollover): the writer resends the refused block after a new setup,
and counts a refused block at or below ``AppendSetup.last_event_number`` as
stored, which holds only if nothing landed over it.

**Refusals.** A failed command's outcome is a ``Refused`` naming its
``RefusalKind``: the protocol has a reply for a missing segment, a sealed
segment, a lost owner and a bad event number (``refusal_kind`` is that
ladder, in one place); anything else is a plain failure with the error's
status. Each refusal is counted in ``folio_errors_total``.

**Shutdown.** When ``stopping`` is set, the stream stops reading commands,
lets the appends it started finish and queues their outcomes, then ends
(``pump`` returns True: the servicer ends the call UNAVAILABLE).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol

from broker.api import AppendResult, Block, SegmentHandle, Topics
from broker.appends.held import HeldBudget, HeldRun
from broker.clip import clip
from broker.errors import (
    BrokerError,
    BrokerShuttingDownError,
    EventTooLargeError,
    InvalidArgumentError,
    InvalidEventNumberError,
    NoSuchSegmentError,
    PermissionDeniedError,
    SegmentSealedError,
    TopicNotFoundError,
    WrongHostError,
)
from broker.metrics import flows_bound, observe_error
from broker.segments.block_limits import check_block_size, check_blocks
from broker.segments.names import MAX_SEGMENT_NAME_CHARS
from broker.status import is_retriable
from ledger.errors import LedgerDeletedError, LedgerError, LedgerFencedError
from txnbuffer.api import TxnId


class TxnWrites(Protocol):
    """Around each transactional append (``TxnCoordinator``; a cluster: ``TxnParticipant``)."""

    def writing(self, txn_id: TxnId, segment: str,
                loaded: object = None) -> AbstractAsyncContextManager[None]:
        """Refuses unless the transaction may write ``segment``; counts the append in flight."""
        ...

__all__ = [
    "MAX_COMMANDS_IN_FLIGHT",
    "MAX_FLOWS",
    "MAX_WRITER_ID_CHARS",
    "AppendEngine",
    "Appended",
    "BlockCommand",
    "Command",
    "NotBound",
    "Outcome",
    "RefusalKind",
    "Refused",
    "SetupCommand",
    "SetupDone",
    "TxnWrites",
    "refusal_kind",
]

log = logging.getLogger(__name__)

#: Commands of one stream being worked on at once; reading pauses beyond it.
MAX_COMMANDS_IN_FLIGHT = 1024
#: Flows one stream may bind.
MAX_FLOWS = 65536
#: Longest writer id.
MAX_WRITER_ID_CHARS = 128


@dataclass(frozen=True, slots=True)
class SetupCommand:
    """``SetupAppend``: bind flow ``request_id >> 32`` to ``segment`` and ``writer_id``."""

    request_id: int
    segment: str
    writer_id: str
    #: The transaction the flow appends in, or None.
    txn_id: TxnId | None = None
    #: Why the request's txn id is not one (the servicer decodes it): the setup is refused.
    txn_id_error: InvalidArgumentError | None = None


@dataclass(frozen=True, slots=True)
class BlockCommand:
    """``AppendBlock``: one block of the flow; held until an ``end`` block."""

    request_id: int
    data: bytes
    event_count: int
    last_event_number: int
    end: bool


Command = SetupCommand | BlockCommand


class RefusalKind(Enum):
    """Which failure reply the protocol has for a refused command."""

    NO_SUCH_SEGMENT = "no_such_segment"
    SEGMENT_SEALED = "segment_is_sealed"
    WRONG_HOST = "wrong_host"
    INVALID_EVENT_NUMBER = "invalid_event_number"
    #: Any other error: the plain failure, with the error's status.
    FAILED = "append_failed"


def refusal_kind(error: BrokerError | LedgerError) -> RefusalKind:
    """The protocol's reply for ``error`` (the one place that decides it)."""
    if isinstance(error, (NoSuchSegmentError, TopicNotFoundError, LedgerDeletedError)):
        return RefusalKind.NO_SUCH_SEGMENT
    if isinstance(error, SegmentSealedError):
        return RefusalKind.SEGMENT_SEALED
    if isinstance(error, (WrongHostError, LedgerFencedError)):
        return RefusalKind.WRONG_HOST
    if isinstance(error, InvalidEventNumberError):
        return RefusalKind.INVALID_EVENT_NUMBER
    return RefusalKind.FAILED


@dataclass(frozen=True, slots=True)
class SetupDone:
    """The flow is bound; the writer's last recorded event number (-1: none)."""

    request_id: int
    segment: str
    last_event_number: int


@dataclass(frozen=True, slots=True)
class Appended:
    """The blocks (held ones and the ``end`` block) are durable, or were a duplicate."""

    request_id: int
    result: AppendResult


@dataclass(frozen=True, slots=True)
class Refused:
    """The command failed with ``error``; ``kind`` says which reply the protocol has."""

    request_id: int
    segment: str
    error: BrokerError | LedgerError
    kind: RefusalKind


@dataclass(frozen=True, slots=True)
class NotBound:
    """A block on a flow that no setup bound on this stream."""

    request_id: int
    flow_id: int


Outcome = SetupDone | Appended | Refused | NotBound


@dataclass(slots=True, eq=False)
class _Flow:
    """One writer on one segment, as bound by a setup."""

    segment_name: str
    writer_id: str
    # The segment and the writer's last event number as the setup read it; the
    # flow's blocks wait for it (landed first, the answer would count them).
    opened: asyncio.Future[tuple[SegmentHandle, int]]
    held: HeldRun = field(default_factory=HeldRun)
    # The transaction the flow appends in, or None.
    txn_id: TxnId | None = None
    # Why the block sequence under way failed: its later blocks are dropped
    # and its end block gets this failure.
    failed: BrokerError | None = None
    # A transactional flow's first failed append: every later block gets it
    # too, so the blocks that land are a prefix of those sent (module docstring).
    txn_failed: BrokerError | LedgerError | None = None
    # A plain flow's first retriable refusal: the same for its later blocks.
    refused: BrokerError | LedgerError | None = None
    # Done once the flow's latest outcome is queued: the next one waits on it.
    tail: asyncio.Future[None] | None = None


class AppendEngine:
    """The broker end of an Append stream: runs its commands, queues outcomes in flow order.

    Args:
        topics: the broker's topics.
        stopping: set when the broker shuts down; the stream then winds down.
        held: the broker-wide budget of held blocks.
        coordinator: the transaction coordinator (in a cluster the segment
            owner's ``TxnParticipant``); None: no transactional flows.
        authorize: checks each SetupAppend's segment (``broker.auth``: produce
            on its topic), raising ``PermissionDeniedError``; once per flow
            setup, never per block. None: no check.
    """

    def __init__(self, topics: Topics, stopping: asyncio.Event, held: HeldBudget,
                 coordinator: TxnWrites | None = None, *,
                 authorize: Callable[[str], None] | None = None) -> None:
        self._coordinator = coordinator
        self._authorize = authorize
        self._topics = topics
        self._stopping = stopping
        self._held = held
        self._flows: dict[int, _Flow] = {}
        self._out: asyncio.Queue[Outcome | BaseException | None] = asyncio.Queue()
        self._slots = asyncio.Semaphore(MAX_COMMANDS_IN_FLIGHT)
        self._tasks: set[asyncio.Task[None]] = set()

    async def next_outcome(self) -> Outcome | None:
        """The next outcome to send; None once the stream is done. Raises a fatal error."""
        item = await self._out.get()
        if isinstance(item, BaseException):
            raise item
        return item

    async def pump(self, commands: AsyncIterator[Command]) -> bool:
        """Read and start every command, then wait for their outcomes.

        Returns True if it stopped because the broker is stopping, False when
        the client half-closed. The outcome queue then ends with None. A
        ``BrokerError`` out of ``commands`` (an undecodable command) ends the
        stream: ``next_outcome`` raises it.
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

    def close(self) -> None:
        """The stream is over: its flows no longer count as bound."""
        flows_bound(-len(self._flows))

    async def _read_commands(
        self, commands: AsyncIterator[Command], stop: asyncio.Future[Any]
    ) -> bool:
        """Read and dispatch commands until the client half-closes (False) or ``stop`` (True).

        One task reads them all, raced against ``stop`` once: a task and a
        wait per command would cost each block two more turns of the event
        loop (and their allocations) on its way to the ledger.
        """
        reading = asyncio.ensure_future(self._read_all(commands))
        try:
            await asyncio.wait((reading, stop), return_when=asyncio.FIRST_COMPLETED)
            if reading.done():
                return reading.result()
        finally:
            if not reading.done():  # stopped, or this task cancelled: the read goes too
                # It ends between two commands (dispatching is synchronous); ``wait``
                # neither raises how (no matter) nor swallows this task's cancellation.
                reading.cancel()
                await asyncio.wait((reading,))
                if not reading.cancelled():
                    reading.exception()
        return True

    async def _read_all(self, commands: AsyncIterator[Command]) -> bool:
        """Every command, dispatched as read (at most ``MAX_COMMANDS_IN_FLIGHT`` at once)."""
        while True:
            await self._slots.acquire()
            command = await anext(commands, None)
            if command is None:
                return False
            self._dispatch(command)

    def _dispatch(self, command: Command) -> None:
        request_id = command.request_id
        flow_id = request_id >> 32
        work: Awaitable[Outcome]
        flow: _Flow | None
        if isinstance(command, SetupCommand):
            flow, work = self._bind(request_id, flow_id, command)
        else:
            flow = self._flows.get(flow_id)
            if flow is None:
                work = _ready(NotBound(request_id, flow_id))
            else:
                answer = self._block(request_id, flow, command)
                if answer is None:
                    self._slots.release()
                    return
                work = answer
        task = asyncio.create_task(self._answer(flow, work))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _bind(
        self, request_id: int, flow_id: int, setup: SetupCommand
    ) -> tuple[_Flow | None, Awaitable[Outcome]]:
        """Bind the flow now, before the next command is read, and answer it later."""
        old = self._flows.get(flow_id)
        if len(setup.segment) > MAX_SEGMENT_NAME_CHARS:
            return old, _ready(_refused(request_id, clip(setup.segment), InvalidArgumentError(
                f"segment name must be 1 to {MAX_SEGMENT_NAME_CHARS} characters, "
                f"got {len(setup.segment)}")))
        if not 1 <= len(setup.writer_id) <= MAX_WRITER_ID_CHARS:
            return old, _ready(_refused(request_id, setup.segment, InvalidArgumentError(
                f"writer_id must be 1 to {MAX_WRITER_ID_CHARS} characters, "
                f"got {len(setup.writer_id)}")))
        if setup.txn_id_error is not None:
            return old, _ready(_refused(request_id, setup.segment, setup.txn_id_error))
        if setup.txn_id is not None and self._coordinator is None:
            return old, _ready(_refused(request_id, setup.segment, InvalidArgumentError(
                "a txn_id needs a broker with transactions; this one has none")))
        if self._authorize is not None:
            try:
                self._authorize(setup.segment)
            except PermissionDeniedError as error:
                return old, _ready(_refused(request_id, setup.segment, error))
        if old is None and len(self._flows) >= MAX_FLOWS:
            return old, _ready(_refused(request_id, setup.segment, EventTooLargeError(
                len(self._flows) + 1, MAX_FLOWS, what="flow count")))
        if old is not None:
            self._held.drop(old.held)
        else:
            flows_bound(1)
        opened = asyncio.ensure_future(self._open(
            setup.segment, setup.writer_id,
            "a transactional Append" if setup.txn_id is not None else "Append"))
        flow = _Flow(setup.segment, setup.writer_id, opened,
                     tail=old.tail if old is not None else None, txn_id=setup.txn_id)
        self._flows[flow_id] = flow
        return flow, self._setup(request_id, flow)

    async def _answer(self, flow: _Flow | None, work: Awaitable[Outcome]) -> None:
        previous = flow.tail if flow is not None else None
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if flow is not None:
            flow.tail = done
        try:
            outcome = await work
            if previous is not None:
                await previous
            self._out.put_nowait(outcome)
        finally:
            done.set_result(None)
            self._slots.release()

    # ------------------------------------------------------------- commands

    async def _open(self, name: str, writer_id: str, what: str) -> tuple[SegmentHandle, int]:
        handle = await self._topics.writable_segment(name, what)
        return handle, await handle.last_event_number(writer_id)

    async def _setup(self, request_id: int, flow: _Flow) -> Outcome:
        try:
            _, last = await flow.opened
        except (BrokerError, LedgerError) as error:
            return _refused(request_id, flow.segment_name, error)
        return SetupDone(request_id, flow.segment_name, last)

    def _block(
        self, request_id: int, flow: _Flow, command: BlockCommand
    ) -> Awaitable[Outcome] | None:
        """Hold the block, or start writing it with the held ones; None: nothing to answer."""
        block = Block(command.data, command.event_count)
        end = command.end
        if flow.failed is not None:  # the rest of a failed sequence
            if not end:
                return None
            error, flow.failed = flow.failed, None
            return _ready(_refused(request_id, flow.segment_name, error))
        try:
            check_block_size(len(block.data))  # a held block too: refused before it is kept
            self._held.admit(flow.held, block, command.last_event_number, end)
        except BrokerError as error:
            self._held.drop(flow.held)
            if not end:
                flow.failed = error
            return _ready(_refused(request_id, flow.segment_name, error))
        if not end:
            return None
        blocks = [*self._held.take(flow.held), block]
        return self._append(request_id, flow, blocks, command.last_event_number)

    async def _append(
        self, request_id: int, flow: _Flow, blocks: list[Block], last_event_number: int
    ) -> Outcome:
        if flow.txn_id is None or self._coordinator is None:
            try:
                if flow.refused is not None:
                    raise flow.refused
                segment, _ = await flow.opened
                check_blocks(blocks, segment.config.max_event_bytes)
                result = await segment.append(blocks, flow.writer_id, last_event_number)
            except (BrokerError, LedgerError) as error:
                if flow.refused is None and is_retriable(error):
                    # The writer resends it after a new setup: a later block must
                    # not land before it does (module docstring).
                    flow.refused = error
                return _refused(request_id, flow.segment_name, error)
            return Appended(request_id, result)
        return await self._append_in_txn(request_id, flow, flow.txn_id, self._coordinator,
                                         blocks, last_event_number)

    async def _append_in_txn(
        self, request_id: int, flow: _Flow, txn_id: TxnId, coordinator: TxnWrites,
        blocks: list[Block], last_event_number: int,
    ) -> Outcome:
        """A transactional block: refused once an earlier block of the flow failed."""
        try:
            _check_txn_flow(flow)
            segment, _ = await flow.opened
            check_blocks(blocks, segment.config.max_event_bytes)
            # Registers the segment with the transaction before writing to it.
            async with coordinator.writing(txn_id, flow.segment_name, segment):
                _check_txn_flow(flow)  # an earlier block failed while this one waited
                result = await segment.append(blocks, flow.writer_id, last_event_number,
                                              txn_id=txn_id)
        except (BrokerError, LedgerError) as error:
            if flow.txn_failed is None:
                flow.txn_failed = error
                log.info("transactional flow of writer %r to %s failed (%s); its later "
                         "blocks are refused until a new SetupAppend", flow.writer_id,
                         flow.segment_name, error)
            return _refused(request_id, flow.segment_name, error)
        except BaseException:
            if flow.txn_failed is None:
                flow.txn_failed = BrokerShuttingDownError(
                    "an earlier block of this transactional flow was cancelled")
            raise
        return Appended(request_id, result)


def _check_txn_flow(flow: _Flow) -> None:
    """Raise the flow's first failure, if it had one (a transactional flow lands a prefix)."""
    if flow.txn_failed is not None:
        raise flow.txn_failed


async def _ready(outcome: Outcome) -> Outcome:
    return outcome


def _refused(request_id: int, segment: str, error: BrokerError | LedgerError) -> Refused:
    """The outcome of a failed command (counted in ``folio_errors_total``)."""
    observe_error(error)
    return Refused(request_id, segment, error, refusal_kind(error))
