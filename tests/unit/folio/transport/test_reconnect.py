"""Streams open again once their channel is back; a refusing broker gets a backoff.

Against real gRPC servers on loopback, behind a real TCP proxy
(``tests/support/proxy.py``) where a connection must fail: the proxy relays
new connections to a port that refuses them (the broker is unreachable:
every attempt fails and the channel goes to TRANSIENT_FAILURE), then to the
server again. The reconnect backoff is given 300 to 600 s: a stream that
waited it out would miss every deadline here, so a test that passes shows
the stream was opened by the channel's READY, not by the backoff's end.
Append streams, and at the end a Read stream. The same with a real ``folio
standalone`` and an ``EventWriter``: ``tests/faults/test_append_reconnect.py``.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import grpc
import pytest
from grpc import aio

from folio._transport.append_stream import AppendStream, Backoff
from folio._transport.io_thread import CHANNEL_OPTIONS, IoThread
from folio._transport.pool import ConnectionPool, ReadLease
from folio._transport.segment_streams import SegmentStreams
from folio.api.v1 import append_pb2, append_pb2_grpc, read_pb2, read_pb2_grpc
from folio.api.v1.block import encode_block
from folio.errors import FolioError
from tests.support.proxy import TcpProxy
from tests.support.wait import wait_for
from tests.unit.folio.transport.test_liveness import SEGMENT, _serve

WAIT_S = 30.0
#: Far beyond WAIT_S: only the channel's READY can end such a wait in time.
LONG_S = 600.0


class Broker(append_pb2_grpc.AppendServicer):
    """Answers each SetupAppend while ``answering``; ``refusing`` ends every stream at once."""

    def __init__(self, *, refusing: bool = False) -> None:
        self.refusing = refusing
        self.answering = True
        self.streams = 0

    async def Append(self, request_iterator: AsyncIterator[append_pb2.AppendCommand],
                     context: Any) -> AsyncIterator[append_pb2.AppendReply]:
        self.streams += 1
        if self.refusing:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "the broker is shutting down")
        async for command in request_iterator:
            if command.HasField("setup_append") and self.answering:
                yield append_pb2.AppendReply(
                    request_id=command.request_id,
                    append_setup=append_pb2.AppendSetup(segment=SEGMENT, last_event_number=-1))


class SetupFlow:
    """An append flow that sets up on every ``on_stream_ready`` and counts the answers."""

    segment = SEGMENT

    def __init__(self, stream: AppendStream) -> None:
        self.stream = stream
        self.flow_id = stream.register(self)
        self.setups = 0
        self.lost: list[FolioError] = []
        self.changed = asyncio.Event()

    def on_reply(self, reply: append_pb2.AppendReply) -> None:
        if reply.HasField("append_setup"):
            self.setups += 1
        self.changed.set()

    def on_stream_ready(self) -> None:
        self.stream.send(self.flow_id, append_pb2.AppendCommand(
            setup_append=append_pb2.SetupAppend(segment=SEGMENT, writer_id="w")))
        self.changed.set()

    def on_stream_lost(self, error: FolioError) -> None:
        self.lost.append(error)
        self.changed.set()

    def on_tick(self, now: float) -> None:
        self.changed.set()  # ten times a second: lets _until look at the stream's state


class RecordingBackoff(Backoff):
    """A ``Backoff`` that records its delays and resets."""

    def __init__(self, max_s: float, *, min_s: float) -> None:
        super().__init__(max_s, min_s=min_s)
        self.delays: list[float] = []
        self.resets = 0

    def next_delay(self) -> float:
        delay = super().next_delay()
        self.delays.append(delay)
        return delay

    def reset(self) -> None:
        self.resets += 1
        super().reset()


async def _until(flow: SetupFlow, condition: Callable[[], bool], what: str) -> None:
    async def wait() -> None:
        while not condition():
            flow.changed.clear()
            await flow.changed.wait()
    try:
        await asyncio.wait_for(wait(), WAIT_S)
    except TimeoutError:
        raise AssertionError(f"not within {WAIT_S} s: {what}") from None


async def _channel_state(channel: aio.Channel, wanted: grpc.ChannelConnectivity) -> None:
    """Waits until ``channel`` is in ``wanted``, asking it to connect when it is IDLE."""
    async def wait() -> None:
        state = channel.get_state(try_to_connect=True)
        while state is not wanted:
            await channel.wait_for_state_change(state)
            state = channel.get_state(try_to_connect=True)
    try:
        await asyncio.wait_for(wait(), WAIT_S)
    except TimeoutError:
        raise AssertionError(f"the channel not {wanted.name} within {WAIT_S} s") from None


@pytest.fixture
def refusing_port() -> Iterator[int]:
    """A loopback port bound but not listening: every connection to it is refused."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


class _Rig:
    """A server behind a proxy, a channel to the proxy, its Append stream and one flow."""

    def __init__(self, broker: Broker, backoff: Backoff) -> None:
        self.broker = broker
        self.backoff = backoff

    async def __aenter__(self) -> _Rig:
        self.server, address = await _serve(self.broker,
                                            append_pb2_grpc.add_AppendServicer_to_server)
        self.port = int(address.rsplit(":", 1)[1])
        self.proxy = TcpProxy("127.0.0.1", self.port)
        self.channel = aio.insecure_channel(self.proxy.address, options=list(CHANNEL_OPTIONS))
        self.stream = AppendStream(append_pb2_grpc.AppendStub(self.channel),
                                   progress_timeout_s=LONG_S, channel=self.channel,
                                   backoff=self.backoff)
        self.flow = SetupFlow(self.stream)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stream.close()
        await self.channel.close(None)
        await asyncio.to_thread(self.proxy.close)
        await self.server.stop(None)

    async def unreachable(self, refusing_port: int) -> None:
        """Cuts the connection; new ones are refused until ``reachable``."""
        await asyncio.to_thread(self.proxy.retarget, refusing_port)
        assert await asyncio.to_thread(self.proxy.cut) == 1
        await _until(self.flow, lambda: len(self.flow.lost) == 1, "the stream broken by the cut")
        await _channel_state(self.channel, grpc.ChannelConnectivity.TRANSIENT_FAILURE)

    async def reachable(self) -> None:
        await asyncio.to_thread(self.proxy.retarget, self.port)


async def test_a_stream_cut_off_its_broker_opens_again_as_soon_as_the_channel_is_back(
        refusing_port: int) -> None:
    async with _Rig(Broker(), Backoff(LONG_S, min_s=LONG_S)) as rig:
        await _until(rig.flow, lambda: rig.flow.setups == 1, "the first setup answered")
        await rig.unreachable(refusing_port)
        # The stream waits for its channel: the connection failed, not the broker.
        assert rig.stream.reconnect_wait == "channel" and not rig.stream.connected
        await rig.reachable()
        # gRPC redials (its own backoff, at most 2 s), the channel turns READY
        # and the stream opens at once: not after its backoff of 300 s or more.
        await _until(rig.flow, lambda: rig.flow.setups == 2, "the setup after the channel is back")
        assert (rig.stream.attempts, rig.stream.restarts, rig.stream.ready_wakeups) == (2, 1, 1)
        assert rig.broker.streams == 2


async def test_a_broker_that_keeps_refusing_the_stream_keeps_its_backoff() -> None:
    # The connection is up (the channel stays READY) and the broker ends every
    # Append stream at once: nothing for the channel to wake the stream for.
    backoff = RecordingBackoff(0.64, min_s=0.01)
    async with _Rig(Broker(refusing=True), backoff) as rig:
        await _until(rig.flow, lambda: len(rig.flow.lost) >= 7, "seven refusals")
        assert rig.stream.ready_wakeups == 0 and backoff.resets == 0
        assert rig.channel.get_state() is grpc.ChannelConnectivity.READY
        # Steps 0.01, 0.02, ... 0.64 s, each delay in [step / 2, step].
        assert len(backoff.delays) >= 6
        for index, delay in enumerate(backoff.delays[:7]):
            step = 0.01 * 2 ** index
            assert step / 2 <= delay <= step


async def test_a_stream_the_channel_woke_that_breaks_before_any_answer_waits_the_whole_backoff(
        refusing_port: int) -> None:
    # A broker that accepts connections and drops them before answering must
    # not be retried at each READY: the next wait is the backoff itself.
    async with _Rig(Broker(), Backoff(LONG_S, min_s=LONG_S)) as rig:
        await _until(rig.flow, lambda: rig.flow.setups == 1, "the first setup answered")
        await rig.unreachable(refusing_port)
        rig.broker.answering = False
        await rig.reachable()
        await _until(rig.flow, lambda: rig.stream.ready_wakeups == 1 and rig.stream.connected
                     and rig.broker.streams == 2, "the stream opened again on READY")
        assert await asyncio.to_thread(rig.proxy.cut) == 1  # no answer came on it
        await _until(rig.flow, lambda: rig.stream.reconnect_wait == "backoff",
                     "the stream waiting out its backoff")
        assert (rig.stream.attempts, rig.stream.restarts) == (2, 2)
        assert len(rig.flow.lost) == 2 and rig.flow.setups == 1


# -- Read streams ------------------------------------------------------------------


class Tail(read_pb2_grpc.ReadServicer):
    """Serves ``payloads`` from the offset asked, then an empty response every 50 ms (the tail)."""

    def __init__(self) -> None:
        self.payloads = [b"e0"]
        self.streams = 0

    async def Read(self, request: read_pb2.ReadRequest,
                   context: Any) -> AsyncIterator[read_pb2.ReadResponse]:
        self.streams += 1
        offset = request.offset
        while True:
            end = len(self.payloads)
            if offset < end:
                yield read_pb2.ReadResponse(blocks=[read_pb2.ReadBlock(
                    offset=offset, event_count=end - offset,
                    data=encode_block(self.payloads[offset:end]))], next_offset=end,
                    end_offset=end)
                offset = end
            else:
                yield read_pb2.ReadResponse(next_offset=offset, end_offset=end)
            await asyncio.sleep(0.05)


class _OnePool:
    """``ReadChannels`` of one broker (not a cluster): the streams lease its pool's channels."""

    cluster = False

    def __init__(self, pool: ConnectionPool) -> None:
        self.pool = pool

    def lease_read(self, segment: str) -> ReadLease:
        return self.pool.lease_read(segment)

    def owner_of(self, segment: str) -> str | None:
        return self.pool.endpoint

    def moved(self, segment: str, owner: str | None) -> None:
        raise AssertionError("a single broker never moves a segment")

    async def find_owner(self, segment: str, deadline: float | None) -> str:
        raise AssertionError("a single broker never moves a segment")


def _next_offset(streams: SegmentStreams[Any]) -> int:
    deadline = time.monotonic() + WAIT_S
    while (left := deadline - time.monotonic()) > 0:
        event = streams.next_event(left)
        if event is not None:
            return event.offset
    raise AssertionError(f"no event within {WAIT_S} s")


def test_a_read_stream_cut_off_its_broker_reads_on_as_soon_as_the_channel_is_back(
        refusing_port: int) -> None:
    io = IoThread("test-reconnect-read")
    tail = Tail()
    server, address = io.run(_serve(tail, read_pb2_grpc.add_ReadServicer_to_server), WAIT_S)
    port = int(address.rsplit(":", 1)[1])
    proxy = TcpProxy("127.0.0.1", port)

    async def make_pool() -> ConnectionPool:
        return ConnectionPool(proxy.address, max_connections=1)

    async def channel_state() -> grpc.ChannelConnectivity:
        return pool.admin.channel.get_state(try_to_connect=True)

    pool = io.run(make_pool(), WAIT_S)
    streams: SegmentStreams[Any] = SegmentStreams(
        io=io, channels=_OnePool(pool), deserialize=None,
        backoff=lambda: Backoff(LONG_S, min_s=LONG_S))
    try:
        streams.add(SEGMENT, 0)
        assert _next_offset(streams) == 0
        proxy.retarget(refusing_port)
        assert proxy.cut() == 1
        wait_for(lambda: io.run(channel_state(), WAIT_S)
                 is grpc.ChannelConnectivity.TRANSIENT_FAILURE,
                 "the channel failing to reach the broker", WAIT_S)
        tail.payloads.append(b"e1")
        proxy.retarget(port)
        # Read on from offset 1 once the channel is back, not after 300 s or more.
        assert _next_offset(streams) == 1
        assert streams.ready_wakeups == 1 and tail.streams == 2
    finally:
        streams.close()
        io.run(pool.close(), WAIT_S)
        proxy.close()
        io.run(server.stop(None), WAIT_S)
        io.close()
