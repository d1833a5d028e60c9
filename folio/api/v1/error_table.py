"""Every error the broker answers with, one row each: the one error table.

A row is one error (the broker class ``folio-error`` names) with everything a
front end or a client needs to know about it: its stable number (an
``ErrorCode`` of proto/folio/v1/errors.proto, sent as ``folio-error-code``), the
gRPC status code it is answered with, whether the same call may succeed later
unchanged, and the Kafka error code the Kafka listener answers it with.

Every map is derived from these rows, never written a second time:

- ``broker.status`` (errors -> gRPC status and trailing metadata) binds each
  row to its class by name (``broker.errors`` below 100, ``ledger.errors``
  from 100) and fails at import if a name has no class;
- ``broker.kafka.error_codes`` (errors -> Kafka codes) reads the ``kafka`` column;
- ``folio._status`` (a status back to the SDK's typed error) reads the numbers
  and names.

The table sits here, in the public wire layer, because it is part of the wire
(errors.proto says the same in prose, and tests/unit/broker/test_error_table.py
holds the two together) and because both the broker and the SDK may import
this package. ``tests/unit/broker/test_error_table.py`` fails when a broker
error class has no row, or a row's ``retriable`` is not its class's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import grpc

from folio.api.v1.errors_pb2 import ErrorCode

__all__ = ["ERRORS", "FIRST_LEDGER_NUMBER", "LEDGER_KAFKA_FALLBACK", "ErrorRow"]

#: Numbers from here on are errors of the ledger service behind the broker
#: (``ledger.errors``); below it, the broker's own (``broker.errors``).
FIRST_LEDGER_NUMBER: Final = 100


@dataclass(frozen=True, slots=True)
class ErrorRow:
    """One error and how every front end answers it.

    Attributes:
        number: its ``ErrorCode``; never reused or renumbered.
        name: the server class name (sent as ``folio-error``).
        code: the gRPC status code it is answered with.
        retriable: whether the same call may succeed later unchanged (the
            class's ``retriable``, which the broker sends on the Append stream).
        kafka: the Kafka error code's protocol name (``NOT_LEADER_OR_FOLLOWER``),
            chosen on purpose for every row, also for errors no Kafka API
            raises today (so one that starts to is answered deliberately, never
            UNKNOWN_SERVER_ERROR; tests/unit/broker/kafka/test_error_codes.py).
    """

    number: ErrorCode.ValueType
    name: str
    code: grpc.StatusCode
    retriable: bool
    kafka: str

    @property
    def from_ledger(self) -> bool:
        """Whether the error is the ledger service's (``ledger.errors``), not the broker's."""
        return self.number >= FIRST_LEDGER_NUMBER


_N = ErrorCode
_C = grpc.StatusCode

# Kafka codes (kio names them in lower case): a retriable condition maps to a
# retriable code (the client retries, or refreshes its metadata first), a refusal
# to the code a Kafka broker gives for the same refusal (docs/kafka.md).
_UNKNOWN_TOPIC = "UNKNOWN_TOPIC_OR_PARTITION"
_INVALID_TOPIC = "INVALID_TOPIC_EXCEPTION"
# Another broker owns the segment, or this one stops: refresh metadata and retry.
_NOT_LEADER = "NOT_LEADER_OR_FOLLOWER"
# The ledger service failed: a retriable failure may pass (the client retries) ...
_TIMED_OUT = "REQUEST_TIMED_OUT"
# ... the others are storage errors.
_STORAGE = "KAFKA_STORAGE_ERROR"

#: The Kafka code of a ledger error without a row (the bookie protocol's own
#: errors, which reach a client only through a broker bug), by its ``retriable``.
LEDGER_KAFKA_FALLBACK: Final[dict[bool, str]] = {True: _TIMED_OUT, False: _STORAGE}

# Rows no Kafka API raises today still name a code on purpose (issue 27): the
# transaction errors the Kafka refusal of the same condition (a batch set too big:
# RECORD_LIST_TOO_LARGE; state, expiry or a transaction no longer known (its
# timeout ended it): INVALID_TXN_STATE, the producer must abort; the buffer full, retriable:
# CONCURRENT_TRANSACTIONS, which producers retry); reader groups the group codes
# (a state conflict is retriable: REBALANCE_IN_PROGRESS makes a member rejoin);
# a permission refused TOPIC_AUTHORIZATION_FAILED (the Kafka handlers check
# permissions themselves and answer the resource's own code first).

#: The one table, in number order.
ERRORS: Final[tuple[ErrorRow, ...]] = (
    ErrorRow(_N.ERROR_CODE_INVALID_ARGUMENT, "InvalidArgumentError",
             _C.INVALID_ARGUMENT, False, "INVALID_REQUEST"),
    ErrorRow(_N.ERROR_CODE_INVALID_BLOCK, "InvalidBlockError",
             _C.INVALID_ARGUMENT, False, "INVALID_REQUEST"),
    ErrorRow(_N.ERROR_CODE_TOPIC_NAME, "TopicNameError",
             _C.INVALID_ARGUMENT, False, _INVALID_TOPIC),
    ErrorRow(_N.ERROR_CODE_TOPIC_NOT_FOUND, "TopicNotFoundError",
             _C.NOT_FOUND, False, _UNKNOWN_TOPIC),
    ErrorRow(_N.ERROR_CODE_NO_SUCH_SEGMENT, "NoSuchSegmentError",
             _C.NOT_FOUND, False, _UNKNOWN_TOPIC),
    ErrorRow(_N.ERROR_CODE_TOPIC_EXISTS, "TopicExistsError",
             _C.ALREADY_EXISTS, False, "TOPIC_ALREADY_EXISTS"),
    ErrorRow(_N.ERROR_CODE_TOPIC_SEALED, "TopicSealedError",
             _C.FAILED_PRECONDITION, False, _INVALID_TOPIC),
    # A sealed segment takes no appends; its successors do (docs/kafka.md).
    ErrorRow(_N.ERROR_CODE_SEGMENT_SEALED, "SegmentSealedError",
             _C.FAILED_PRECONDITION, False, _INVALID_TOPIC),
    ErrorRow(_N.ERROR_CODE_INVALID_EVENT_NUMBER, "InvalidEventNumberError",
             _C.INVALID_ARGUMENT, False, "OUT_OF_ORDER_SEQUENCE_NUMBER"),
    ErrorRow(_N.ERROR_CODE_OFFSET_OUT_OF_RANGE, "OffsetOutOfRangeError",
             _C.OUT_OF_RANGE, False, "OFFSET_OUT_OF_RANGE"),
    ErrorRow(_N.ERROR_CODE_EVENT_TOO_LARGE, "EventTooLargeError",
             _C.RESOURCE_EXHAUSTED, False, "MESSAGE_TOO_LARGE"),
    ErrorRow(_N.ERROR_CODE_TRANSACTION_TOO_LARGE, "TransactionTooLargeError",
             _C.RESOURCE_EXHAUSTED, False, "RECORD_LIST_TOO_LARGE"),
    ErrorRow(_N.ERROR_CODE_TRANSACTION_BUFFER_FULL, "TransactionBufferFullError",
             _C.RESOURCE_EXHAUSTED, True, "CONCURRENT_TRANSACTIONS"),
    ErrorRow(_N.ERROR_CODE_TRANSACTION_EXPIRED, "TransactionExpiredError",
             _C.FAILED_PRECONDITION, False, "INVALID_TXN_STATE"),
    ErrorRow(_N.ERROR_CODE_TXN_NOT_FOUND, "TxnNotFoundError",
             _C.NOT_FOUND, False, "INVALID_TXN_STATE"),
    ErrorRow(_N.ERROR_CODE_TXN_STATE, "TxnStateError",
             _C.FAILED_PRECONDITION, False, "INVALID_TXN_STATE"),
    ErrorRow(_N.ERROR_CODE_TXN_LABEL_CLOSED, "TxnLabelClosedError",
             _C.FAILED_PRECONDITION, False, "INVALID_TXN_STATE"),
    ErrorRow(_N.ERROR_CODE_WRONG_HOST, "WrongHostError",
             _C.UNAVAILABLE, True, _NOT_LEADER),
    ErrorRow(_N.ERROR_CODE_BROKER_SHUTTING_DOWN, "BrokerShuttingDownError",
             _C.UNAVAILABLE, True, _NOT_LEADER),
    ErrorRow(_N.ERROR_CODE_CORRUPT_DATA, "CorruptDataError",
             _C.DATA_LOSS, False, "CORRUPT_MESSAGE"),
    ErrorRow(_N.ERROR_CODE_READER_GROUP_NOT_FOUND, "ReaderGroupNotFoundError",
             _C.NOT_FOUND, False, "GROUP_ID_NOT_FOUND"),
    ErrorRow(_N.ERROR_CODE_READER_GROUP_EXISTS, "ReaderGroupExistsError",
             _C.ALREADY_EXISTS, False, "INVALID_REQUEST"),
    ErrorRow(_N.ERROR_CODE_GROUP_STATE_CONFLICT, "GroupStateConflictError",
             _C.FAILED_PRECONDITION, True, "REBALANCE_IN_PROGRESS"),
    ErrorRow(_N.ERROR_CODE_INTERNAL_TOPIC, "InternalTopicError",
             _C.PERMISSION_DENIED, False, "TOPIC_AUTHORIZATION_FAILED"),
    ErrorRow(_N.ERROR_CODE_PERMISSION_DENIED, "PermissionDeniedError",
             _C.PERMISSION_DENIED, False, "TOPIC_AUTHORIZATION_FAILED"),
    ErrorRow(_N.ERROR_CODE_READER_GROUP_NOT_EMPTY, "ReaderGroupNotEmptyError",
             _C.FAILED_PRECONDITION, False, "NON_EMPTY_GROUP"),
    # The ledger service behind the broker (its status codes are the ledger
    # table's, ledger/status.py: the bookie protocol answers them the same way).
    ErrorRow(_N.ERROR_CODE_BOOKIE_UNAVAILABLE, "BookieUnavailableError",
             _C.UNAVAILABLE, True, _TIMED_OUT),
    ErrorRow(_N.ERROR_CODE_NOT_ENOUGH_BOOKIES, "NotEnoughBookiesError",
             _C.UNAVAILABLE, True, _TIMED_OUT),
    ErrorRow(_N.ERROR_CODE_LEDGER_STORAGE, "StorageError",
             _C.UNAVAILABLE, True, _TIMED_OUT),
    ErrorRow(_N.ERROR_CODE_LEDGER_RECOVERY, "LedgerRecoveryError",
             _C.UNAVAILABLE, True, _TIMED_OUT),
    ErrorRow(_N.ERROR_CODE_ENTRY_TOO_LARGE, "EntryTooLargeError",
             _C.RESOURCE_EXHAUSTED, False, _STORAGE),
    ErrorRow(_N.ERROR_CODE_LEDGER_DATA_LOSS, "DataLossError",
             _C.DATA_LOSS, False, _STORAGE),
)
