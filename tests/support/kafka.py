"""Kafka helpers for tests: the Kafka address of a standalone, raw requests through kio.

``kafka_address(server)`` reads ``kafka on HOST:PORT`` from the ready line of
a standalone started with ``--kafka-port 0``. ``raw_request`` encodes one
request (header and body) with kio, as a client would; ``read_response``
reads a frame back and decodes it, so raw-socket tests need no Kafka client.
``sasl_plain`` authenticates a raw connection to a SASL listener with PLAIN,
a Folio JWT as the password (its ``sub`` is the role).
"""

from __future__ import annotations

import io
import re
import socket
import struct
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from tests.support.bookies import BookieProcess

__all__ = ["kafka_address", "raw_request", "read_frame", "read_response", "sasl_plain"]

_KAFKA = re.compile(r"kafka on (?P<host>[^\s:]+):(?P<port>\d+)")


def kafka_address(server: BookieProcess) -> tuple[str, int]:
    """The Kafka listener's (host, port) from the server's ready line."""
    match = _KAFKA.search(server.ready_line)
    assert match is not None, f"no Kafka listener in {server.ready_line!r}"
    return match["host"], int(match["port"])


def raw_request(api_key: int, version: int, correlation_id: int, request: Any,
                client_id: str = "test") -> bytes:
    """The frame (size prefix included) of ``request`` at ``version``."""
    cls: Any = load_request_schema(api_key, version)
    header_cls = cls.__header_schema__
    out = io.BytesIO()
    entity_writer(header_cls)(out, header_cls(request_api_key=api_key,
                                              request_api_version=version,
                                              correlation_id=correlation_id,
                                              client_id=client_id))
    entity_writer(cls)(out, request)
    body = out.getvalue()
    return struct.pack(">i", len(body)) + body


def read_frame(sock: socket.socket) -> bytes | None:
    """One frame's payload, or None if the peer closed the connection first."""
    prefix = _read_exactly(sock, 4)
    if prefix is None:
        return None
    (size,) = struct.unpack(">i", prefix)
    return _read_exactly(sock, size)


def read_response(sock: socket.socket, api_key: int, version: int) -> tuple[int, Any]:
    """(correlation id, decoded response) of the next frame; AssertionError if closed."""
    data = read_frame(sock)
    assert data is not None, "the broker closed the connection"
    cls: Any = load_response_schema(api_key, version)
    header, used = entity_reader(cls.__header_schema__)(data, 0)
    response, _ = entity_reader(cls)(data, used)
    return header.correlation_id, response


def sasl_plain(sock: socket.socket, token: str) -> None:
    """Authenticate ``sock`` with SaslHandshake v1 and SaslAuthenticate v2, PLAIN and ``token``.

    The user name is left empty (the broker takes the token's role);
    AssertionError when the broker refuses.
    """
    handshake_cls: Any = load_request_schema(17, 1)
    sock.sendall(raw_request(17, 1, 0, handshake_cls(mechanism="PLAIN")))
    _, handshake = read_response(sock, 17, 1)
    assert handshake.error_code.value == 0, handshake
    authenticate_cls: Any = load_request_schema(36, 2)
    sock.sendall(raw_request(36, 2, 0, authenticate_cls(
        auth_bytes=b"\x00\x00" + token.encode())))
    _, answer = read_response(sock, 36, 2)
    assert answer.error_code.value == 0, answer.error_message


def _read_exactly(sock: socket.socket, size: int) -> bytes | None:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(size - len(chunks))
        if not chunk:
            return None
        chunks.extend(chunk)
    return bytes(chunks)
