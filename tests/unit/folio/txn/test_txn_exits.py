"""Leaving a transaction's or a transaction writer's ``with`` because its body raised.

The body's exception is the one the application sees: the abort (of a
transaction) or the close (of a writer) that leaving the block runs may
fail too, and that failure is added to the body's exception as a note
(``folio._exits``), never raised in its place and never dropped unsaid. As
the plain writer does (``tests/unit/folio/write/test_writer_failures.py``).

The broker is played by the test: the single-key writer's Append stream by
``RecordingStream`` (``conftest.py``), the full transactions' coordinator
calls by a function that answers or fails as each test says.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from folio._transport.io_thread import IoThread
from folio.api.v1 import transactions_pb2
from folio.errors import TxnNotFoundError
from folio.txn.txn_full import Transaction, TransactionalWriter
from tests.unit.folio.txn.conftest import Harness, RecordingStream, _Bytes, _topic

TXN_ID = bytes(range(16))


class _BodyFailed(Exception):
    """The application's own error, raised in a ``with`` body."""


def _notes(error: BaseException) -> list[str]:
    return list(getattr(error, "__notes__", []))


# -- single-routing-key transactions -------------------------------------------------


def test_a_single_key_transaction_left_by_an_error_is_aborted_and_the_error_kept(
        harness: Harness) -> None:
    with pytest.raises(_BodyFailed) as raised, harness.writer.begin() as txn:
        txn.write_event(b"never sent")
        raise _BodyFailed("the body's own check failed")
    assert txn.state == "aborted" and not _notes(raised.value)
    harness.sync()
    assert harness.commands("append_block") == []  # nothing of it was sent
    assert harness.writer.begin().state == "open"  # the writer goes on


def test_a_single_key_writer_whose_close_fails_keeps_the_body_error(io: IoThread) -> None:
    # close() can fail only once the client's IO thread is gone (it hands the
    # flow's release to it); leaving the block must still show the body's error.
    harness = Harness(io)
    harness.setup()
    with pytest.raises(_BodyFailed) as raised, harness.writer:
        harness.writer.begin().write_event(b"open")
        io.close()
        raise _BodyFailed("the body's own check failed")
    assert harness.writer.closed
    (note,) = _notes(raised.value)
    assert note.startswith("closing the transaction writer of topic 't' (routing key 'key') "
                           "also reported RuntimeError")


# -- full transactions ---------------------------------------------------------------


class _Stub:
    BeginTxn = "BeginTxn"
    CommitTxn = "CommitTxn"
    AbortTxn = "AbortTxn"
    GetTxnStatus = "GetTxnStatus"


class _Coordinator:
    """Answers BeginTxn; AbortTxn and GetTxnStatus fail with ``failure`` when set."""

    def __init__(self) -> None:
        self.failure: BaseException | None = None
        self.calls: list[str] = []

    def __call__(self, method: str, request: object, *, retry: bool = False) -> Any:
        self.calls.append(method)
        if method == "BeginTxn":
            return transactions_pb2.BeginTxnResponse(txn_id=TXN_ID)
        if self.failure is not None:
            raise self.failure
        if method == "AbortTxn":
            return transactions_pb2.AbortTxnResponse()
        raise AssertionError(f"unexpected call {method}")


@pytest.fixture
def coordinator() -> _Coordinator:
    return _Coordinator()


@pytest.fixture
def writer(io: IoThread, coordinator: _Coordinator) -> Iterator[TransactionalWriter[bytes]]:
    made: TransactionalWriter[bytes] = TransactionalWriter(
        _topic(), _Bytes(), io=io, source=RecordingStream(), stub=_Stub(),  # type: ignore[arg-type]
        call=coordinator, txn_timeout_ms=60_000)  # type: ignore[arg-type]
    yield made
    coordinator.failure = None
    made.close()


def test_a_transaction_left_by_an_error_is_aborted_and_the_error_kept(
        writer: TransactionalWriter[bytes], coordinator: _Coordinator) -> None:
    with pytest.raises(_BodyFailed) as raised, writer.begin() as txn:
        txn.write_event(b"never sent", routing_key="k")
        raise _BodyFailed("the body's own check failed")
    assert coordinator.calls == ["BeginTxn", "AbortTxn"]
    assert not _notes(raised.value)
    assert repr(txn).startswith(f"<Transaction {TXN_ID.hex()} 't' ABORTED")


@pytest.mark.parametrize("failure", [
    # A FolioError (here the broker no longer knows the transaction; as well
    # an outcome still unknown when the abort gives up): it was dropped without
    # a word, and the application never learnt that the transaction may stay
    # open until its timeout.
    TxnNotFoundError(f"no transaction {TXN_ID.hex()}", txn_id=TXN_ID.hex()),
    # The client's IO thread closed: the abort's RuntimeError replaced the body's error.
    RuntimeError("the client's IO thread is closed"),
])
def test_an_abort_that_fails_is_noted_on_the_body_error(
        writer: TransactionalWriter[bytes], coordinator: _Coordinator,
        failure: BaseException) -> None:
    with pytest.raises(_BodyFailed) as raised, writer.begin() as txn:
        txn.write_event(b"never sent", routing_key="k")
        coordinator.failure = failure
        raise _BodyFailed("the body's own check failed")
    assert "AbortTxn" in coordinator.calls
    (note,) = _notes(raised.value)
    assert note == (f"aborting transaction {TXN_ID.hex()} also reported "
                    f"{type(failure).__name__}: {failure}")


def test_a_transactional_writer_whose_close_fails_keeps_the_body_error(
        writer: TransactionalWriter[bytes], coordinator: _Coordinator) -> None:
    # close() aborts the transactions still open; its abort's RuntimeError
    # (the client's IO thread closed) replaced the body's error.
    with pytest.raises(_BodyFailed) as raised, writer:
        txn: Transaction[bytes] = writer.begin()
        txn.write_event(b"open", routing_key="k")
        coordinator.failure = RuntimeError("the client's IO thread is closed")
        raise _BodyFailed("the body's own check failed")
    assert writer.closed
    (note,) = _notes(raised.value)
    assert note == ("closing the transactional writer of topic 't' also reported "
                    "RuntimeError: the client's IO thread is closed")


def test_a_transaction_left_normally_still_raises_its_commit_failure(
        writer: TransactionalWriter[bytes], coordinator: _Coordinator) -> None:
    # No body error to keep: the commit's own failure is what the caller sees.
    coordinator.failure = TxnNotFoundError(f"no transaction {TXN_ID.hex()}")
    with pytest.raises(TxnNotFoundError), writer.begin():
        pass
    assert coordinator.calls[:2] == ["BeginTxn", "CommitTxn"]
