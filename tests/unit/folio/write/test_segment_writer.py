"""A segment writer's batching and its flow's retry rules, on a real IO thread.

The Append stream is the one thing replaced: a recording stand-in whose
replies each test writes, so every branch of the flow (setup, acks,
duplicates, retriable and fatal failures, a lost stream, delivery timeouts)
is driven exactly. The broker's real answers are covered by
``tests/integration/test_sdk.py``.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from folio._transport.io_thread import IoThread
from folio.api.v1 import append_pb2
from folio.api.v1.block import decode_block
from folio.errors import (
    DeliveryTimeoutError,
    FolioUnavailableError,
    LedgerUnavailableError,
    SegmentSealedError,
    WriterClosedError,
)
from folio.write._segment_writer import SegmentWriter

SEGMENT = "t/0"


class RecordingStream:
    """Stands in for ``AppendStream``: records commands, the test plays the broker."""

    def __init__(self) -> None:
        self.flows: dict[int, Any] = {}
        self.sent: list[append_pb2.AppendCommand] = []
        self.connected = True
        self._sequence = 0
        self._sent = threading.Condition()

    def open_flow(self, flow: Any) -> tuple[Any, int]:
        return self, self.register(flow)

    def register(self, flow: Any) -> int:
        self.flows[1] = flow
        if self.connected:
            asyncio.get_running_loop().call_soon(flow.on_stream_ready)
        return 1

    def unregister(self, flow_id: int) -> None:
        self.flows.pop(flow_id, None)

    def send(self, flow_id: int, command: append_pb2.AppendCommand) -> int | None:
        if not self.connected:
            return None
        self._sequence += 1
        command.request_id = flow_id << 32 | self._sequence
        with self._sent:
            self.sent.append(command)
            self._sent.notify_all()
        return self._sequence

    def wait_for(self, kind: str, count: int, timeout_s: float = 5.0) -> None:
        """Wait until ``count`` commands of ``kind`` were sent (fails after ``timeout_s``)."""
        with self._sent:
            assert self._sent.wait_for(
                lambda: sum(c.WhichOneof("command") == kind for c in self.sent) >= count,
                timeout_s), f"fewer than {count} {kind} commands sent in {timeout_s} s"


class Harness:
    def __init__(self, io: IoThread, **options: Any) -> None:
        self.io = io
        self.stream = RecordingStream()
        self.errors: list[BaseException] = []
        settings: dict[str, Any] = {"batch_size_bytes": 1 << 20, "linger_s": 60.0,
                                    "max_in_flight": 5, "delivery_timeout_s": 60.0,
                                    "idle_cut": False}
        settings.update(options)
        self.writer = SegmentWriter(SEGMENT, writer_id="w", io=io,
                                    stream=self.stream,
                                    on_error=self.errors.append, **settings)

    def sync(self) -> None:
        """Waits until the IO thread ran everything queued so far (twice: call_soon chains)."""
        for _ in range(3):
            self.io.run(asyncio.sleep(0), timeout=5)

    def on_io(self, fn: Any, *args: Any) -> None:
        async def call() -> None:
            fn(*args)
        self.io.run(call(), timeout=5)
        self.sync()

    def append(self, payload: bytes, key: str | None = "k") -> Any:
        return self.writer.append(payload, key, None, 1000, len(payload))

    def commands(self, kind: str) -> list[append_pb2.AppendCommand]:
        return [c for c in self.stream.sent if c.WhichOneof("command") == kind]

    def reply(self, command: append_pb2.AppendCommand, **reply: Any) -> None:
        message = append_pb2.AppendReply(request_id=command.request_id, **reply)
        self.on_io(self.writer.on_reply, message)

    def setup(self, last_event_number: int = -1) -> None:
        self.reply(self.commands("setup_append")[-1],
                   append_setup=append_pb2.AppendSetup(segment=SEGMENT,
                                                       last_event_number=last_event_number))

    def ack(self, command: append_pb2.AppendCommand, offset: int,
            duplicate: bool = False) -> None:
        block = command.append_block
        self.reply(command, data_appended=append_pb2.DataAppended(
            event_number=block.last_event_number, offset=-1 if duplicate else offset,
            event_count=0 if duplicate else block.event_count, duplicate=duplicate))

    def cut(self) -> None:
        assert self.writer.cut_now(time.monotonic() + 5)
        self.sync()


@pytest.fixture
def io() -> Iterator[IoThread]:
    thread = IoThread("test-io")
    yield thread
    thread.close()


def test_blocks_are_numbered_from_the_setup_and_acked_per_event(io: IoThread) -> None:
    h = Harness(io)
    first = [h.append(b"a%d" % i) for i in range(3)]
    h.cut()
    assert [c.setup_append.writer_id for c in h.commands("setup_append")] == ["w"]
    assert h.commands("append_block") == []  # held until AppendSetup
    h.setup(last_event_number=41)
    (block,) = h.commands("append_block")
    assert (block.append_block.event_count, block.append_block.last_event_number,
            block.append_block.end) == (3, 44, True)
    decoded = decode_block(block.append_block.data)
    assert decoded.payloads == [b"a0", b"a1", b"a2"]
    assert decoded.routing_keys == ["k", "k", "k"]
    assert decoded.timestamps_ms == [1000] * 3
    h.ack(block, offset=100)
    assert [f.result(timeout=1).offset for f in first] == [100, 101, 102]
    second = h.append(b"b")
    h.cut()
    assert h.commands("append_block")[-1].append_block.last_event_number == 45
    h.ack(h.commands("append_block")[-1], offset=103)
    assert second.result(timeout=1).offset == 103
    assert h.writer.wait_idle(time.monotonic() + 1)


def test_keyed_and_keyless_events_never_share_a_block(io: IoThread) -> None:
    h = Harness(io)
    h.append(b"keyed", "k")
    h.append(b"free", None)
    h.append(b"free2", None)
    h.cut()
    h.setup()
    blocks = [decode_block(c.append_block.data) for c in h.commands("append_block")]
    assert [(b.payloads, b.routing_keys) for b in blocks] == \
        [([b"keyed"], ["k"]), ([b"free", b"free2"], [])]


def test_a_full_batch_is_cut_and_backpressure_waits_for_acks(io: IoThread) -> None:
    h = Harness(io, batch_size_bytes=40, max_in_flight=1)
    h.append(b"x" * 30)  # 30 + framing >= 40: cut at once
    h.sync()
    h.setup()
    assert len(h.commands("append_block")) == 1
    h.append(b"y" * 30)  # full, but one block in flight: held
    h.sync()
    assert len(h.commands("append_block")) == 1
    h.ack(h.commands("append_block")[0], offset=0)  # room: the held batch is cut
    assert len(h.commands("append_block")) == 2


def test_every_acknowledgement_cuts_the_open_batch(io: IoThread) -> None:
    h = Harness(io)  # linger 60 s: only the acknowledgements cut here
    h.append(b"a")
    h.cut()
    h.append(b"b")
    h.cut()
    h.setup()
    first, second = h.commands("append_block")
    later = h.append(b"c")  # a batch opens behind two blocks in flight
    h.append(b"d")
    assert len(h.commands("append_block")) == 2  # it fills while they are out
    h.ack(first, offset=0)  # one came back: cut, though the other is still out
    third = h.commands("append_block")[2]
    assert decode_block(third.append_block.data).payloads == [b"c", b"d"]
    h.ack(second, offset=1)  # no batch open: nothing to cut
    assert len(h.commands("append_block")) == 3
    h.ack(third, offset=2)
    assert later.result(timeout=1).offset == 2


def test_add_on_loop_fills_batches_as_append_does_and_says_when_it_would_wait(
        io: IoThread) -> None:
    # The asyncio face's path (no lock: called on the IO thread, as the loop face
    # always is). Its shortcut and its fall-backs to ``append`` make the same blocks.
    h = Harness(io, batch_size_bytes=200, max_in_flight=1)
    placed: list[Any] = []

    def add(payload: bytes, key: str | None, headers: dict[str, bytes] | None = None) -> None:
        placed.append(h.writer.add_on_loop(payload, key, headers, 1000,
                                           len(payload) + len(key or "")))

    def add_all() -> None:
        add(b"a", "k")  # opens a batch (through append)
        add(b"b", "k")  # the shortcut
        add(b"c", "k", {"h": b"v"})  # headers: through append, same batch
        add(b"d", None)  # keyless after keyed: append cuts, a new batch opens
        add(b"e", None)  # the shortcut again, one block in flight
        add(b"f" * 190, None)  # fills the batch past 200 bytes: no room to cut it
        add(b"g", None)  # full batch, max_in_flight out: would wait, so None

    h.on_io(add_all)
    assert placed[6] is None
    first, second = placed[0][0], placed[3][0]
    assert [p[0] for p in placed[:6]] == [first] * 3 + [second] * 3
    assert [p[1] for p in placed[:6]] == [0, 1, 2, 0, 1, 2]
    h.setup()
    (block,) = h.commands("append_block")
    decoded = decode_block(block.append_block.data)
    assert (decoded.payloads, decoded.routing_keys, decoded.headers) == \
        ([b"a", b"b", b"c"], ["k", "k", "k"], [{}, {}, {"h": b"v"}])
    h.ack(block, offset=10)  # room: the full batch is cut
    block = h.commands("append_block")[1]
    decoded = decode_block(block.append_block.data)
    assert (decoded.payloads, decoded.routing_keys, decoded.timestamps_ms) == \
        ([b"d", b"e", b"f" * 190], [], [1000] * 3)  # g was not appended
    h.ack(block, offset=13)
    assert [p[0].outcome_of(p[1]).offset for p in placed[:6]] == [10, 11, 12, 13, 14, 15]


def test_a_batch_opened_with_nothing_in_flight_is_cut_without_lingering(
        io: IoThread) -> None:
    h = Harness(io, idle_cut=True)  # linger 60 s: never the timer here
    future = h.append(b"x")
    h.stream.wait_for("setup_append", 1)
    h.sync()
    h.setup()
    (block,) = h.commands("append_block")
    assert decode_block(block.append_block.data).payloads == [b"x"]
    later = h.append(b"y")  # one block in flight: this batch waits for its ack
    h.sync()
    assert len(h.commands("append_block")) == 1
    h.ack(block, offset=0)
    assert future.result(timeout=1).offset == 0
    second = h.commands("append_block")[1]
    assert decode_block(second.append_block.data).payloads == [b"y"]
    h.ack(second, offset=1)
    assert later.result(timeout=1).offset == 1


def test_linger_cuts_a_block(io: IoThread) -> None:
    h = Harness(io, linger_s=0.01)
    future = h.append(b"x")
    h.stream.wait_for("setup_append", 1)  # the flow opens with its first block
    h.sync()
    h.setup()
    h.ack(h.commands("append_block")[0], offset=7)
    assert future.result(timeout=1).offset == 7


def test_a_lost_stream_resends_only_what_the_broker_did_not_record(io: IoThread) -> None:
    h = Harness(io)
    futures = []
    for i in range(3):
        futures.append(h.append(b"%d" % i))
        h.cut()
        if i == 0:
            h.setup()
    blocks = h.commands("append_block")
    assert [b.append_block.last_event_number for b in blocks] == [0, 1, 2]
    h.stream.connected = False
    h.on_io(h.writer.on_stream_lost, FolioUnavailableError("cut"))
    h.stream.connected = True
    h.stream.sent.clear()
    h.on_io(h.writer.on_stream_ready)
    h.setup(last_event_number=1)  # blocks 0 and 1 were written, their acks lost
    assert futures[0].result(timeout=1).offset == -1
    assert futures[1].result(timeout=1).offset == -1
    (resent,) = h.commands("append_block")
    assert resent.append_block.last_event_number == 2
    h.ack(resent, offset=2)
    assert futures[2].result(timeout=1).offset == 2
    assert h.errors == []


def _append_failed(retriable: bool) -> append_pb2.AppendFailed:
    return append_pb2.AppendFailed(code=grpc.StatusCode.UNAVAILABLE.value[0],
                                   message="bookies down", error="BookieUnavailableError",
                                   retriable=retriable)


def test_a_retriable_failure_sets_up_again_and_resends_in_order(io: IoThread) -> None:
    h = Harness(io)
    first = h.append(b"a")
    h.cut()
    h.setup()
    second = h.append(b"b")
    h.cut()
    one, two = h.commands("append_block")
    h.reply(one, append_failed=_append_failed(retriable=True))
    h.reply(two, append_failed=_append_failed(retriable=True))
    h.stream.wait_for("setup_append", 2)  # the setup comes after the backoff
    h.sync()
    already = len(h.stream.sent)
    h.setup(last_event_number=-1)
    resent = [c for c in h.stream.sent[already:] if c.HasField("append_block")]
    assert [c.append_block.last_event_number for c in resent] == [0, 1]
    h.ack(resent[0], offset=0)
    h.ack(resent[1], offset=1)
    assert (first.result(timeout=1).offset, second.result(timeout=1).offset) == (0, 1)


def test_a_refused_block_the_next_setup_covers_was_stored(io: IoThread) -> None:
    # Refused because its ledger failed, yet its entry reached a bookie and the
    # segment's next load recovered it. The broker lands a flow's blocks as a
    # prefix of those sent (append.proto), so the setup's last_event_number
    # covering it says it is stored: acknowledged, not failed, not resent.
    h = Harness(io)
    first = h.append(b"a")
    h.cut()
    h.setup()
    second = h.append(b"b")
    h.cut()
    one, two = h.commands("append_block")
    h.reply(one, append_failed=_append_failed(retriable=True))
    h.reply(two, append_failed=_append_failed(retriable=True))  # the rest of the flow too
    h.stream.wait_for("setup_append", 2)
    h.sync()
    already = len(h.stream.sent)
    h.setup(last_event_number=0)
    assert first.result(timeout=1).offset == -1
    resent = [c for c in h.stream.sent[already:] if c.HasField("append_block")]
    assert [c.append_block.last_event_number for c in resent] == [1]
    h.ack(resent[0], offset=1)
    assert second.result(timeout=1).offset == 1
    assert h.errors == []


def test_a_sealed_segment_fails_this_and_every_later_block(io: IoThread) -> None:
    h = Harness(io)
    first = h.append(b"a")
    h.cut()
    h.setup()
    h.reply(h.commands("append_block")[0],
            segment_is_sealed=append_pb2.SegmentIsSealed(segment=SEGMENT, end_offset=9))
    with pytest.raises(SegmentSealedError, match="sealed") as caught:
        first.result(timeout=1)
    assert caught.value.end_offset == 9
    later = h.append(b"b")
    h.cut()
    with pytest.raises(SegmentSealedError):
        later.result(timeout=1)
    assert len(h.errors) == 2 and len(h.commands("append_block")) == 1


def test_the_unavailable_ledger_service_is_retried_until_the_deadline_then_unknown(
        io: IoThread) -> None:
    # LedgerUnavailableError (BookieUnavailableError on the wire) is transient:
    # set up again and resend, however often, until the block's deadline; then
    # the outcome is unknown (the refused block may have reached a bookie).
    h = Harness(io, delivery_timeout_s=60.0)
    future = h.append(b"a")
    h.cut()
    for attempt in range(1, 4):
        h.stream.wait_for("setup_append", attempt)
        h.sync()
        h.setup(last_event_number=-1)
        block = h.commands("append_block")[-1]
        assert block.append_block.last_event_number == 0  # the same block, again
        h.reply(block, append_failed=_append_failed(retriable=True))
        h.on_io(h.writer.on_tick, time.monotonic())  # a tick before the deadline
        assert not future.done()
    h.on_io(h.writer.on_tick, time.monotonic() + 61)  # a tick past the delivery deadline
    error = future.exception(timeout=5)
    assert isinstance(error, DeliveryTimeoutError) and not error.retriable
    assert error.segment == SEGMENT and "outcome is unknown" in str(error)
    assert isinstance(error.__cause__, LedgerUnavailableError)
    assert error.last_error == "LedgerUnavailableError"


def test_blocks_past_the_delivery_timeout_fail(io: IoThread) -> None:
    h = Harness(io, delivery_timeout_s=0.01)
    h.stream.connected = False  # the broker is unreachable
    future = h.append(b"a")
    h.cut()
    h.on_io(h.writer.on_tick, time.monotonic() + 1)  # a tick past the delivery deadline
    with pytest.raises(DeliveryTimeoutError, match="delivery_timeout_ms"):
        future.result(timeout=1)
    assert h.writer.wait_idle(time.monotonic() + 1)


def test_close_fails_what_was_not_acknowledged(io: IoThread) -> None:
    h = Harness(io)
    sent = h.append(b"a")
    h.cut()
    h.setup()
    batched = h.append(b"b")
    h.writer.close()
    h.sync()
    for future in (sent, batched):
        with pytest.raises(WriterClosedError):
            future.result(timeout=1)
    with pytest.raises(WriterClosedError):
        h.append(b"c")
    assert h.stream.flows == {}
