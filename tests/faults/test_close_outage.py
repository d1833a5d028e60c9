"""Leaving a writer's ``with`` block while the broker is unreachable: bounded, typed, nothing lost.

A real ``folio standalone`` behind a real TCP proxy (``tests/support/proxy.py``)
that is paused: connections stay open, no byte passes, so the client sees a
silent broker (the worst case: nothing tells it the broker is gone). Each
``with`` block is left on a thread joined with a deadline; the assertions are
on the typed error it raises (or notes on the body's own error) and, after
the proxy resumes, on what the topic holds: every acknowledged event once,
nothing of an undecided transaction.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

import folio
from tests.integration.test_txn import read_topic
from tests.support.bookies import BookieProcess
from tests.support.proxy import TcpProxy
from tests.support.wait import wait_for

pytestmark = pytest.mark.faults

#: The writers' deadlines (their ``txn_timeout_ms``, ``delivery_timeout_ms``).
DEADLINE_MS = 2_000
#: A bound for leaving a block, far above the deadlines (never a timing assertion).
JOIN_S = 60.0


def _leave(body: Callable[[], None]) -> BaseException | None:
    """Runs ``body`` (a ``with`` block) on a thread; what it raised. Fails if it hangs."""
    raised: list[BaseException] = []

    def run() -> None:
        try:
            body()
        except BaseException as error:
            raised.append(error)

    thread = threading.Thread(target=run, name="leave-with", daemon=True)
    thread.start()
    thread.join(JOIN_S)
    assert not thread.is_alive(), "leaving the with block hung while the broker was away"
    return raised[0] if raised else None


def test_writers_leave_their_with_blocks_while_the_broker_is_away(
        server: BookieProcess, proxy: TcpProxy) -> None:
    topic = "close-outage"
    with folio.Client(proxy.address, timeout_s=5) as client:
        client.create_topic(topic, 1)
        txn_writer = client.single_routing_key_txn_writer(topic, "k",
                                                          txn_timeout_ms=DEADLINE_MS)
        body_writer, commit_writer = (
            client.single_routing_key_txn_writer(topic, "k", txn_timeout_ms=DEADLINE_MS)
            for _ in range(2))
        event_writer = client.writer(topic, delivery_timeout_ms=DEADLINE_MS)
        acknowledged = txn_writer.begin()
        acknowledged.write_event(b"acked-1")
        acknowledged.write_event(b"acked-2")
        assert acknowledged.commit(30).event_count == 2
        event_writer.write_event(b"acked-3", routing_key="k").result(30)

        proxy.pause()
        pending: list[folio.TransactionResult | BaseException] = []

        def leave_txn_writer() -> None:
            with txn_writer:
                in_flight = txn_writer.begin()
                in_flight.write_event(b"doubt-1")
                in_flight.write_event(b"doubt-2")
                future = in_flight.commit_async()
                future.add_done_callback(
                    lambda f: pending.append(f.exception() or f.result()))
                txn_writer.begin().write_event(b"never")  # left open: aborted locally

        error = _leave(leave_txn_writer)
        assert isinstance(error, folio.TimeoutError), error
        assert not error.retriable
        assert error.context["unsettled"] == 1
        assert "WriterClosedError" in str(error) and "read the segment back" in str(error)
        wait_for(lambda: bool(pending), "the commit in doubt to be failed")
        assert isinstance(pending[0], folio.WriterClosedError), pending

        def raise_in_body() -> None:
            with body_writer:
                in_doubt = body_writer.begin()
                in_doubt.write_event(b"doubt-3")
                in_doubt.commit_async()
                raise ValueError("the body's own error")

        error = _leave(raise_in_body)
        # The body's error propagates; closing's TimeoutError is a note on it.
        assert isinstance(error, ValueError) and str(error) == "the body's own error"
        assert any("also reported TimeoutError" in note and "1 commits" in note
                   for note in getattr(error, "__notes__", [])), error

        def commit_on_leaving() -> None:
            with commit_writer, commit_writer.begin() as txn:
                txn.write_event(b"doubt-4")

        error = _leave(commit_on_leaving)
        # The commit's own bound (txn_timeout_ms) passes first; closing adds its error.
        assert isinstance(error, folio.TimeoutError), error
        assert any("closing the transaction writer" in note
                   for note in getattr(error, "__notes__", [])), error

        def leave_event_writer() -> None:
            with event_writer:
                event_writer.write_event(b"doubt-5", routing_key="k")

        error = _leave(leave_event_writer)
        assert isinstance(error, folio.DeliveryTimeoutError), error

        proxy.resume()
        payloads = [event.payload for event in read_topic(client, topic)]
    # Acknowledged: once each. In doubt: whole or absent, never doubled.
    for payload in (b"acked-1", b"acked-2", b"acked-3"):
        assert payloads.count(payload) == 1, payloads
    assert payloads.count(b"doubt-1") == payloads.count(b"doubt-2") <= 1, payloads
    for payload in (b"doubt-3", b"doubt-4", b"doubt-5"):
        assert payloads.count(payload) <= 1, payloads
    assert b"never" not in payloads
    assert payloads.index(b"acked-1") + 1 == payloads.index(b"acked-2")


def test_a_transactional_writer_closes_while_the_broker_is_away(
        server: BookieProcess, proxy: TcpProxy) -> None:
    topic = "close-outage-full"
    with folio.Client(proxy.address, timeout_s=5) as client:
        client.create_topic(topic, 2)
        writer = client.transactional_writer(topic, txn_timeout_ms=DEADLINE_MS)
        with writer.begin() as committed:
            committed.write_event(b"committed", routing_key="a")
        left_open = writer.begin()
        left_open.write_event(b"undecided", routing_key="b")
        left_open.flush(30)  # on the broker, uncommitted

        proxy.pause()

        def leave() -> None:
            with writer:
                pass

        error = _leave(leave)
        assert isinstance(error, folio.TimeoutError), error
        assert not error.retriable
        assert error.context["txn_ids"] == [left_open.txn_id.hex()]
        assert "aborts each by itself when its txn_timeout_ms" in str(error)
        assert writer.closed

        proxy.resume()
        wait_for(lambda: client.transaction_status(left_open.txn_id)
                 in (folio.TxnStatus.ABORTED, folio.TxnStatus.TIMED_OUT),
                 "the broker to abort the undecided transaction", timeout_s=60)
        got: list[bytes] = []
        with client.reader(topic, isolation="read_committed") as reader:
            while (event := reader.read_next(timeout=2)) is not None:
                got.append(event.payload)
    assert got == [b"committed"]
