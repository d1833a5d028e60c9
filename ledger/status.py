"""Ledger errors <-> gRPC status codes: one table, read both ways.

The server side turns a raised ``LedgerError`` into a status code, a message
and trailing metadata (``status_for``, ``trailing_metadata_for``); the client
side turns a status back into the same typed error (``error_from_status``,
``error_from_rpc_error``). The exact error travels in the trailing metadata as
a stable number (``folio-error-code``, a ``LedgerErrorCode`` of the bookie
protocol, so renaming a class breaks no peer), beside its class name
(``folio-error``, which older peers send and read) and its typed context
(``ledger_id``, ``size``/``limit``, ``path``/``expected``/``actual``) as JSON
under ``folio-error-context``. A reader takes the number if it knows it, else
the name, else the status code alone (a status from a proxy, or gRPC itself),
which maps to the first class of the table with that code.

Anything the table does not know (a bug) becomes INTERNAL, and its traceback
is logged at ERROR here, since it is the last place that still has it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final, TypeVar

import grpc

from ledger._proto.v1 import bookie_pb2
from ledger.errors import (
    BadVersionError,
    BookieUnavailableError,
    DataLossError,
    EntryTooLargeError,
    InvalidArgumentError,
    LedgerClosedError,
    LedgerDeletedError,
    LedgerError,
    LedgerFencedError,
    LedgerRecoveryError,
    MetadataSessionExpiredError,
    MetadataUnavailableError,
    NodeExistsError,
    NoNodeError,
    NoSuchEntryError,
    NoSuchLedgerError,
    NotEmptyError,
    NotEnoughBookiesError,
    StorageError,
)

__all__ = [
    "ERROR_CODE_KEY",
    "ERROR_CONTEXT_KEY",
    "ERROR_KEY",
    "ERROR_NUMBERS",
    "STATUS_TABLE",
    "StatusRow",
    "error_from_rpc_error",
    "error_from_status",
    "has_error_metadata",
    "lookup_by_class",
    "status_for",
    "trailing_metadata_for",
]

log = logging.getLogger(__name__)

R = TypeVar("R")

#: Trailing metadata key holding the error's stable number (a ``LedgerErrorCode``).
ERROR_CODE_KEY: Final = "folio-error-code"
#: Trailing metadata key holding the error's class name (read when no known number came).
ERROR_KEY: Final = "folio-error"
#: Trailing metadata key holding the error's typed context as a JSON object.
ERROR_CONTEXT_KEY: Final = "folio-error-context"

_Code = grpc.StatusCode


@dataclass(frozen=True, slots=True)
class StatusRow:
    """One error class, its status code and the attributes that travel with it.

    Attributes:
        error: the ``LedgerError`` subclass.
        code: the gRPC status code it is answered with.
        context: attribute names (besides ``ledger_id``) sent as typed context.
    """

    error: type[LedgerError]
    code: grpc.StatusCode
    context: tuple[str, ...] = ()


#: The one table. For a code shared by several classes, the first row is the
#: class a bare status (no ``folio-error`` metadata) is read back as.
STATUS_TABLE: Final[tuple[StatusRow, ...]] = (
    StatusRow(InvalidArgumentError, _Code.INVALID_ARGUMENT),
    StatusRow(NoSuchLedgerError, _Code.NOT_FOUND),
    StatusRow(NoSuchEntryError, _Code.NOT_FOUND),
    StatusRow(NoNodeError, _Code.NOT_FOUND),
    StatusRow(NodeExistsError, _Code.ALREADY_EXISTS),
    StatusRow(LedgerFencedError, _Code.FAILED_PRECONDITION),
    StatusRow(LedgerDeletedError, _Code.FAILED_PRECONDITION),
    StatusRow(LedgerClosedError, _Code.FAILED_PRECONDITION),
    StatusRow(NotEmptyError, _Code.FAILED_PRECONDITION),
    # A lost compare-and-set is a conflict: re-read and retry, as ABORTED says.
    StatusRow(BadVersionError, _Code.ABORTED, ("path", "expected", "actual")),
    StatusRow(EntryTooLargeError, _Code.RESOURCE_EXHAUSTED, ("size", "limit")),
    StatusRow(BookieUnavailableError, _Code.UNAVAILABLE),
    StatusRow(NotEnoughBookiesError, _Code.UNAVAILABLE),
    StatusRow(StorageError, _Code.UNAVAILABLE),
    StatusRow(LedgerRecoveryError, _Code.UNAVAILABLE),
    StatusRow(DataLossError, _Code.DATA_LOSS),
    # ZooKeeper out of reach (cluster mode): a retry may work once it is back.
    StatusRow(MetadataUnavailableError, _Code.UNAVAILABLE),
    StatusRow(MetadataSessionExpiredError, _Code.UNAVAILABLE),
)

_Number = bookie_pb2.LedgerErrorCode

#: The wire number of each row's class (``LedgerErrorCode`` in proto/ledger/v1/bookie.proto).
#: Kept apart from the rows so that a row added without a number still works
#: by name; tests/unit/ledger/test_status.py fails until it gets one.
ERROR_NUMBERS: Final[Mapping[type[LedgerError], int]] = {
    InvalidArgumentError: _Number.LEDGER_ERROR_CODE_INVALID_ARGUMENT,
    NoSuchLedgerError: _Number.LEDGER_ERROR_CODE_NO_SUCH_LEDGER,
    NoSuchEntryError: _Number.LEDGER_ERROR_CODE_NO_SUCH_ENTRY,
    NoNodeError: _Number.LEDGER_ERROR_CODE_NO_NODE,
    NodeExistsError: _Number.LEDGER_ERROR_CODE_NODE_EXISTS,
    LedgerFencedError: _Number.LEDGER_ERROR_CODE_LEDGER_FENCED,
    LedgerDeletedError: _Number.LEDGER_ERROR_CODE_LEDGER_DELETED,
    LedgerClosedError: _Number.LEDGER_ERROR_CODE_LEDGER_CLOSED,
    NotEmptyError: _Number.LEDGER_ERROR_CODE_NOT_EMPTY,
    BadVersionError: _Number.LEDGER_ERROR_CODE_BAD_VERSION,
    EntryTooLargeError: _Number.LEDGER_ERROR_CODE_ENTRY_TOO_LARGE,
    BookieUnavailableError: _Number.LEDGER_ERROR_CODE_BOOKIE_UNAVAILABLE,
    NotEnoughBookiesError: _Number.LEDGER_ERROR_CODE_NOT_ENOUGH_BOOKIES,
    StorageError: _Number.LEDGER_ERROR_CODE_STORAGE,
    LedgerRecoveryError: _Number.LEDGER_ERROR_CODE_LEDGER_RECOVERY,
    DataLossError: _Number.LEDGER_ERROR_CODE_DATA_LOSS,
    MetadataUnavailableError: _Number.LEDGER_ERROR_CODE_METADATA_UNAVAILABLE,
    MetadataSessionExpiredError: _Number.LEDGER_ERROR_CODE_METADATA_SESSION_EXPIRED,
}

_BY_CLASS: Final = {row.error: row for row in STATUS_TABLE}
_BY_NAME: Final = {row.error.__name__: row for row in STATUS_TABLE}
_BY_NUMBER: Final = {
    number: _BY_CLASS[error] for error, number in ERROR_NUMBERS.items() if error in _BY_CLASS
}
_BY_CODE: Final[dict[grpc.StatusCode, StatusRow]] = {}
for _row in STATUS_TABLE:
    _BY_CODE.setdefault(_row.code, _row)
# A bookie that never answered (refused, cut, past its deadline, shut down
# mid-call) is unavailable, whatever gRPC itself called it: a retry may work.
for _code in (_Code.DEADLINE_EXCEEDED, _Code.CANCELLED):
    _BY_CODE[_code] = _BY_CLASS[BookieUnavailableError]
del _row, _code


def lookup_by_class(table: Mapping[type, R], error: BaseException) -> R | None:
    """The row of ``error``'s class, or of its nearest mapped base class (MRO order)."""
    for cls in type(error).__mro__:
        row = table.get(cls)
        if row is not None:
            return row
    return None


def _row_for(error: BaseException) -> StatusRow | None:
    return lookup_by_class(_BY_CLASS, error)


def status_for(error: BaseException) -> tuple[grpc.StatusCode, str]:
    """The status code and message a servicer answers ``error`` with.

    Errors outside the table are bugs: they map to INTERNAL and their
    traceback is logged at ERROR.

    Args:
        error: the exception a domain call raised.

    Returns:
        ``(code, message)``; the message is ``str(error)`` for known errors.
    """
    row = _row_for(error)
    if row is None:
        log.error("unexpected error answered as INTERNAL", exc_info=error)
        return _Code.INTERNAL, f"internal error: {type(error).__name__}: {error}"
    return row.code, str(error)


def trailing_metadata_for(error: BaseException) -> tuple[tuple[str, str], ...]:
    """Trailing metadata that lets ``error_from_status`` rebuild ``error`` exactly.

    Empty for errors outside the table (they are answered as INTERNAL).
    """
    row = _row_for(error)
    if row is None:
        return ()
    context: dict[str, object] = {"ledger_id": getattr(error, "ledger_id", None)}
    for name in row.context:
        context[name] = getattr(error, name, None)
    number = ERROR_NUMBERS.get(row.error)
    numbered = () if number is None else ((ERROR_CODE_KEY, str(number)),)
    return (
        *numbered,
        (ERROR_KEY, row.error.__name__),
        (ERROR_CONTEXT_KEY, json.dumps(context, separators=(",", ":"))),
    )


def _metadata_value(metadata: Iterable[object], key: str) -> str | None:
    # Items are (key, value) pairs: plain tuples from grpc.aio, namedtuples
    # (``_Metadatum``) from the synchronous API.
    for item in metadata:
        if isinstance(item, tuple) and len(item) == 2 and item[0] == key:
            value = item[1]
            return value.decode() if isinstance(value, bytes) else str(value)
    return None


def _context(raw: str | None) -> dict[str, object]:
    if raw is None:
        return {}
    try:
        parsed = json.loads(raw)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def error_from_status(
    code: grpc.StatusCode,
    details: str | None,
    ledger_id: int | None = None,
    *,
    metadata: Iterable[object] = (),
) -> LedgerError:
    """The ``LedgerError`` a client raises for a failed call.

    Args:
        code: the call's status code.
        details: the call's status message; becomes the error's message.
        ledger_id: the ledger the call was about, if the status does not say.
        metadata: the call's trailing metadata, ``(key, value)`` pairs; with
            a known ``folio-error-code`` number, or else a known ``folio-error``
            class name, the exact class (and its typed context) is rebuilt,
            else the class follows ``code`` (unknown codes give a plain
            ``LedgerError``).

    Returns:
        The error, not raised. Typed context attributes missing from the
        metadata (``EntryTooLargeError.size`` of a bare status) are ``None``.
    """
    metadata = tuple(metadata)
    row: StatusRow | None = None
    number = _metadata_value(metadata, ERROR_CODE_KEY)
    if number is not None and number.isdigit():
        row = _BY_NUMBER.get(int(number))
    name = _metadata_value(metadata, ERROR_KEY)
    if row is None and name is not None:
        row = _BY_NAME.get(name)
    if row is None:
        row = _BY_CODE.get(code)
    message = details or code.name
    if row is None:
        return LedgerError(f"{code.name}: {message}", ledger_id=ledger_id)
    context = _context(_metadata_value(metadata, ERROR_CONTEXT_KEY))
    sent_ledger_id = context.get("ledger_id")
    if isinstance(sent_ledger_id, int):
        ledger_id = sent_ledger_id
    # Classes with typed context have their own __init__ signatures; build them
    # the same way for every row so the table alone decides what travels.
    error = row.error.__new__(row.error)
    LedgerError.__init__(error, message, ledger_id=ledger_id)
    for attribute in row.context:
        setattr(error, attribute, context.get(attribute))
    return error


def has_error_metadata(metadata: Iterable[object]) -> bool:
    """Whether trailing metadata names a ledger error (the peer answered itself)."""
    metadata = tuple(metadata)
    return (
        _metadata_value(metadata, ERROR_CODE_KEY) is not None
        or _metadata_value(metadata, ERROR_KEY) is not None
    )


def error_from_rpc_error(error: grpc.RpcError, ledger_id: int | None = None) -> LedgerError:
    """``error_from_status`` for a caught ``grpc.RpcError`` (sync or asyncio)."""
    return error_from_status(
        error.code(), error.details(), ledger_id, metadata=error.trailing_metadata() or ()
    )
