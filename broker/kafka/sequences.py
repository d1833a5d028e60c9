"""Idempotent producers' sequences: what a batch's append result is answered with.

A Kafka idempotent producer numbers the records it sends to a partition 0, 1,
2, ... (per producer id and epoch); the Produce handler appends its batch as
writer ``kafka:<producer id>:<epoch>`` with the batch's last sequence as the
last event number and ``contiguous=True``. The segment then keeps the
producer's state as it keeps every writer's (``broker.segments.writers``):
in its entry headers and in its record's writer snapshot, never in this
broker's memory, so the rules below hold after a failed append, a reload, a
restart and a move to another broker and back (as Kafka keeps its producer
state with the log):

* a batch that begins right after the last sequence written (at 0 for a
  producer the partition does not know) is written;
* one that skips sequences, or overlaps what was written without matching a
  batch of it, is refused: OUT_OF_ORDER_SEQUENCE_NUMBER (the segment raises
  ``InvalidEventNumberError``, ``broker.kafka.error_codes``), nothing written;
* a resend of one of the producer's last ``RECENT_APPENDS`` (5) batches is not
  written again and is answered with the base offset its first copy got;
* a resend of an older batch: DUPLICATE_SEQUENCE_NUMBER, which Kafka clients
  take as "written before, offset unknown" (a success without an offset).

The answers for duplicates are given once every append submitted before is
durable (the segment's ``_settle``): if the first copy's append then fails,
so does the answer.

**A failed append is answered only once its outcome is known**
(``resolve_failed_append``). An entry whose add failed may still have reached
a bookie, and ledger recovery then keeps it (an add that failed is not an add
that was not stored). Answering the failure at once (REQUEST_TIMED_OUT,
KAFKA_STORAGE_ERROR) lets librdkafka treat the batch as not written: it
retries it, but if its producer's epoch is bumped meanwhile (any partition's
OUT_OF_ORDER_SEQUENCE_NUMBER does that), the batch's records are numbered
again from 0 under the new epoch and written a second time (issue 22: 14
records doubled in a fault run, the first copies recovered from the failed
ledger). So the batch is asked about again on the segment loaded anew from its
record, whose recovery fenced the failed ledger and read what it holds: the
batch stored there is answered as written, with its offset; one that is not
is answered NOT_ENOUGH_REPLICAS, which clients take as "not written" (it now
never can be: the ledger is fenced and closed). Only if the segment cannot be
loaded again within ``RESOLVE_TIMEOUT_S`` is the failure answered as it was,
its outcome unknown (REQUEST_TIMED_OUT: "possibly written").

**The segment may move meanwhile** (issue 22: one record stored twice in a
fault run). The ZooKeeper connection was lost while a failed batch's outcome
was being asked: writes paused, the segment could not be loaded here
(WrongHost), and the batch was answered NOT_LEADER_OR_FOLLOWER, which
librdkafka takes as "not written". It was stored (the failed ledger held it);
before the resend reached the partition again, another partition's
OUT_OF_ORDER_SEQUENCE_NUMBER (a batch behind one answered NOT_ENOUGH_REPLICAS)
bumped the producer's epoch, the resend was numbered again from 0, and the
segment could not know it for the same records. So a segment that cannot be
loaded here is asked without loading it (``Topics.stored_writer``): its
record's writer snapshot and its last ledger's headers, as any load would
recover them. Once the failed ledger is closed (by the next load, here or at
the new owner; this broker fences nothing it does not own) that is the
answer: stored, with its offset; not stored, NOT_LEADER_OR_FOLLOWER, now true
for good (the producer sends it to the new owner). While the ledger is still
open, the outcome is unknown and the question is asked again until the
deadline: a retriable "not written" code is never answered for a batch that
may be stored. The same holds for an append whose ledger was fenced under it
(another broker's load): WrongHost then comes after the entry was handed over.

Transactional batches (``broker.kafka.handlers.transactions``) do not need
this: a transactional producer bumps its epoch only through an abort
(KIP-360: the coordinator bumps it when the transaction aborts), so a batch
renumbered under a new epoch never commits beside its first copy; a resend
under the same epoch is a duplicate the segment's persisted writer table
recognises wherever the segment is loaded.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence

from kio.schema.errors import ErrorCode

from broker.api import AppendResult, Block, SegmentState, StoredWriter, Topics
from broker.errors import BrokerError, SegmentSealedError, WrongHostError
from broker.segments.records import RECENT_APPENDS
from ledger.errors import LedgerError, LedgerFencedError

__all__ = ["BATCHES_PER_PRODUCER", "RESOLVE_TIMEOUT_S", "answer_of", "handed_to_ledger",
           "resolve_failed_append"]

log = logging.getLogger(__name__)

#: Kafka's broker remembers 5 batches per producer (max.in.flight is at most 5).
BATCHES_PER_PRODUCER = RECENT_APPENDS

#: How long a failed idempotent append waits for its segment to load again
#: (below librdkafka's 30 s ``request.timeout.ms``).
RESOLVE_TIMEOUT_S = 15.0
_FIRST_DELAY_S = 0.05
_MAX_DELAY_S = 1.0


def answer_of(result: AppendResult, writer: str,
              segment_name: str) -> tuple[ErrorCode, int, str | None]:
    """(error code, base offset, error message) answering a batch appended as ``result``."""
    if not result.duplicate:
        return ErrorCode.none, result.offset, None
    if result.offset >= 0:
        log.info("kafka: producer %s resent a batch %s already holds (last sequence %d); "
                 "answered with its offset %d", writer, segment_name, result.event_number,
                 result.offset)
        return ErrorCode.none, result.offset, None
    log.info("kafka: producer %s resent a batch %s holds from before its last %d "
             "(last sequence %d): DUPLICATE_SEQUENCE_NUMBER", writer, segment_name,
             BATCHES_PER_PRODUCER, result.event_number)
    return (ErrorCode.duplicate_sequence_number, -1,
            f"the batch ending at sequence {result.event_number} was written to "
            f"{segment_name} before the producer's last {BATCHES_PER_PRODUCER}; its offset "
            "is no longer known")


def handed_to_ledger(error: BaseException) -> bool:
    """Whether an append that failed with ``error`` may have reached its ledger.

    A ``LedgerError`` (the ledger failed: its add may have reached a bookie),
    or a ``WrongHostError`` caused by ``LedgerFencedError`` (another broker's
    load fenced the ledger under the add). Other ``BrokerError``s are raised
    before the entry is handed over (the segment moved or closed, a sequence
    refused): their answer is the truth.
    """
    if isinstance(error, LedgerError):
        return True
    return isinstance(error, WrongHostError) and isinstance(error.__cause__, LedgerFencedError)


async def resolve_failed_append(
    topics: Topics, segment_name: str, blocks: Sequence[Block], writer: str, last: int,
    error: BrokerError | LedgerError, *, failed_ledger_id: int | None = None,
    timeout_s: float = RESOLVE_TIMEOUT_S,
) -> tuple[ErrorCode, int, str | None]:
    """The answer to an idempotent batch whose append failed with ``error`` (module docstring).

    Loads the segment again (``writable_segment`` replaces a failed one; its
    recovery fences the failed ledger) until it answers, then: the batch is
    stored (its last sequence is at or below the producer's recorded one: the
    numbers are contiguous) -- appended again, which writes nothing and gives
    its first offset; not stored -- NOT_ENOUGH_REPLICAS, or
    ``SegmentSealedError`` if the segment is sealed now (another broker's
    scale fenced it: the batch goes to the heir). Nothing is written
    here: a batch that was not stored is the producer's to resend, in its order.

    When the segment cannot be loaded here (WrongHost: it moved, or writes
    are paused) and ``failed_ledger_id`` names the ledger the append was
    handed to, the stored state is read without loading it
    (``Topics.stored_writer``) once that ledger is closed: stored, its
    offset; not stored, NOT_LEADER_OR_FOLLOWER.

    Raises ``error`` if the outcome is still unknown at the deadline, and a
    ``BrokerError`` the segment answers with (gone, closing): the caller
    answers those as any failed append.
    """
    deadline = time.monotonic() + timeout_s
    delay = _FIRST_DELAY_S
    event_count = sum(block.event_count for block in blocks)
    while True:
        try:
            try:
                segment = await topics.writable_segment(segment_name, "Kafka Produce")
            except WrongHostError as moved:
                if failed_ledger_id is None:
                    raise
                # Not ours to load now: ask the stored state (fences nothing).
                stored = await topics.stored_writer(segment_name, writer, failed_ledger_id)
                if stored.decided:
                    if last > stored.last_event_number:
                        await _raise_if_sealed(topics, segment_name, writer, last)
                    return _answer_stored(stored, segment_name, writer, last, event_count,
                                          moved)
                log.info("kafka: producer %s's failed batch to %s (last sequence %d): the "
                         "segment is not served here (%s) and ledger %d is not closed yet; "
                         "asking again", writer, segment_name, last, moved, failed_ledger_id)
            else:
                recorded = await segment.last_event_number(writer)
                info = segment.info()
                if last > recorded and info.sealed:
                    # Sealed under the append (another broker's scale fenced the
                    # ledger): not stored, and now never can be here; the batch
                    # goes to the heir (``broker.kafka.succession``). A "not
                    # written" error instead would make librdkafka refresh its
                    # metadata and move keys to the new partitions.
                    log.info("kafka: producer %s's batch to %s (last sequence %d) failed "
                             "and is not stored; the segment is sealed now: to its heir",
                             writer, segment_name, last)
                    raise SegmentSealedError(segment_name, info.segment.end_offset)
                if last > recorded:
                    log.info("kafka: producer %s's batch to %s (last sequence %d) failed and "
                             "is not stored (the producer's last is %d): NOT_ENOUGH_REPLICAS",
                             writer, segment_name, last, recorded)
                    return (ErrorCode.not_enough_replicas, -1,
                            f"not written to {segment_name}: {error}")
                result = await segment.append(blocks, writer, last, contiguous=True)
                log.info("kafka: producer %s's failed batch to %s (last sequence %d) was "
                         "stored by the failed ledger (recovered)", writer, segment_name, last)
                return answer_of(result, writer, segment_name)
        # Another BrokerError (gone, closing) propagates: the new owner's
        # recovery decides, and the producer's resend there gets the same answer.
        except (LedgerError, WrongHostError) as again:
            if isinstance(again, WrongHostError) and failed_ledger_id is None:
                raise  # moved, and no ledger to ask about: the caller answers it
            # Still failing (bookies down, the segment not loaded again yet,
            # the metadata store away, the failed ledger not closed yet): the
            # outcome stays unknown; ask again until the deadline.
            if time.monotonic() + delay > deadline:
                log.warning("kafka: producer %s's batch to %s (last sequence %d) failed and "
                            "its outcome is still unknown after %.0f s: %s", writer,
                            segment_name, last, timeout_s, again)
                raise error from again
        else:
            if time.monotonic() + delay > deadline:
                log.warning("kafka: producer %s's batch to %s (last sequence %d) failed and "
                            "its outcome is still unknown after %.0f s (ledger %s not "
                            "closed)", writer, segment_name, last, timeout_s, failed_ledger_id)
                raise error
        await asyncio.sleep(delay)
        delay = min(delay * 2, _MAX_DELAY_S)


async def _raise_if_sealed(topics: Topics, segment_name: str, writer: str, last: int) -> None:
    """``SegmentSealedError`` if the segment's record says it is sealed (the batch: to the heir).

    A scale on another broker fences the owner's ledger and seals the segment;
    the owner's load racing that record change is refused (WrongHost) for a
    moment. A batch the sealed segment does not hold never will be: it goes to
    the heir (``broker.kafka.succession``), not back to the producer as
    NOT_LEADER_OR_FOLLOWER (librdkafka would refresh its metadata and move keys
    to the new partitions; kafkajs resends the whole request).
    """
    segment, _ = await topics.get_successors(segment_name)
    if segment.state is SegmentState.SEALED:
        log.info("kafka: producer %s's batch to %s (last sequence %d) failed and is not "
                 "stored; the segment is sealed now: to its heir", writer, segment_name, last)
        raise SegmentSealedError(segment_name, segment.end_offset)


def _answer_stored(stored: StoredWriter, segment_name: str, writer: str, last: int,
                   event_count: int, moved: WrongHostError,
                   ) -> tuple[ErrorCode, int, str | None]:
    """The answer from the stored state of a segment this broker does not serve now."""
    if last > stored.last_event_number:
        # Not in the failed ledger, which is closed: it never will be. The
        # producer sends it again, to the owner its metadata names.
        log.info("kafka: producer %s's batch to %s (last sequence %d) failed and is not "
                 "stored (the producer's last is %d); the segment is not served here: "
                 "NOT_LEADER_OR_FOLLOWER", writer, segment_name, last,
                 stored.last_event_number)
        return (ErrorCode.not_leader_or_follower, -1,
                f"not written to {segment_name}: {moved}")
    first = last - event_count + 1
    offset = next((base for low, high, base in stored.recent if (low, high) == (first, last)),
                  -1)
    log.info("kafka: producer %s's failed batch to %s (last sequence %d) is stored (read "
             "from the segment's record and ledger; it is not served here)", writer,
             segment_name, last)
    return answer_of(AppendResult(offset, 0, last, duplicate=True), writer, segment_name)
