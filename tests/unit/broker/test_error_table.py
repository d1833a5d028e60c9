"""The one error table (folio/api/v1/error_table.py) against every class, map and document.

Every map is derived from the table; these tests hold the table itself to the
error classes (each has a row, retriable as the row says), to the ledger's own
table, to Kafka's codes, to the SDK's classes and to errors.proto's prose.
"""

from __future__ import annotations

import re
from pathlib import Path

import grpc
import pytest
from kio.schema.errors import ErrorCode as KafkaErrorCode

import broker.errors
from broker.errors import BrokerError
from broker.status import CLASS_ROWS, LEDGER_ERROR_NUMBERS, STATUS_TABLE
from folio import _status
from folio.api.v1.error_table import ERRORS, LEDGER_KAFKA_FALLBACK, ErrorRow
from folio.api.v1.errors_pb2 import ErrorCode
from ledger import status as ledger_status

ERRORS_PROTO = Path(__file__).resolve().parents[3] / "proto" / "folio" / "v1" / "errors.proto"


def _broker_classes(cls: type[BrokerError]) -> set[type[BrokerError]]:
    found: set[type[BrokerError]] = set()
    for sub in cls.__subclasses__():
        if sub.__module__.startswith("broker."):
            found.add(sub)
        found |= _broker_classes(sub)
    return found


def test_every_broker_error_class_has_a_row() -> None:
    declared = {cls for cls in vars(broker.errors).values() if isinstance(cls, type)
                and issubclass(cls, BrokerError) and cls is not BrokerError}
    rowed = {cls for cls in CLASS_ROWS if issubclass(cls, BrokerError)}
    assert declared | _broker_classes(BrokerError) == rowed
    assert len(CLASS_ROWS) == len(ERRORS)


def test_every_number_has_one_row_and_the_order_is_the_numbers() -> None:
    numbers = [row.number for row in ERRORS]
    assert numbers == sorted(set(numbers))
    assert set(numbers) == set(ErrorCode.values()) - {ErrorCode.ERROR_CODE_UNSPECIFIED}


@pytest.mark.parametrize("row", ERRORS, ids=lambda row: row.name)
def test_a_row_is_retriable_as_its_class_and_the_sdk_class(row: ErrorRow) -> None:
    cls = next(cls for cls, bound in CLASS_ROWS.items() if bound is row)
    assert getattr(cls, "retriable", None) is row.retriable  # ledger or broker error class
    sdk_class = _status.NAME_CLASSES.get(row.name) or _status.NAME_ALIASES[row.name]
    assert sdk_class("x").retriable is row.retriable


def test_the_sdk_maps_every_row_and_nothing_else() -> None:
    assert {row.number: row.name for row in ERRORS} == _status.NUMBER_NAMES
    assert set(_status.NAME_CLASSES) | set(_status.NAME_ALIASES) == {row.name for row in ERRORS}
    assert not set(_status.NAME_CLASSES) & set(_status.NAME_ALIASES)


def test_ledger_rows_repeat_the_ledger_tables_status_codes() -> None:
    ledger_codes = {row.error: row.code for row in ledger_status.STATUS_TABLE}
    assert {cls: CLASS_ROWS[cls].code for cls in LEDGER_ERROR_NUMBERS} == {
        cls: ledger_codes[cls] for cls in LEDGER_ERROR_NUMBERS}
    assert {row.error for row in STATUS_TABLE} | set(LEDGER_ERROR_NUMBERS) == set(CLASS_ROWS)


def test_kafka_names_are_kafka_codes() -> None:
    names = {row.kafka for row in ERRORS if row.kafka} | set(LEDGER_KAFKA_FALLBACK.values())
    for name in names:
        assert name == name.upper()
        assert KafkaErrorCode[name.lower()].name == name.lower()


def _proto_rows() -> dict[str, tuple[str, bool]]:
    """Each ErrorCode in errors.proto -> (status code, retriable), as its comment says."""
    documented: dict[str, tuple[str, bool]] = {}
    comment: list[str] = []
    for line in ERRORS_PROTO.read_text().splitlines():
        stripped = line.strip()
        if stripped.startswith("//"):
            comment.append(stripped.removeprefix("//").strip())
            continue
        match = re.match(r"(ERROR_CODE_\w+) = \d+;", stripped)
        if match and match.group(1) != "ERROR_CODE_UNSPECIFIED":
            heads = [re.match(r"([A-Z_]+)(, retriable)?:", text) for text in comment]
            head = [found for found in heads if found][-1]
            documented[match.group(1)] = (head.group(1), head.group(2) is not None)
        comment = []
    return documented


def test_errors_proto_says_what_the_table_says() -> None:
    assert _proto_rows() == {
        ErrorCode.Name(row.number): (row.code.name, row.retriable) for row in ERRORS}


def test_a_row_naming_no_class_fails_at_import() -> None:
    from broker import status  # noqa: PLC0415

    ghost = ErrorRow(ErrorCode.ERROR_CODE_TOPIC_NAME, "NoSuchClassError",
                     grpc.StatusCode.INTERNAL, False, "INVALID_REQUEST")
    with pytest.raises(ImportError, match="NoSuchClassError"):
        status._class_of(ghost)
