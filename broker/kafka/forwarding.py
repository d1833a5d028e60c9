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

**Transactional batches** are forwarded the same way, with the producer's
open Folio transaction as ``P``'s owner found it (``ForwardedTxn``: the
transaction, the transactional id, producer id and epoch). The callee places
the batch as a direct transactional batch (``AppendBlock``'s ``txn``: the
Kafka transaction coordinator asked for the producer's open transaction,
``FindKafkaTxn``; the heir registered with the transaction coordinator; the
append inside the participant's ``writing``; the heir's marker written there
at EndTxn), and refuses it (INVALID_TXN_STATE, nothing written) when the open
transaction is not the one the batch was sent in: a late copy of a call
never joins the producer's next transaction. A resend of a call whose answer
was lost is de-duplicated by the heir's writer state (producer id, epoch and
sequences) and, once the transaction's marker closed the heir for it, refused
(the participant): the transaction holds the batch once or not at all. A
producer never commits with a batch unanswered (librdkafka and the Java
client wait for every delivery first, and a failed one makes the transaction
abortable), so a commit holds every batch answered as written, once; a batch
answered REQUEST_TIMED_OUT (outcome unknown) is sent again by the producer,
de-duplicated, or the producer aborts.

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
from dataclasses import dataclass
from typing import Final

from kio.schema.errors import ErrorCode

from broker._proto.v1 import kafka_internal_pb2
from broker.api import SegmentHandle, Topics
from broker.errors import BrokerError, InvalidArgumentError, WrongHostError
from broker.kafka.error_codes import error_code
from broker.kafka.succession import Forward, Outcome, StreamAppend, walk
from ledger.errors import LedgerError
from txnbuffer.api import TxnId
from txnbuffer.txn_ids import txn_id_from_bytes, txn_id_to_bytes

__all__ = ["FORWARD_TIMEOUT_S", "AbortTxn", "AppendBlock", "ForwardedTxn", "HeirForwarder",
           "SendBatch", "aborting_if_unknown", "serve"]

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


@dataclass(frozen=True, slots=True)
class ForwardedTxn:
    """A transactional batch's transaction, as the partition's owner found it."""

    txn_id: TxnId
    transactional_id: str
    producer_id: int
    producer_epoch: int


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

    def forward_of(self, data: bytes, event_count: int,
                   txn: ForwardedTxn | None = None) -> Forward:
        """The ``Forward`` of one batch (``broker.kafka.succession.walk``).

        ``txn``: a transactional batch's transaction (None: not transactional).
        """
        async def forward(segment: str, owner: str, writer: str, last: int) -> Outcome:
            return await self.forward(segment, owner, writer, last, event_count, data, txn)
        return forward

    async def forward(self, segment: str, owner: str, writer: str, last: int,
                      event_count: int, data: bytes,
                      txn: ForwardedTxn | None = None) -> Outcome:
        """The outcome of the walk continued at ``segment`` on its owner."""
        request = kafka_internal_pb2.AppendKafkaBatchRequest(
            segment=segment, writer_id=writer, last_event_number=last,
            event_count=event_count, data=data)
        if txn is not None:
            request.txn_id = txn_id_to_bytes(txn.txn_id)
            request.transactional_id = txn.transactional_id
            request.producer_id = txn.producer_id
            request.producer_epoch = txn.producer_epoch
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


#: Aborts a transaction at the transaction coordinator; True once it is aborted.
AbortTxn = Callable[[TxnId], Awaitable[bool]]


def aborting_if_unknown(forward: Forward, txn: ForwardedTxn, abort: AbortTxn) -> Forward:
    """``forward`` of a transactional batch: an outcome still unknown aborts its transaction.

    REQUEST_TIMED_OUT from the hop means the heir may hold the batch or not,
    and may still take a copy in flight until the transaction's marker closes
    it there. A commit would then hold the batch or not, by chance; so the
    transaction is aborted before the producer is answered (it learns it at
    its next request, INVALID_TXN_STATE, and aborts). Crash window: this
    broker dies before the abort: the producer's connection is lost with its
    batch unanswered, it resends, and the resend walks to the same heir (de-
    duplicated there) or is refused; a producer commits only once every
    batch is answered.
    """
    async def forward_or_abort(segment: str, owner: str, writer: str, last: int) -> Outcome:
        code, offset, message = await forward(segment, owner, writer, last)
        if code is ErrorCode.request_timed_out:
            aborted = await abort(txn.txn_id)
            message = (f"{message}; its transaction "
                       f"{'was aborted' if aborted else 'could not be aborted'}")
        return code, offset, message
    return forward_or_abort


#: Appends the block to an open segment as produce does: (segment handle,
#: segment name, writer id, last event number, event count, data, the
#: transactional batch's transaction or None) -> outcome; raises
#: ``SegmentSealedError`` if the segment is sealed (nothing written).
AppendBlock = Callable[[SegmentHandle, str, str, int, int, bytes, ForwardedTxn | None],
                       Awaitable[Outcome]]


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
    txn = _txn_of(request)

    async def append_here(segment: SegmentHandle, name: str, stream: str,
                          last: int) -> Outcome:
        return await append(segment, name, stream, last, count, data, txn)

    step: StreamAppend = append_here
    try:
        code, offset, message = await walk(
            topics, request.segment, writer, request.last_event_number if writer else -1,
            count, step, partition=False,
            forward=None if forwarder is None else forwarder.forward_of(data, count, txn))
    except WrongHostError as error:
        if error.segment == request.segment:
            raise
        code, offset, message = error_code(error), -1, str(error)
    except (BrokerError, LedgerError) as error:
        code, offset, message = error_code(error), -1, str(error)
    return kafka_internal_pb2.AppendKafkaBatchResponse(
        error_code=int(code), base_offset=offset, error_message=message or "")


def _txn_of(request: kafka_internal_pb2.AppendKafkaBatchRequest) -> ForwardedTxn | None:
    """A transactional batch's transaction (None: not transactional).

    Raises ``InvalidArgumentError`` for a malformed transaction id, or one
    without a transactional id or producer sequences (a transactional
    producer is idempotent).
    """
    if not request.txn_id:
        return None
    txn_id = txn_id_from_bytes(request.txn_id) if len(request.txn_id) == 16 else None
    if txn_id is None or not request.transactional_id or not request.writer_id:
        raise InvalidArgumentError(
            "AppendKafkaBatch of a transactional batch needs a 16-byte txn_id, a "
            "transactional_id and a writer_id")
    return ForwardedTxn(txn_id, request.transactional_id, request.producer_id,
                        request.producer_epoch)
