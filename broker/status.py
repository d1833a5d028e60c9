"""Broker errors -> gRPC status codes: one table, as data.

Every refusal a client gets from the broker goes through here: the status
code, the message, and trailing metadata naming the exact error by its stable
number (``folio-error-code``, an ``ErrorCode`` of proto/folio/v1/errors.proto,
so renaming a class breaks no client), by its class name (``folio-error``, for
clients older than the numbers) and its typed context as JSON
(``folio-error-context``), so the SDK rebuilds the same typed error. Ledger
errors that reach a client (the ledger service failing under an append) keep
the ledger table's status code and name; the ledger's own number (a
``LedgerErrorCode`` of the bookie protocol) is replaced by the public one, or
dropped when the public protocol has none. Anything neither table knows is a
bug: INTERNAL, with its traceback logged.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Final

import grpc

from broker.clip import clip_context, clip_context_json, clip_message
from broker.errors import (
    BrokerError,
    BrokerShuttingDownError,
    CorruptDataError,
    EventTooLargeError,
    GroupStateConflictError,
    InternalTopicError,
    InvalidArgumentError,
    InvalidBlockError,
    InvalidEventNumberError,
    NoSuchSegmentError,
    OffsetOutOfRangeError,
    PermissionDeniedError,
    ReaderGroupExistsError,
    ReaderGroupNotFoundError,
    SegmentSealedError,
    TopicExistsError,
    TopicNameError,
    TopicNotFoundError,
    TopicSealedError,
    TransactionBufferFullError,
    TransactionExpiredError,
    TransactionTooLargeError,
    TxnLabelClosedError,
    TxnNotFoundError,
    TxnStateError,
    WrongHostError,
)
from folio.api.v1.errors_pb2 import ErrorCode
from ledger import status as ledger_status
from ledger.errors import (
    BookieUnavailableError,
    DataLossError,
    EntryTooLargeError,
    LedgerError,
    LedgerFencedError,
    LedgerRecoveryError,
    NotEnoughBookiesError,
    StorageError,
)

__all__ = [
    "LEDGER_ERROR_NUMBERS",
    "STATUS_TABLE",
    "StatusRow",
    "error_number",
    "is_retriable",
    "status_for",
    "trailing_metadata_for",
]

log = logging.getLogger(__name__)

_Code = grpc.StatusCode
_N = ErrorCode


@dataclass(frozen=True, slots=True)
class StatusRow:
    """One broker error class, the status code it is answered with and its wire number.

    Attributes:
        error: the ``BrokerError`` subclass.
        code: the gRPC status code.
        number: its ``ErrorCode`` (proto/folio/v1/errors.proto); never reused.
    """

    error: type[BrokerError]
    code: grpc.StatusCode
    number: ErrorCode.ValueType


#: The one table (subclasses before their bases: the first match wins).
STATUS_TABLE: Final[tuple[StatusRow, ...]] = (
    StatusRow(TopicNameError, _Code.INVALID_ARGUMENT, _N.ERROR_CODE_TOPIC_NAME),
    StatusRow(InvalidBlockError, _Code.INVALID_ARGUMENT, _N.ERROR_CODE_INVALID_BLOCK),
    StatusRow(InvalidArgumentError, _Code.INVALID_ARGUMENT, _N.ERROR_CODE_INVALID_ARGUMENT),
    StatusRow(TopicNotFoundError, _Code.NOT_FOUND, _N.ERROR_CODE_TOPIC_NOT_FOUND),
    StatusRow(NoSuchSegmentError, _Code.NOT_FOUND, _N.ERROR_CODE_NO_SUCH_SEGMENT),
    StatusRow(TopicExistsError, _Code.ALREADY_EXISTS, _N.ERROR_CODE_TOPIC_EXISTS),
    StatusRow(TopicSealedError, _Code.FAILED_PRECONDITION, _N.ERROR_CODE_TOPIC_SEALED),
    StatusRow(SegmentSealedError, _Code.FAILED_PRECONDITION, _N.ERROR_CODE_SEGMENT_SEALED),
    StatusRow(InvalidEventNumberError, _Code.INVALID_ARGUMENT, _N.ERROR_CODE_INVALID_EVENT_NUMBER),
    StatusRow(OffsetOutOfRangeError, _Code.OUT_OF_RANGE, _N.ERROR_CODE_OFFSET_OUT_OF_RANGE),
    StatusRow(EventTooLargeError, _Code.RESOURCE_EXHAUSTED, _N.ERROR_CODE_EVENT_TOO_LARGE),
    StatusRow(TransactionTooLargeError, _Code.RESOURCE_EXHAUSTED,
              _N.ERROR_CODE_TRANSACTION_TOO_LARGE),
    StatusRow(TransactionBufferFullError, _Code.RESOURCE_EXHAUSTED,
              _N.ERROR_CODE_TRANSACTION_BUFFER_FULL),
    StatusRow(TransactionExpiredError, _Code.FAILED_PRECONDITION,
              _N.ERROR_CODE_TRANSACTION_EXPIRED),
    StatusRow(TxnNotFoundError, _Code.NOT_FOUND, _N.ERROR_CODE_TXN_NOT_FOUND),
    StatusRow(TxnStateError, _Code.FAILED_PRECONDITION, _N.ERROR_CODE_TXN_STATE),
    StatusRow(TxnLabelClosedError, _Code.FAILED_PRECONDITION, _N.ERROR_CODE_TXN_LABEL_CLOSED),
    StatusRow(WrongHostError, _Code.UNAVAILABLE, _N.ERROR_CODE_WRONG_HOST),
    StatusRow(BrokerShuttingDownError, _Code.UNAVAILABLE, _N.ERROR_CODE_BROKER_SHUTTING_DOWN),
    StatusRow(CorruptDataError, _Code.DATA_LOSS, _N.ERROR_CODE_CORRUPT_DATA),
    StatusRow(ReaderGroupNotFoundError, _Code.NOT_FOUND, _N.ERROR_CODE_READER_GROUP_NOT_FOUND),
    StatusRow(ReaderGroupExistsError, _Code.ALREADY_EXISTS, _N.ERROR_CODE_READER_GROUP_EXISTS),
    StatusRow(GroupStateConflictError, _Code.FAILED_PRECONDITION,
              _N.ERROR_CODE_GROUP_STATE_CONFLICT),
    StatusRow(InternalTopicError, _Code.PERMISSION_DENIED, _N.ERROR_CODE_INTERNAL_TOPIC),
    StatusRow(PermissionDeniedError, _Code.PERMISSION_DENIED, _N.ERROR_CODE_PERMISSION_DENIED),
)

#: The public number of each ledger error a client may meet through the broker
#: (the ledger service failing under it). Other ledger errors reaching a client
#: are broker bugs: they travel by name and status code only.
LEDGER_ERROR_NUMBERS: Final[dict[type[LedgerError], ErrorCode.ValueType]] = {
    BookieUnavailableError: _N.ERROR_CODE_BOOKIE_UNAVAILABLE,
    NotEnoughBookiesError: _N.ERROR_CODE_NOT_ENOUGH_BOOKIES,
    StorageError: _N.ERROR_CODE_LEDGER_STORAGE,
    LedgerRecoveryError: _N.ERROR_CODE_LEDGER_RECOVERY,
    EntryTooLargeError: _N.ERROR_CODE_ENTRY_TOO_LARGE,
    DataLossError: _N.ERROR_CODE_LEDGER_DATA_LOSS,
}

_BY_CLASS: Final = {row.error: row for row in STATUS_TABLE}


def _row_for(error: BaseException) -> StatusRow | None:
    return ledger_status.lookup_by_class(_BY_CLASS, error)


def _translated(error: BaseException) -> BaseException:
    # A fenced ledger under a segment means another broker recovered it: this
    # broker no longer owns the segment, which clients handle as WrongHost.
    if isinstance(error, LedgerFencedError):
        return WrongHostError(f"ledger {error.ledger_id}")
    return error


def status_for(error: BaseException) -> tuple[grpc.StatusCode, str]:
    """The status code and message a servicer answers ``error`` with.

    The message quotes values from the request by a short prefix only
    (``broker.clip``), however long they were.
    """
    code, message = _status_for(error)
    context = error.context() if isinstance(error, BrokerError) else None
    return code, clip_message(message, context)


def _status_for(error: BaseException) -> tuple[grpc.StatusCode, str]:
    error = _translated(error)
    row = _row_for(error)
    if row is not None:
        return row.code, str(error)
    if isinstance(error, LedgerError):
        return ledger_status.status_for(error)
    log.error("unexpected error answered as INTERNAL", exc_info=error)
    return _Code.INTERNAL, f"internal error: {type(error).__name__}: {error}"


def error_number(error: BaseException) -> ErrorCode.ValueType:
    """The ``ErrorCode`` number ``error`` travels with (``ERROR_CODE_UNSPECIFIED``: none)."""
    error = _translated(error)
    row = _row_for(error)
    if row is not None:
        return row.number
    if isinstance(error, LedgerError):
        number = ledger_status.lookup_by_class(LEDGER_ERROR_NUMBERS, error)
        if number is not None:
            return number
    return _N.ERROR_CODE_UNSPECIFIED


def trailing_metadata_for(error: BaseException) -> tuple[tuple[str, str], ...]:
    """``folio-error-code``, ``folio-error`` and ``folio-error-context`` (empty if unknown)."""
    number = error_number(error)
    numbered = ((ledger_status.ERROR_CODE_KEY, str(number)),) if number else ()
    error = _translated(error)
    if isinstance(error, BrokerError) and _row_for(error) is not None:
        return (
            *numbered,
            (ledger_status.ERROR_KEY, type(error).__name__),
            (ledger_status.ERROR_CONTEXT_KEY,
             json.dumps(clip_context(error.context()), separators=(",", ":"))),
        )
    if isinstance(error, LedgerError):
        # The ledger's own number is of the bookie protocol: never forward it.
        return numbered + tuple(
            (key, clip_context_json(value) if key == ledger_status.ERROR_CONTEXT_KEY else value)
            for key, value in ledger_status.trailing_metadata_for(error)
            if key != ledger_status.ERROR_CODE_KEY)
    return ()


def is_retriable(error: BaseException) -> bool:
    """Whether a client may send the same request again and succeed."""
    return bool(getattr(_translated(error), "retriable", False))
