"""The broker's status table: every error class answers with its code, name and context."""

from __future__ import annotations

import json

import grpc
import pytest

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
from broker.status import STATUS_TABLE, is_retriable, status_for, trailing_metadata_for
from ledger.errors import BookieUnavailableError, LedgerFencedError

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
