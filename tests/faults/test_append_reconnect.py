"""A write during an outage goes as soon as the broker is reachable again (issue 22).

A real ``folio standalone`` behind a real TCP proxy (``tests/support/proxy.py``):
the proxy cuts the writer's connection and relays new ones to a port that
refuses them (the broker is unreachable: each reconnect fails, the channel is
in TRANSIENT_FAILURE), then to the broker again. The writer's Append stream
is given a reconnect backoff of 300 to 600 s: written out, the event written
during the outage would wait that long. It is acknowledged because the stream
opens again when its channel turns READY, which the stream's counters show
(one more attempt, and it was the channel that ended the wait). Before, the
stream slept its backoff (up to 2 s once grown) whatever the channel did, and
``test_silent_broker.py`` asked the broker something first to be sure the
resumed broker was reachable before its writer's next block.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import grpc
import pytest
from grpc import aio

import folio
from folio._transport.append_stream import AppendStream, Backoff
from folio._transport.io_thread import CHANNEL_OPTIONS, IoThread
from folio.api.v1 import append_pb2_grpc
from folio.serializers import BytesSerializer
from folio.write.writer import EventWriter
from tests.support.bookies import BookieProcess
from tests.support.proxy import TcpProxy
from tests.support.standalone import read_payloads
from tests.support.wait import wait_for

pytestmark = pytest.mark.faults

TOPIC = "reconnect"
SEGMENT = f"{TOPIC}/0"
WAIT_S = 60.0
#: Far beyond WAIT_S: only the channel turning READY ends such a wait in time.
LONG_BACKOFF_S = 600.0


@pytest.fixture
def io() -> Iterator[IoThread]:
    thread = IoThread("test-reconnect-io")
    yield thread
    thread.close()


@pytest.fixture
def refusing_port() -> Iterator[int]:
    """A loopback port bound but not listening: every connection to it is refused."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


async def _open(address: str) -> tuple[aio.Channel, AppendStream]:
    """On the IO thread: a client channel and its Append stream, with the long backoff."""
    channel = aio.insecure_channel(address, options=list(CHANNEL_OPTIONS))
    stream = AppendStream(append_pb2_grpc.AppendStub(channel), channel=channel,
                          backoff=Backoff(LONG_BACKOFF_S, min_s=LONG_BACKOFF_S))
    return channel, stream


async def _close(channel: aio.Channel, stream: AppendStream) -> None:
    await stream.close()
    await channel.close(None)


async def _state(channel: aio.Channel) -> grpc.ChannelConnectivity:
    return channel.get_state(try_to_connect=True)


def test_a_write_during_an_outage_goes_as_soon_as_the_broker_is_reachable_again(
        server: BookieProcess, proxy: TcpProxy, io: IoThread, refusing_port: int) -> None:
    with folio.Client(server.address, timeout_s=WAIT_S) as admin:
        admin.create_topic(TOPIC)
        topic = admin.get_topic(TOPIC)
    channel, stream = io.run(_open(proxy.address), timeout=WAIT_S)
    try:
        writer: EventWriter[bytes] = EventWriter(
            topic, BytesSerializer(), io=io, stream=stream, linger_ms=0,
            batch_size_bytes=1 << 20, max_in_flight=5, delivery_timeout_ms=300_000,
            writer_id="w")
        assert writer.write_event(b"before", routing_key="k").result(WAIT_S).offset == 0
        assert (stream.attempts, stream.restarts) == (1, 0)

        proxy.retarget(refusing_port)
        assert proxy.cut() == 1
        wait_for(lambda: stream.restarts == 1, "the writer's stream broken by the cut", WAIT_S)
        wait_for(lambda: io.run(_state(channel), timeout=WAIT_S)
                 is grpc.ChannelConnectivity.TRANSIENT_FAILURE,
                 "the channel failing to reach the broker", WAIT_S)
        assert stream.reconnect_wait == "channel" and not stream.connected
        during = writer.write_event(b"during", routing_key="k")
        assert not during.done()  # nothing to send it on

        proxy.retarget(server.port)
        assert during.result(WAIT_S).offset == 1
        # Opened once more, by the channel turning READY (the backoff was 300 s or more).
        assert (stream.attempts, stream.restarts, stream.ready_wakeups) == (2, 1, 1)
        assert writer.write_event(b"after", routing_key="k").result(WAIT_S).offset == 2
        writer.close(timeout=WAIT_S)
    finally:
        io.run(_close(channel, stream), timeout=WAIT_S)
    with grpc.insecure_channel(server.address) as reading:
        assert read_payloads(reading, SEGMENT, until_offset=3) == [b"before", b"during",
                                                                   b"after"]
