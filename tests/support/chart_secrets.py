"""The Secrets of the chart's ``ci/secure-values.yaml``, made for one test.

Certificates by trustme (tests/support/certs.py), an ES256 key pair (the
public key for the servers) and the brokers' token, keyed as the values name
them, ready for ``LocalCluster(secrets=...)``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from ledger.security.tokens import create_token
from tests.support.certs import Pki

__all__ = ["SecureFiles", "secure_secrets"]


@dataclasses.dataclass(frozen=True)
class SecureFiles:
    """The Secrets of ci/secure-values.yaml, made for one test, and what clients need."""

    secrets: dict[str, dict[str, bytes]]
    ca: Path
    token_key: bytes


def secure_secrets(directory: Path) -> SecureFiles:
    """A CA and one certificate for every pod (127.0.0.1: names are mapped to loopback),
    an ES256 key pair (the public key for the servers) and the brokers' token."""
    from cryptography.hazmat.primitives import serialization  # noqa: PLC0415
    from cryptography.hazmat.primitives.asymmetric import ec  # noqa: PLC0415

    pki = Pki(directory)
    served = pki.server("folio")
    private = ec.generate_private_key(ec.SECP256R1())
    private_pem = private.private_bytes(serialization.Encoding.PEM,
                                        serialization.PrivateFormat.PKCS8,
                                        serialization.NoEncryption())
    public_pem = private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    return SecureFiles({
        "folio-tls": {"tls.crt": served.cert.read_bytes(), "tls.key": served.key.read_bytes(),
                      "ca.crt": pki.ca.read_bytes()},
        "folio-token-key": {"public.pem": public_pem},
        "folio-broker-token": {"token": create_token("broker", private_pem, "ES256").encode()},
    }, pki.ca, private_pem)
