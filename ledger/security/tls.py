"""TLS for every gRPC port: server credentials that reload, client credentials that reload.

A server given a certificate and key serves TLS; given a CA too, it requires
and verifies client certificates (mutual TLS): ``--tls-ca`` on a server means
"clients must present a certificate signed by this CA". There is no separate
flag, so a server can never be told of a client CA and then not check it.

**Rotation without restart.** ``server_credentials`` uses gRPC's dynamic SSL
server credentials: gRPC asks ``_ServerCertificates.fetch`` for a new
configuration before each TLS handshake; the fetcher compares the files'
modification time and size with what it loaded and returns a new
configuration only when they changed (a ``stat`` of three files per new
connection, nothing per call). A half-written or mismatched pair (cert
replaced, key not yet) is refused with a warning and the old one kept, so a
rotation done in two steps never breaks the port; the next handshake tries
again. Connections already open keep the certificate they were made with.

The broker's channels to bookies (``ReloadingChannelCredentials``) check
their files at most once a second and, on a change, the caller opens a new
channel with the new credentials (``ledger.bookie.remote``).
"""

from __future__ import annotations

import logging
import os
import ssl
import tempfile
import time
from dataclasses import dataclass
from typing import Any

import grpc

__all__ = [
    "ClientTls",
    "ReloadingChannelCredentials",
    "ServerTls",
    "TlsConfigError",
    "metrics_tls_arguments",
    "server_credentials",
]

log = logging.getLogger(__name__)

#: The client side checks its files at most this often (seconds).
CLIENT_CHECK_INTERVAL_S = 1.0

_Signature = tuple[tuple[int, int], ...]


class TlsConfigError(ValueError):
    """A TLS setting is incomplete or its files cannot be read (a usage error)."""


def _read(path: str, what: str) -> bytes:
    try:
        with open(path, "rb") as file:
            return file.read()
    except OSError as error:
        raise TlsConfigError(f"cannot read {what} {path}: {error.strerror}") from None


def _signature(paths: tuple[str, ...]) -> _Signature:
    """(mtime_ns, size) of each file: what tells a rotation."""
    out = []
    for path in paths:
        stat = os.stat(path)
        out.append((stat.st_mtime_ns, stat.st_size))
    return tuple(out)


def _check_pair(cert: bytes, key: bytes, what: str) -> None:
    """Raise ``TlsConfigError`` unless ``cert`` and ``key`` are PEM that belong together.

    ``ssl`` loads only from files, so they go through a private temporary
    directory (removed at once); this runs at start and on a rotation only.
    """
    with tempfile.TemporaryDirectory(prefix="folio-tls-") as directory:
        cert_path, key_path = os.path.join(directory, "c"), os.path.join(directory, "k")
        for path, data in ((cert_path, cert), (key_path, key)):
            with open(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600), "wb") as file:
                file.write(data)
        try:
            ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(
                cert_path, key_path)
        except (ssl.SSLError, ValueError) as error:
            raise TlsConfigError(f"{what}: the certificate and key are not a valid PEM pair "
                                 f"({error})") from None


def _check_ca(ca: bytes, path: str) -> None:
    try:
        ssl.create_default_context(cadata=ca.decode("ascii"))
    except (ssl.SSLError, ValueError, UnicodeDecodeError) as error:
        raise TlsConfigError(f"CA file {path} holds no valid PEM certificate ({error})") from None


@dataclass(frozen=True)
class ServerTls:
    """A server port's TLS files; all empty: plain text.

    Attributes:
        cert_file: PEM certificate chain the server presents.
        key_file: its PEM private key.
        ca_file: PEM CA bundle; when set, clients must present a certificate
            it signed (mutual TLS).
    """

    cert_file: str = ""
    key_file: str = ""
    ca_file: str = ""

    def __post_init__(self) -> None:
        if bool(self.cert_file) != bool(self.key_file):
            raise TlsConfigError("tls_cert and tls_key go together: give both or neither")
        if self.ca_file and not self.cert_file:
            raise TlsConfigError("tls_ca (client certificates) needs tls_cert and tls_key")

    @property
    def enabled(self) -> bool:
        """Whether the port serves TLS."""
        return bool(self.cert_file)

    @property
    def mutual(self) -> bool:
        """Whether clients must present a certificate."""
        return bool(self.ca_file)

    def paths(self) -> tuple[str, ...]:
        """The files, in the order the signature covers them."""
        return tuple(path for path in (self.cert_file, self.key_file, self.ca_file) if path)


class _ServerCertificates:
    """Loads a ``ServerTls``'s files, and again when they change (gRPC's fetcher)."""

    def __init__(self, tls: ServerTls) -> None:
        self._tls = tls
        self._signature: _Signature = ()
        self.reloads = 0

    def load(self) -> Any:
        """The certificate configuration now. Raises ``TlsConfigError``."""
        tls = self._tls
        try:
            signature = _signature(tls.paths())
        except OSError as error:
            raise TlsConfigError(f"cannot read TLS file {error.filename}: "
                                 f"{error.strerror}") from None
        cert = _read(tls.cert_file, "certificate")
        key = _read(tls.key_file, "private key")
        _check_pair(cert, key, f"{tls.cert_file} / {tls.key_file}")
        ca = _read(tls.ca_file, "CA file") if tls.ca_file else None
        if ca is not None:
            _check_ca(ca, tls.ca_file)
        self._signature = signature
        return grpc.ssl_server_certificate_configuration([(key, cert)], root_certificates=ca)

    def fetch(self) -> Any:
        """A new configuration if the files changed since the last load, else None.

        Called by gRPC before each handshake; never raises (a bad new file
        keeps the old configuration and logs a warning).
        """
        try:
            if _signature(self._tls.paths()) == self._signature:
                return None
            configuration = self.load()
        except (OSError, TlsConfigError) as error:
            log.warning("TLS files changed but cannot be loaded, keeping the old ones: %s", error)
            return None
        self.reloads += 1
        log.info("TLS certificate reloaded from %s", self._tls.cert_file)
        return configuration


def server_credentials(tls: ServerTls) -> grpc.ServerCredentials:
    """Credentials of a TLS port that reload their files when they change.

    Raises:
        TlsConfigError: a file cannot be read or is not valid PEM.
    """
    certificates = _ServerCertificates(tls)
    return grpc.dynamic_ssl_server_credentials(
        certificates.load(), certificates.fetch, require_client_authentication=tls.mutual)


def metrics_tls_arguments(tls: ServerTls) -> dict[str, Any]:
    """``prometheus_client.start_http_server`` keyword arguments for HTTPS with ``tls``.

    Read once at start: the metrics port does not reload its certificate.
    """
    if not tls.enabled:
        raise TlsConfigError("metrics_tls needs tls_cert and tls_key")
    arguments: dict[str, Any] = {"certfile": tls.cert_file, "keyfile": tls.key_file}
    if tls.mutual:
        arguments.update(client_cafile=tls.ca_file, client_auth_required=True)
    return arguments


@dataclass(frozen=True)
class ClientTls:
    """What a client end (the broker towards its bookies) trusts and presents.

    Attributes:
        ca_file: PEM CA bundle the server's certificate must chain to; empty:
            the system's roots.
        cert_file: PEM certificate for mutual TLS; empty: none.
        key_file: its PEM private key.
        server_name: the name checked against the server's certificate
            instead of the address's host; empty: the host.
    """

    ca_file: str = ""
    cert_file: str = ""
    key_file: str = ""
    server_name: str = ""

    def __post_init__(self) -> None:
        if bool(self.cert_file) != bool(self.key_file):
            raise TlsConfigError("the client certificate and key go together: give both or "
                                 "neither")

    def paths(self) -> tuple[str, ...]:
        """The files given."""
        return tuple(path for path in (self.ca_file, self.cert_file, self.key_file) if path)

    def channel_options(self) -> tuple[tuple[str, Any], ...]:
        """Channel options this needs (the name override)."""
        if self.server_name:
            return (("grpc.ssl_target_name_override", self.server_name),)
        return ()

    def credentials(self) -> grpc.ChannelCredentials:
        """Channel credentials from the files now. Raises ``TlsConfigError``."""
        ca = _read(self.ca_file, "CA file") if self.ca_file else None
        if ca is not None:
            _check_ca(ca, self.ca_file)
        cert = key = None
        if self.cert_file:
            cert = _read(self.cert_file, "client certificate")
            key = _read(self.key_file, "client private key")
            _check_pair(cert, key, f"{self.cert_file} / {self.key_file}")
        return grpc.ssl_channel_credentials(root_certificates=ca, private_key=key,
                                            certificate_chain=cert)


class ReloadingChannelCredentials:
    """A ``ClientTls``'s credentials and a generation that moves when its files change.

    ``current()`` stats the files at most once per ``check_interval_s``, so a
    caller may ask on every call; when the generation moved it opens a new
    channel (connections cannot change credentials).
    """

    def __init__(self, tls: ClientTls, *, check_interval_s: float = CLIENT_CHECK_INTERVAL_S,
                 clock: Any = time.monotonic) -> None:
        """Loads the files. Raises ``TlsConfigError``."""
        self.tls = tls
        self._interval_s = check_interval_s
        self._clock = clock
        self._signature = self._stat()
        self._credentials = tls.credentials()
        self._checked = clock()
        self.generation = 0

    def _stat(self) -> _Signature:
        try:
            return _signature(self.tls.paths())
        except OSError as error:
            raise TlsConfigError(f"cannot read TLS file {error.filename}: "
                                 f"{error.strerror}") from None

    def current(self) -> tuple[grpc.ChannelCredentials, int]:
        """The credentials and their generation (files re-checked if due)."""
        now = self._clock()
        if now - self._checked >= self._interval_s:
            self._checked = now
            try:
                signature = self._stat()
                if signature != self._signature:
                    self._credentials = self.tls.credentials()
                    self._signature = signature
                    self.generation += 1
                    log.info("client TLS files reloaded (%s)", ", ".join(self.tls.paths()))
            except TlsConfigError as error:
                log.warning("client TLS files changed but cannot be loaded, keeping the old "
                            "ones: %s", error)
        return self._credentials, self.generation
