"""Folio's domain errors as Kafka error codes, chosen so Kafka clients do the right thing.

Derived from the one error table (``folio.api.v1.error_table``, its ``kafka``
column, bound to the classes by ``broker.status.CLASS_ROWS``): retriable
conditions map to retriable codes (a client retries or refreshes its
metadata), refusals to the code a Kafka broker would give for the same refusal.
"""

from __future__ import annotations

import logging
from typing import Final

from kio.schema.errors import ErrorCode

from broker.status import CLASS_ROWS
from folio.api.v1.error_table import LEDGER_KAFKA_FALLBACK
from ledger.errors import LedgerError

__all__ = ["error_code"]

log = logging.getLogger(__name__)


def _kafka_code(name: str) -> ErrorCode:
    return ErrorCode[name.lower()]


#: Each class with the Kafka code of its row (every row names one). A class not
#: in the table takes its nearest base class's: the first class of its MRO here decides.
_BY_CLASS: Final[dict[type[BaseException], ErrorCode]] = {
    cls: _kafka_code(row.kafka) for cls, row in CLASS_ROWS.items()}
_LEDGER_FALLBACK: Final = {
    retriable: _kafka_code(name) for retriable, name in LEDGER_KAFKA_FALLBACK.items()}


def error_code(error: BaseException) -> ErrorCode:
    """The Kafka error code for ``error``; unknown errors are logged and UNKNOWN_SERVER_ERROR."""
    code: ErrorCode | None = None
    for cls in type(error).__mro__:
        code = _BY_CLASS.get(cls)
        if code is not None:
            break
    if code is None and isinstance(error, LedgerError):
        # The ledger service failed; a retriable one may pass (the client retries).
        code = _LEDGER_FALLBACK[bool(error.retriable)]
    if code is ErrorCode.kafka_storage_error:
        log.warning("kafka: ledger error answered as KAFKA_STORAGE_ERROR: %s", error)
    if code is None:
        log.error("kafka: unexpected error answered as UNKNOWN_SERVER_ERROR", exc_info=error)
        return ErrorCode.unknown_server_error
    return code
