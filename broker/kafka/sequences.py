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
"""

from __future__ import annotations

import logging

from kio.schema.errors import ErrorCode

from broker.api import AppendResult
from broker.segments.records import RECENT_APPENDS

__all__ = ["BATCHES_PER_PRODUCER", "answer_of"]

log = logging.getLogger(__name__)

#: Kafka's broker remembers 5 batches per producer (max.in.flight is at most 5).
BATCHES_PER_PRODUCER = RECENT_APPENDS


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
