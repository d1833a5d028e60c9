"""Broker errors -> gRPC status codes: one table, as data.

Every refusal a client gets from the broker goes through here: the status
code, the message, and trailing metadata naming the exact error class
(``folio-error``) with its typed context as JSON (``folio-error-context``), so
the SDK rebuilds the same typed error. Ledger errors that reach a client (the
ledger service failing under an append) keep the ledger table's mapping.
Anything neither table knows is a bug: INTERNAL, with its traceback logged.
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
from ledger import status as ledger_status
from ledger.errors import LedgerError, LedgerFencedError

__all__ = ["STATUS_TABLE", "StatusRow", "is_retriable", "status_for", "trailing_metadata_for"]

log = logging.getLogger(__name__)

_Code = grpc.StatusCode


@dataclass(frozen=True, slots=True)
class StatusRow:
    """One broker error class and the status code it is answered with."""

    error: type[BrokerError]
    code: grpc.StatusCode


#: The one table (subclasses before their bases: the first match wins).
STATUS_TABLE: Final[tuple[StatusRow, ...]] = (
    StatusRow(TopicNameError, _Code.INVALID_ARGUMENT),
    StatusRow(InvalidBlockError, _Code.INVALID_ARGUMENT),
    StatusRow(InvalidArgumentError, _Code.INVALID_ARGUMENT),
    StatusRow(TopicNotFoundError, _Code.NOT_FOUND),
    StatusRow(NoSuchSegmentError, _Code.NOT_FOUND),
    StatusRow(TopicExistsError, _Code.ALREADY_EXISTS),
    StatusRow(TopicSealedError, _Code.FAILED_PRECONDITION),
    StatusRow(SegmentSealedError, _Code.FAILED_PRECONDITION),
    StatusRow(InvalidEventNumberError, _Code.INVALID_ARGUMENT),
    StatusRow(OffsetOutOfRangeError, _Code.OUT_OF_RANGE),
    StatusRow(EventTooLargeError, _Code.RESOURCE_EXHAUSTED),
    StatusRow(TransactionTooLargeError, _Code.RESOURCE_EXHAUSTED),
    StatusRow(TransactionBufferFullError, _Code.RESOURCE_EXHAUSTED),
    StatusRow(TransactionExpiredError, _Code.FAILED_PRECONDITION),
    StatusRow(TxnNotFoundError, _Code.NOT_FOUND),
    StatusRow(TxnStateError, _Code.FAILED_PRECONDITION),
    StatusRow(TxnLabelClosedError, _Code.FAILED_PRECONDITION),
    StatusRow(WrongHostError, _Code.UNAVAILABLE),
    StatusRow(BrokerShuttingDownError, _Code.UNAVAILABLE),
    StatusRow(CorruptDataError, _Code.DATA_LOSS),
    StatusRow(ReaderGroupNotFoundError, _Code.NOT_FOUND),
    StatusRow(ReaderGroupExistsError, _Code.ALREADY_EXISTS),
    StatusRow(GroupStateConflictError, _Code.FAILED_PRECONDITION),
    StatusRow(InternalTopicError, _Code.PERMISSION_DENIED),
    StatusRow(PermissionDeniedError, _Code.PERMISSION_DENIED),
)

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


def trailing_metadata_for(error: BaseException) -> tuple[tuple[str, str], ...]:
    """``folio-error`` and ``folio-error-context`` for ``error`` (empty if unknown)."""
    error = _translated(error)
    if isinstance(error, BrokerError) and _row_for(error) is not None:
        return (
            (ledger_status.ERROR_KEY, type(error).__name__),
            (ledger_status.ERROR_CONTEXT_KEY,
             json.dumps(clip_context(error.context()), separators=(",", ":"))),
        )
    if isinstance(error, LedgerError):
        return tuple((key, clip_context_json(value) if key == ledger_status.ERROR_CONTEXT_KEY
                      else value) for key, value in ledger_status.trailing_metadata_for(error))
    return ()


def is_retriable(error: BaseException) -> bool:
    """Whether a client may send the same request again and succeed."""
    return bool(getattr(_translated(error), "retriable", False))
