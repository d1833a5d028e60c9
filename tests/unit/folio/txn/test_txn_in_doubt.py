"""Issue 22: a single-routing-key commit in doubt is never reported as "not committed".

Its end block was sent and the stream lost; the setup that would say whether
the broker wrote it (``AppendSetup``'s last event number) is refused for good
(the role lost its permission, say). The old flow failed it with
``TxnFailedError`` ("not committed", so re-sending it looked safe) although it
may be written; now ``OutcomeUnknownError``. A commit never sent is still a
``TxnFailedError``.
"""

from __future__ import annotations

import pytest

from folio.api.v1 import append_pb2
from folio.errors import OutcomeUnknownError, PermissionDeniedError, TxnFailedError
from tests.unit.folio.txn.conftest import WAIT_S, Harness


def test_a_sent_commit_whose_setup_is_refused_is_in_doubt(harness: Harness) -> None:
    sent = harness.writer.begin()
    sent.write_event(b"sent")
    in_doubt = sent.commit_async()
    harness.sync()
    assert [b.end for b in harness.blocks()] == [True]
    queued = harness.writer.begin()
    queued.write_event(b"queued")
    never_sent = queued.commit_async()  # waits behind the outstanding sequence
    harness.sync()
    harness.lose_stream()
    harness.restore_stream()
    harness.reply(harness.commands("setup_append")[-1], append_failed=append_pb2.AppendFailed(
        code=7, message="role app may not produce to t", error="PermissionDeniedError",
        retriable=False))
    with pytest.raises(OutcomeUnknownError) as unknown:
        in_doubt.result(WAIT_S)
    assert "may or may not have been written" in str(unknown.value)
    assert isinstance(unknown.value.__cause__, PermissionDeniedError)
    with pytest.raises(TxnFailedError):
        never_sent.result(WAIT_S)
    assert len(harness.blocks()) == 1  # nothing sent again
