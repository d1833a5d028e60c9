"""The ``folio.v1.Append`` servicer: decode commands, run the stream, encode outcomes.

The stream's work (flows multiplexed, held blocks, outcomes in flow order,
which failure reply each error gets, shutdown) is ``broker.appends.stream``;
the protocol itself is ``proto/folio/v1/append.proto``. Here each
``AppendCommand`` becomes a ``SetupCommand`` or ``BlockCommand`` (a command
that sets neither ends the stream INVALID_ARGUMENT) and each outcome its
``AppendReply``, with constant work per command.

**Shutdown.** When the broker stops, the stream stops reading commands, lets
the appends it started finish and their replies go out, then the call ends
UNAVAILABLE (``BrokerShuttingDownError``). A writer reconnects (elsewhere),
and ``SetupAppend`` tells it which of its blocks to resend. Appends cut short
by a hard kill are resent the same way; the ones that did reach the ledger
are answered as duplicates.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc

from broker.api import Topics
from broker.appends.held import DEFAULT_MAX_HELD_BYTES, DEFAULT_MAX_HELD_MS, HeldBudget
from broker.appends.stream import (
    Appended,
    AppendEngine,
    BlockCommand,
    Command,
    NotBound,
    Outcome,
    RefusalKind,
    Refused,
    SetupCommand,
    SetupDone,
    TxnWrites,
)
from broker.auth.authorizer import setup_check
from broker.clip import clip_message
from broker.errors import (
    BrokerError,
    BrokerShuttingDownError,
    InvalidArgumentError,
    InvalidEventNumberError,
    SegmentSealedError,
    WrongHostError,
)
from broker.segments.transactions import check_txn_id
from broker.services._servicer import abort_with
from broker.status import error_number, is_retriable, status_for
from folio.api.v1 import append_pb2, append_pb2_grpc
from txnbuffer.api import TxnId

__all__ = ["AppendServicer"]

_Context = grpc.aio.ServicerContext[Any, Any]
_Reply = append_pb2.AppendReply


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
                 coordinator: TxnWrites | None = None) -> None:
        self._topics = topics
        self._stopping = stopping
        self._coordinator = coordinator
        self.held = HeldBudget(max_held_bytes, max_held_ms, clock)

    async def Append(
        self, request_iterator: AsyncIterator[append_pb2.AppendCommand], context: _Context
    ) -> AsyncIterator[_Reply]:
        stream = AppendEngine(self._topics, self._stopping, self.held, self._coordinator,
                              authorize=setup_check())
        pump = asyncio.create_task(stream.pump(_decode(request_iterator)))
        try:
            while (outcome := await stream.next_outcome()) is not None:
                yield _encode(outcome)
            stopped = await pump
        except BrokerError as error:
            await abort_with(context, error)
        finally:
            # The call is over (or gone): its pump winds down before the call
            # ends, so its held blocks are dropped by then. ``wait`` neither
            # raises the pump's end nor swallows a cancellation of this call.
            pump.cancel()
            await asyncio.wait((pump,))
            if not pump.cancelled():
                pump.exception()
            stream.close()
        if stopped:
            await abort_with(context, BrokerShuttingDownError("the broker is stopping"))


async def _decode(commands: AsyncIterator[append_pb2.AppendCommand]) -> AsyncIterator[Command]:
    """The stream's commands, decoded; ``InvalidArgumentError`` at one that sets none."""
    async for command in commands:
        kind = command.WhichOneof("command")
        if kind is None:
            raise InvalidArgumentError(f"AppendCommand {command.request_id} sets no command")
        if kind == "setup_append":
            setup = command.setup_append
            txn_id, txn_id_error = _txn_id(setup.txn_id)
            yield SetupCommand(command.request_id, setup.segment, setup.writer_id, txn_id,
                               txn_id_error)
        else:
            block = command.append_block
            yield BlockCommand(command.request_id, block.data, block.event_count,
                               block.last_event_number, block.end)


def _txn_id(raw: bytes) -> tuple[TxnId | None, InvalidArgumentError | None]:
    """A setup's txn id (None: not transactional), or why its bytes are not one.

    A bad id refuses that setup only (a reply on its flow), not the stream.
    """
    if not raw:
        return None, None
    try:
        return check_txn_id(raw), None
    except InvalidArgumentError as error:
        return None, error


def _encode(outcome: Outcome) -> _Reply:
    """The reply for ``outcome``."""
    request_id = outcome.request_id
    if isinstance(outcome, Appended):
        result = outcome.result
        # The wire says -1 for a duplicate (append.proto), whatever the segment
        # remembers of the first copy's offset (that is for Kafka producers).
        return _Reply(request_id=request_id, data_appended=append_pb2.DataAppended(
            event_number=result.event_number, offset=-1 if result.duplicate else result.offset,
            event_count=result.event_count, duplicate=result.duplicate))
    if isinstance(outcome, SetupDone):
        return _Reply(request_id=request_id, append_setup=append_pb2.AppendSetup(
            segment=outcome.segment, last_event_number=outcome.last_event_number))
    if isinstance(outcome, NotBound):
        return _Reply(request_id=request_id, no_such_segment=append_pb2.NoSuchSegment(
            message=f"no SetupAppend on flow {outcome.flow_id} of this stream"))
    return _refusal(outcome)


def _refusal(refused: Refused) -> _Reply:
    """The failure reply ``refused.kind`` names."""
    request_id, segment, error = refused.request_id, refused.segment, refused.error
    kind = refused.kind
    if kind is RefusalKind.NO_SUCH_SEGMENT:
        return _Reply(request_id=request_id, no_such_segment=append_pb2.NoSuchSegment(
            segment=segment, message=clip_message(str(error))))
    if kind is RefusalKind.SEGMENT_SEALED and isinstance(error, SegmentSealedError):
        return _Reply(request_id=request_id, segment_is_sealed=append_pb2.SegmentIsSealed(
            segment=segment, end_offset=error.end_offset))
    if kind is RefusalKind.WRONG_HOST:
        owner = error.owner if isinstance(error, WrongHostError) else ""
        return _Reply(request_id=request_id, wrong_host=append_pb2.WrongHost(
            segment=segment, owner=owner))
    if kind is RefusalKind.INVALID_EVENT_NUMBER and isinstance(error, InvalidEventNumberError):
        return _Reply(request_id=request_id, invalid_event_number=append_pb2.InvalidEventNumber(
            expected_above=error.expected_above, message=clip_message(str(error))))
    code, message = status_for(error)
    return _Reply(request_id=request_id, append_failed=append_pb2.AppendFailed(
        code=code.value[0], message=message, error=type(error).__name__,
        retriable=is_retriable(error), error_code=error_number(error)))
