"""Every error the broker raises, as the Kafka code a Kafka client gets (kafka/error_codes.py).

The expected codes are written out, so a change to the error table that changes
what Kafka clients see fails here.
"""

from __future__ import annotations

import grpc
import pytest
from kio.schema.errors import ErrorCode

import broker.errors
from broker.kafka.error_codes import error_code
from broker.status import CLASS_ROWS
from folio.api.v1.error_table import ERRORS
from ledger import status as ledger_status
from ledger.errors import LedgerError
from tests.unit.broker.test_status import CASES

#: Each broker error class -> the Kafka code its row chose (never UNKNOWN_SERVER_ERROR).
BROKER_KAFKA_CODES: dict[str, ErrorCode] = {
    "TopicNameError": ErrorCode.invalid_topic_exception,
    "InvalidArgumentError": ErrorCode.invalid_request,
    "InvalidBlockError": ErrorCode.invalid_request,
    "TopicNotFoundError": ErrorCode.unknown_topic_or_partition,
    "NoSuchSegmentError": ErrorCode.unknown_topic_or_partition,
    "TopicExistsError": ErrorCode.topic_already_exists,
    "TopicSealedError": ErrorCode.invalid_topic_exception,
    "SegmentSealedError": ErrorCode.invalid_topic_exception,
    "InvalidEventNumberError": ErrorCode.out_of_order_sequence_number,
    "OffsetOutOfRangeError": ErrorCode.offset_out_of_range,
    "EventTooLargeError": ErrorCode.message_too_large,
    "TransactionTooLargeError": ErrorCode.record_list_too_large,
    "TransactionBufferFullError": ErrorCode.concurrent_transactions,
    "TransactionExpiredError": ErrorCode.invalid_txn_state,
    "TxnNotFoundError": ErrorCode.invalid_txn_state,
    "TxnStateError": ErrorCode.invalid_txn_state,
    "TxnLabelClosedError": ErrorCode.invalid_txn_state,
    "WrongHostError": ErrorCode.not_leader_or_follower,
    "BrokerShuttingDownError": ErrorCode.not_leader_or_follower,
    "CorruptDataError": ErrorCode.corrupt_message,
    "ReaderGroupNotFoundError": ErrorCode.group_id_not_found,
    "ReaderGroupExistsError": ErrorCode.invalid_request,
    "GroupStateConflictError": ErrorCode.rebalance_in_progress,
    "InternalTopicError": ErrorCode.topic_authorization_failed,
    "PermissionDeniedError": ErrorCode.topic_authorization_failed,
    "ReaderGroupNotEmptyError": ErrorCode.non_empty_group,
}

#: Ledger errors: a retriable one is REQUEST_TIMED_OUT (the client retries), else
#: KAFKA_STORAGE_ERROR.
LEDGER_KAFKA_CODES: dict[str, ErrorCode] = {
    "InvalidArgumentError": ErrorCode.kafka_storage_error,
    "NoSuchLedgerError": ErrorCode.kafka_storage_error,
    "NoSuchEntryError": ErrorCode.kafka_storage_error,
    "NoNodeError": ErrorCode.kafka_storage_error,
    "NodeExistsError": ErrorCode.kafka_storage_error,
    "LedgerFencedError": ErrorCode.kafka_storage_error,
    "LedgerDeletedError": ErrorCode.kafka_storage_error,
    "LedgerClosedError": ErrorCode.kafka_storage_error,
    "NotEmptyError": ErrorCode.kafka_storage_error,
    "BadVersionError": ErrorCode.kafka_storage_error,
    "EntryTooLargeError": ErrorCode.kafka_storage_error,
    "BookieUnavailableError": ErrorCode.request_timed_out,
    "NotEnoughBookiesError": ErrorCode.request_timed_out,
    "StorageError": ErrorCode.request_timed_out,
    "LedgerRecoveryError": ErrorCode.request_timed_out,
    "DataLossError": ErrorCode.kafka_storage_error,
    "MetadataUnavailableError": ErrorCode.request_timed_out,
    "MetadataSessionExpiredError": ErrorCode.request_timed_out,
}


def test_every_broker_error_has_its_kafka_code() -> None:
    assert {type(error).__name__ for error, _, _ in CASES} == set(BROKER_KAFKA_CODES)
    assert {type(error).__name__: error_code(error) for error, _, _ in CASES} \
        == BROKER_KAFKA_CODES


def test_every_ledger_error_has_its_kafka_code() -> None:
    rows = ledger_status.STATUS_TABLE
    assert {row.error.__name__ for row in rows} == set(LEDGER_KAFKA_CODES)
    errors = [ledger_status.error_from_status(grpc.StatusCode.UNKNOWN, "failed", 3,
                                              metadata=[("folio-error", row.error.__name__)])
              for row in rows]
    assert {type(error).__name__: error_code(error) for error in errors} == LEDGER_KAFKA_CODES
    assert error_code(LedgerError("plain")) is ErrorCode.kafka_storage_error


def test_every_error_maps_to_a_deliberate_kafka_code() -> None:
    """Every broker and ledger error class has a row naming a real Kafka code.

    Fails when a class is added to ``broker.errors`` (or a row to the table)
    without choosing its Kafka code: such an error would otherwise fall through
    to UNKNOWN_SERVER_ERROR, logged as unexpected.
    """
    names = {code.name for code in ErrorCode}
    for row in ERRORS:
        assert row.kafka.lower() in names, (row.name, row.kafka)
        assert row.kafka != "UNKNOWN_SERVER_ERROR", row.name
    classes = {value for value in vars(broker.errors).values()
               if isinstance(value, type) and issubclass(value, broker.errors.BrokerError)
               and value is not broker.errors.BrokerError}
    assert classes <= set(CLASS_ROWS), classes - set(CLASS_ROWS)
    for error, _, _ in CASES:
        assert error_code(error) is not ErrorCode.unknown_server_error, type(error).__name__


def test_an_unknown_error_is_an_unknown_server_error(caplog: pytest.LogCaptureFixture) -> None:
    assert error_code(RuntimeError("boom")) is ErrorCode.unknown_server_error
    assert "unexpected error" in caplog.text
