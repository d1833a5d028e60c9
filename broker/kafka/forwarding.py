"""Forwarding a Produce batch to the broker that owns its partition's heir (docs/kafka.md).

In a cluster, a batch for a sealed partition ``P`` reaches ``P``'s owner (its
leader in Metadata), but ``P``'s heir (``broker.kafka.succession``) may be in
a container another broker owns. ``P``'s owner then sends the rest of the
heir walk there: ``AppendKafkaBatch`` (proto/broker/v1/kafka_internal.proto)
with the heir, the stream's writer id there (``kafka:<id>:<epoch>@<P>``),
its last event number there, and the block as the producer sent it. The
callee continues the walk at the heir (``serve``): it appends if the heir is
open, else checks and passes on to the heir's heir (forwarding again if a
third broker owns that one). The producer's answer waits for the callee's.

Three outcomes of the hop (``HeirForwarder.forward``):

- **answered**: the callee's Kafka outcome (written, a duplicate, or a Kafka
  error code; ``REQUEST_TIMED_OUT`` from it means its own append's outcome is
  unknown, treated as below);
- **refused as not the owner** (WRONG_HOST), or answered
  NOT_LEADER_OR_FOLLOWER (the callee's walk met a segment moving or handed
  over): nothing written; asked again of the owner it names (or the owner
  cache's) until the deadline, then NOT_LEADER_OR_FOLLOWER;
- **unknown** (the call timed out, the connection was cut, the callee went
  down: maybe applied). For an idempotent stream the same call is made again
  (to whoever owns the heir then) until it is answered: the heir holds the
  stream as a contiguous writer, so a copy it already holds is answered as a
  duplicate (its offset, or DUPLICATE_SEQUENCE_NUMBER) and never stored
  twice. Past ``FORWARD_TIMEOUT_S`` the producer is answered
  REQUEST_TIMED_OUT, never a "not written" code: its own resend comes back
  through the same walk and is de-duplicated the same way. A producer
  without idempotence has no numbers to de-duplicate with: it is answered
  REQUEST_TIMED_OUT at once, and its resend may store the batch twice, as a
  Kafka broker's lost answer does to such a producer (at least once).

Crash windows: ``P``'s owner may die after the callee appended and before
it answered the producer; the producer resends to ``P``'s new owner, whose
walk reaches the same heir (heirs never change) under the same writer id and
numbers, and the heir drops the copy. The callee may die after its append is
durable and before it answers: the next call (here, at once, or the
producer's resend) goes to the heir's next owner, whose load of the heir
recovered that append, and is answered as a duplicate.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Final

from kio.schema.errors import ErrorCode

from broker._proto.v1 import kafka_internal_pb2
from broker.api import SegmentHandle, Topics
from broker.errors import BrokerError, InvalidArgumentError, WrongHostError
from broker.kafka.error_codes import error_code
from broker.kafka.succession import Forward, Outcome, StreamAppend, walk
from ledger.errors import LedgerError

__all__ = ["FORWARD_TIMEOUT_S", "HeirForwarder", "SendBatch", "serve"]

log = logging.getLogger(__name__)

#: How long a forwarded batch is retried before the producer hears REQUEST_TIMED_OUT.
FORWARD_TIMEOUT_S: Final = 15.0
_FIRST_DELAY_S: Final = 0.05
_MAX_DELAY_S: Final = 1.0

#: One ``AppendKafkaBatch`` call on the broker at an address. Raises
#: ``WrongHostError`` (not its owner: nothing written), other ``BrokerError``s
#: it answered (``NoSuchSegmentError``, ``InvalidArgumentError``, refused: nothing
#: written), ``BrokerShuttingDownError`` when the outcome is unknown.
SendBatch = Callable[[str, kafka_internal_pb2.AppendKafkaBatchRequest],
                     Awaitable[kafka_internal_pb2.AppendKafkaBatchResponse]]
#: The owner's address of a segment now, "" when unknown (the owner cache).
OwnerOf = Callable[[str], str]


class HeirForwarder:
    """Sends heir walks to the brokers that own the heirs (see the module docstring).

    Args:
        send: the ``AppendKafkaBatch`` call (``PeerClients.append_kafka_batch``).
        owner_of: the owner cache's answer for a segment.
        timeout_s: how long one batch is tried before REQUEST_TIMED_OUT.
    """

    def __init__(self, send: SendBatch, owner_of: OwnerOf, *,
                 timeout_s: float = FORWARD_TIMEOUT_S) -> None:
        self._send = send
        self._owner_of = owner_of
        self._timeout_s = timeout_s

    def forward_of(self, data: bytes, event_count: int) -> Forward:
        """The ``Forward`` of one batch (``broker.kafka.succession.walk``)."""
        async def forward(segment: str, owner: str, writer: str, last: int) -> Outcome:
            return await self.forward(segment, owner, writer, last, event_count, data)
        return forward

    async def forward(self, segment: str, owner: str, writer: str, last: int,
                      event_count: int, data: bytes) -> Outcome:
        """The outcome of the walk continued at ``segment`` on its owner."""
        request = kafka_internal_pb2.AppendKafkaBatchRequest(
            segment=segment, writer_id=writer, last_event_number=last,
            event_count=event_count, data=data)
        deadline = time.monotonic() + self._timeout_s
        delay_s = _FIRST_DELAY_S
        hint = owner
        #: An earlier call may have been applied: never answered "not written".
        maybe_applied = False
        while True:
            address = hint or self._owner_of(segment)
            hint = ""
            unknown = False
            if not address:
                failure: str = f"no owner of {segment} known"
            else:
                try:
                    answer = await self._send(address, request)
                except WrongHostError as elsewhere:
                    # Nothing written there: ask the owner it names.
                    failure = str(elsewhere)
                    hint = elsewhere.owner if elsewhere.owner != address else ""
                except (BrokerError, LedgerError) as error:
                    if not error.retriable:
                        # Refused (the segment was deleted, a bad request): not written.
                        return error_code(error), -1, f"{segment} on {address}: {error}"
                    # No answer: maybe appended there.
                    failure, unknown = f"{address}: {error}", True
                else:
                    code = ErrorCode(answer.error_code)
                    failure = f"{address}: {answer.error_message}"
                    if code is ErrorCode.request_timed_out:
                        # The callee's own append has an unknown outcome.
                        unknown = True
                    elif code is not ErrorCode.not_leader_or_follower:
                        return (code, answer.base_offset,
                                f"{failure}" if answer.error_message else None)
                    # else: the callee's walk met a segment moving or handed
                    # over (nothing written): asked again.
            maybe_applied = maybe_applied or unknown
            if unknown and not writer:
                # Without sequence numbers a second call could store it twice.
                return (ErrorCode.request_timed_out, -1,
                        f"the outcome of the batch forwarded to {segment} is unknown: "
                        f"{failure}")
            if time.monotonic() + delay_s > deadline:
                log.warning("kafka: a batch forwarded to %s (writer %s) is not answered "
                            "after %g s: %s", segment, writer, self._timeout_s, failure)
                return (ErrorCode.request_timed_out if maybe_applied
                        else ErrorCode.not_leader_or_follower, -1,
                        f"the batch forwarded to {segment} is not answered "
                        f"({'outcome unknown' if maybe_applied else 'not written'}): "
                        f"{failure}")
            log.debug("kafka: a batch forwarded to %s is asked again in %.2f s: %s",
                      segment, delay_s, failure)
            await asyncio.sleep(delay_s)
            delay_s = min(delay_s * 2, _MAX_DELAY_S)


#: Appends the block to an open segment as produce does: (segment handle,
#: segment name, writer id, last event number, event count, data) -> outcome.
AppendBlock = Callable[[SegmentHandle, str, str, int, int, bytes], Awaitable[Outcome]]


async def serve(topics: Topics, append: AppendBlock, forwarder: HeirForwarder | None,
                request: kafka_internal_pb2.AppendKafkaBatchRequest
                ) -> kafka_internal_pb2.AppendKafkaBatchResponse:
    """The callee's side of ``AppendKafkaBatch``: the walk continued at ``request.segment``.

    Raises:
        WrongHostError: this broker does not own ``request.segment`` (nothing written).
        InvalidArgumentError: no segment, data or events.
    """
    if not request.segment or not request.data or request.event_count <= 0:
        raise InvalidArgumentError(
            "AppendKafkaBatch needs a segment, data and a positive event_count")
    writer, count, data = request.writer_id, request.event_count, request.data

    async def append_here(segment: SegmentHandle, name: str, stream: str,
                          last: int) -> Outcome:
        return await append(segment, name, stream, last, count, data)

    step: StreamAppend = append_here
    try:
        code, offset, message = await walk(
            topics, request.segment, writer, request.last_event_number if writer else -1,
            count, step, partition=False,
            forward=None if forwarder is None else forwarder.forward_of(data, count))
    except WrongHostError as error:
        if error.segment == request.segment:
            raise
        code, offset, message = error_code(error), -1, str(error)
    except (BrokerError, LedgerError) as error:
        code, offset, message = error_code(error), -1, str(error)
    return kafka_internal_pb2.AppendKafkaBatchResponse(
        error_code=int(code), base_offset=offset, error_message=message or "")
