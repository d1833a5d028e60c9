"""One Kafka client connection: frames in, requests decoded, answered in order.

Requests of one connection are handled one at a time, in the order they
came, as Kafka's broker does (it mutes a connection while a request is in
flight): responses therefore leave in request order, and the appends of one
producer connection reach their segments in the order it sent them, which is
what its sequence numbers and ``max.in.flight`` rely on.

Anything that breaks the protocol closes the connection, as Kafka's broker
does, after a WARNING log naming the peer: a frame size out of bounds or cut
short, an unknown api_key, an unsupported version (except ApiVersions, which
answers UNSUPPORTED_VERSION with the served versions, KIP-511), a header or
body that does not decode (bytes after a decoded body are ignored, as Kafka's
broker ignores them). A handler that fails
unexpectedly is logged at ERROR and closes the connection too; the broker
and every other connection go on.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import struct
from typing import Any

from kio.index import KioIndexError
from kio.serial.errors import SerialError

from broker.kafka.context import KafkaContext
from broker.kafka.dispatch import Call, DispatchTable
from broker.kafka.framing import FrameError, frame, read_frame
from broker.kafka.handlers.api_versions import API_VERSIONS_KEY, unsupported_version_answer
from broker.kafka.messages import (
    decode_entity,
    encode_entity,
    request_class,
    response_class,
)

__all__ = ["KafkaConnection", "ProtocolError"]

log = logging.getLogger(__name__)

_PREFIX = struct.Struct(">hhi")


class ProtocolError(Exception):
    """A request that breaks the protocol: the connection is closed."""


class KafkaConnection:
    """Serves one accepted connection until the client or the listener closes it."""

    def __init__(self, context: KafkaContext, table: DispatchTable,
                 reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 max_frame_bytes: int) -> None:
        self._context = context
        self._table = table
        self._reader = reader
        self._writer = writer
        self._max_frame_bytes = max_frame_bytes
        peer = writer.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)

    async def serve(self) -> None:
        """Answer requests until the peer closes, breaks the protocol, or the task is cancelled."""
        try:
            while True:
                data = await read_frame(self._reader, self._max_frame_bytes)
                if data is None:
                    return
                answer = await self._answer(data)
                if answer is not None:
                    self._writer.write(frame(answer))
                    await self._writer.drain()
        except (FrameError, ProtocolError) as error:
            log.warning("kafka: closing connection from %s: %s", self.peer, error)
        except (ConnectionError, asyncio.IncompleteReadError):
            log.debug("kafka: connection from %s lost", self.peer)
        except Exception:
            log.exception("kafka: closing connection from %s after an unexpected error",
                          self.peer)
        finally:
            self._writer.close()
            with contextlib.suppress(Exception):
                await self._writer.wait_closed()

    async def _answer(self, data: bytes) -> bytes | None:
        """The response frame's payload for one request, None when none is due."""
        if len(data) < _PREFIX.size:
            raise ProtocolError(f"request of {len(data)} bytes has no header")
        api_key, version, correlation_id = _PREFIX.unpack_from(data)
        row = self._table.get(api_key)
        if row is None:
            raise ProtocolError(f"unknown api_key {api_key} (version {version})")
        if not row.supports(version):
            if api_key == API_VERSIONS_KEY:
                # KIP-511: a client newer than the broker learns the served
                # versions from a v0 answer and retries with one of them.
                return self._encode(API_VERSIONS_KEY, 0, correlation_id,
                                    unsupported_version_answer(self._context))
            raise ProtocolError(f"{row.name} version {version} is not served "
                                f"(versions {row.min_version}-{row.max_version})")
        call = self._decode(api_key, version, data)
        response = await row.handler(self._context, call)
        if response is None:
            return None
        return self._encode(api_key, version, correlation_id, response)

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
        return Call(api_key, version, header.correlation_id, header.client_id, request)

    @staticmethod
    def _encode(api_key: int, version: int, correlation_id: int, response: Any) -> bytes:
        cls = response_class(api_key, version)
        header_cls = cls.__header_schema__  # type: ignore[attr-defined]
        out = io.BytesIO()
        encode_entity(header_cls, header_cls(correlation_id=correlation_id), out)
        encode_entity(cls, response, out)
        return out.getvalue()


