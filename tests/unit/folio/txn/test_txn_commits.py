"""Single-routing-key transactions: commit sequences, coalescing, lost streams, refusals."""

from __future__ import annotations

from typing import Any

import pytest

from folio._transport.io_thread import IoThread
from folio.api.v1 import append_pb2
from folio.api.v1.block import decode_block
from folio.errors import (
    EventTooLargeError,
    SegmentSealedError,
    TimeoutError,
    TxnFailedError,
    WriterClosedError,
)
from folio.txn.txn import (
    TXN_BLOCK_BYTES,
    TransactionResult,
)
from tests.unit.folio.txn.conftest import (
    SEGMENT,
    WAIT_S,
    Harness,
    _big_txn,
    _payloads,
    _wait_for,
)


def test_commit_sends_held_blocks_then_one_end_block_numbered_consecutively(
    io: IoThread,
) -> None:
    harness = Harness(io)
    harness.setup(41)  # the segment recorded 41 for this writer id: numbering goes on at 42
    future = _big_txn(harness).commit_async()
    harness.sync()
    blocks = harness.blocks()
    assert len(blocks) == 3 and [b.end for b in blocks] == [False, False, True]
    assert all(len(b.data) <= TXN_BLOCK_BYTES for b in blocks)
    assert [b.event_count for b in blocks] == [4, 4, 4]
    assert [b.last_event_number for b in blocks] == [45, 49, 53]
    harness.ack_end(100)
    assert future.result(WAIT_S) == TransactionResult(SEGMENT, 100, 12)
    # The next transaction's numbers follow.
    txn = harness.writer.begin()
    txn.write_event(b"z")
    txn.commit_async()
    harness.sync()
    assert harness.blocks()[-1].last_event_number == 54 and harness.blocks()[-1].end


def _commit_small(harness: Harness, *names: bytes) -> list[Any]:
    futures = []
    for name in names:
        txn = harness.writer.begin()
        txn.write_event(name + b".a")
        txn.write_event(name + b".b")
        futures.append(txn.commit_async())
    harness.sync()
    return futures


def test_one_sequence_at_a_time_and_waiting_commits_coalesce_into_one(harness: Harness) -> None:
    futures = _commit_small(harness, b"t0", b"t1", b"t2")
    assert _payloads(harness.blocks()) == [b"t0.a", b"t0.b"]  # the others wait
    harness.ack_end(0)
    # t1 and t2 go as one sequence: one entry, each still whole and contiguous;
    # their blocks (without headers) are joined into one AppendBlock.
    second = harness.blocks()[1:]
    assert [(b.end, b.event_count, b.last_event_number) for b in second] == [(True, 4, 5)]
    assert _payloads(second) == [b"t1.a", b"t1.b", b"t2.a", b"t2.b"]
    harness.ack_end(2)
    assert [f.result(WAIT_S) for f in futures] == [
        TransactionResult(SEGMENT, 0, 2), TransactionResult(SEGMENT, 2, 2),
        TransactionResult(SEGMENT, 4, 2)]


def test_blocks_with_headers_are_never_joined(harness: Harness) -> None:
    first = harness.writer.begin()
    first.write_event(b"t0")
    first.commit_async()
    harness.sync()
    with_headers = harness.writer.begin()
    with_headers.write_event(b"t1", headers={"h": b"1"})
    with_headers.commit_async()
    plain = harness.writer.begin()
    plain.write_event(b"t2")
    plain.commit_async()
    harness.sync()
    harness.ack_end(0)
    second = harness.blocks()[1:]
    assert [(b.end, b.event_count) for b in second] == [(False, 1), (True, 1)]
    assert [decode_block(b.data).headers for b in second] == [[{"h": b"1"}], []]


def test_a_coalesced_sequence_settled_by_setup_after_a_cut(harness: Harness) -> None:
    futures = _commit_small(harness, b"t0", b"t1", b"t2")
    harness.lose_stream()
    harness.restore_stream()
    harness.setup(1)  # t0 was written; t1 and t2 were not
    assert futures[0].result(WAIT_S).offset == -1
    again = harness.blocks()[1:]
    assert _payloads(again) == [b"t1.a", b"t1.b", b"t2.a", b"t2.b"]
    harness.lose_stream()
    harness.restore_stream()
    harness.setup(5)  # both were written, ack lost
    assert [f.result(WAIT_S).offset for f in futures[1:]] == [-1, -1]
    assert len(harness.blocks()) == 2  # t0, then t1 and t2 joined; nothing more
    assert harness.flow.settled_by_setup == 3 and harness.flow.resent == 0


def test_lost_stream_after_the_end_block_and_the_broker_had_written_it(harness: Harness) -> None:
    future = _big_txn(harness).commit_async()
    harness.sync()
    last = harness.blocks()[-1].last_event_number
    harness.lose_stream()
    harness.restore_stream()
    sent = len(harness.blocks())
    harness.setup(last)  # the broker recorded the transaction's number: it was written
    assert len(harness.blocks()) == sent  # not sent again
    assert future.result(WAIT_S) == TransactionResult(SEGMENT, -1, 12)


def test_lost_stream_mid_sequence_retransmits_the_whole_transaction(harness: Harness) -> None:
    future = _big_txn(harness).commit_async()
    harness.sync()
    first = harness.blocks()
    harness.lose_stream()
    harness.restore_stream()
    harness.setup(-1)  # nothing of it was written
    again = harness.blocks()[len(first):]
    assert [(b.data, b.event_count, b.last_event_number, b.end) for b in again] == \
        [(b.data, b.event_count, b.last_event_number, b.end) for b in first]
    harness.ack_end(0)
    assert future.result(WAIT_S).offset == 0


def test_stream_down_at_commit_sends_after_setup(harness: Harness) -> None:
    harness.lose_stream()
    future = _big_txn(harness, 2).commit_async()
    harness.sync()
    assert harness.blocks() == []
    harness.restore_stream()
    harness.setup(-1)
    assert [b.end for b in harness.blocks()] == [False, True]
    harness.ack_end(0)
    assert future.result(WAIT_S).event_count == 8


def test_retriable_refusal_sets_up_again_and_resends(harness: Harness) -> None:
    txn = harness.writer.begin()
    txn.write_event(b"r")
    future = txn.commit_async()
    harness.sync()
    end = harness.commands("append_block")[-1]
    harness.reply(end, append_failed=append_pb2.AppendFailed(
        code=14, message="ledger unavailable", error="BookieUnavailableError", retriable=True))
    setups = _wait_for(lambda: len(harness.commands("setup_append")) == 2 or None)
    assert setups
    harness.setup(-1)
    assert _payloads(harness.blocks()) == [b"r", b"r"]
    harness.ack_end(0)
    assert future.result(WAIT_S).offset == 0


def test_final_refusal_fails_the_transaction_and_the_next_goes_on(harness: Harness) -> None:
    txn = harness.writer.begin()
    txn.write_event(b"too big for the broker")
    failed = txn.commit_async()
    nxt = harness.writer.begin()
    nxt.write_event(b"fine")
    ok = nxt.commit_async()
    harness.sync()
    end = harness.commands("append_block")[-1]
    harness.reply(end, append_failed=append_pb2.AppendFailed(
        code=8, message="entry too large", error="EntryTooLargeError", retriable=False))
    with pytest.raises(TxnFailedError) as raised:
        failed.result(WAIT_S)
    assert isinstance(raised.value.__cause__, EventTooLargeError)
    assert _payloads(harness.blocks()) == [b"too big for the broker", b"fine"]
    harness.ack_end(1)
    assert ok.result(WAIT_S).offset == 1


def test_a_refused_coalesced_sequence_goes_again_one_by_one(harness: Harness) -> None:
    futures = _commit_small(harness, b"t0", b"t1", b"t2")
    harness.ack_end(0)
    refusal = append_pb2.AppendFailed(code=8, message="too large", error="EntryTooLargeError",
                                      retriable=False)
    harness.reply(harness.commands("append_block")[-1], append_failed=refusal)
    # t1 alone now; the broker takes it, then refuses t2 alone.
    assert _payloads(harness.blocks()[2:]) == [b"t1.a", b"t1.b"]
    assert harness.blocks()[-1].end
    harness.ack_end(2)
    assert _payloads(harness.blocks()[3:]) == [b"t2.a", b"t2.b"]
    harness.reply(harness.commands("append_block")[-1], append_failed=refusal)
    assert futures[1].result(WAIT_S).offset == 2
    with pytest.raises(TxnFailedError):
        futures[2].result(WAIT_S)


def test_sealed_segment_fails_this_and_later_commits(harness: Harness) -> None:
    txn = harness.writer.begin()
    txn.write_event(b"s")
    future = txn.commit_async()
    harness.sync()
    harness.reply(harness.commands("append_block")[-1],
                  segment_is_sealed=append_pb2.SegmentIsSealed(segment=SEGMENT, end_offset=9))
    with pytest.raises(TxnFailedError) as raised:
        future.result(WAIT_S)
    assert isinstance(raised.value.__cause__, SegmentSealedError)
    later = harness.writer.begin()
    later.write_event(b"later")
    with pytest.raises(TxnFailedError):
        later.commit(timeout=WAIT_S)


def test_a_partial_write_by_the_broker_is_reported(harness: Harness) -> None:
    future = _big_txn(harness, 3).commit_async()
    harness.sync()
    held = harness.commands("append_block")[1]
    harness.reply(held, append_failed=append_pb2.AppendFailed(
        code=8, message="held budget", error="EventTooLargeError", retriable=False))
    harness.ack_end(0, count=2)  # a broker that went on holding after the refusal
    with pytest.raises(TxnFailedError, match="partial"):
        future.result(WAIT_S)


def test_close_aborts_the_open_one_and_fails_commits_still_unacknowledged(
    harness: Harness,
) -> None:
    txn = harness.writer.begin()
    txn.write_event(b"c")
    future = txn.commit_async()
    open_one = harness.writer.begin()
    open_one.write_event(b"o")
    with pytest.raises(TimeoutError):
        harness.writer.close(timeout=0.05)
    assert open_one.state == "aborted"
    with pytest.raises(WriterClosedError):
        future.result(WAIT_S)
    with pytest.raises(WriterClosedError):
        harness.writer.begin()
    harness.writer.close()  # idempotent
