"""The error <-> status table: every row round-trips, the rest is INTERNAL."""

from __future__ import annotations

import logging

import grpc
import pytest

from ledger import errors
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
    NodeExistsError,
    NoNodeError,
    NoSuchEntryError,
    NoSuchLedgerError,
    NotEmptyError,
    NotEnoughBookiesError,
    StorageError,
)
from ledger.status import (
    ERROR_CODE_KEY,
    ERROR_CONTEXT_KEY,
    ERROR_KEY,
    ERROR_NUMBERS,
    STATUS_TABLE,
    StatusRow,
    error_from_rpc_error,
    error_from_status,
    status_for,
    trailing_metadata_for,
)

Code = grpc.StatusCode

#: The mapping the style guide asks for, written out independently of the table.
EXPECTED_CODES: dict[type[LedgerError], grpc.StatusCode] = {
    InvalidArgumentError: Code.INVALID_ARGUMENT,
    NoSuchLedgerError: Code.NOT_FOUND,
    NoSuchEntryError: Code.NOT_FOUND,
    NoNodeError: Code.NOT_FOUND,
    NodeExistsError: Code.ALREADY_EXISTS,
    LedgerFencedError: Code.FAILED_PRECONDITION,
    LedgerDeletedError: Code.FAILED_PRECONDITION,
    LedgerClosedError: Code.FAILED_PRECONDITION,
    NotEmptyError: Code.FAILED_PRECONDITION,
    BadVersionError: Code.ABORTED,
    EntryTooLargeError: Code.RESOURCE_EXHAUSTED,
    NotEnoughBookiesError: Code.UNAVAILABLE,
    BookieUnavailableError: Code.UNAVAILABLE,
    StorageError: Code.UNAVAILABLE,
    LedgerRecoveryError: Code.UNAVAILABLE,
    DataLossError: Code.DATA_LOSS,
    errors.MetadataUnavailableError: Code.UNAVAILABLE,
    errors.MetadataSessionExpiredError: Code.UNAVAILABLE,
}

#: One instance of every row's class, with typed context where it has some.
SAMPLES: dict[type[LedgerError], LedgerError] = {
    InvalidArgumentError: InvalidArgumentError("ledger_id must be >= 0, got -1", ledger_id=-1),
    NoSuchLedgerError: NoSuchLedgerError("this bookie holds no ledger 7", ledger_id=7),
    NoSuchEntryError: NoSuchEntryError("entry 9 is beyond the LAC 3", ledger_id=8),
    NoNodeError: NoNodeError("/ledgers/L0000000001"),
    NodeExistsError: NodeExistsError("/ledgers/L0000000001"),
    LedgerFencedError: LedgerFencedError("ledger 5 is fenced", ledger_id=5),
    LedgerDeletedError: LedgerDeletedError("ledger 5 was deleted", ledger_id=5),
    LedgerClosedError: LedgerClosedError("ledger 5 is closed", ledger_id=5),
    NotEmptyError: NotEmptyError("/ledgers has children"),
    BadVersionError: BadVersionError("/ledgers/idgen", 3, 4),
    EntryTooLargeError: EntryTooLargeError(6_000_000, 5_242_880, ledger_id=11),
    NotEnoughBookiesError: NotEnoughBookiesError("need 3 bookies, 2 available"),
    BookieUnavailableError: BookieUnavailableError("bookie 127.0.0.1:1 refused", ledger_id=2),
    StorageError: StorageError("bookie storage write failed: disk full"),
    LedgerRecoveryError: LedgerRecoveryError("no quorum answered", ledger_id=4),
    DataLossError: DataLossError("entry 3 found on no bookie", ledger_id=4),
    errors.MetadataUnavailableError: errors.MetadataUnavailableError(
        "/ledgers/idgen: connection to ZooKeeper lost"),
    errors.MetadataSessionExpiredError: errors.MetadataSessionExpiredError(
        "/ledgers/idgen: the ZooKeeper session expired"),
}

#: Attributes every rebuilt error must carry over.
CONTEXT = ("ledger_id", "size", "limit", "path", "expected", "actual")


def _attributes(error: LedgerError) -> dict[str, object]:
    return {name: getattr(error, name) for name in CONTEXT if hasattr(error, name)}


def test_table_is_the_documented_mapping() -> None:
    assert {row.error: row.code for row in STATUS_TABLE} == EXPECTED_CODES
    assert len({row.error for row in STATUS_TABLE}) == len(STATUS_TABLE)


def test_every_concrete_ledger_error_has_a_row() -> None:
    concrete = {
        value for value in vars(errors).values()
        if isinstance(value, type) and issubclass(value, LedgerError)
        and value not in (LedgerError, errors.MetadataError)
    }
    assert concrete == set(EXPECTED_CODES)
    assert set(SAMPLES) == concrete


@pytest.mark.parametrize("row", STATUS_TABLE, ids=lambda row: row.error.__name__)
def test_row_round_trips_exactly(row: StatusRow) -> None:
    sent = SAMPLES[row.error]
    code, message = status_for(sent)
    assert (code, message) == (row.code, str(sent))

    received = error_from_status(code, message, metadata=trailing_metadata_for(sent))

    assert type(received) is type(sent)
    assert str(received) == str(sent)
    assert received.retriable == sent.retriable
    assert _attributes(received) == _attributes(sent)
    assert status_for(received) == (code, message)


@pytest.mark.parametrize("row", STATUS_TABLE, ids=lambda row: row.error.__name__)
def test_row_round_trips_through_grpc_metadata(row: StatusRow) -> None:
    sent = SAMPLES[row.error]
    code, message = status_for(sent)
    rpc_error = grpc.aio.AioRpcError(
        code, grpc.aio.Metadata(), grpc.aio.Metadata(*trailing_metadata_for(sent)), message, None
    )

    received = error_from_rpc_error(rpc_error, ledger_id=999)

    assert type(received) is type(sent)
    assert str(received) == str(sent)
    # The ledger id the server sent wins over the caller's guess.
    expected_ledger_id = sent.ledger_id if sent.ledger_id is not None else 999
    assert received.ledger_id == expected_ledger_id


@pytest.mark.parametrize("row", STATUS_TABLE, ids=lambda row: row.error.__name__)
def test_bare_status_falls_back_on_the_code(row: StatusRow) -> None:
    received = error_from_status(row.code, "no metadata", ledger_id=12)

    first = next(other for other in STATUS_TABLE if other.code == row.code)
    assert type(received) is first.error
    assert str(received) == "no metadata"
    assert received.ledger_id == 12
    assert status_for(received)[0] == row.code


def test_every_row_has_its_own_wire_number_from_the_proto_enum() -> None:
    numbers = [ERROR_NUMBERS.get(row.error) for row in STATUS_TABLE]

    assert None not in numbers, "give the new error a LedgerErrorCode in bookie.proto"
    assert len(set(numbers)) == len(numbers)
    # Every number the proto defines (but UNSPECIFIED) names exactly one error.
    defined = set(bookie_pb2.LedgerErrorCode.values()) - {
        bookie_pb2.LEDGER_ERROR_CODE_UNSPECIFIED
    }
    assert set(numbers) == defined
    assert ERROR_NUMBERS[LedgerFencedError] == bookie_pb2.LEDGER_ERROR_CODE_LEDGER_FENCED == 6


@pytest.mark.parametrize("row", STATUS_TABLE, ids=lambda row: row.error.__name__)
def test_row_round_trips_by_its_number_alone(row: StatusRow) -> None:
    """A peer whose class has another name (renamed) still reads the right error."""
    sent = SAMPLES[row.error]
    code, message = status_for(sent)
    metadata = [(key, value) for key, value in trailing_metadata_for(sent) if key != ERROR_KEY]
    assert dict(metadata)[ERROR_CODE_KEY] == str(ERROR_NUMBERS[row.error])

    received = error_from_status(code, message, metadata=metadata)

    assert type(received) is type(sent)
    assert _attributes(received) == _attributes(sent)


def test_number_wins_over_a_renamed_class_name() -> None:
    number = str(ERROR_NUMBERS[LedgerClosedError])
    metadata = ((ERROR_CODE_KEY, number), (ERROR_KEY, "LedgerWasClosedError"))

    received = error_from_status(Code.FAILED_PRECONDITION, "closed", metadata=metadata)

    assert type(received) is LedgerClosedError


def test_old_peer_without_a_number_is_read_by_class_name() -> None:
    metadata = ((ERROR_KEY, "NotEmptyError"), (ERROR_CONTEXT_KEY, '{"ledger_id": null}'))

    received = error_from_status(Code.FAILED_PRECONDITION, "/ledgers has children",
                                 metadata=metadata)

    assert type(received) is NotEmptyError


@pytest.mark.parametrize("number", ["999", "-1", "x", ""])
def test_unknown_number_falls_back_on_the_name_then_the_code(number: str) -> None:
    by_name = error_from_status(
        Code.FAILED_PRECONDITION, "fenced",
        metadata=((ERROR_CODE_KEY, number), (ERROR_KEY, "LedgerFencedError")),
    )
    by_code = error_from_status(Code.NOT_FOUND, "gone", metadata=((ERROR_CODE_KEY, number),))

    assert type(by_name) is LedgerFencedError
    assert type(by_code) is NoSuchLedgerError


def test_bare_entry_too_large_has_unknown_size() -> None:
    received = error_from_status(Code.RESOURCE_EXHAUSTED, "Sent message larger than max")

    assert isinstance(received, EntryTooLargeError)
    assert str(received) == "Sent message larger than max"
    # A bare status (from gRPC itself) carries no typed context.
    assert (vars(received)["size"], vars(received)["limit"]) == (None, None)


@pytest.mark.parametrize("code", [Code.UNAVAILABLE, Code.DEADLINE_EXCEEDED, Code.CANCELLED])
def test_transport_failures_are_retriable_unavailability(code: grpc.StatusCode) -> None:
    received = error_from_status(code, "connection refused", ledger_id=3)

    assert type(received) is BookieUnavailableError
    assert received.retriable
    assert received.ledger_id == 3


def test_unknown_code_is_a_plain_ledger_error() -> None:
    received = error_from_status(Code.UNKNOWN, "Exception calling application", ledger_id=1)

    assert type(received) is LedgerError
    assert not received.retriable
    assert str(received) == "UNKNOWN: Exception calling application"


def test_unknown_class_name_falls_back_on_the_code() -> None:
    metadata = ((ERROR_KEY, "SomeFutureError"), (ERROR_CONTEXT_KEY, "not json"))

    received = error_from_status(Code.NOT_FOUND, "gone", metadata=metadata)

    assert type(received) is NoSuchLedgerError
    assert received.ledger_id is None


def test_metadata_values_may_be_bytes() -> None:
    metadata = ((ERROR_KEY, b"LedgerClosedError"), (ERROR_CONTEXT_KEY, b'{"ledger_id": 5}'))

    received = error_from_status(Code.FAILED_PRECONDITION, "closed", metadata=metadata)

    assert type(received) is LedgerClosedError
    assert received.ledger_id == 5


def test_subclass_answers_as_its_mapped_parent() -> None:
    class ReadOnlyStorageError(StorageError):
        pass

    assert status_for(ReadOnlyStorageError("read-only")) == (Code.UNAVAILABLE, "read-only")
    assert dict(trailing_metadata_for(ReadOnlyStorageError("x")))[ERROR_KEY] == "StorageError"


@pytest.mark.parametrize(
    "error",
    [KeyError("boom"), LedgerError("unclassified"), errors.MetadataError("unclassified")],
    ids=["KeyError", "LedgerError", "MetadataError"],
)
def test_anything_else_is_internal_and_logged_with_its_traceback(
    error: Exception, caplog: pytest.LogCaptureFixture
) -> None:
    try:
        raise error
    except Exception as raised:
        with caplog.at_level(logging.ERROR, logger="ledger.status"):
            code, message = status_for(raised)

    assert code is Code.INTERNAL
    assert type(error).__name__ in message
    assert trailing_metadata_for(error) == ()
    [record] = caplog.records
    assert record.levelno == logging.ERROR
    assert record.exc_info is not None
    assert record.exc_info[1] is error
