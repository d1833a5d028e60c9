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

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from folio._transport.io_thread import IoThread
from folio.api.v1 import append_pb2
from folio.api.v1.block import decode_block
from folio.errors import (
    EventTooLargeError,
    FolioUnavailableError,
    MaxTransactionSizeExceededError,
    SegmentSealedError,
    TimeoutError,
    TxnFailedError,
    TxnStateError,
    WriterClosedError,
)
from folio.models import SegmentRange, TopicConfig, TopicInfo
from folio.serializers import StringSerializer
from folio.txn.txn import (
    MAX_TRANSACTION_BYTES,
    TXN_BLOCK_BYTES,
    SingleRoutingKeyTransactionWriter,
    TransactionResult,
)

SEGMENT = "t/0"
MiB = 1024 * 1024
WAIT_S = 5.0


class RecordingStream:
    """Stands in for the pool/``AppendStream``: records commands, the test plays the broker."""

    def __init__(self) -> None:
        self.flows: dict[int, Any] = {}
        self.sent: list[append_pb2.AppendCommand] = []
        self.connected = True
        self._sequence = 0

    def open_flow(self, flow: Any) -> tuple[Any, int]:
        self.flows[1] = flow
        if self.connected:
            asyncio.get_running_loop().call_soon(flow.on_stream_ready)
        return self, 1

    def unregister(self, flow_id: int) -> None:
        self.flows.pop(flow_id, None)

    def send(self, flow_id: int, command: append_pb2.AppendCommand) -> int | None:
        if not self.connected:
            return None
        self._sequence += 1
        command.request_id = flow_id << 32 | self._sequence
        self.sent.append(command)
        return self._sequence


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _topic(max_event_bytes: int = 4 * MiB) -> TopicInfo:
    config = TopicConfig(retention_ms=-1, retention_bytes=-1, max_event_bytes=max_event_bytes,
                         ledger_rollover_bytes=1 << 30, ledger_rollover_ms=3_600_000)
    return TopicInfo("t", config, (SegmentRange(SEGMENT, 0, 0.0, 1.0, False, 0, 0),), 0)


class Harness:
    def __init__(self, io: IoThread, *, txn_timeout_ms: int = 60_000,
                 clock: Any = None, serializer: Any = None) -> None:
        self.io = io
        self.stream = RecordingStream()
        options: dict[str, Any] = {} if clock is None else {"clock": clock}
        self.writer: SingleRoutingKeyTransactionWriter[Any] = SingleRoutingKeyTransactionWriter(
            _topic(), "key", serializer or _Bytes(), io=io,
            source=self.stream,  # type: ignore[arg-type]
            txn_timeout_ms=txn_timeout_ms, writer_id="w", **options)
        self.sync()

    @property
    def flow(self) -> Any:
        return self.stream.flows[1]

    def sync(self) -> None:
        """Waits until the IO thread ran everything queued so far (call_soon chains)."""
        for _ in range(3):
            self.io.run(asyncio.sleep(0), timeout=WAIT_S)

    def on_io(self, fn: Any, *args: Any) -> None:
        async def call() -> None:
            fn(*args)
        self.io.run(call(), timeout=WAIT_S)
        self.sync()

    def commands(self, kind: str) -> list[append_pb2.AppendCommand]:
        return [c for c in self.stream.sent if c.WhichOneof("command") == kind]

    def blocks(self) -> list[append_pb2.AppendBlock]:
        return [c.append_block for c in self.commands("append_block")]

    def reply(self, command: append_pb2.AppendCommand, **reply: Any) -> None:
        message = append_pb2.AppendReply(request_id=command.request_id, **reply)
        self.on_io(self.flow.on_reply, message)

    def setup(self, last_event_number: int = -1) -> None:
        self.reply(self.commands("setup_append")[-1],
                   append_setup=append_pb2.AppendSetup(segment=SEGMENT,
                                                       last_event_number=last_event_number))

    def ack_end(self, offset: int, *, duplicate: bool = False, count: int | None = None) -> None:
        end = [c for c in self.commands("append_block") if c.append_block.end][-1]
        block = end.append_block
        events = sum(b.event_count for b in self.blocks()[-self._sequence_length():])
        self.reply(end, data_appended=append_pb2.DataAppended(
            event_number=block.last_event_number, offset=-1 if duplicate else offset,
            event_count=0 if duplicate else (events if count is None else count),
            duplicate=duplicate))

    def _sequence_length(self) -> int:
        blocks = self.blocks()
        length = 1
        while length < len(blocks) and not blocks[-length - 1].end:
            length += 1
        return length

    def lose_stream(self) -> None:
        self.stream.connected = False
        self.on_io(self.flow.on_stream_lost, FolioUnavailableError("cut"))

    def restore_stream(self) -> None:
        self.stream.connected = True
        self.on_io(self.flow.on_stream_ready)


class _Bytes:
    def serialize(self, value: bytes) -> bytes:
        return value

    def deserialize(self, data: bytes) -> bytes:
        return data


@pytest.fixture
def io() -> Iterator[IoThread]:
    thread = IoThread("test-txn-io")
    yield thread
    thread.close()


@pytest.fixture
def harness(io: IoThread) -> Harness:
    made = Harness(io)
    made.setup()
    return made


def _payloads(blocks: list[append_pb2.AppendBlock]) -> list[bytes]:
    return [p for block in blocks for p in decode_block(block.data).payloads]


# -- the caller's side ------------------------------------------------------------


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


def _wait_for(get: Any, timeout: float = WAIT_S) -> Any:
    """Polls ``get()`` until it is truthy; fails after ``timeout``."""
    deadline = time.monotonic() + timeout
    tick = threading.Event()
    while time.monotonic() < deadline:
        value = get()
        if value:
            return value
        tick.wait(0.01)
    raise AssertionError("condition not met in time")


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


def _big_txn(harness: Harness, megabytes: int = 3) -> Any:
    txn = harness.writer.begin()
    for index in range(megabytes * 4):
        txn.write_event(bytes([index]) * (256 * 1024 - 100))
    return txn


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
