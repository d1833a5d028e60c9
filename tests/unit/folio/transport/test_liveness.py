"""Progress deadlines (folio._transport.liveness) against real gRPC servers on loopback.

The servers are up but go silent: they answer a SetupAppend and then nothing,
or send one Read response and then nothing, as a broker whose process is
stopped would (its connections stay up). The client's streams must not wait
on them: the Append stream is cut and opened again (its flows hear
``on_stream_lost`` with the reason, then ``on_stream_ready``), and a Read
stream ends with UNAVAILABLE that says why. Keepalive, the other half, needs a
stopped process: ``tests/faults/test_silent_broker.py``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from grpc import aio

from folio._status import error_from_rpc
from folio._transport.append_stream import AppendStream
from folio._transport.io_thread import CHANNEL_OPTIONS
from folio._transport.liveness import with_progress_deadline
from folio.api.v1 import append_pb2, append_pb2_grpc, read_pb2, read_pb2_grpc
from folio.errors import FolioError, FolioUnavailableError

SEGMENT = "t/0"
#: Short deadlines: the tests wait for their outcome, not for a time.
PROGRESS_S = 0.3
WAIT_S = 30.0


class SilentAppend(append_pb2_grpc.AppendServicer):
    """Answers every SetupAppend; blocks are taken and never answered."""

    def __init__(self) -> None:
        self.streams = 0

    async def Append(self, request_iterator: AsyncIterator[append_pb2.AppendCommand],
                     context: Any) -> AsyncIterator[append_pb2.AppendReply]:
        self.streams += 1
        async for command in request_iterator:
            if command.HasField("setup_append"):
                yield append_pb2.AppendReply(
                    request_id=command.request_id,
                    append_setup=append_pb2.AppendSetup(segment=SEGMENT, last_event_number=-1))


class SilentRead(read_pb2_grpc.ReadServicer):
    """Sends one empty response, then nothing (the stream stays open)."""

    async def Read(self, request: read_pb2.ReadRequest,
                   context: Any) -> AsyncIterator[read_pb2.ReadResponse]:
        yield read_pb2.ReadResponse(next_offset=request.offset, end_offset=request.offset)
        await asyncio.Event().wait()


class Flow:
    """An append flow that sets up, then sends one block with ``end`` (awaiting its reply)."""

    segment = SEGMENT

    def __init__(self) -> None:
        self.stream: AppendStream | None = None
        self.flow_id = 0
        self.ready = 0
        self.setups = 0
        self.lost: list[FolioError] = []
        self.changed = asyncio.Event()

    def on_reply(self, reply: append_pb2.AppendReply) -> None:
        if reply.HasField("append_setup") and self.stream is not None:
            self.setups += 1
            self.changed.set()
            self.stream.send(self.flow_id, append_pb2.AppendCommand(
                append_block=append_pb2.AppendBlock(data=b"x", event_count=1,
                                                    last_event_number=0, end=True)))

    def on_stream_ready(self) -> None:
        self.ready += 1
        if self.stream is not None:
            self.stream.send(self.flow_id, append_pb2.AppendCommand(
                setup_append=append_pb2.SetupAppend(segment=SEGMENT, writer_id="w")))
        self.changed.set()

    def on_stream_lost(self, error: FolioError) -> None:
        self.lost.append(error)
        self.changed.set()

    def on_tick(self, now: float) -> None:
        pass


async def _until(flow: Flow, condition: Any) -> None:
    async def wait() -> None:
        while not condition():
            flow.changed.clear()
            await flow.changed.wait()
    await asyncio.wait_for(wait(), WAIT_S)


async def _serve(servicer: object, add: Any) -> tuple[aio.Server, str]:
    server = aio.server()
    add(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, f"127.0.0.1:{port}"


async def test_an_append_stream_awaiting_a_reply_from_a_silent_broker_is_reopened() -> None:
    servicer = SilentAppend()
    server, address = await _serve(servicer, append_pb2_grpc.add_AppendServicer_to_server)
    channel = aio.insecure_channel(address, options=list(CHANNEL_OPTIONS))
    stream = AppendStream(append_pb2_grpc.AppendStub(channel), progress_timeout_s=PROGRESS_S)
    flow = Flow()
    try:
        flow.stream = stream
        flow.flow_id = stream.register(flow)
        # Set up, block sent and never answered: cut, then set up again on a new stream.
        await _until(flow, lambda: flow.setups >= 2)
        assert flow.ready == 2 and len(flow.lost) == 1
        error = flow.lost[0]
        assert isinstance(error, FolioUnavailableError)
        assert "no reply from the broker" in str(error) and "silent" in str(error)
        assert stream.restarts == 1 and servicer.streams == 2
    finally:
        await stream.close()
        await channel.close(None)
        await server.stop(None)


async def test_a_read_stream_from_a_silent_broker_ends_unavailable() -> None:
    server, address = await _serve(SilentRead(), read_pb2_grpc.add_ReadServicer_to_server)
    channel = aio.insecure_channel(address, options=list(CHANNEL_OPTIONS))
    got: list[read_pb2.ReadResponse] = []
    try:
        call = read_pb2_grpc.ReadStub(channel).Read(read_pb2.ReadRequest(segment=SEGMENT))
        with pytest.raises(grpc.RpcError) as raised:
            async for response in with_progress_deadline(call, "Read stream", PROGRESS_S):
                got.append(response)
        assert len(got) == 1  # the response that came is handed on
        error = error_from_rpc(raised.value)
        # Shaped as a cut connection: retriable, no broker error name (a cluster
        # client looks the segment's owner up again).
        assert isinstance(error, FolioUnavailableError) and error.retriable
        assert error.error_name is None
        assert "no answer from the broker" in str(error)
        assert call.cancelled()
    finally:
        await channel.close(None)
        await server.stop(None)
