"""Kafka frames: a big-endian int32 size, then that many bytes (request or response).

A size outside ``[MIN_FRAME_BYTES, max_frame_bytes]`` is a protocol error:
the connection is closed (as Kafka's broker does with
``socket.request.max.bytes``), so one client can make the broker hold at most
``max_frame_bytes`` per connection (and ``QUEUED_FRAME_BYTES`` of frames read
ahead).

``FrameStream`` is one connection's protocol: an ``asyncio.BufferedProtocol``,
so the transport (the socket, or asyncio's TLS layer after ``start_tls``)
writes straight into the buffer the stream hands out. Small frames land in a
256 KiB scratch buffer (one read takes many of them; one buffer per thread,
shared by the connections) and are copied out once;
a frame larger than ``IN_PLACE_BYTES`` is read into a buffer of its own size
as soon as its size is known. A ``StreamReader`` copies every byte three or
four times more (its buffer grows, ``readexactly`` slices and shifts it), and
over TLS asyncio 3.11 decrypts each 16 KiB record into a fresh 256 KiB
``bytes`` before joining them: measured on a 2-core machine, reading 1 MiB
frames cost 3.6 ns per byte in plain text and 5.0 over TLS through streams,
0.4 and 1.5 this way (docs/kafka.md, "Measured").

Read-ahead is bounded: once ``QUEUED_FRAME_BYTES`` of whole frames wait for
the connection, the stream stops reading until it has taken some.
"""

from __future__ import annotations

import asyncio
import collections
import ssl
import struct
import threading
from collections.abc import Callable
from typing import Any, Final

__all__ = ["DEFAULT_MAX_FRAME_BYTES", "IN_PLACE_BYTES", "MIN_FRAME_BYTES",
           "QUEUED_FRAME_BYTES", "FrameError", "FrameStream", "FrameTooLargeError", "frame"]

_SIZE = struct.Struct(">i")
#: The largest request a client may send (Kafka's ``socket.request.max.bytes``
#: is 100 MiB; a Folio block is at most 4 MiB, so 64 MiB leaves room for a
#: Produce of many partitions without letting one connection hold more).
DEFAULT_MAX_FRAME_BYTES: Final = 64 * 1024 * 1024
#: The smallest request: api_key, api_version, correlation_id and a null client id.
MIN_FRAME_BYTES: Final = 10
#: Frames larger than this are read into a buffer of their own, not copied.
IN_PLACE_BYTES: Final = 64 * 1024
#: The scratch buffer: the most one read of small frames takes (asyncio's own
#: read size); a partial frame of at most ``IN_PLACE_BYTES`` leaves room for more.
_SCRATCH_BYTES: Final = 256 * 1024
#: Bytes of whole frames read ahead beyond which reading pauses.
QUEUED_FRAME_BYTES: Final = 256 * 1024


class FrameError(Exception):
    """A frame that breaks the protocol: the connection must be closed."""


class FrameTooLargeError(FrameError):
    """A frame size over the stream's ``max_frame_bytes`` (``size``: the one announced)."""

    def __init__(self, size: int, max_frame_bytes: int) -> None:
        super().__init__(f"frame of {size} bytes is outside "
                         f"[{MIN_FRAME_BYTES}, {max_frame_bytes}]")
        self.size = size
        self.max_frame_bytes = max_frame_bytes


def frame(payload: bytes) -> bytes:
    """``payload`` with its size in front."""
    return b"".join((_SIZE.pack(len(payload)), payload))


class FrameStream(asyncio.BufferedProtocol):
    """One connection: its requests as frames (``next_frame``), its answers written.

    ``on_connected`` is called with the stream once the transport is there
    (``connection_made``); the owner then serves it. Methods other than the
    protocol's callbacks are for that owner's task.
    """

    def __init__(self, max_frame_bytes: int,
                 on_connected: Callable[[FrameStream], None] | None = None) -> None:
        self._max_frame_bytes = max_frame_bytes
        self._on_connected = on_connected
        self._transport: asyncio.BaseTransport | None = None
        self._tls = False
        # Reading: what was read and is not yet a whole frame (a frame of at most
        # IN_PLACE_BYTES, or a size), moved to the front of the scratch buffer
        # before each read.
        self._carry = b""
        # A large frame read in place: its buffer and how much of it is read.
        self._body: bytearray | None = None
        self._body_view: memoryview | None = None
        self._filled = 0
        self._frames: collections.deque[bytes] = collections.deque()
        self._queued_bytes = 0
        self._reading_paused = False  # by the stream's own flow control
        self._eof = False
        self._failure: BaseException | None = None  # raised once the frames before it are taken
        self._reader: asyncio.Future[None] | None = None
        # Writing.
        self._writing_paused = False
        self._drainers: list[asyncio.Future[None]] = []
        self._lost: BaseException | None = None
        self._closed: asyncio.Future[None] | None = None

    @property
    def max_frame_bytes(self) -> int:
        """The largest frame accepted; a larger size is a ``FrameTooLargeError``.

        The owner may change it between frames (a SASL listener keeps it at
        512 KiB until the client has authenticated); it applies to sizes read
        from then on.
        """
        return self._max_frame_bytes

    @max_frame_bytes.setter
    def max_frame_bytes(self, value: int) -> None:
        if value < MIN_FRAME_BYTES:
            raise ValueError(f"max_frame_bytes must be at least {MIN_FRAME_BYTES}, not {value}")
        self._max_frame_bytes = value

    @property
    def queued_bytes(self) -> int:
        """Bytes of whole frames read ahead and not yet taken."""
        return self._queued_bytes

    @property
    def reading_paused(self) -> bool:
        """Whether the stream stopped reading (frames read ahead, or a protocol error)."""
        return self._reading_paused

    # The protocol (called by the transport).

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Keep the transport and hand the stream to its owner."""
        self._transport = transport
        self._closed = asyncio.get_running_loop().create_future()
        if self._on_connected is not None:
            self._on_connected(self)

    def get_buffer(self, sizehint: int) -> memoryview:
        """Where the transport writes what it reads next (never empty)."""
        del sizehint  # the TLS layer's hint is what it holds encrypted, not what is due
        if self._body_view is not None:
            return self._body_view[self._filled:]
        view = _scratch()
        carried = len(self._carry)
        if carried:
            view[:carried] = self._carry
        return view[carried:]

    def buffer_updated(self, nbytes: int) -> None:
        """``nbytes`` more were written into the last buffer handed out."""
        if self._body is not None:
            self._filled += nbytes
            if self._filled == len(self._body):
                data = bytes(self._body)
                self._body = self._body_view = None
                self._push(data)
            return
        self._split(len(self._carry) + nbytes)

    def eof_received(self) -> bool:
        """The client closed its side: frames already read are still answered."""
        self._eof = True
        self._wake_reader()
        # Plain text: keep the transport open to write the answers due (asyncio's
        # TLS layer ignores the answer and closes after its own close_notify).
        return not self._tls

    def connection_lost(self, exc: Exception | None) -> None:
        """The transport is closed: wake whoever waits, with the error if there was one."""
        self._eof = True
        self._lost = exc if exc is not None else ConnectionResetError("connection lost")
        if exc is not None and self._failure is None:
            self._failure = exc
        self._wake_reader()
        for drainer in self._drainers:
            if not drainer.done():
                drainer.set_exception(ConnectionResetError("connection lost"))
        self._drainers.clear()
        if self._closed is not None and not self._closed.done():
            self._closed.set_result(None)

    def pause_writing(self) -> None:
        """The transport's buffer is over its high-water mark."""
        self._writing_paused = True

    def resume_writing(self) -> None:
        """The transport's buffer drained below its low-water mark."""
        self._writing_paused = False
        for drainer in self._drainers:
            if not drainer.done():
                drainer.set_result(None)
        self._drainers.clear()

    # Reading frames.

    def _split(self, end: int) -> None:
        """Take the whole frames out of ``scratch[:end]``; start a large one in place."""
        view, start = _scratch(), 0
        while end - start >= _SIZE.size:
            (size,) = _SIZE.unpack_from(view, start)
            if size > self._max_frame_bytes:
                self._fail(FrameTooLargeError(size, self._max_frame_bytes))
                start = end
                break
            if size < MIN_FRAME_BYTES:
                self._fail(FrameError(f"frame of {size} bytes is outside "
                                      f"[{MIN_FRAME_BYTES}, {self._max_frame_bytes}]"))
                start = end
                break
            body_start = start + _SIZE.size
            if end - body_start >= size:
                self._push(bytes(view[body_start:body_start + size]))
                start = body_start + size
                continue
            if size > IN_PLACE_BYTES:
                have = end - body_start
                body = bytearray(size)
                body[:have] = view[body_start:end]
                self._body, self._body_view, self._filled = body, memoryview(body), have
                start = end
            break
        self._carry = bytes(view[start:end]) if start < end else b""

    def _push(self, data: bytes) -> None:
        self._frames.append(data)
        self._queued_bytes += len(data)
        self._wake_reader()
        if self._queued_bytes >= QUEUED_FRAME_BYTES and not self._reading_paused:
            self._pause_reading()

    def _fail(self, error: BaseException) -> None:
        """A protocol error: read no more; it is raised after the frames before it."""
        if self._failure is None:
            self._failure = error
        if not self._reading_paused:
            self._pause_reading()
        self._wake_reader()

    def _pause_reading(self) -> None:
        transport = self._transport
        if isinstance(transport, asyncio.ReadTransport) and not transport.is_closing():
            transport.pause_reading()
            self._reading_paused = True

    def _wake_reader(self) -> None:
        reader = self._reader
        if reader is not None and not reader.done():
            reader.set_result(None)

    def _partial(self) -> str | None:
        """What a connection ending now would cut, None: nothing."""
        if self._body is not None:
            return f"frame cut after {self._filled} of its {len(self._body)} bytes"
        left = len(self._carry)
        if not left:
            return None
        if left < _SIZE.size:
            return f"frame size cut after {left} of 4 bytes"
        (size,) = _SIZE.unpack_from(self._carry)
        return f"frame cut after {left - _SIZE.size} of its {size} bytes"

    async def next_frame(self, timeout_s: float | None = None) -> bytes | None:
        """The next frame's bytes, or None when the client closed the connection cleanly.

        Raises ``FrameError`` for a size out of bounds or a frame cut short,
        the transport's error if the connection broke, and ``TimeoutError``
        when ``timeout_s`` passes first (None: no limit).
        """
        while not self._frames:
            if self._failure is not None:
                raise self._failure
            if self._eof:
                cut = self._partial()
                if cut is not None:
                    raise FrameError(cut)
                return None
            loop = asyncio.get_running_loop()
            reader: asyncio.Future[None] = loop.create_future()
            self._reader = reader
            timer = None if timeout_s is None else loop.call_later(
                max(0.0, timeout_s), _time_out, reader)
            try:
                await reader
            finally:
                self._reader = None
                if timer is not None:
                    timer.cancel()
        data = self._frames.popleft()
        self._queued_bytes -= len(data)
        if (self._reading_paused and self._failure is None
                and self._queued_bytes < QUEUED_FRAME_BYTES // 2):
            transport = self._transport
            if isinstance(transport, asyncio.ReadTransport) and not transport.is_closing():
                transport.resume_reading()
            self._reading_paused = False
        return data

    # Writing, TLS, closing.

    def write(self, data: bytes | memoryview) -> None:
        """Queue ``data`` for the client (``drain`` waits until the transport takes more)."""
        transport = self._transport
        if not isinstance(transport, asyncio.WriteTransport):
            raise ConnectionResetError("not connected")
        transport.write(data)

    async def drain(self) -> None:
        """Wait while the transport's buffer is full; ``ConnectionError`` once it is closed."""
        transport = self._transport
        if transport is not None and transport.is_closing():
            await asyncio.sleep(0)  # let connection_lost run, as StreamWriter.drain does
        if self._lost is not None:
            raise ConnectionResetError("connection lost") from self._lost
        if not self._writing_paused:
            return
        drainer: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._drainers.append(drainer)
        await drainer

    def hold(self) -> None:
        """Read nothing until ``start_tls`` (call it from ``on_connected``)."""
        transport = self._transport
        if isinstance(transport, asyncio.ReadTransport):
            transport.pause_reading()

    async def start_tls(self, context: ssl.SSLContext, handshake_timeout_s: float) -> None:
        """Upgrade to TLS as the server side; what follows is read and written through it."""
        transport = self._transport
        if not isinstance(transport, asyncio.WriteTransport):
            raise ConnectionResetError("not connected")
        self._tls = True
        upgraded = await asyncio.get_running_loop().start_tls(
            transport, self, context, server_side=True,
            ssl_handshake_timeout=handshake_timeout_s)
        if upgraded is None:
            raise ConnectionResetError("the connection closed during the TLS handshake")
        self._transport = upgraded

    def get_extra_info(self, name: str) -> Any:
        """The transport's ``get_extra_info`` (``peername``, ``ssl_object``, ...)."""
        return None if self._transport is None else self._transport.get_extra_info(name)

    def close(self) -> None:
        """Close the connection (what was written is still sent)."""
        if self._transport is not None:
            self._transport.close()

    async def wait_closed(self) -> None:
        """Wait until the connection is closed."""
        if self._closed is not None:
            await asyncio.shield(self._closed)


_LOCAL = threading.local()


def _scratch() -> memoryview:
    """The scratch buffer every stream of this thread's event loop reads small frames into.

    One per thread, not per connection: a transport calls ``get_buffer``,
    fills the buffer and calls ``buffer_updated`` in one go, and the stream
    keeps what is left (``_carry``) apart, so an idle connection holds no
    256 KiB of its own.
    """
    view: memoryview | None = getattr(_LOCAL, "view", None)
    if view is None:
        view = _LOCAL.view = memoryview(bytearray(_SCRATCH_BYTES))
    return view


def _time_out(reader: asyncio.Future[None]) -> None:
    if not reader.done():
        reader.set_exception(TimeoutError())
