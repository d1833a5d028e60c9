"""The connection pool's choices and the Append stream's multiplexing, without a broker.

- ``AppendStream`` over a scripted gRPC call: request ids are
  ``flow_id << 32 | sequence``, replies reach the flow named by
  ``request_id >> 32`` (and no other), sequences wrap at 32 bits (all of
  them), flow ids wrap below 2**32 and skip ids in use, unregistered flows
  get nothing.
- ``ConnectionPool``: a new flow goes to the channel with the fewest flows,
  a channel is opened only while every open one is busy and the pool is under
  its maximum, flows counted as append flows plus Read streams; ``stats``.
- ``EventWriter``: no per-segment state until a segment is written to, and
  writers of one topic share its layout.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Iterator
from functools import partial
from typing import Any, TypeVar

import pytest

import folio
from folio._transport.append_stream import _MAX_FLOW_ID, AppendStream
from folio._transport.io_thread import IoThread
from folio._transport.pool import ConnectionPool, ReadLease
from folio.api.v1 import append_pb2
from folio.errors import FolioError, FolioUnavailableError, InvalidArgumentError
from folio.models import SegmentRange, TopicConfig, TopicInfo
from folio.serializers import BytesSerializer
from folio.write.writer import EventWriter

R = TypeVar("R")

#: Nothing listens here: channels to it never connect (and gRPC connects lazily).
NOWHERE = "127.0.0.1:1"


class ScriptedCall:
    """Stands in for the Append stream call: records writes, yields the replies pushed."""

    def __init__(self) -> None:
        self.written: list[append_pb2.AppendCommand] = []
        self.replies: asyncio.Queue[append_pb2.AppendReply | None] = asyncio.Queue()

    async def write(self, command: append_pb2.AppendCommand) -> None:
        self.written.append(command)

    def cancel(self) -> None:
        self.replies.put_nowait(None)

    def __aiter__(self) -> ScriptedCall:
        return self

    async def __anext__(self) -> append_pb2.AppendReply:
        reply = await self.replies.get()
        if reply is None:
            raise StopAsyncIteration
        return reply


class ScriptedStub:
    def __init__(self) -> None:
        self.calls: list[ScriptedCall] = []

    def Append(self, _request: object) -> ScriptedCall:
        call = ScriptedCall()
        self.calls.append(call)
        return call


class RecordingFlow:
    def __init__(self) -> None:
        self.segment = "t/0"  # an AppendFlow names its segment; the pool does not read it
        self.replies: list[append_pb2.AppendReply] = []
        self.ready = 0
        self.lost: list[FolioError] = []
        self.readied = threading.Condition()

    def on_reply(self, reply: append_pb2.AppendReply) -> None:
        self.replies.append(reply)

    def on_stream_ready(self) -> None:
        with self.readied:
            self.ready += 1
            self.readied.notify_all()

    def on_stream_lost(self, error: FolioError) -> None:
        self.lost.append(error)

    def on_tick(self, now: float) -> None:
        pass


@pytest.fixture
def io() -> Iterator[IoThread]:
    thread = IoThread("test-pool-io")
    yield thread
    thread.close()


def on_io(io: IoThread, fn: Callable[[], R]) -> R:
    """Runs ``fn`` on the IO thread, lets the loop run what it queued, returns the result."""
    async def call() -> R:
        result = fn()
        for _ in range(5):
            await asyncio.sleep(0)
        return result
    return io.run(call(), timeout=5)


def run(io: IoThread, coro: Callable[[], Awaitable[R]]) -> R:
    async def call() -> R:
        return await coro()
    return io.run(call(), timeout=5)


def setup_command() -> append_pb2.AppendCommand:
    return append_pb2.AppendCommand(setup_append=append_pb2.SetupAppend(segment="t/0",
                                                                        writer_id="w"))


# -- AppendStream -------------------------------------------------------------------


def test_replies_reach_the_flow_their_request_id_names(io: IoThread) -> None:
    stub = ScriptedStub()
    stream = AppendStream(stub)  # type: ignore[arg-type]
    flows = [RecordingFlow() for _ in range(3)]
    ids = on_io(io, lambda: [stream.register(flow) for flow in flows])
    assert ids == [1, 2, 3]
    assert [flow.ready for flow in flows] == [1, 1, 1]
    sent: list[tuple[int, int]] = []
    for flow_id in ids:
        for _ in range(2):
            sequence = on_io(io, partial(stream.send, flow_id, setup_command()))
            assert sequence is not None
            sent.append((flow_id, sequence))
    call = stub.calls[0]
    assert [c.request_id for c in call.written] == [f << 32 | s for f, s in sent]
    assert [s for _, s in sent] == [1, 2, 1, 2, 1, 2]
    # Replies in an order of the broker's choosing, one to nobody.
    for request_id in (3 << 32 | 2, 1 << 32 | 1, 9 << 32 | 1, 2 << 32 | 1, 1 << 32 | 2,
                       3 << 32 | 1, 2 << 32 | 2):
        call.replies.put_nowait(append_pb2.AppendReply(request_id=request_id))
    on_io(io, lambda: None)
    for flow_id, flow in zip(ids, flows, strict=True):
        assert {r.request_id >> 32 for r in flow.replies} == {flow_id}
        assert sorted(r.request_id & 0xFFFFFFFF for r in flow.replies) == [1, 2]
    run(io, stream.close)


def test_sequences_wrap_at_32_bits_and_flow_ids_skip_those_in_use(io: IoThread) -> None:
    stub = ScriptedStub()
    stream = AppendStream(stub)  # type: ignore[arg-type]
    first = on_io(io, lambda: stream.register(RecordingFlow()))
    assert first == 1
    stream._sequences[first] = 0xFFFFFFFF
    assert on_io(io, lambda: stream.send(first, setup_command())) == 0
    assert on_io(io, lambda: stream.send(first, setup_command())) == 1
    assert [c.request_id for c in stub.calls[0].written] == [1 << 32, 1 << 32 | 1]

    stream._next_flow_id = _MAX_FLOW_ID
    top_flow = RecordingFlow()
    top = on_io(io, lambda: stream.register(top_flow))
    after_wrap = on_io(io, lambda: stream.register(RecordingFlow()))
    assert (top, after_wrap) == (_MAX_FLOW_ID, 2)  # 1 is still in use
    on_io(io, lambda: stream.send(top, setup_command()))
    request_id = stub.calls[0].written[-1].request_id
    assert request_id == _MAX_FLOW_ID << 32 | 1 and request_id < 1 << 64
    stub.calls[0].replies.put_nowait(append_pb2.AppendReply(request_id=request_id))
    on_io(io, lambda: None)
    assert [r.request_id for r in top_flow.replies] == [request_id]
    run(io, stream.close)


def test_an_unregistered_flow_sends_and_hears_nothing(io: IoThread) -> None:
    stub = ScriptedStub()
    stream = AppendStream(stub)  # type: ignore[arg-type]
    flow = RecordingFlow()
    flow_id = on_io(io, lambda: stream.register(flow))
    assert stream.flow_count == 1
    on_io(io, lambda: stream.unregister(flow_id))
    assert stream.flow_count == 0
    assert on_io(io, lambda: stream.send(flow_id, setup_command())) is None
    stub.calls[0].replies.put_nowait(append_pb2.AppendReply(request_id=flow_id << 32 | 1))
    on_io(io, lambda: None)
    assert flow.replies == [] and stub.calls[0].written == []
    run(io, stream.close)


def test_a_broken_stream_is_reopened_and_its_flows_told(io: IoThread) -> None:
    stub = ScriptedStub()
    stream = AppendStream(stub)  # type: ignore[arg-type]
    flow = RecordingFlow()
    on_io(io, lambda: stream.register(flow))
    stub.calls[0].cancel()  # the broker ends the stream

    with flow.readied:  # reopened after the first backoff (50 ms)
        assert flow.readied.wait_for(lambda: flow.ready >= 2, 3), "the stream was not reopened"
    assert len(flow.lost) == 1 and flow.ready == 2
    assert stream.restarts == 1 and stream.connected and len(stub.calls) == 2
    run(io, stream.close)


# -- ConnectionPool -----------------------------------------------------------------


def test_flows_go_to_the_least_busy_channel_opening_one_only_under_the_max(
        io: IoThread) -> None:
    pool: ConnectionPool = run(io, lambda: _pool(2))
    leases: list[ReadLease] = []

    def lease() -> int:
        made = pool.lease_read()
        leases.append(made)
        return min(i for i, c in enumerate(pool.connections) if made.stub is c.read)

    # The first channel is idle (admin calls are not flows): it takes the first flow.
    assert [on_io(io, lease) for _ in range(5)] == [0, 1, 0, 1, 0]
    assert len(pool.connections) == 2
    assert [c.flows for c in pool.stats().connections] == [3, 2]
    on_io(io, leases[0].release)
    on_io(io, leases[2].release)
    on_io(io, leases[2].release)  # idempotent
    assert [c.read_flows for c in pool.stats().connections] == [1, 2]
    assert on_io(io, lease) == 0
    run(io, pool.close)
    with pytest.raises(FolioUnavailableError):
        on_io(io, pool.pick)
    assert pool.stats().connections == ()


@pytest.mark.parametrize(("channels", "flows"), [(1, 7), (3, 30), (3, 31)])
def test_flows_spread_evenly(io: IoThread, channels: int, flows: int) -> None:
    pool: ConnectionPool = run(io, lambda: _pool(channels))
    for _ in range(flows):
        on_io(io, pool.lease_read)
    counts = [c.flows for c in pool.stats().connections]
    assert len(counts) == channels and sum(counts) == flows
    assert max(counts) - min(counts) <= 1
    run(io, pool.close)


def test_append_flows_count_and_new_flows_avoid_the_busy_channel(io: IoThread) -> None:
    pool: ConnectionPool = run(io, lambda: _pool(2))
    flows = [RecordingFlow() for _ in range(4)]
    opened = [on_io(io, partial(pool.open_flow, flow)) for flow in flows]
    streams = [stream for stream, _ in opened]
    assert streams[0] is streams[2] and streams[1] is streams[3] and streams[0] is not streams[1]
    assert [flow_id for _, flow_id in opened] == [1, 1, 2, 2]  # unique per channel
    stats = pool.stats()
    assert [(c.index, c.append_flows, c.read_flows) for c in stats.connections] == \
        [(0, 2, 0), (1, 2, 0)]
    assert stats.flows == 4 and stats.open_connections == 2 and stats.max_connections == 2
    on_io(io, lambda: streams[1].unregister(1))
    on_io(io, lambda: streams[1].unregister(2))
    assert on_io(io, lambda: pool.open_flow(RecordingFlow()))[0] is streams[1]
    run(io, pool.close)


def test_pool_limits_are_checked() -> None:
    with pytest.raises(InvalidArgumentError):
        ConnectionPool(NOWHERE, 0)
    with pytest.raises(InvalidArgumentError):
        folio.Client(NOWHERE, max_connections_per_endpoint=0)


async def _pool(channels: int) -> ConnectionPool:
    return ConnectionPool(NOWHERE, channels)


# -- EventWriter --------------------------------------------------------------------


class NoFlows:
    def open_flow(self, flow: Any) -> Any:
        raise AssertionError("nothing was written")


def _topic(segments: int) -> TopicInfo:
    config = TopicConfig(retention_ms=-1, retention_bytes=-1, max_event_bytes=1 << 20,
                         ledger_rollover_bytes=1 << 30, ledger_rollover_ms=3_600_000)
    ranges = tuple(SegmentRange(name=f"t/{n}", number=n, key_low=n / segments,
                                key_high=(n + 1) / segments, sealed=False, start_offset=0,
                                end_offset=0) for n in range(segments))
    return TopicInfo(name="t", config=config, segments=ranges, created_ms=1)


def test_an_idle_writer_holds_no_segment_state_and_shares_its_layout(io: IoThread) -> None:
    def make() -> EventWriter[bytes]:
        return EventWriter(_topic(100), BytesSerializer(), io=io, stream=NoFlows(),
                           linger_ms=5.0, batch_size_bytes=1 << 16, max_in_flight=5,
                           delivery_timeout_ms=1000, writer_id=None)

    first, second = make(), make()
    assert first._segments == {} and second._segments == {}
    assert first._layout is second._layout
    assert first._layout.names[7] == "t/7"
    first.close(timeout=1)
    second.close(timeout=1)
