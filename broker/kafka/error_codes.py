"""Folio's domain errors as Kafka error codes, chosen so Kafka clients do the right thing.

One table, as data (like ``broker.status`` for gRPC): retriable conditions map
to retriable codes (a client retries or refreshes its metadata), refusals to
the code a Kafka broker would give for the same refusal.
"""

from __future__ import annotations

import logging

from kio.schema.errors import ErrorCode

from broker.errors import (
    BrokerShuttingDownError,
    CorruptDataError,
    EventTooLargeError,
    InternalTopicError,
    InvalidArgumentError,
    InvalidEventNumberError,
    NoSuchSegmentError,
    OffsetOutOfRangeError,
    SegmentSealedError,
    TopicExistsError,
    TopicNameError,
    TopicNotFoundError,
    WrongHostError,
)
from ledger.errors import LedgerError

__all__ = ["error_code"]

log = logging.getLogger(__name__)

#: Most specific first: the first class the error is an instance of decides.
_TABLE: tuple[tuple[type[BaseException], ErrorCode], ...] = (
    (TopicNotFoundError, ErrorCode.unknown_topic_or_partition),
    (NoSuchSegmentError, ErrorCode.unknown_topic_or_partition),
    (TopicExistsError, ErrorCode.topic_already_exists),
    (TopicNameError, ErrorCode.invalid_topic_exception),
    (InternalTopicError, ErrorCode.topic_authorization_failed),
    # A sealed segment takes no appends; its successors do (docs/kafka.md).
    (SegmentSealedError, ErrorCode.invalid_topic_exception),
    (OffsetOutOfRangeError, ErrorCode.offset_out_of_range),
    (EventTooLargeError, ErrorCode.message_too_large),
    (InvalidEventNumberError, ErrorCode.out_of_order_sequence_number),
    # Another broker owns the segment: the client refreshes metadata and retries.
    (WrongHostError, ErrorCode.not_leader_or_follower),
    (BrokerShuttingDownError, ErrorCode.not_leader_or_follower),
    (CorruptDataError, ErrorCode.corrupt_message),
    (InvalidArgumentError, ErrorCode.invalid_request),
)


def error_code(error: BaseException) -> ErrorCode:
    """The Kafka error code for ``error``; unknown errors are logged and UNKNOWN_SERVER_ERROR."""
    for kind, code in _TABLE:
        if isinstance(error, kind):
            return code
    if isinstance(error, LedgerError):
        # The ledger service failed; a retriable one may pass (the client retries).
        if error.retriable:
            return ErrorCode.request_timed_out
        log.warning("kafka: ledger error answered as KAFKA_STORAGE_ERROR: %s", error)
        return ErrorCode.kafka_storage_error
    log.error("kafka: unexpected error answered as UNKNOWN_SERVER_ERROR", exc_info=error)
    return ErrorCode.unknown_server_error
