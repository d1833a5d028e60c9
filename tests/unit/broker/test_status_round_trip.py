"""Broker status -> wire -> SDK error: every row of the broker's table, by number and by name."""

from __future__ import annotations

import grpc
import pytest

from broker.errors import BrokerError
from broker.status import LEDGER_ERROR_NUMBERS, status_for, trailing_metadata_for
from folio import _status
from folio import errors as e
from ledger import status as ledger_status
from ledger.errors import LedgerError, LedgerFencedError
from tests.unit.broker.test_status import CASES

#: The SDK class each broker class reads back as (folio/_status.py's tables, written out).
SDK_CLASSES: dict[str, type[e.FolioError]] = {
    "TopicNameError": e.TopicNameError, "InvalidArgumentError": e.InvalidArgumentError,
    "InvalidBlockError": e.InvalidBlockError, "TopicNotFoundError": e.TopicNotFoundError,
    "NoSuchSegmentError": e.NoSuchSegmentError, "TopicExistsError": e.TopicExistsError,
    "TopicSealedError": e.SegmentSealedError, "SegmentSealedError": e.SegmentSealedError,
    "InvalidEventNumberError": e.InvalidEventNumberError,
    "OffsetOutOfRangeError": e.OffsetOutOfRangeError, "EventTooLargeError": e.EventTooLargeError,
    "TransactionTooLargeError": e.MaxTransactionSizeExceededError,
    "TransactionBufferFullError": e.FolioUnavailableError,
    "TransactionExpiredError": e.TxnFailedError, "TxnNotFoundError": e.TxnNotFoundError,
    "TxnStateError": e.TxnStateError, "TxnLabelClosedError": e.TxnFailedError,
    "WrongHostError": e.WrongHostError, "BrokerShuttingDownError": e.FolioUnavailableError,
    "CorruptDataError": e.DataLossError, "ReaderGroupNotFoundError": e.ReaderGroupNotFoundError,
    "ReaderGroupExistsError": e.ReaderGroupExistsError,
    "GroupStateConflictError": e.GroupStateConflictError,
    "ReaderGroupNotEmptyError": e.ReaderGroupNotEmptyError,
    "InternalTopicError": e.InternalTopicError, "PermissionDeniedError": e.PermissionDeniedError,
    "BookieUnavailableError": e.LedgerUnavailableError,
    "NotEnoughBookiesError": e.LedgerUnavailableError, "StorageError": e.LedgerUnavailableError,
    "LedgerRecoveryError": e.LedgerUnavailableError, "EntryTooLargeError": e.EventTooLargeError,
    "DataLossError": e.DataLossError,
}


def _ledger_error(cls: type[LedgerError]) -> LedgerError:
    return ledger_status.error_from_status(
        grpc.StatusCode.UNKNOWN, "the ledger service failed", 3,
        metadata=[("folio-error", cls.__name__)])


ERRORS: list[BaseException] = [error for error, _, _ in CASES] + [
    _ledger_error(cls) for cls in LEDGER_ERROR_NUMBERS]


@pytest.mark.parametrize("error", ERRORS, ids=[type(error).__name__ for error in ERRORS])
@pytest.mark.parametrize("keep", ["everything", "number only", "name only"])
def test_every_error_reaches_the_sdk_as_its_typed_class(error: BaseException, keep: str) -> None:
    code, message = status_for(error)
    metadata = trailing_metadata_for(error)
    if keep == "number only":  # a client of another language sends nothing else, say
        metadata = tuple(pair for pair in metadata if pair[0] != "folio-error")
    elif keep == "name only":  # what a broker before the numbers sends
        metadata = tuple(pair for pair in metadata if pair[0] != "folio-error-code")
    sdk_error = _status.error_from_status(code, message, metadata)
    assert type(sdk_error) is SDK_CLASSES[type(error).__name__]
    assert str(sdk_error) == message
    assert sdk_error.error_name == type(error).__name__
    if keep != "name only":
        assert sdk_error.error_code is not None and sdk_error.error_code > 0
    if isinstance(error, BrokerError):
        assert sdk_error.context == error.context()


def test_a_fenced_ledger_reaches_the_sdk_as_wrong_host() -> None:
    fenced = LedgerFencedError("fenced", ledger_id=3)
    code, message = status_for(fenced)
    metadata = [pair for pair in trailing_metadata_for(fenced) if pair[0] != "folio-error"]
    error = _status.error_from_status(code, message, metadata)
    assert type(error) is e.WrongHostError and error.retriable
