"""A gRPC status (code, message, trailing metadata) back to its typed SDK error.

The broker sends the exact error three ways in the trailing metadata: its
stable number under ``folio-error-code`` (an ``ErrorCode`` of
proto/folio/v1/errors.proto), its class name under ``folio-error`` (which
older brokers send alone) and its typed context, a JSON object, under
``folio-error-context``. A number the SDK knows gives its class (``NUMBER_NAMES``
names the server class it stands for); else a name the SDK knows gives that
class, and a server class without an SDK twin (the ledger's
``BookieUnavailableError``, say) gives its alias below; anything else, or a
status with no metadata at all (a proxy, a dead connection), falls back to the
class of the status code. The numbers and names come from the one error table
(``folio.api.v1.error_table``); the aliases are the SDK's own choice, and the
unit tests round-trip every row.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Final

import grpc

from folio import errors as e
from folio.api.v1 import append_pb2
from folio.api.v1.error_table import ERRORS

__all__ = [
    "CODE_CLASSES",
    "ERROR_CODE_KEY",
    "ERROR_CONTEXT_KEY",
    "ERROR_KEY",
    "NAME_ALIASES",
    "NAME_CLASSES",
    "NUMBER_NAMES",
    "error_from_reply",
    "error_from_rpc",
    "error_from_status",
]

#: Trailing metadata key holding the exact error's stable number, in decimal.
ERROR_CODE_KEY: Final = "folio-error-code"
#: Trailing metadata key naming the exact error class (read when no known number came).
ERROR_KEY: Final = "folio-error"
#: Trailing metadata key holding the error's typed context as a JSON object.
ERROR_CONTEXT_KEY: Final = "folio-error-context"

_Code = grpc.StatusCode

#: Server classes with no SDK twin, read back as the SDK class that means the same.
NAME_ALIASES: Final[dict[str, type[e.FolioError]]] = {
    "BrokerShuttingDownError": e.FolioUnavailableError,
    # The broker is up; the ledger service behind it is not (bookies down, disk full).
    "BookieUnavailableError": e.LedgerUnavailableError,
    "NotEnoughBookiesError": e.LedgerUnavailableError,
    "StorageError": e.LedgerUnavailableError,
    "LedgerRecoveryError": e.LedgerUnavailableError,
    # Produce to a sealed topic: no open segment, as a writer meets it.
    "TopicSealedError": e.SegmentSealedError,
    "EntryTooLargeError": e.EventTooLargeError,
    "TransactionTooLargeError": e.MaxTransactionSizeExceededError,
    "TransactionExpiredError": e.TxnFailedError,
    # BeginTxn with a label whose job ended (AbortTxns closed it).
    "TxnLabelClosedError": e.TxnFailedError,
    # The broker holds all the uncommitted transaction bytes it may: later may work.
    "TransactionBufferFullError": e.FolioUnavailableError,
    # Stored bytes the broker cannot decode: as lost as an entry no bookie holds.
    "CorruptDataError": e.DataLossError,
}

#: SDK classes the broker names in ``folio-error``, by name: every row of the
#: error table without an alias above (the SDK class of the server's name).
NAME_CLASSES: Final[dict[str, type[e.FolioError]]] = {
    row.name: getattr(e, row.name) for row in ERRORS if row.name not in NAME_ALIASES}

#: Every ``ErrorCode`` number -> the server class it stands for, which
#: ``NAME_CLASSES`` or ``NAME_ALIASES`` turns into the SDK class.
NUMBER_NAMES: Final[dict[int, str]] = {row.number: row.name for row in ERRORS}

#: The class of a status whose ``folio-error`` is missing or unknown.
CODE_CLASSES: Final[dict[grpc.StatusCode, type[e.FolioError]]] = {
    _Code.NOT_FOUND: e.NotFoundError,
    _Code.INVALID_ARGUMENT: e.InvalidArgumentError,
    _Code.ALREADY_EXISTS: e.AlreadyExistsError,
    _Code.OUT_OF_RANGE: e.OffsetOutOfRangeError,
    _Code.RESOURCE_EXHAUSTED: e.ResourceExhaustedError,
    _Code.UNAVAILABLE: e.FolioUnavailableError,
    # Not the client's own cancellation (grpc.aio raises CancelledError for that):
    # a broker that stops cancels the calls still running on it. Retriable, as
    # UNAVAILABLE: a reader looking a segment's owner up must not give up on it.
    _Code.CANCELLED: e.FolioUnavailableError,
    _Code.DEADLINE_EXCEEDED: e.TimeoutError,
    _Code.PERMISSION_DENIED: e.PermissionDeniedError,
    _Code.UNAUTHENTICATED: e.UnauthenticatedError,
}

#: Words of gRPC's own status message when a TLS handshake failed (no call was made).
_TLS_FAILURES: Final = ("handshake", "certificate_verify_failed", "ssl", "tls",
                        "wrong_version_number", "peer name")


def error_from_status(code: grpc.StatusCode, message: str,
                      metadata: Iterable[tuple[str, str | bytes]] = ()) -> e.FolioError:
    """The typed error for a gRPC status.

    Args:
        code: the status code.
        message: the status message (its details).
        metadata: the call's trailing metadata, ``(key, value)`` pairs.

    Returns:
        The error: the class of the ``folio-error-code`` number when the SDK
        knows it, else the class ``folio-error`` names when the SDK knows it,
        else the class of ``code`` (``FolioError`` for codes without one). Its
        ``context`` holds the ``folio-error-context`` object, if any; its
        ``error_code`` the number sent, its ``error_name`` the name sent (or,
        with a known number alone, the server class the number stands for).
    """
    name: str | None = None
    number: int | None = None
    context: dict[str, object] = {}
    for key, value in metadata:
        text = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
        if key == ERROR_CODE_KEY:
            number = int(text) if text.isdigit() else None
        elif key == ERROR_KEY:
            name = text
        elif key == ERROR_CONTEXT_KEY:
            context = _parse_context(text)
    cls: type[e.FolioError] | None = None
    numbered = NUMBER_NAMES.get(number) if number is not None else None
    if numbered is not None:
        cls = NAME_CLASSES.get(numbered) or NAME_ALIASES.get(numbered)
        name = name or numbered
    if cls is None and name is not None:
        cls = NAME_CLASSES.get(name) or NAME_ALIASES.get(name)
    if cls is None and code is _Code.UNAVAILABLE and _is_tls_failure(message):
        return e.TlsError(
            f"the TLS handshake with the broker failed ({message}): check that the "
            "broker serves TLS, that its certificate chains to the client's CA (TLS(ca=...), "
            "--tls-ca) and names the endpoint's host (or set server_name), and that a client "
            "certificate is given if the broker requires one", error_name=name,
            context=context, error_code=number)
    if cls is None:
        cls = CODE_CLASSES.get(code, e.FolioError)
    text = message or f"{code.name} without a message"
    if cls is e.FolioError and name is None:
        text = f"{code.name}: {text}"
    return cls(text, error_name=name, context=context, error_code=number)


def _is_tls_failure(message: str) -> bool:
    lowered = message.lower()
    return any(word in lowered for word in _TLS_FAILURES)


def error_from_rpc(error: grpc.RpcError) -> e.FolioError:
    """The typed error for a failed gRPC call (sync or ``grpc.aio``)."""
    code = error.code() if hasattr(error, "code") else _Code.UNKNOWN
    details = error.details() if hasattr(error, "details") else str(error)
    trailing = error.trailing_metadata() if hasattr(error, "trailing_metadata") else None
    return error_from_status(code or _Code.UNKNOWN, details or "", _pairs(trailing))


def _pairs(metadata: object) -> list[tuple[str, str | bytes]]:
    if metadata is None:
        return []
    pairs: list[tuple[str, str | bytes]] = []
    for item in metadata:  # type: ignore[attr-defined]
        key, value = item
        pairs.append((str(key), value))
    return pairs


def _parse_context(text: str) -> dict[str, object]:
    try:
        parsed = json.loads(text)
    except ValueError:
        return {}
    if not isinstance(parsed, dict):
        return {}
    return {str(key): value for key, value in parsed.items()}


_CODES_BY_VALUE: Final = {code.value[0]: code for code in grpc.StatusCode}


def error_from_reply(reply: append_pb2.AppendReply, segment: str,
                     sealed_note: str = "") -> e.FolioError:
    """The typed error of a failure reply on the Append stream (any but DataAppended/Setup).

    Args:
        reply: the failure reply.
        segment: the flow's segment, named in the message and the error.
        sealed_note: appended to the message of a ``SegmentIsSealed``.
    """
    kind = reply.WhichOneof("reply")
    if kind == "segment_is_sealed":
        sealed = reply.segment_is_sealed
        return e.SegmentSealedError(
            f"segment {segment!r} is sealed at offset {sealed.end_offset}{sealed_note}",
            segment=segment, end_offset=sealed.end_offset)
    if kind == "no_such_segment":
        missing = reply.no_such_segment
        return e.NoSuchSegmentError(
            f"segment {segment!r}: {missing.message or 'no such segment'}", segment=segment)
    if kind == "wrong_host":
        return e.WrongHostError(f"the broker does not own segment {segment!r}",
                                segment=segment, owner=reply.wrong_host.owner)
    if kind == "invalid_event_number":
        invalid = reply.invalid_event_number
        return e.InvalidEventNumberError(invalid.message, expected_above=invalid.expected_above)
    failed = reply.append_failed
    code = _CODES_BY_VALUE.get(failed.code, grpc.StatusCode.UNKNOWN)
    metadata = [(ERROR_KEY, failed.error)] if failed.error else []
    if failed.error_code:
        metadata.append((ERROR_CODE_KEY, str(failed.error_code)))
    error = error_from_status(code, failed.message, metadata)
    if failed.retriable != error.retriable:
        error.retriable = failed.retriable  # the broker's word wins
    return error
