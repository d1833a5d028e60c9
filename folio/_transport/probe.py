"""Why a broker could not be reached: a few raw probes of its endpoint, after gRPC failed.

gRPC says "failed to connect" whatever stands at the endpoint. When the
first contact with a broker fails (``folio._transport.connect``), these probes
open plain TCP (and TLS) connections of their own to say why, each a typed
error with a distinct message:

- nothing listening (connection refused), a host that does not resolve or
  cannot be reached: :class:`FolioUnavailableError` (a broker may start);
- something else listening: an HTTP server (a metrics port), a Kafka
  listener (Folio's own Kafka port), or something that answers neither:
  :class:`WrongEndpointError`;
- TLS refused: the broker's certificate does not chain to the client's CA,
  does not name the host, or one side speaks plain text against the other's
  TLS: :class:`TlsError`.

Each probe waits at most ``PROBE_S``; they run only on the failure path, never
before a call that works.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import struct
from typing import Final

from folio.errors import FolioError, FolioUnavailableError, TlsError, WrongEndpointError
from folio.security import TLS

__all__ = ["PROBE_S", "diagnose"]

#: Longest wait of one probe (connect, handshake or first bytes of an answer).
PROBE_S: Final = 1.0
#: A Kafka ApiVersions v0 request: size, api key 18, version 0, correlation id, no client id.
_KAFKA_CORRELATION: Final = 0x0F011005
_KAFKA_API_VERSIONS: Final = struct.pack(">ihhih", 10, 18, 0, _KAFKA_CORRELATION, -1)
_HTTP_GET: Final = b"GET / HTTP/1.0\r\n\r\n"
_USE_GRPC = "the folio CLI and SDK need a broker's gRPC port (7070 unless configured)"


def _split(endpoint: str) -> tuple[str, int]:
    host, _, port = endpoint.rpartition(":")
    return host.strip("[]") or "localhost", int(port)


async def _open(host: str, port: int, tls: ssl.SSLContext | None = None,
                server_name: str | None = None
                ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.wait_for(asyncio.open_connection(
        host, port, ssl=tls, server_hostname=server_name if tls is not None else None,
        ssl_handshake_timeout=PROBE_S if tls is not None else None), PROBE_S)


async def _ask(host: str, port: int, request: bytes, size: int) -> bytes:
    """Sends ``request`` on a new connection; the first ``size`` bytes answered (maybe fewer)."""
    try:
        reader, writer = await _open(host, port)
    except (TimeoutError, OSError):
        return b""
    try:
        writer.write(request)
        await writer.drain()
        answer = b""
        while len(answer) < size:
            chunk = await asyncio.wait_for(reader.read(size - len(answer)), PROBE_S)
            if not chunk:
                break
            answer += chunk
        return answer
    except (TimeoutError, OSError):
        return b""
    finally:
        writer.close()
        with contextlib.suppress(OSError, asyncio.TimeoutError, ssl.SSLError):
            await asyncio.wait_for(writer.wait_closed(), PROBE_S)


async def _speaks_tls(host: str, port: int) -> bool:
    """Whether the server completes a TLS handshake (certificate not checked)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        _reader, writer = await _open(host, port, context, host)
    except (TimeoutError, OSError, ssl.SSLError):
        return False
    writer.close()
    with contextlib.suppress(OSError, asyncio.TimeoutError, ssl.SSLError):
        await asyncio.wait_for(writer.wait_closed(), PROBE_S)
    return True


async def _other_service(endpoint: str, host: str, port: int) -> FolioError | None:
    """An HTTP server or a Kafka listener at the endpoint, as an error; None: neither."""
    if (await _ask(host, port, _HTTP_GET, 5)).startswith(b"HTTP/"):
        return WrongEndpointError(
            f"an HTTP server listens at {endpoint}, not a Folio broker's gRPC API (a "
            f"metrics port?); {_USE_GRPC}", endpoint=endpoint, found="http")
    answer = await _ask(host, port, _KAFKA_API_VERSIONS, 8)
    if len(answer) == 8 and struct.unpack(">i", answer[4:])[0] == _KAFKA_CORRELATION:
        return WrongEndpointError(
            f"a Kafka listener answers at {endpoint}, not a Folio broker's gRPC API (Kafka "
            f"clients go there); {_USE_GRPC}", endpoint=endpoint, found="kafka")
    return None


def _tls_context(tls: TLS) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=tls.ca) if tls.ca else \
        ssl.create_default_context()
    if tls.cert and tls.key:
        context.load_cert_chain(tls.cert, tls.key)
    return context


async def _check_tls(endpoint: str, host: str, port: int, tls: TLS) -> FolioError | None:
    """Why the client's TLS handshake fails (the same CA and name as gRPC checks)."""
    name = tls.server_name or host
    try:
        context = _tls_context(tls)
    except (OSError, ssl.SSLError):
        return None  # the SDK read these files already; gRPC's own error stands
    try:
        _reader, writer = await _open(host, port, context, name)
    except ssl.SSLCertVerificationError as error:
        if error.verify_code == 62 or "hostname" in str(error.verify_message).lower():
            return TlsError(
                f"TLS refused at {endpoint}: the broker's certificate does not name "
                f"{name!r} ({error.verify_message}); connect by a name it lists or set "
                f"the name to check (--tls-server-name, TLS(server_name=...))",
                endpoint=endpoint, reason="host_name")
        return TlsError(
            f"TLS refused at {endpoint}: the broker's certificate does not chain to the CA "
            f"{tls.ca or '(the system roots)'} ({error.verify_message}); give the CA that "
            f"signed it (--tls-ca, TLS(ca=...))", endpoint=endpoint, reason="ca")
    except (ssl.SSLError, ConnectionError, asyncio.IncompleteReadError, EOFError) as error:
        other = await _other_service(endpoint, host, port)
        if other is not None:
            return other
        return TlsError(
            f"TLS refused at {endpoint}: the server does not speak TLS (it answered the "
            f"handshake with plain text or closed it: {error}); a broker without TLS is "
            f"reached without --tls-ca", endpoint=endpoint, reason="plain_text")
    except (TimeoutError, OSError):
        return None
    writer.close()
    with contextlib.suppress(OSError, asyncio.TimeoutError, ssl.SSLError):
        await asyncio.wait_for(writer.wait_closed(), PROBE_S)
    return None  # the handshake works here: gRPC failed after it


async def diagnose(endpoint: str, tls: TLS | None) -> FolioError | None:
    """Why ``endpoint`` is no Folio broker one can reach, or None when the probes cannot tell.

    Returns:
        ``FolioUnavailableError`` (nothing listening, host unknown or
        unreachable), ``WrongEndpointError`` (HTTP, Kafka) or ``TlsError``.
    """
    try:
        host, port = _split(endpoint)
    except ValueError:
        return None
    try:
        _reader, writer = await _open(host, port)
    except ConnectionRefusedError:
        return FolioUnavailableError(
            f"nothing is listening at {endpoint} (connection refused)", endpoint=endpoint,
            reason="refused")
    except socket.gaierror as error:
        return FolioUnavailableError(f"the host of {endpoint} does not resolve "
                                     f"({error.strerror})", endpoint=endpoint,
                                     reason="unresolved")
    except TimeoutError:
        return FolioUnavailableError(
            f"no answer from {endpoint} within {PROBE_S:g} s (a host that is down, or a "
            f"firewall dropping packets)", endpoint=endpoint, reason="no_answer")
    except OSError as error:
        return FolioUnavailableError(f"cannot connect to {endpoint}: {error.strerror or error}",
                                     endpoint=endpoint, reason="unreachable")
    writer.close()
    with contextlib.suppress(OSError, asyncio.TimeoutError):
        await asyncio.wait_for(writer.wait_closed(), PROBE_S)
    if tls is not None:
        return await _check_tls(endpoint, host, port, tls)
    if await _speaks_tls(host, port):
        return TlsError(
            f"TLS refused at {endpoint}: the broker speaks TLS and the client plain text; "
            f"give the CA its certificate chains to (--tls-ca, TLS(ca=...))",
            endpoint=endpoint, reason="plain_text")
    other = await _other_service(endpoint, host, port)
    if other is not None:
        return other
    return WrongEndpointError(
        f"something listens at {endpoint} but does not speak a Folio broker's gRPC API; "
        f"{_USE_GRPC}", endpoint=endpoint, found="unknown")
