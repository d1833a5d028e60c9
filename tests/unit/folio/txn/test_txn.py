"""Single-routing-key transactions (PDP-44) on a real IO thread, the broker played by the test.

The Append stream is replaced by a recording stand-in (as in
``test_segment_writer.py``) whose replies each test writes, so the caller
side (size limit, timeout, reuse, one open transaction) and every branch of
the flow (block sequence and numbering, a lost stream, a retriable or final
refusal, a sealed segment, a partial write) are driven exactly. Against the
real broker: ``tests/integration/test_txn.py`` and
``tests/faults/test_txn_faults.py``.
"""

from __future__ import annotations

import threading

import pytest

from folio._transport.io_thread import IoThread
from folio.api.v1.block import decode_block
from folio.errors import (
    EventTooLargeError,
    MaxTransactionSizeExceededError,
    TimeoutError,
    TxnFailedError,
    TxnStateError,
)
from folio.serializers import StringSerializer
from folio.txn.txn import (
    MAX_TRANSACTION_BYTES,
    TransactionResult,
)
from tests.unit.folio.txn.conftest import (
    SEGMENT,
    WAIT_S,
    Clock,
    Harness,
    MiB,
    _payloads,
    _wait_for,
)


def test_size_limit_refuses_the_event_that_would_pass_it_and_keeps_the_transaction(
    harness: Harness,
) -> None:
    txn = harness.writer.begin()
    event = b"x" * MiB
    written = 0
    with pytest.raises(MaxTransactionSizeExceededError) as raised:
        while True:
            txn.write_event(event)
            written += 1
    assert written == 15  # 16 x (1 MiB + framing) would pass 16 MiB
    assert raised.value.limit == MAX_TRANSACTION_BYTES
    assert raised.value.size is not None and raised.value.size > MAX_TRANSACTION_BYTES
    assert txn.event_count == written and txn.size <= MAX_TRANSACTION_BYTES
    assert txn.state == "open"
    txn.write_event(b"small")  # still usable
    future = txn.commit_async()
    harness.sync()
    blocks = harness.blocks()
    assert sum(len(b.data) for b in blocks) <= MAX_TRANSACTION_BYTES
    assert sum(b.event_count for b in blocks) == written + 1
    assert _payloads(blocks) == [event] * written + [b"small"]
    harness.ack_end(0)
    assert future.result(WAIT_S) == TransactionResult(SEGMENT, 0, written + 1)


def test_an_event_above_max_event_bytes_is_refused_at_once(harness: Harness) -> None:
    txn = harness.writer.begin()
    with pytest.raises(EventTooLargeError):
        txn.write_event(b"x" * (4 * MiB + 1))
    assert txn.event_count == 0 and txn.state == "open"


def test_timeout_aborts_and_releases_the_buffer(io: IoThread) -> None:
    harness = Harness(io, txn_timeout_ms=100)
    harness.setup()
    txn = harness.writer.begin()
    for _ in range(100):
        txn.write_event(b"y" * 10_000)
    assert txn.wait_finished(WAIT_S), "the timer did not abort the transaction"
    assert txn.state == "timed_out"
    buffer = txn._buffer
    assert (buffer._blocks, buffer._payloads, buffer._timestamps) == ([], [], [])  # released
    with pytest.raises(TxnFailedError, match="txn_timeout_ms"):
        txn.commit()
    with pytest.raises(TxnFailedError):
        txn.write_event(b"late")
    assert harness.blocks() == []  # nothing was sent
    # The writer goes on: the next transaction commits.
    nxt = harness.writer.begin()
    nxt.write_event(b"next")
    future = nxt.commit_async()
    harness.sync()
    harness.ack_end(7)
    assert future.result(WAIT_S).offset == 7


def test_timeout_is_checked_on_every_call_too(io: IoThread) -> None:
    clock = Clock()
    harness = Harness(io, txn_timeout_ms=60_000, clock=clock)
    txn = harness.writer.begin()
    txn.write_event(b"a")
    clock.now += 59.9
    txn.write_event(b"b")
    clock.now += 0.2
    with pytest.raises(TxnFailedError):
        txn.commit()
    assert txn.state == "timed_out" and txn._buffer._payloads == []
    # begin() sees the expired one as gone.
    harness.writer.begin().abort()


def test_begin_while_open_is_refused_and_the_writer_is_reusable(harness: Harness) -> None:
    first = harness.writer.begin()
    with pytest.raises(TxnStateError, match="open transaction"):
        harness.writer.begin()
    first.write_event(b"dropped")
    first.abort()
    first.abort()  # idempotent
    with pytest.raises(TxnStateError):
        first.write_event(b"after abort")
    with pytest.raises(TxnStateError):
        first.commit()
    second = harness.writer.begin()
    second.write_event(b"one")
    future = second.commit_async()
    # commit handed it over: the next can begin while it is on its way.
    third = harness.writer.begin()
    third.write_event(b"two")
    with pytest.raises(TxnStateError):
        second.write_event(b"after commit")
    with pytest.raises(TxnStateError, match="committed"):
        second.abort()
    harness.sync()
    assert _payloads(harness.blocks()) == [b"one"]  # the aborted one never went
    harness.ack_end(0)
    assert future.result(WAIT_S).offset == 0
    third_future = third.commit_async()
    harness.sync()
    harness.ack_end(1)
    assert third_future.result(WAIT_S) == TransactionResult(SEGMENT, 1, 1)
    assert _payloads(harness.blocks()) == [b"one", b"two"]


def test_empty_commit_sends_nothing(harness: Harness) -> None:
    result = harness.writer.begin().commit(timeout=WAIT_S)
    assert result == TransactionResult(SEGMENT, -1, 0)
    assert harness.blocks() == []


def test_context_managers_commit_or_abort(harness: Harness) -> None:
    with pytest.raises(RuntimeError), harness.writer.begin() as txn:
        txn.write_event(b"lost")
        raise RuntimeError("boom")
    assert txn.state == "aborted"
    outcome: list[BaseException | None] = []

    def commit() -> None:
        try:
            with harness.writer.begin() as inner:
                inner.write_event(b"kept")
            outcome.append(None)
        except BaseException as error:
            outcome.append(error)

    committer = threading.Thread(target=commit)
    committer.start()
    assert _payloads(_wait_for(harness.blocks)) == [b"kept"]
    harness.ack_end(0)
    committer.join(WAIT_S)
    assert outcome == [None]


def test_commit_timeout_leaves_the_commit_going(harness: Harness) -> None:
    txn = harness.writer.begin()
    txn.write_event(b"slow")
    with pytest.raises(TimeoutError):
        txn.commit(timeout=0.05)
    harness.ack_end(3)
    assert txn._future is not None and txn._future.result(WAIT_S).offset == 3


def test_serializer_is_used(io: IoThread) -> None:
    harness = Harness(io, serializer=StringSerializer())
    harness.setup()
    txn = harness.writer.begin()
    txn.write_event("héllo", headers={"h": b"v"})
    txn.commit_async()
    harness.sync()
    block = decode_block(harness.blocks()[0].data)
    assert block.payloads == ["héllo".encode()]
    assert block.routing_keys == ["key"]
    assert block.headers == [{"h": b"v"}]


# -- the flow ---------------------------------------------------------------------


