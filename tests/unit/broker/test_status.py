"""The broker's status table: every error class answers with its code, name and context."""

from __future__ import annotations

import json

import grpc
import pytest

import broker.errors
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
    ReaderGroupNotEmptyError,
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
from broker.status import (
    LEDGER_ERROR_NUMBERS,
    STATUS_TABLE,
    error_number,
    is_retriable,
    status_for,
    trailing_metadata_for,
)
from folio.api.v1.errors_pb2 import ErrorCode
from ledger import status as ledger_status
from ledger.errors import BookieUnavailableError, LedgerClosedError, LedgerError, LedgerFencedError

_Code = grpc.StatusCode

CASES: list[tuple[BrokerError, grpc.StatusCode, dict[str, object]]] = [
    (TopicNameError("bad name"), _Code.INVALID_ARGUMENT, {}),
    (InvalidArgumentError("bad"), _Code.INVALID_ARGUMENT, {}),
    (InvalidBlockError("bad block"), _Code.INVALID_ARGUMENT, {}),
    (TopicNotFoundError("t"), _Code.NOT_FOUND, {"topic": "t"}),
    (NoSuchSegmentError("t/1"), _Code.NOT_FOUND, {"segment": "t/1"}),
    (TopicExistsError("t"), _Code.ALREADY_EXISTS, {"topic": "t"}),
    (TopicSealedError("t"), _Code.FAILED_PRECONDITION, {"topic": "t"}),
    (SegmentSealedError("t/0", 9), _Code.FAILED_PRECONDITION, {"segment": "t/0", "end_offset": 9}),
    (InvalidEventNumberError("no events", 4), _Code.INVALID_ARGUMENT, {"expected_above": 4}),
    (OffsetOutOfRangeError("t/0", 1, 5, 9), _Code.OUT_OF_RANGE,
     {"segment": "t/0", "offset": 1, "start_offset": 5, "end_offset": 9}),
    (EventTooLargeError(11, 10), _Code.RESOURCE_EXHAUSTED, {"size": 11, "limit": 10}),
    (TransactionTooLargeError(17 << 20, 16 << 20), _Code.RESOURCE_EXHAUSTED,
     {"size": 17 << 20, "limit": 16 << 20}),
    (TransactionBufferFullError(300, 256), _Code.RESOURCE_EXHAUSTED, {"size": 300, "limit": 256}),
    (TransactionExpiredError(130_000, 120_000), _Code.FAILED_PRECONDITION,
     {"held_ms": 130_000, "max_held_ms": 120_000}),
    (TxnNotFoundError("00" * 16), _Code.NOT_FOUND, {"txn_id": "00" * 16}),
    (TxnStateError("01" * 16, "OPEN", "ABORTED"), _Code.FAILED_PRECONDITION,
     {"txn_id": "01" * 16, "expected": "OPEN", "actual": "ABORTED"}),
    (TxnLabelClosedError("job-1"), _Code.FAILED_PRECONDITION, {"label": "job-1"}),
    (WrongHostError("t/0", "h:1"), _Code.UNAVAILABLE, {"segment": "t/0", "owner": "h:1"}),
    (BrokerShuttingDownError("stopping"), _Code.UNAVAILABLE, {}),
    (CorruptDataError("bad entry"), _Code.DATA_LOSS, {"what": "entry"}),
    (ReaderGroupNotFoundError("g"), _Code.NOT_FOUND, {"group": "g"}),
    (ReaderGroupExistsError("g"), _Code.ALREADY_EXISTS, {"group": "g"}),
    (GroupStateConflictError("g", 3, 4), _Code.FAILED_PRECONDITION,
     {"group": "g", "expected_version": 3, "version": 4}),
    (ReaderGroupNotEmptyError("g", ["m-1"]), _Code.FAILED_PRECONDITION,
     {"group": "g", "members": ["m-1"]}),
    (InternalTopicError("_txnlog", "DeleteTopic"), _Code.PERMISSION_DENIED,
     {"topic": "_txnlog", "action": "DeleteTopic"}),
    (PermissionDeniedError("no"), _Code.PERMISSION_DENIED, {}),
]


def test_every_row_of_the_table_has_a_case() -> None:
    assert {row.error for row in STATUS_TABLE} == {type(error) for error, _, _ in CASES}


@pytest.mark.parametrize(("error", "code", "context"), CASES,
                         ids=[type(error).__name__ for error, _, _ in CASES])
def test_status_names_the_class_and_carries_its_context(
    error: BrokerError, code: grpc.StatusCode, context: dict[str, object]
) -> None:
    assert status_for(error) == (code, str(error))
    metadata = dict(trailing_metadata_for(error))
    assert metadata["folio-error"] == type(error).__name__
    assert metadata["folio-error-code"] == str(error_number(error))
    assert json.loads(metadata["folio-error-context"]) == context


def test_messages_name_the_limits() -> None:
    assert "10 bytes" in str(EventTooLargeError(11, 10))
    assert "16777216 bytes (16 MiB) per transaction" in str(
        TransactionTooLargeError(17 << 20, 16 << 20))
    assert "transaction expired" in str(TransactionExpiredError(130_000, 120_000))
    assert is_retriable(TransactionBufferFullError(300, 256))
    assert not is_retriable(TransactionTooLargeError(17 << 20, 16 << 20))
    assert "start offset 5" in str(OffsetOutOfRangeError("t/0", 1, 5, 9))
    assert "end offset 9" in str(OffsetOutOfRangeError("t/0", 10, 5, 9))


def test_ledger_errors_keep_the_ledger_table_and_fencing_means_wrong_host() -> None:
    assert status_for(BookieUnavailableError("down"))[0] is _Code.UNAVAILABLE
    assert dict(trailing_metadata_for(BookieUnavailableError("down")))["folio-error"] \
        == "BookieUnavailableError"
    assert status_for(LedgerFencedError("fenced", ledger_id=3))[0] is _Code.UNAVAILABLE
    assert dict(trailing_metadata_for(LedgerFencedError("x", ledger_id=3)))["folio-error"] \
        == "WrongHostError"
    assert is_retriable(LedgerFencedError("x", ledger_id=3))
    assert not is_retriable(TopicNotFoundError("t"))


def test_unknown_errors_are_internal_and_send_no_class(caplog: pytest.LogCaptureFixture) -> None:
    code, message = status_for(RuntimeError("boom"))
    assert code is _Code.INTERNAL
    assert "RuntimeError: boom" in message
    assert trailing_metadata_for(RuntimeError("boom")) == ()
    assert "unexpected error" in caplog.text


def _subclasses(cls: type[BrokerError]) -> set[type[BrokerError]]:
    """Every subclass of ``cls`` the broker package defines (tests may define their own)."""
    found: set[type[BrokerError]] = set()
    for sub in cls.__subclasses__():
        if sub.__module__.startswith("broker."):
            found.add(sub)
        found |= _subclasses(sub)
    return found


def test_every_broker_error_class_has_a_row_with_a_unique_number() -> None:
    declared = {cls for cls in vars(broker.errors).values() if isinstance(cls, type)
                and issubclass(cls, BrokerError) and cls is not BrokerError}
    assert declared <= _subclasses(BrokerError)
    assert {row.error for row in STATUS_TABLE} == _subclasses(BrokerError)
    numbers = [row.number for row in STATUS_TABLE] + list(LEDGER_ERROR_NUMBERS.values())
    assert len(numbers) == len(set(numbers))
    assert ErrorCode.ERROR_CODE_UNSPECIFIED not in numbers


def test_every_error_code_of_the_proto_is_sent_for_some_error() -> None:
    """A number in errors.proto that nothing sends is a number the SDK maps for nothing."""
    sent = {row.number for row in STATUS_TABLE} | set(LEDGER_ERROR_NUMBERS.values())
    assert sent == set(ErrorCode.values()) - {ErrorCode.ERROR_CODE_UNSPECIFIED}


def test_numbers_are_the_documented_ones() -> None:
    """Numbers never change: this is the errors.proto table, written out."""
    assert {row.error.__name__: int(row.number) for row in STATUS_TABLE} == {
        "InvalidArgumentError": 1, "InvalidBlockError": 2, "TopicNameError": 3,
        "TopicNotFoundError": 4, "NoSuchSegmentError": 5, "TopicExistsError": 6,
        "TopicSealedError": 7, "SegmentSealedError": 8, "InvalidEventNumberError": 9,
        "OffsetOutOfRangeError": 10, "EventTooLargeError": 11, "TransactionTooLargeError": 12,
        "TransactionBufferFullError": 13, "TransactionExpiredError": 14, "TxnNotFoundError": 15,
        "TxnStateError": 16, "TxnLabelClosedError": 17, "WrongHostError": 18,
        "BrokerShuttingDownError": 19, "CorruptDataError": 20, "ReaderGroupNotFoundError": 21,
        "ReaderGroupExistsError": 22, "GroupStateConflictError": 23, "InternalTopicError": 24,
        "PermissionDeniedError": 25, "ReaderGroupNotEmptyError": 26,
    }
    assert {cls.__name__: int(n) for cls, n in LEDGER_ERROR_NUMBERS.items()} == {
        "BookieUnavailableError": 100, "NotEnoughBookiesError": 101, "StorageError": 102,
        "LedgerRecoveryError": 103, "EntryTooLargeError": 104, "DataLossError": 105,
    }


@pytest.mark.parametrize("cls", list(LEDGER_ERROR_NUMBERS), ids=lambda cls: cls.__name__)
def test_ledger_errors_carry_the_public_number_not_the_bookie_protocols(
        cls: type[LedgerError]) -> None:
    error = ledger_status.error_from_status(
        grpc.StatusCode.UNKNOWN, "failed", 3, metadata=[("folio-error", cls.__name__)])
    assert type(error) is cls
    metadata = trailing_metadata_for(error)
    assert [value for key, value in metadata if key == "folio-error-code"] == [
        str(LEDGER_ERROR_NUMBERS[cls])]
    assert dict(metadata)["folio-error"] == cls.__name__


def test_a_ledger_error_without_a_public_number_sends_none() -> None:
    metadata = dict(trailing_metadata_for(LedgerClosedError("closed", ledger_id=4)))
    assert "folio-error-code" not in metadata
    assert metadata["folio-error"] == "LedgerClosedError"
    assert error_number(LedgerClosedError("closed", ledger_id=4)) == 0
    assert dict(trailing_metadata_for(LedgerFencedError("x", ledger_id=3)))[
        "folio-error-code"] == str(ErrorCode.ERROR_CODE_WRONG_HOST)
    assert error_number(RuntimeError("boom")) == ErrorCode.ERROR_CODE_UNSPECIFIED
