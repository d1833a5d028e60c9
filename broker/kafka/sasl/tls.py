"""TLS of the Kafka listener: the API port's files, reloaded when they change.

``ListenerTls.context()`` is asked once per accepted connection (the
connection then upgrades itself with ``StreamWriter.start_tls``). It stats
the three files, as the gRPC port's fetcher does before each handshake
(``ledger.security.tls``), and builds a new ``ssl.SSLContext`` only when
they changed; a half-written or mismatched pair keeps the old context with
a warning, so a rotation done in two steps never breaks the port.
Connections already open keep the certificate they were made with.

With a CA (``tls_ca``) clients must present a certificate it signed;
``certificate_role`` gives the role of such a certificate: its subject's
common name (CN), the principal of an SSL connection without SASL.
"""

from __future__ import annotations

import logging
import os
import ssl
from typing import Any

from ledger.security.tls import ServerTls, TlsConfigError

__all__ = ["ListenerTls", "certificate_role"]

log = logging.getLogger(__name__)


def _signature(tls: ServerTls) -> tuple[tuple[int, int], ...]:
    out = []
    for path in tls.paths():
        stat = os.stat(path)
        out.append((stat.st_mtime_ns, stat.st_size))
    return tuple(out)


def _context(tls: ServerTls) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(tls.cert_file, tls.key_file)
        if tls.mutual:
            context.load_verify_locations(cafile=tls.ca_file)
            context.verify_mode = ssl.CERT_REQUIRED
    except (OSError, ssl.SSLError, ValueError) as error:
        raise TlsConfigError(f"Kafka listener TLS ({tls.cert_file}): {error}") from None
    return context


class ListenerTls:
    """The listener's current ``ssl.SSLContext`` (see the module docstring).

    Raises ``TlsConfigError`` at construction when the files do not load.
    """

    def __init__(self, tls: ServerTls) -> None:
        if not tls.enabled:
            raise TlsConfigError("the Kafka listener's TLS needs tls_cert and tls_key")
        self.tls = tls
        try:
            self._signature = _signature(tls)
        except OSError as error:
            raise TlsConfigError(f"cannot read TLS file {error.filename}: "
                                 f"{error.strerror}") from None
        self._context = _context(tls)
        self.reloads = 0

    def context(self) -> ssl.SSLContext:
        """The context for a new connection (reloaded first if the files changed)."""
        try:
            signature = _signature(self.tls)
            if signature != self._signature:
                self._context = _context(self.tls)
                self._signature = signature
                self.reloads += 1
                log.info("kafka: TLS certificate reloaded from %s", self.tls.cert_file)
        except (OSError, TlsConfigError) as error:
            log.warning("kafka: TLS files changed but cannot be loaded, keeping the old "
                        "ones: %s", error)
        return self._context


def certificate_role(peer_certificate: dict[str, Any] | None) -> str | None:
    """The CN of a verified client certificate (``SSLObject.getpeercert()``), else None."""
    if not peer_certificate:
        return None
    for rdn in peer_certificate.get("subject", ()):
        for key, value in rdn:
            if key == "commonName" and value:
                return str(value)
    return None
