"""``FrameStream`` over real loopback connections, plain and TLS: frames whole, in order, bounded.

A server on port 0 hands each accepted ``FrameStream`` to the test; the
client writes raw bytes (cut at awkward places) with asyncio's streams.
"""

from __future__ import annotations

import asyncio
import os
import ssl
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from broker.kafka.framing import (
    IN_PLACE_BYTES,
    QUEUED_FRAME_BYTES,
    FrameError,
    FrameStream,
    FrameTooLargeError,
    frame,
)
from tests.support.certs import Pki

MAX_FRAME_BYTES = 4 * 1024 * 1024

Connection = tuple[FrameStream, asyncio.StreamReader, asyncio.StreamWriter]
Connect = Callable[[], Awaitable[Connection]]


@pytest.fixture(params=["plain", "tls"])
async def connect(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Connect]:
    """A listener of FrameStreams; connect() gives (the server's stream, the client's writer)."""
    tls = request.param == "tls"
    server_context = client_context = None
    if tls:
        pki = Pki(tmp_path)
        files = pki.server()
        server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        server_context.load_cert_chain(files.cert, files.key)
        client_context = ssl.create_default_context(cafile=str(pki.ca))
    accepted: asyncio.Queue[FrameStream] = asyncio.Queue()

    def on_connected(stream: FrameStream) -> None:
        if tls:
            stream.hold()
        accepted.put_nowait(stream)

    server = await asyncio.get_running_loop().create_server(
        lambda: FrameStream(MAX_FRAME_BYTES, on_connected), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    writers: list[asyncio.StreamWriter] = []
    streams: list[FrameStream] = []

    async def open_one() -> Connection:
        opening = asyncio.ensure_future(asyncio.open_connection(
            "127.0.0.1", port, ssl=client_context,
            server_hostname="127.0.0.1" if tls else None))
        stream = await asyncio.wait_for(accepted.get(), 30)
        if server_context is not None:
            await stream.start_tls(server_context, 30)
        reader, writer = await asyncio.wait_for(opening, 30)
        writers.append(writer)
        streams.append(stream)
        return stream, reader, writer

    yield open_one
    for writer in writers:
        writer.close()
    for stream in streams:
        stream.close()
    server.close()
    await server.wait_closed()


async def test_small_and_large_frames_arrive_whole_and_in_order(connect: Connect) -> None:
    stream, _reader, writer = await connect()
    payloads = [os.urandom(size) for size in (
        10, 200, IN_PLACE_BYTES, IN_PLACE_BYTES + 1, 300 * 1024, 3 * 1024 * 1024, 11)]
    payloads += [os.urandom(1000) for _ in range(500)]  # many in one read
    data = b"".join(frame(payload) for payload in payloads)
    writer.write(data)
    await writer.drain()
    got = [await asyncio.wait_for(stream.next_frame(), 30) for _ in payloads]
    assert got == payloads
    _end(writer)
    assert await asyncio.wait_for(stream.next_frame(), 30) is None


async def test_frames_cut_at_every_byte(connect: Connect) -> None:
    stream, _reader, writer = await connect()
    payloads = [b"a" * 10, b"b" * 70_000, b"c" * 33]
    data = b"".join(frame(payload) for payload in payloads)
    for start in range(0, len(data), 7_001):  # each piece its own write
        writer.write(data[start:start + 7_001])
        await writer.drain()
    for small in range(3):  # byte by byte: the size prefix itself cut
        writer.write(frame(b"s" * 12)[small:small + 1])
        await writer.drain()
    writer.write(frame(b"s" * 12)[3:])
    got = [await asyncio.wait_for(stream.next_frame(), 30) for _ in range(4)]
    assert got == [*payloads, b"s" * 12]


async def test_connections_cut_mid_frame_keep_their_own_bytes(connect: Connect) -> None:
    """The scratch buffer is shared: what each connection left over stays its own."""
    (first, _, first_writer), (second, _, second_writer) = await connect(), await connect()
    frames = {first: [frame(b"1" * 1000), frame(b"3" * 50_000)],
              second: [frame(b"2" * 1000), frame(b"4" * 50_000)]}
    writers = {first: first_writer, second: second_writer}
    for cut in (700, 20_000):
        for stream, writer in writers.items():
            data = b"".join(frames[stream])
            writer.write(data[:cut] if cut == 700 else data[700:cut])
            await writer.drain()
    for stream, writer in writers.items():
        writer.write(b"".join(frames[stream])[20_000:])
    for stream in writers:
        got = [await asyncio.wait_for(stream.next_frame(), 30) for _ in range(2)]
        assert [frame(data) if data is not None else None for data in got] == frames[stream]


@pytest.mark.parametrize(("data", "message"), [
    (struct.pack(">i", MAX_FRAME_BYTES + 1) + b"x" * 64, "outside"),
    (struct.pack(">i", -5), "outside"),
    (struct.pack(">i", 4) + b"\x00" * 4, "outside"),
    (struct.pack(">i", 100) + b"\x00" * 10, "frame cut after 10 of its 100 bytes"),
    (struct.pack(">i", 200_000) + b"\x00" * 10, "frame cut after 10 of its 200000 bytes"),
    (b"\x00\x00", "frame size cut after 2 of 4 bytes"),
])
async def test_bad_frames_raise_after_the_good_ones(connect: Connect, data: bytes,
                                                    message: str) -> None:
    stream, _reader, writer = await connect()
    writer.write(frame(b"good" * 5) + data)
    await writer.drain()
    _end(writer)
    assert await asyncio.wait_for(stream.next_frame(), 30) == b"good" * 5
    with pytest.raises(FrameError, match=message):
        await asyncio.wait_for(stream.next_frame(), 30)


async def test_read_ahead_is_bounded_and_resumes(connect: Connect) -> None:
    """A client sending far more than the server takes: reading pauses, then all arrives."""
    stream, _reader, writer = await connect()
    payloads = [i.to_bytes(4, "big") * 256 for i in range(8192)]  # 8 MiB of 1 KiB frames
    sending = asyncio.ensure_future(_send_all(writer, payloads))
    deadline = asyncio.get_running_loop().time() + 30
    while not stream.reading_paused:
        assert asyncio.get_running_loop().time() < deadline, "reading never paused"
        await asyncio.sleep(0.01)
    assert stream.queued_bytes < QUEUED_FRAME_BYTES + 256 * 1024
    got = [await asyncio.wait_for(stream.next_frame(), 30) for _ in payloads]
    assert got == payloads
    await asyncio.wait_for(sending, 30)


async def _send_all(writer: asyncio.StreamWriter, payloads: list[bytes]) -> None:
    for payload in payloads:
        writer.write(frame(payload))
        await writer.drain()


async def test_a_frame_not_come_in_time_times_out(connect: Connect) -> None:
    stream, _reader, writer = await connect()
    with pytest.raises(TimeoutError):
        await stream.next_frame(0.05)
    writer.write(frame(b"late" * 4))
    assert await asyncio.wait_for(stream.next_frame(30), 30) == b"late" * 4


async def test_a_lowered_cap_refuses_larger_frames_until_raised(connect: Connect) -> None:
    stream, _reader, writer = await connect()
    stream.max_frame_bytes = 1024
    writer.write(frame(bytes(1024)))
    assert await asyncio.wait_for(stream.next_frame(), 30) == bytes(1024)
    stream.max_frame_bytes = MAX_FRAME_BYTES  # raised between frames: a larger one passes
    writer.write(frame(bytes(4096)))
    assert await asyncio.wait_for(stream.next_frame(), 30) == bytes(4096)
    stream.max_frame_bytes = 1024
    writer.write(struct.pack(">i", 1025))  # refused on its size, no body needed
    with pytest.raises(FrameTooLargeError) as raised:
        await asyncio.wait_for(stream.next_frame(), 30)
    assert (raised.value.size, raised.value.max_frame_bytes) == (1025, 1024)
    with pytest.raises(ValueError, match="at least 10"):
        stream.max_frame_bytes = 9


async def test_answers_are_written_and_drained(connect: Connect) -> None:
    stream, reader, _writer = await connect()
    answer = os.urandom(4 * 1024 * 1024)
    reading = asyncio.ensure_future(reader.readexactly(len(answer)))
    for start in range(0, len(answer), 256 * 1024):
        stream.write(answer[start:start + 256 * 1024])
        await stream.drain()
    assert await asyncio.wait_for(reading, 30) == answer
    stream.close()
    await asyncio.wait_for(stream.wait_closed(), 30)
    with pytest.raises(ConnectionError):
        await stream.drain()


def _end(writer: asyncio.StreamWriter) -> None:
    """The client is done: half-close in plain text, close (close_notify) over TLS."""
    if writer.can_write_eof():
        writer.write_eof()
    else:
        writer.close()
