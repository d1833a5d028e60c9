"""Certificates made on the fly for TLS tests (``trustme``): never a committed key.

``Pki(directory)`` makes a CA and writes PEM files the servers and clients
take by path: ``server(name)`` a certificate for 127.0.0.1 and localhost,
``client(name)`` one for a client (trustme's certificates allow both uses).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import trustme

__all__ = ["CertFiles", "Pki"]


@dataclass(frozen=True)
class CertFiles:
    """A certificate chain and its key, as files."""

    cert: Path
    key: Path


class Pki:
    """One test CA and the files it issued, under ``directory``."""

    def __init__(self, directory: Path, name: str = "ca") -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self.name = name
        self._ca = trustme.CA()
        self.ca = directory / f"{name}.pem"
        self._ca.cert_pem.write_to_path(str(self.ca))

    def _issue(self, name: str, *identities: str, common_name: str | None = None) -> CertFiles:
        issued = self._ca.issue_cert(*identities, common_name=common_name)
        files = CertFiles(self.directory / f"{self.name}-{name}.crt",
                          self.directory / f"{self.name}-{name}.key")
        issued.private_key_pem.write_to_path(str(files.key))
        files.cert.write_bytes(b"".join(blob.bytes() for blob in issued.cert_chain_pems))
        return files

    def server(self, name: str = "server") -> CertFiles:
        """A server certificate for 127.0.0.1 and localhost."""
        return self._issue(name, "127.0.0.1", "localhost")

    def client(self, name: str = "client") -> CertFiles:
        """A client certificate (its name: a DNS-like identity and the subject's CN)."""
        return self._issue(name, f"{name}.folio.test", common_name=name)
