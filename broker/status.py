"""Broker errors -> gRPC status codes, derived from the one error table.

The rows are ``folio.api.v1.error_table.ERRORS`` (one per error: its number,
status code, retriability and Kafka code); this module binds each to its class
and answers with it. Every refusal a client gets from the broker goes through here: the status
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

import broker.errors
import ledger.errors
from broker.clip import clip_context, clip_context_json, clip_message
from broker.errors import BrokerError, NoSuchSegmentError, WrongHostError
from folio.api.v1.error_table import ERRORS, ErrorRow
from folio.api.v1.errors_pb2 import ErrorCode
from ledger import status as ledger_status
from ledger.errors import LedgerDeletedError, LedgerError, LedgerFencedError

__all__ = [
    "CLASS_ROWS",
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


def _classes(module: object, base: type[Exception]) -> dict[str, type[Exception]]:
    return {name: value for name, value in vars(module).items()
            if isinstance(value, type) and issubclass(value, base)}


_BROKER_CLASSES: Final = _classes(broker.errors, BrokerError)
_LEDGER_CLASSES: Final = _classes(ledger.errors, LedgerError)


def _class_of(row: ErrorRow) -> type[Exception]:
    classes = _LEDGER_CLASSES if row.from_ledger else _BROKER_CLASSES
    cls = classes.get(row.name)
    if cls is None:  # a row without its class: a bug found at import, by every test
        raise ImportError(f"error table row {row.number} names {row.name!r}, which "
                          f"{'ledger' if row.from_ledger else 'broker'}.errors does not define")
    return cls


#: Every row of the one error table (folio/api/v1/error_table.py) by its class.
CLASS_ROWS: Final[dict[type[Exception], ErrorRow]] = {_class_of(row): row for row in ERRORS}

#: The broker's rows: each ``BrokerError`` class, its status code and number.
STATUS_TABLE: Final[tuple[StatusRow, ...]] = tuple(
    StatusRow(cls, row.code, row.number) for cls, row in CLASS_ROWS.items()
    if issubclass(cls, BrokerError))

#: The public number of each ledger error a client may meet through the broker
#: (the ledger service failing under it). Other ledger errors reaching a client
#: are broker bugs: they travel by name and status code only. Their status code
#: is the ledger table's (ledger/status.py), which the rows repeat (a test checks).
LEDGER_ERROR_NUMBERS: Final[dict[type[LedgerError], ErrorCode.ValueType]] = {
    cls: row.number for cls, row in CLASS_ROWS.items() if issubclass(cls, LedgerError)}

_BY_CLASS: Final = {row.error: row for row in STATUS_TABLE}


def _row_for(error: BaseException) -> StatusRow | None:
    return ledger_status.lookup_by_class(_BY_CLASS, error)


def _translated(error: BaseException) -> BaseException:
    # A fenced ledger under a segment means another broker recovered it: this
    # broker no longer owns the segment, which clients handle as WrongHost.
    # A deleted one: the segment was deleted (through another broker).
    if isinstance(error, LedgerDeletedError):
        return NoSuchSegmentError(f"ledger {error.ledger_id}",
                                  f"ledger {error.ledger_id} was deleted with its segment")
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
