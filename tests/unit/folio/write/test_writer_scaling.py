"""Writers across a seal, the broker played by the test (as in ``test_segment_writer.py``).

A segment writer that meets ``SegmentIsSealed`` learns from one more setup
(the sealed segment's record of the writer) which blocks were written, then
hands the rest over in order; a single-routing-key transaction writer moves
its unfinished transactions whole to the successor owning its key, including
one whose end block was sent before a lost reply (PDP-44 "Segment Sealed").
Against the real broker: ``tests/integration/test_scaling.py``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest

from folio._transport.io_thread import IoThread
from folio.api.v1 import append_pb2
from folio.errors import SegmentSealedError, TxnFailedError
from folio.models import SegmentRange, WriteResult
from folio.txn.txn import SingleRoutingKeyTransactionWriter
from folio.write._write_future import BlockOutcome, WriteFuture
from tests.unit.folio.txn.conftest import WAIT_S, RecordingStream, _Bytes, _payloads, _topic
from tests.unit.folio.txn.conftest import Harness as TxnHarness
from tests.unit.folio.write.test_segment_writer import SEGMENT, Harness


@pytest.fixture
def io() -> Iterator[IoThread]:
    thread = IoThread("test-scaling-io")
    yield thread
    thread.close()


def _sealed(h: Any, command: append_pb2.AppendCommand) -> None:
    h.reply(command, segment_is_sealed=append_pb2.SegmentIsSealed(segment=SEGMENT,
                                                                  end_offset=7))


class Forwarded:
    """A stand-in successor: records the events handed to it, one outcome for all."""

    def __init__(self) -> None:
        self.events: list[tuple[bytes, str | None, int, bool]] = []
        self.outcome = BlockOutcome("t/1")
        self.published = 0

    def begin(self) -> tuple[Callable[..., WriteFuture], Callable[[], None]]:
        def forward(payload: bytes, key: str | None, headers: Mapping[str, bytes] | None,
                    timestamp_ms: int, size: int, force: bool) -> WriteFuture:
            self.events.append((payload, key, timestamp_ms, force))
            return WriteFuture(self.outcome, len(self.events) - 1)

        def publish() -> None:
            self.published += 1

        return forward, publish


def test_a_sealed_segment_settles_by_setup_then_hands_the_rest_over_in_order(
        io: IoThread) -> None:
    sealed: list[Any] = []
    h = Harness(io, on_sealed=sealed.append)
    first = h.append(b"a")
    h.cut()
    h.setup()
    second = h.append(b"b")
    h.cut()
    blocks = h.commands("append_block")
    assert len(blocks) == 2
    # The first block's reply is lost; the second is refused: sealed.
    _sealed(h, blocks[1])
    assert len(h.commands("setup_append")) == 2  # asks the sealed segment what it holds
    assert not sealed and not second.done()
    pending = h.append(b"c")  # still taken meanwhile (batched, never sent here)
    h.setup(last_event_number=0)  # the writer attribute: the first block was written
    assert first.result(timeout=1).offset == -1  # written before the seal (a duplicate ack)
    assert sealed == [h.writer]
    assert len(h.commands("append_block")) == 2  # nothing resent to the sealed segment

    successor = Forwarded()
    h.on_io(h.writer.hand_over, successor.begin)
    assert [(p, k) for p, k, _, _ in successor.events] == [(b"b", "k"), (b"c", "k")]
    assert all(force for *_, force in successor.events)  # the IO thread never waits
    assert successor.published == 1
    later = h.append(b"d")  # passed straight on
    assert successor.events[-1][:2] == (b"d", "k")
    assert not second.done()
    successor.outcome.set_result(40)
    assert second.result(timeout=1) == WriteResult("t/1", 40)
    assert pending.result(timeout=1).offset == 41 and later.result(timeout=1).offset == 42
    assert h.errors == []
    assert h.writer.wait_idle(None)


def test_no_successors_fail_what_was_not_written(
        io: IoThread) -> None:
    sealed: list[Any] = []
    h = Harness(io, on_sealed=sealed.append)
    future = h.append(b"a")
    h.cut()
    h.setup()
    _sealed(h, h.commands("append_block")[0])
    h.setup(last_event_number=-1)
    assert sealed == [h.writer]
    h.on_io(h.writer.fail, SegmentSealedError("its topic is sealed", segment=SEGMENT))
    with pytest.raises(SegmentSealedError, match="topic is sealed"):
        future.result(timeout=1)


def test_a_forwarded_outcome_is_done_once_every_new_block_is() -> None:
    old = BlockOutcome("t/0")
    left, right = BlockOutcome("t/1"), BlockOutcome("t/2")
    futures = [WriteFuture(left, 0), WriteFuture(right, 0), WriteFuture(left, 1)]
    old.forward(futures)
    done = threading.Event()
    WriteFuture(old, 0).add_done_callback(lambda _: done.set())
    left.set_result(5)
    assert not old.done and not done.is_set()
    right.set_error(SegmentSealedError("sealed", segment="t/2"))
    assert old.done and done.is_set()
    assert WriteFuture(old, 0).result(0).offset == 5
    assert WriteFuture(old, 2).result(0).offset == 6
    assert isinstance(WriteFuture(old, 1).exception(0), SegmentSealedError)


# -- single-routing-key transactions ---------------------------------------------------

SUCCESSOR = SegmentRange("t/1", 1, 0.0, 1.0, False, 0, 0, ("t/0",))


class TxnScalingHarness(TxnHarness):
    def __init__(self, io: IoThread, successors: list[SegmentRange]) -> None:
        self.io = io
        self.stream = RecordingStream()
        self.looked_up: list[str] = []

        async def lookup(segment: str) -> list[SegmentRange]:
            self.looked_up.append(segment)
            return successors

        self.writer: SingleRoutingKeyTransactionWriter[Any] = SingleRoutingKeyTransactionWriter(
            _topic(), "key", _Bytes(), io=io, source=self.stream,
            txn_timeout_ms=60_000, writer_id="w", successors=lookup)
        self.sync()


def _commit(h: TxnHarness, *payloads: bytes) -> Any:
    txn = h.writer.begin()
    for payload in payloads:
        txn.write_event(payload)
    future = txn.commit_async()
    h.sync()
    return future


def test_a_transaction_refused_as_sealed_goes_whole_to_the_successor(io: IoThread) -> None:
    h = TxnScalingHarness(io, [SUCCESSOR])
    h.setup()
    future = _commit(h, b"x", b"y")
    _sealed_txn = h.commands("append_block")[-1]
    h.reply(_sealed_txn, segment_is_sealed=append_pb2.SegmentIsSealed(segment="t/0"))
    h.sync()
    assert h.looked_up == ["t/0"]
    assert h.flow.segment == "t/1"
    assert h.commands("setup_append")[-1].setup_append.segment == "t/1"
    h.setup(last_event_number=-1)
    assert _payloads(h.blocks()[-1:]) == [b"x", b"y"]  # whole, renumbered from the setup
    assert h.blocks()[-1].last_event_number == 1
    h.ack_end(30)
    assert future.result(WAIT_S).segment == "t/1" and future.result(WAIT_S).offset == 30
    assert h.writer.segment == "t/1"


def test_an_end_block_in_doubt_is_settled_by_the_sealed_segments_writer_attribute(
        io: IoThread) -> None:
    h = TxnScalingHarness(io, [SUCCESSOR])
    h.setup()
    written = _commit(h, b"w1")        # its end block went out; the reply is lost
    h.lose_stream()
    later = _commit(h, b"l1", b"l2")   # committed meanwhile: queued behind it
    h.restore_stream()
    # The segment was sealed meanwhile: it still answers the setup with what it
    # holds of this writer (event 0: the transaction in doubt was written).
    h.setup(last_event_number=0)
    assert written.result(WAIT_S).offset == -1  # settled, never sent again
    h.reply(h.commands("append_block")[-1],
            segment_is_sealed=append_pb2.SegmentIsSealed(segment="t/0"))
    h.sync()
    h.setup(last_event_number=-1)  # the successor's setup
    assert [c.setup_append.segment for c in h.commands("setup_append")][-1] == "t/1"
    assert _payloads(h.blocks()[-1:]) == [b"l1", b"l2"]
    h.ack_end(0)
    assert later.result(WAIT_S).segment == "t/1"
    sent_to_successor = [b for b in h.blocks() if b"w1" in b.data]
    assert len(sent_to_successor) == 1  # w1 went out once, to the sealed segment only


def test_an_end_block_in_doubt_not_written_moves_whole(io: IoThread) -> None:
    h = TxnScalingHarness(io, [SUCCESSOR])
    h.setup()
    future = _commit(h, b"a", b"b")
    h.lose_stream()
    h.restore_stream()
    h.setup(last_event_number=-1)  # not written before the seal: sent again...
    h.reply(h.commands("append_block")[-1],
            segment_is_sealed=append_pb2.SegmentIsSealed(segment="t/0"))  # ...refused
    h.sync()
    h.setup(last_event_number=-1)
    assert _payloads(h.blocks()[-1:]) == [b"a", b"b"]
    h.ack_end(3)
    assert future.result(WAIT_S).segment == "t/1"


def test_a_sealed_topic_fails_the_transaction(io: IoThread) -> None:
    h = TxnScalingHarness(io, [])
    h.setup()
    future = _commit(h, b"a")
    h.reply(h.commands("append_block")[-1],
            segment_is_sealed=append_pb2.SegmentIsSealed(segment="t/0"))
    with pytest.raises(TxnFailedError) as raised:
        future.result(WAIT_S)
    assert isinstance(raised.value.__cause__, SegmentSealedError)
