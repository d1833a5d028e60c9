"""One Kafka client connection: frames in, requests decoded, answered in order.

Requests of one connection are started one at a time, in the order they
came, and answered in that order. A handler that returns a ``Deferred``
(Produce, once it has called its appends) lets the next request start while
its own completes: a producer's pipelined batches (``max.in.flight``) are
then group-committed together instead of one fsync each, and since each
append is called before the next request starts, they reach their segments
in the order sent, which the producer's sequence numbers rely on. Other
handlers (Fetch's long poll among them) hold the connection until they
answer, as Kafka's broker does. At most ``MAX_PENDING_RESPONSES`` answers
wait per connection; beyond that the connection stops reading.

Anything that breaks the protocol closes the connection, as Kafka's broker
does, after a WARNING log naming the peer: a frame size out of bounds or cut
short, an unknown api_key, an unsupported version (except ApiVersions, which
answers UNSUPPORTED_VERSION with the served versions, KIP-511), a header or
body that does not decode (bytes after a decoded body are ignored, as Kafka's
broker ignores them). A handler that fails
unexpectedly is logged at ERROR and closes the connection too; the broker
and every other connection go on. A ``LedgerError`` a handler has no answer
for (the metadata store unreachable) closes it after a WARNING: the client
reconnects and asks again.

A client over a quota (``broker.kafka.quotas``: byte rates, request time,
controller mutations) gets its answer at once with ``throttle_time_ms`` set,
and its next request is read only once that time has passed after the answer
(KIP-219): ``Throttle``, one per connection.

On a SASL listener a frame over ``PRE_AUTHENTICATION_MAX_FRAME_BYTES`` (512
KiB, Kafka's ``sasl.server.max.receive.size``) before the client has
authenticated closes the connection on its size alone, counted and logged
(rate-limited) as a refused authentication; once authenticated the general
cap applies.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import struct
import time
from typing import Any

from kio.index import KioIndexError
from kio.serial.errors import SerialError

from broker.errors import BrokerShuttingDownError
from broker.kafka.context import KafkaContext
from broker.kafka.dispatch import Call, Deferred, DispatchTable
from broker.kafka.framing import (
    DEFAULT_MAX_FRAME_BYTES,
    FrameError,
    FrameStream,
    FrameTooLargeError,
)
from broker.kafka.handlers.api_versions import API_VERSIONS_KEY, unsupported_version_answer
from broker.kafka.handlers.sasl import (
    OPEN_KEYS,
    SASL_AUTHENTICATE_KEY,
    SASL_HANDSHAKE_KEY,
    SaslSession,
)
from broker.kafka.messages import (
    decode_entity,
    encode_entity,
    request_class,
    response_class,
)
from broker.kafka.quotas.mute import Throttle, declared, with_throttle
from ledger.errors import LedgerError
from ledger.security.tokens import Principal

__all__ = ["PRE_AUTHENTICATION_MAX_FRAME_BYTES", "KafkaConnection", "ProtocolError"]

log = logging.getLogger(__name__)

_PREFIX = struct.Struct(">hhi")
_SIZE = struct.Struct(">i")
_NO_SIZE = bytes(_SIZE.size)
#: Answers (deferred or ready) waiting to be written, per connection.
MAX_PENDING_RESPONSES = 16
_WRITE_SLICE_BYTES = 256 * 1024
#: Seconds a refused authentication's connection stays open after its answer.
FAILED_AUTHENTICATION_DELAY_S = 0.1
#: The largest frame a SASL listener reads before the client has authenticated
#: (Kafka's ``sasl.server.max.receive.size`` default): an anonymous client makes
#: the broker hold at most this, not the general cap, per connection.
PRE_AUTHENTICATION_MAX_FRAME_BYTES = 512 * 1024


class ProtocolError(Exception):
    """A request that breaks the protocol: the connection is closed."""


class _RefusedError(Exception):
    """A connection that did not authenticate (already counted and logged): closed."""


class KafkaConnection:
    """Serves one accepted connection until the client or the listener closes it."""

    def __init__(self, context: KafkaContext, table: DispatchTable, stream: FrameStream, *,
                 max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self._context = context
        self._table = table
        self._stream = stream
        #: The frame size cap once authenticated (before: the stream's own, which
        #: the server lowers on a SASL listener).
        self._max_frame_bytes = max_frame_bytes
        peer = stream.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        #: The client's host as Kafka's DescribeGroups shows it ("/<address>").
        self.client_host = f"/{peer[0]}" if isinstance(peer, tuple) else ""
        #: Who this connection authenticated as; None: the listener authenticates no one.
        self.principal: Principal | None = None
        #: The connection's SASL state when the listener authenticates (set by the
        #: server before ``serve``: SASL, or a client certificate's role).
        self.session: SaslSession | None = None
        #: Throttle times over the client quotas, and the mute after them.
        self._throttle = Throttle(context.quotas)

    async def serve(self) -> None:
        """Answer requests until the peer closes, breaks the protocol, or the task is cancelled."""
        pending: asyncio.Queue[asyncio.Future[bytes | None] | None] = asyncio.Queue(
            MAX_PENDING_RESPONSES)
        sender = asyncio.ensure_future(self._send(pending))
        try:
            while not sender.done():
                await self._throttle.wait()  # a throttled client's next request waits
                data = await self._next_frame()
                if data is None:
                    break
                await _enqueue(pending, await self._answer(data), sender)
                if self.session is not None and self.session.close_after:
                    break  # a refused authentication: its answer, then the end
            if not sender.done():
                await _enqueue(pending, None, sender)
            await sender  # the answers still due, then the sender's own failure
            if self.session is not None and self.session.close_after:
                # As Kafka's connection.failed.authentication.delay.ms: the client
                # reads the refusal before the connection ends, and a client
                # guessing passwords gets no faster than one guess per delay.
                await asyncio.sleep(FAILED_AUTHENTICATION_DELAY_S)
        except _RefusedError:
            pass  # counted and logged (rate-limited) by the session
        except (FrameError, ProtocolError) as error:
            log.warning("kafka: closing connection from %s: %s", self.peer, error)
        except OSError as error:  # ConnectionError, or the TLS layer's SSLError
            log.debug("kafka: connection from %s lost: %s", self.peer, error)
        except LedgerError as error:
            # A handler with no answer of its own for storage that cannot be
            # read now (a request for all topics while ZooKeeper is away): the
            # client reconnects and asks again. Handlers answer what they can
            # per topic or partition (a retriable code) before it comes to this.
            log.warning("kafka: closing connection from %s: the metadata store or the "
                        "ledgers cannot be read (%s); the client reconnects", self.peer, error)
        except BrokerShuttingDownError:
            log.info("kafka: closing connection from %s: the broker is stopping", self.peer)
        except Exception:
            log.exception("kafka: closing connection from %s after an unexpected error",
                          self.peer)
        finally:
            if not sender.done():
                sender.cancel()
            with contextlib.suppress(BaseException):
                await sender
            while not pending.empty():  # answers no one will read: stop their work
                item = pending.get_nowait()
                if item is not None and not item.done():
                    item.cancel()
            self._stream.close()
            with contextlib.suppress(Exception):
                await self._stream.wait_closed()

    async def _send(self, pending: asyncio.Queue[asyncio.Future[bytes | None] | None]) -> None:
        """Write the answers in request order; a None item ends the connection's answers."""
        while True:
            item = await pending.get()
            if item is None:
                return
            answer = await item
            if answer is None:
                continue
            # Large answers (Fetch) go in slices, each drained: asyncio (3.11)
            # keeps what the socket did not take in one buffer and shifts it
            # after every send, which costs more than the send on large frames
            # (and its TLS layer encrypts each write into one more buffer).
            view = memoryview(answer)
            for start in range(0, len(view), _WRITE_SLICE_BYTES):
                self._stream.write(view[start:start + _WRITE_SLICE_BYTES])
                await self._stream.drain()

    async def _next_frame(self) -> bytes | None:
        """The next frame; a session whose lifetime passes meanwhile ends the connection."""
        session = self.session
        try:
            if session is None or session.deadline is None:
                return await self._stream.next_frame()
            return await self._stream.next_frame(session.deadline - time.monotonic())
        except FrameTooLargeError as error:
            if session is None or session.authenticated:
                raise
            session.refuse("frame_too_large", f"a frame of {error.size} bytes before "
                           f"authenticating (at most {error.max_frame_bytes})")
            raise _RefusedError from None
        except TimeoutError:
            if session is None:  # no timeout was asked for: not ours
                raise
            session.refuse("session_expired", "the session's token expired and the client "
                           "did not re-authenticate")
            raise _RefusedError from None

    def _check_session(self, api_key: int) -> SaslSession | None:
        """The session if this request is part of authentication; refuse what comes too early."""
        session = self.session
        if session is None:
            return None
        if session.expired():
            session.refuse("session_expired", "the session's token expired and the client "
                           "did not re-authenticate")
            raise _RefusedError
        if api_key in (SASL_HANDSHAKE_KEY, SASL_AUTHENTICATE_KEY):
            return session
        if not session.authenticated and api_key not in OPEN_KEYS:
            session.refuse("unauthenticated_request",
                           f"api_key {api_key} before authenticating")
            raise _RefusedError
        return None

    async def _answer(self, data: bytes) -> asyncio.Future[bytes | None]:
        """The answer to one request (its frame, or None when none is due), maybe later."""
        if len(data) < _PREFIX.size:
            raise ProtocolError(f"request of {len(data)} bytes has no header")
        api_key, version, correlation_id = _PREFIX.unpack_from(data)
        session = self._check_session(api_key)
        row = self._table.get(api_key)
        if row is None:
            raise ProtocolError(f"unknown api_key {api_key} (version {version})")
        if not row.supports(version):
            if api_key == API_VERSIONS_KEY:
                # KIP-511: a client newer than the broker learns the served
                # versions from a v0 answer and retries with one of them.
                return _ready(self._encode(API_VERSIONS_KEY, 0, correlation_id,
                                           unsupported_version_answer(self._context)))
            raise ProtocolError(f"{row.name} version {version} is not served "
                                f"(versions {row.min_version}-{row.max_version})")
        started = time.perf_counter()
        call = self._throttle.bounded(self._decode(api_key, version, data))
        decode_s = time.perf_counter() - started
        if session is not None:
            response = await session.answer(call)
            self.principal = session.principal
            if session.authenticated:
                self._stream.max_frame_bytes = self._max_frame_bytes
            return _ready(self._encode(api_key, version, correlation_id, response))
        response, request_ms = await self._throttle.handled(
            call, row.handler(self._context, call), decode_s)
        throttle_ms = max(request_ms, self._throttle.on_request(call, len(data)))
        if isinstance(response, Deferred):
            later = asyncio.ensure_future(
                self._later(api_key, version, correlation_id, response, throttle_ms))
            self._throttle.mute_after(later, throttle_ms)
            return later
        frame = None
        if response is not None:
            throttle_ms = max(throttle_ms, declared(response))
            frame = self._encode(api_key, version, correlation_id,
                                 with_throttle(response, throttle_ms))
            answered_ms = self._throttle.on_answer(call, len(frame))
            if answered_ms > throttle_ms:  # (see broker.kafka.quotas.mute)
                throttle_ms = answered_ms
                frame = self._encode(api_key, version, correlation_id,
                                     with_throttle(response, throttle_ms))
        ready = _ready(frame)
        self._throttle.mute_after(ready, throttle_ms)
        return ready

    async def _later(self, api_key: int, version: int, correlation_id: int,
                     deferred: Deferred, throttle_ms: int) -> bytes | None:
        response = await deferred.result
        return (None if response is None
                else self._encode(api_key, version, correlation_id,
                                  with_throttle(response, throttle_ms)))

    def _decode(self, api_key: int, version: int, data: bytes) -> Call:
        try:
            cls = request_class(api_key, version)
            header, used = decode_entity(cls.__header_schema__, data, 0)  # type: ignore[attr-defined]
            request, size = decode_entity(cls, data, used)
        except (SerialError, KioIndexError, ValueError, UnicodeDecodeError) as error:
            raise ProtocolError(f"api_key {api_key} version {version}: request does not "
                                f"decode: {error}") from None
        if used + size != len(data):
            # Kafka's broker ignores what follows a request it decoded, and
            # clients rely on it (librdkafka's Metadata v12 sends 3 bytes more).
            log.debug("kafka: api_key %d version %d from %s: %d bytes after the request",
                      api_key, version, self.peer, len(data) - used - size)
        return Call(api_key, version, header.correlation_id, header.client_id, request,
                    self.principal, self.client_host)

    @staticmethod
    def _encode(api_key: int, version: int, correlation_id: int, response: Any) -> bytes:
        """The response frame, its size prefix included (written in place: one copy less)."""
        cls = response_class(api_key, version)
        header_cls = cls.__header_schema__  # type: ignore[attr-defined]
        out = io.BytesIO()
        out.write(_NO_SIZE)
        encode_entity(header_cls, header_cls(correlation_id=correlation_id), out)
        encode_entity(cls, response, out)
        with out.getbuffer() as view:
            _SIZE.pack_into(view, 0, len(view) - _SIZE.size)
        return out.getvalue()




async def _enqueue(pending: asyncio.Queue[asyncio.Future[bytes | None] | None],
                   item: asyncio.Future[bytes | None] | None,
                   sender: asyncio.Future[None]) -> None:
    """Queue ``item`` for the sender, unless the sender ends first (a failed write).

    A full queue waits for the sender; if the sender has stopped, nothing
    would ever take the item: it is cancelled and the sender's end awaited
    by the caller instead of waiting forever.
    """
    put = asyncio.ensure_future(pending.put(item))
    await asyncio.wait((put, sender), return_when=asyncio.FIRST_COMPLETED)
    if not put.done():
        put.cancel()
        if item is not None:
            item.cancel()


def _ready(answer: bytes | None) -> asyncio.Future[bytes | None]:
    future: asyncio.Future[bytes | None] = asyncio.get_running_loop().create_future()
    future.set_result(answer)
    return future
