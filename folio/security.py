"""The client's TLS and token: ``TLS`` (what it trusts and presents) and its bearer token.

``TLS(ca=..., cert=..., key=...)`` names PEM files: ``ca`` the CA the
broker's certificate must chain to (None: the system's roots), ``cert`` and
``key`` a client certificate for brokers that require one (mutual TLS).
``server_name`` checks the broker's certificate for that name instead of the
endpoint's host (a broker reached through an address its certificate does
not list).

A token (``token=`` text, or ``token_file=``, re-read when the file changes,
checked at most once a second) is sent as ``authorization: Bearer <token>``
metadata on every call and stream, added by client interceptors, once per
call or stream, never per event. Not by gRPC call credentials: their Python
plugin runs on a thread of its own for every call, which measured a third
fewer unary calls per second (``bench/security_bench.py``), and gRPC refuses
them on plain-text channels anyway.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import grpc
from grpc import aio

from folio.errors import InvalidArgumentError

__all__ = ["TLS", "ChannelSecurity", "TokenSource"]

#: A token file is checked for changes at most this often (seconds).
TOKEN_CHECK_INTERVAL_S: Final = 1.0


def _read(path: str, what: str) -> bytes:
    try:
        with open(path, "rb") as file:
            return file.read()
    except OSError as error:
        raise InvalidArgumentError(f"cannot read the {what} {path}: {error.strerror}") from None


@dataclass(frozen=True, slots=True)
class TLS:
    """TLS settings of a client: PEM file paths.

    Attributes:
        ca: the CA bundle the broker's certificate must chain to; None: the
            system's trusted roots.
        cert: a client certificate (mutual TLS); needs ``key``.
        key: its private key.
        server_name: the name to check the broker's certificate for; None:
            the endpoint's host.
    """

    ca: str | None = None
    cert: str | None = None
    key: str | None = None
    server_name: str | None = None

    def __post_init__(self) -> None:
        if bool(self.cert) != bool(self.key):
            raise InvalidArgumentError("TLS cert and key go together: give both or neither")

    def credentials(self) -> grpc.ChannelCredentials:
        """Channel credentials from the files now.

        Raises:
            InvalidArgumentError: a file cannot be read.
        """
        ca = _read(self.ca, "TLS CA file") if self.ca else None
        cert = _read(self.cert, "TLS certificate") if self.cert else None
        key = _read(self.key, "TLS key") if self.key else None
        return grpc.ssl_channel_credentials(root_certificates=ca, private_key=key,
                                            certificate_chain=cert)


class TokenSource:
    """The token to send: fixed text, or a file re-read when it changes.

    Thread-safe (gRPC may ask from its own threads).
    """

    def __init__(self, token: str | None = None, token_file: str | None = None, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        """Raises ``InvalidArgumentError``: both or neither given, or an unreadable file."""
        if bool(token) == bool(token_file):
            raise InvalidArgumentError("give either token or token_file, not both")
        self._file = token_file
        self._clock = clock
        self._lock = threading.Lock()
        self._stamp: tuple[int, int] | None = None
        self._token = token.strip() if token else self._read()
        self._checked = clock()

    def _read(self) -> str:
        assert self._file is not None
        data = _read(self._file, "token file").decode("ascii", "replace").strip()
        if not data:
            raise InvalidArgumentError(f"the token file {self._file} is empty")
        stat = os.stat(self._file)
        self._stamp = (stat.st_mtime_ns, stat.st_size)
        return data

    def __call__(self) -> str:
        """The token now (the file re-read if it changed)."""
        if self._file is None:
            return self._token
        with self._lock:
            now = self._clock()
            if now - self._checked >= TOKEN_CHECK_INTERVAL_S:
                self._checked = now
                try:
                    stat = os.stat(self._file)
                    if (stat.st_mtime_ns, stat.st_size) != self._stamp:
                        self._token = self._read()
                except (OSError, InvalidArgumentError):
                    pass  # being replaced: keep the last good token
            return self._token

    def metadata(self) -> tuple[tuple[str, str], ...]:
        """The call metadata carrying the token."""
        return (("authorization", f"Bearer {self()}"),)


def _with_token(details: Any, source: TokenSource) -> Any:
    metadata = list(details.metadata or ())
    metadata.extend(source.metadata())
    return aio.ClientCallDetails(details.method, details.timeout, aio.Metadata(*metadata),
                                 details.credentials, details.wait_for_ready)


class _UnaryUnary(aio.UnaryUnaryClientInterceptor):  # type: ignore[type-arg]
    def __init__(self, source: TokenSource) -> None:
        self._source = source

    async def intercept_unary_unary(self, continuation: Any, client_call_details: Any,
                                    request: Any) -> Any:
        return await continuation(_with_token(client_call_details, self._source), request)


class _UnaryStream(aio.UnaryStreamClientInterceptor):  # type: ignore[type-arg]
    def __init__(self, source: TokenSource) -> None:
        self._source = source

    async def intercept_unary_stream(self, continuation: Any, client_call_details: Any,
                                     request: Any) -> Any:
        return await continuation(_with_token(client_call_details, self._source), request)


class _StreamUnary(aio.StreamUnaryClientInterceptor):  # type: ignore[type-arg]
    def __init__(self, source: TokenSource) -> None:
        self._source = source

    async def intercept_stream_unary(self, continuation: Any, client_call_details: Any,
                                     request_iterator: Any) -> Any:
        return await continuation(_with_token(client_call_details, self._source),
                                  request_iterator)


class _StreamStream(aio.StreamStreamClientInterceptor):  # type: ignore[type-arg]
    def __init__(self, source: TokenSource) -> None:
        self._source = source

    async def intercept_stream_stream(self, continuation: Any, client_call_details: Any,
                                      request_iterator: Any) -> Any:
        return await continuation(_with_token(client_call_details, self._source),
                                  request_iterator)


class ChannelSecurity:
    """How a client's channels are opened: plain or TLS, with or without a token.

    Made once per client (the files are read then; a token file again when
    it changes); every channel of the pool opens through ``channel``.
    """

    def __init__(self, tls: TLS | None = None, token: TokenSource | None = None) -> None:
        """Raises ``InvalidArgumentError``: a TLS file cannot be read."""
        self.tls = tls
        self.token = token
        self._credentials = tls.credentials() if tls is not None else None
        self._interceptors: list[Any] | None = None
        if token is not None:
            self._interceptors = [_UnaryUnary(token), _UnaryStream(token),
                                  _StreamUnary(token), _StreamStream(token)]

    def channel(self, endpoint: str, options: list[tuple[str, Any]]) -> aio.Channel:
        """A new ``grpc.aio`` channel to ``endpoint`` (on the IO thread)."""
        if self.tls is not None and self.tls.server_name:
            options = [*options, ("grpc.ssl_target_name_override", self.tls.server_name)]
        if self._credentials is not None:
            return aio.secure_channel(endpoint, self._credentials, options=options,
                                      interceptors=self._interceptors)
        return aio.insecure_channel(endpoint, options=options, interceptors=self._interceptors)


    def sync_channel(self, endpoint: str, options: list[tuple[str, Any]]) -> grpc.Channel:
        """A blocking channel to ``endpoint`` (the Spark connector's tasks)."""
        if self.tls is not None and self.tls.server_name:
            options = [*options, ("grpc.ssl_target_name_override", self.tls.server_name)]
        channel = (grpc.secure_channel(endpoint, self._credentials, options=options)
                   if self._credentials is not None
                   else grpc.insecure_channel(endpoint, options=options))
        if self.token is None:
            return channel
        return grpc.intercept_channel(channel, _SyncToken(self.token))


class _SyncToken(grpc.UnaryUnaryClientInterceptor,  # type: ignore[type-arg]
                 grpc.UnaryStreamClientInterceptor):  # type: ignore[type-arg]
    """The token on a blocking channel's unary and server-streaming calls."""

    def __init__(self, source: TokenSource) -> None:
        self._source = source

    def _details(self, details: Any) -> Any:
        return _SyncDetails(details.method, details.timeout,
                            [*(details.metadata or ()), *self._source.metadata()],
                            details.credentials, details.wait_for_ready, details.compression)

    def intercept_unary_unary(self, continuation: Any, client_call_details: Any,
                              request: Any) -> Any:
        return continuation(self._details(client_call_details), request)

    def intercept_unary_stream(self, continuation: Any, client_call_details: Any,
                               request: Any) -> Any:
        return continuation(self._details(client_call_details), request)


class _SyncDetails(grpc.ClientCallDetails):
    def __init__(self, method: str, timeout: float | None, metadata: Any, credentials: Any,
                 wait_for_ready: bool | None, compression: Any) -> None:
        self.method = method
        self.timeout = timeout
        self.metadata = metadata
        self.credentials = credentials
        self.wait_for_ready = wait_for_ready
        self.compression = compression


#: Plain text, no token: what a client without settings uses.
PLAIN: Final = ChannelSecurity()
