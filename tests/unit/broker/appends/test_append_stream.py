"""``refusal_kind``: the one ladder from a failed command's error to the protocol's reply."""

from __future__ import annotations

import pytest

from broker.appends.stream import RefusalKind, refusal_kind
from broker.errors import (
    BrokerError,
    InvalidArgumentError,
    InvalidEventNumberError,
    NoSuchSegmentError,
    SegmentSealedError,
    TopicNotFoundError,
    TransactionTooLargeError,
    WrongHostError,
)
from ledger.errors import LedgerError, LedgerFencedError, StorageError


@pytest.mark.parametrize(("error", "kind"), [
    (NoSuchSegmentError("t/9"), RefusalKind.NO_SUCH_SEGMENT),
    (TopicNotFoundError("t"), RefusalKind.NO_SUCH_SEGMENT),
    (SegmentSealedError("t/0", 42), RefusalKind.SEGMENT_SEALED),
    (WrongHostError("t/0", "broker-2:7070"), RefusalKind.WRONG_HOST),
    (LedgerFencedError("fenced"), RefusalKind.WRONG_HOST),
    (InvalidEventNumberError("overlaps", 7), RefusalKind.INVALID_EVENT_NUMBER),
    (InvalidArgumentError("bad"), RefusalKind.FAILED),
    (StorageError("disk full"), RefusalKind.FAILED),
    (LedgerError("down"), RefusalKind.FAILED),
    (BrokerError("other"), RefusalKind.FAILED),
    (TransactionTooLargeError(17 << 20, 16 << 20), RefusalKind.FAILED),
])
def test_each_error_gets_its_reply(error: BrokerError | LedgerError, kind: RefusalKind) -> None:
    assert refusal_kind(error) is kind

