"""Errors: the status tables round-trip every row, typed context, retriable flags."""

from __future__ import annotations

import json
import pickle

import grpc
import pytest

import folio
from folio import _status
from folio import errors as e
from folio.api.v1 import append_pb2
from folio.api.v1.errors_pb2 import ErrorCode

Code = grpc.StatusCode

#: Every class the broker names and the status code it sends it with (broker/status.py).
SERVER_ROWS: list[tuple[str, grpc.StatusCode, type[e.FolioError]]] = [
    ("TopicNameError", Code.INVALID_ARGUMENT, e.TopicNameError),
    ("InvalidArgumentError", Code.INVALID_ARGUMENT, e.InvalidArgumentError),
    ("InvalidBlockError", Code.INVALID_ARGUMENT, e.InvalidBlockError),
    ("TopicNotFoundError", Code.NOT_FOUND, e.TopicNotFoundError),
    ("NoSuchSegmentError", Code.NOT_FOUND, e.NoSuchSegmentError),
    ("TopicExistsError", Code.ALREADY_EXISTS, e.TopicExistsError),
    ("SegmentSealedError", Code.FAILED_PRECONDITION, e.SegmentSealedError),
    ("TopicSealedError", Code.FAILED_PRECONDITION, e.SegmentSealedError),
    ("InvalidEventNumberError", Code.INVALID_ARGUMENT, e.InvalidEventNumberError),
    ("OffsetOutOfRangeError", Code.OUT_OF_RANGE, e.OffsetOutOfRangeError),
    ("EventTooLargeError", Code.RESOURCE_EXHAUSTED, e.EventTooLargeError),
    ("WrongHostError", Code.UNAVAILABLE, e.WrongHostError),
    ("BrokerShuttingDownError", Code.UNAVAILABLE, e.FolioUnavailableError),
    ("BookieUnavailableError", Code.UNAVAILABLE, e.LedgerUnavailableError),
    ("NotEnoughBookiesError", Code.UNAVAILABLE, e.LedgerUnavailableError),
    ("StorageError", Code.UNAVAILABLE, e.LedgerUnavailableError),
    ("LedgerRecoveryError", Code.UNAVAILABLE, e.LedgerUnavailableError),
    ("EntryTooLargeError", Code.RESOURCE_EXHAUSTED, e.EventTooLargeError),
    ("TransactionTooLargeError", Code.RESOURCE_EXHAUSTED, e.MaxTransactionSizeExceededError),
    ("TransactionExpiredError", Code.FAILED_PRECONDITION, e.TxnFailedError),
    ("TransactionBufferFullError", Code.RESOURCE_EXHAUSTED, e.FolioUnavailableError),
    ("TxnStateError", Code.FAILED_PRECONDITION, e.TxnStateError),
    ("TxnNotFoundError", Code.NOT_FOUND, e.TxnNotFoundError),
    ("ReaderGroupNotFoundError", Code.NOT_FOUND, e.ReaderGroupNotFoundError),
    ("ReaderGroupExistsError", Code.ALREADY_EXISTS, e.ReaderGroupExistsError),
    ("GroupStateConflictError", Code.FAILED_PRECONDITION, e.GroupStateConflictError),
    ("ReaderGroupNotEmptyError", Code.FAILED_PRECONDITION, e.ReaderGroupNotEmptyError),
    ("InternalTopicError", Code.PERMISSION_DENIED, e.InternalTopicError),
    ("PermissionDeniedError", Code.PERMISSION_DENIED, e.PermissionDeniedError),
    ("TxnLabelClosedError", Code.FAILED_PRECONDITION, e.TxnFailedError),
    ("CorruptDataError", Code.DATA_LOSS, e.DataLossError),
    ("DataLossError", Code.DATA_LOSS, e.DataLossError),
]


def _metadata(name: str, context: dict[str, object] | None = None) -> list[tuple[str, str]]:
    pairs = [(_status.ERROR_KEY, name)]
    if context is not None:
        pairs.append((_status.ERROR_CONTEXT_KEY, json.dumps(context)))
    return pairs


@pytest.mark.parametrize(("name", "code", "cls"), SERVER_ROWS)
def test_every_server_name_reads_back_as_its_class(
        name: str, code: grpc.StatusCode, cls: type[e.FolioError]) -> None:
    error = _status.error_from_status(code, "why", _metadata(name))
    assert type(error) is cls
    assert error.error_name == name
    assert str(error) == "why"


def test_every_sdk_class_name_round_trips() -> None:
    for name, cls in _status.NAME_CLASSES.items():
        assert cls.__name__ == name
        error = _status.error_from_status(Code.UNKNOWN, "m", _metadata(name))
        assert type(error) is cls
    assert {cls.__name__ for _, _, cls in SERVER_ROWS if cls.__name__ in
            _status.NAME_CLASSES} == set(_status.NAME_CLASSES)


@pytest.mark.parametrize(("code", "cls"), list(_status.CODE_CLASSES.items()))
def test_a_bare_status_reads_back_by_code(code: grpc.StatusCode,
                                          cls: type[e.FolioError]) -> None:
    assert type(_status.error_from_status(code, "m")) is cls
    unknown = _status.error_from_status(code, "m", _metadata("SomeFutureError"))
    assert type(unknown) is cls and unknown.error_name == "SomeFutureError"


def test_code_table_is_the_documented_one() -> None:
    assert {
        Code.NOT_FOUND: e.NotFoundError,
        Code.INVALID_ARGUMENT: e.InvalidArgumentError,
        Code.ALREADY_EXISTS: e.AlreadyExistsError,
        Code.OUT_OF_RANGE: e.OffsetOutOfRangeError,
        Code.RESOURCE_EXHAUSTED: e.ResourceExhaustedError,
        Code.UNAVAILABLE: e.FolioUnavailableError,
        Code.CANCELLED: e.FolioUnavailableError,  # by a stopping broker
        Code.DEADLINE_EXCEEDED: e.TimeoutError,
        Code.PERMISSION_DENIED: e.PermissionDeniedError,
        Code.UNAUTHENTICATED: e.UnauthenticatedError,
    } == _status.CODE_CLASSES


@pytest.mark.parametrize("code", [Code.INTERNAL, Code.UNKNOWN, Code.FAILED_PRECONDITION,
                                  Code.ABORTED, Code.DATA_LOSS])
def test_other_codes_are_plain_folio_errors(code: grpc.StatusCode) -> None:
    error = _status.error_from_status(code, "boom")
    assert type(error) is e.FolioError
    assert code.name in str(error) and "boom" in str(error)


def test_typed_context_travels() -> None:
    out_of_range = _status.error_from_status(Code.OUT_OF_RANGE, "gone", _metadata(
        "OffsetOutOfRangeError",
        {"segment": "t/0", "offset": 3, "start_offset": 10, "end_offset": 20}))
    assert isinstance(out_of_range, e.OffsetOutOfRangeError)
    assert (out_of_range.segment, out_of_range.offset, out_of_range.start_offset,
            out_of_range.end_offset) == ("t/0", 3, 10, 20)
    too_large = _status.error_from_status(Code.RESOURCE_EXHAUSTED, "big", _metadata(
        "EventTooLargeError", {"size": 5, "limit": 4}))
    assert isinstance(too_large, e.EventTooLargeError)
    assert (too_large.size, too_large.limit) == (5, 4)
    sealed = _status.error_from_status(Code.FAILED_PRECONDITION, "s", _metadata(
        "SegmentSealedError", {"segment": "t/1", "end_offset": 7}))
    assert isinstance(sealed, e.SegmentSealedError)
    assert (sealed.segment, sealed.end_offset) == ("t/1", 7)
    wrong = _status.error_from_status(Code.UNAVAILABLE, "w", _metadata(
        "WrongHostError", {"segment": "t/1", "owner": ""}))
    assert isinstance(wrong, e.WrongHostError) and wrong.owner is None and wrong.retriable
    state = _status.error_from_status(Code.FAILED_PRECONDITION, "t", _metadata(
        "TxnStateError", {"txn_id": "ab" * 16, "expected": "OPEN", "actual": "ABORTED"}))
    assert isinstance(state, e.TxnStateError) and not state.retriable
    assert (state.txn_id, state.expected, state.actual) == ("ab" * 16, "OPEN", "ABORTED")
    missing = _status.error_from_status(Code.NOT_FOUND, "n", _metadata(
        "TxnNotFoundError", {"txn_id": "cd" * 16}))
    assert isinstance(missing, e.TxnNotFoundError) and isinstance(missing, e.NotFoundError)
    assert missing.txn_id == "cd" * 16


def test_missing_and_bad_context_give_none() -> None:
    error = _status.error_from_status(Code.OUT_OF_RANGE, "x", [
        (_status.ERROR_KEY, b"OffsetOutOfRangeError"), (_status.ERROR_CONTEXT_KEY, b"[1, 2]")])
    assert isinstance(error, e.OffsetOutOfRangeError)
    assert error.start_offset is None and error.context == {}
    garbage = _status.error_from_status(Code.OUT_OF_RANGE, "", [
        (_status.ERROR_CONTEXT_KEY, "{not json")])
    assert garbage.context == {} and "OUT_OF_RANGE" in str(garbage)
    # A context key named like a constructor argument cannot break construction.
    odd = _status.error_from_status(Code.NOT_FOUND, "x", _metadata(
        "TopicNotFoundError", {"message": "m", "error_name": "n", "context": 1}))
    assert odd.context == {"message": "m", "error_name": "n", "context": 1}


def test_retriable_flags() -> None:
    assert e.FolioUnavailableError.retriable and e.WrongHostError.retriable
    assert e.TimeoutError.retriable
    # The outcome is unknown (maybe written): resending may duplicate, so not retriable.
    for cls in (e.FolioError, e.InvalidArgumentError, e.NotFoundError, e.TopicExistsError,
                e.SegmentSealedError, e.OffsetOutOfRangeError, e.EventTooLargeError,
                e.InvalidEventNumberError, e.WriterClosedError, e.InvalidBlockError,
                e.DeliveryTimeoutError, e.ForkedProcessError):
        assert not cls.retriable, cls


def test_hierarchy() -> None:
    assert issubclass(e.TopicNameError, e.InvalidArgumentError)
    assert issubclass(e.TopicNotFoundError, e.NotFoundError)
    assert issubclass(e.NoSuchSegmentError, e.NotFoundError)
    assert issubclass(e.TopicExistsError, e.AlreadyExistsError)
    assert issubclass(e.EventTooLargeError, e.ResourceExhaustedError)
    assert issubclass(e.FolioUnavailableError, ConnectionError)
    assert issubclass(e.TimeoutError, TimeoutError)  # the builtin
    assert issubclass(e.DeliveryTimeoutError, e.TimeoutError)
    for name in e.__all__:
        assert issubclass(getattr(e, name), e.FolioError)
        assert getattr(folio, name) is getattr(e, name)


def test_sdk_raised_errors_carry_fields() -> None:
    error = e.EventTooLargeError("too big", size=10, limit=5)
    assert (error.size, error.limit, error.message) == (10, 5, "too big")
    assert e.FolioError().message == ""


def _numbered(number: int, name: str | None = None) -> list[tuple[str, str]]:
    pairs = [(_status.ERROR_CODE_KEY, str(number))]
    if name is not None:
        pairs.append((_status.ERROR_KEY, name))
    return pairs


def test_every_error_code_has_a_server_row_and_a_typed_class() -> None:
    numbers = set(ErrorCode.values()) - {ErrorCode.ERROR_CODE_UNSPECIFIED}
    assert set(_status.NUMBER_NAMES) == numbers
    assert set(_status.NUMBER_NAMES.values()) == {name for name, _, _ in SERVER_ROWS}


@pytest.mark.parametrize(("name", "code", "cls"), SERVER_ROWS)
def test_every_number_reads_back_as_its_class_without_a_name(
        name: str, code: grpc.StatusCode, cls: type[e.FolioError]) -> None:
    number = next(n for n, numbered in _status.NUMBER_NAMES.items() if numbered == name)
    error = _status.error_from_status(code, "why", _numbered(number))
    assert type(error) is cls and cls is not e.FolioError
    assert (error.error_code, error.error_name, str(error)) == (number, name, "why")
    # Whatever status code a proxy rewrote it to, the number decides.
    assert type(_status.error_from_status(Code.UNKNOWN, "why", _numbered(number))) is cls


def test_the_number_wins_over_the_name_and_unknown_numbers_fall_back() -> None:
    renamed = _status.error_from_status(
        Code.NOT_FOUND, "m", _numbered(ErrorCode.ERROR_CODE_TOPIC_NOT_FOUND, "TopicGoneError"))
    assert type(renamed) is e.TopicNotFoundError and renamed.error_name == "TopicGoneError"
    future = _status.error_from_status(Code.NOT_FOUND, "m", _numbered(9999, "TxnNotFoundError"))
    assert type(future) is e.TxnNotFoundError and future.error_code == 9999
    bare = _status.error_from_status(Code.UNAVAILABLE, "m", _numbered(9999))
    assert type(bare) is e.FolioUnavailableError and bare.error_name is None
    garbage = _status.error_from_status(Code.NOT_FOUND, "m", [(_status.ERROR_CODE_KEY, "x")])
    assert type(garbage) is e.NotFoundError and garbage.error_code is None
    old_broker = _status.error_from_status(Code.NOT_FOUND, "m", _metadata("TopicNotFoundError"))
    assert type(old_broker) is e.TopicNotFoundError and old_broker.error_code is None


def test_an_append_failure_reply_reads_its_number_first() -> None:
    reply = append_pb2.AppendReply(append_failed=append_pb2.AppendFailed(
        code=Code.RESOURCE_EXHAUSTED.value[0], message="big", error="RenamedError",
        retriable=False, error_code=ErrorCode.ERROR_CODE_TRANSACTION_TOO_LARGE))
    error = _status.error_from_reply(reply, "t/0")
    assert type(error) is e.MaxTransactionSizeExceededError
    assert error.error_code == ErrorCode.ERROR_CODE_TRANSACTION_TOO_LARGE
    old = append_pb2.AppendReply(append_failed=append_pb2.AppendFailed(
        code=Code.UNAVAILABLE.value[0], message="down", error="BookieUnavailableError",
        retriable=True))
    assert type(_status.error_from_reply(old, "t/0")) is e.LedgerUnavailableError


def test_a_failed_tls_handshake_is_a_tls_error() -> None:
    error = _status.error_from_status(
        Code.UNAVAILABLE, "failed to connect to all addresses; last error: UNAVAILABLE: "
        "ipv4:127.0.0.1:1: Ssl handshake failed: SSL_ERROR_SSL: CERTIFICATE_VERIFY_FAILED")
    assert isinstance(error, e.TlsError) and not error.retriable
    assert "--tls-ca" in str(error)
    plain = _status.error_from_status(Code.UNAVAILABLE, "Connection refused")
    assert type(plain) is e.FolioUnavailableError


def test_deserialization_error_is_typed_not_retriable_and_pickles_whole() -> None:
    cause = ValueError("bad")
    error = folio.DeserializationError("segment t/0 offset 3: ...", topic="t", segment="t/0",
                                       offset=3, payload=b"x", cause=cause)
    assert isinstance(error, folio.FolioError) and not error.retriable
    assert error.__cause__ is cause and error.context == {"topic": "t", "segment": "t/0",
                                                          "offset": 3}
    copy = pickle.loads(pickle.dumps(error))  # as a Spark executor's error travels
    assert (copy.message, copy.topic, copy.segment, copy.offset, copy.payload) == (
        error.message, "t", "t/0", 3, b"x")
    assert repr(copy.cause) == repr(cause)
