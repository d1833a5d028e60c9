"""SCRAM (RFC 5802, RFC 7677): credentials from a password, and the server side of one exchange.

A stored credential keeps what RFC 5802 calls StoredKey and ServerKey, the
salt and the iteration count, never the password nor the salted password:

    SaltedPassword = PBKDF2(password, salt, iterations)
    ClientKey = HMAC(SaltedPassword, "Client Key");  StoredKey = H(ClientKey)
    ServerKey = HMAC(SaltedPassword, "Server Key")

Kafka's AlterUserScramCredentials carries the *salted* password (the client
computes it), so the server can store a credential without seeing the
password either. Channel binding is not offered (``n,,`` only), as Kafka's
broker does.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from dataclasses import dataclass
from typing import Final

__all__ = [
    "MIN_ITERATIONS",
    "SCRAM_HASHES",
    "ScramCredential",
    "ScramError",
    "ScramServer",
    "credential_from_salted",
    "make_credential",
    "salted_password",
]

#: Hash name of each mechanism.
SCRAM_HASHES: Final = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
#: Fewest PBKDF2 iterations accepted (RFC 7677 asks 4096 at least; Kafka too).
MIN_ITERATIONS: Final = 4096
#: Most iterations accepted (Kafka's limit): more would let a client make the broker spin.
MAX_ITERATIONS: Final = 16384
_NONCE_BYTES: Final = 24


class ScramError(Exception):
    """The client's messages break SCRAM, or its proof is wrong."""


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """One user's credential for one mechanism (what the store keeps)."""

    mechanism: str
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def salted_password(mechanism: str, password: bytes, salt: bytes, iterations: int) -> bytes:
    """RFC 5802's SaltedPassword (PBKDF2-HMAC with the mechanism's hash)."""
    return hashlib.pbkdf2_hmac(SCRAM_HASHES[mechanism], password, salt, iterations)


def credential_from_salted(mechanism: str, salted: bytes, salt: bytes,
                           iterations: int) -> ScramCredential:
    """The stored form of a salted password (AlterUserScramCredentials' upsertion)."""
    name = SCRAM_HASHES[mechanism]
    client_key = hmac.digest(salted, b"Client Key", name)
    return ScramCredential(mechanism, salt, hashlib.new(name, client_key).digest(),
                           hmac.digest(salted, b"Server Key", name), iterations)


def make_credential(mechanism: str, password: str, iterations: int = MIN_ITERATIONS,
                    salt: bytes | None = None) -> ScramCredential:
    """A new credential for ``password`` with a random salt."""
    salt = salt if salt is not None else secrets.token_bytes(32)
    return credential_from_salted(
        mechanism, salted_password(mechanism, password.encode(), salt, iterations), salt,
        iterations)


def _attributes(message: str, extensions: dict[str, str] | None = None) -> dict[str, str]:
    """RFC 5802's one-letter attributes; with ``extensions``, Kafka's SCRAM extensions
    (``key=value`` with an alphanumeric key of two letters or more, KIP-84) go there."""
    out: dict[str, str] = {}
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if sep and extensions is not None and len(key) > 1 and key.isalnum():
            extensions.setdefault(key, value)
            continue
        if not sep or len(key) != 1:
            raise ScramError(f"malformed SCRAM attribute {part[:32]!r}")
        out.setdefault(key, value)
    return out


def _unescape_name(name: str) -> str:
    """RFC 5802 saslname: '=2C' is ',', '=3D' is '='; another '=' is malformed."""
    if "=" in name.replace("=2C", "").replace("=3D", ""):
        raise ScramError("malformed user name")
    return name.replace("=2C", ",").replace("=3D", "=")


class ScramServer:
    """The server side of one SCRAM exchange: client-first, then client-final.

    ``first(message)`` answers the client-first message with the server-first
    one and returns the user name (looked up by the caller, who then calls
    ``use``); ``final(message)`` checks the proof and answers the
    server-final message. Any fault raises ``ScramError``. ``extensions``:
    the client-first message's SCRAM extensions (Kafka's ``tokenauth=true``
    asks for a delegation token, ``broker.kafka.sasl.delegation``).
    """

    def __init__(self, mechanism: str) -> None:
        self.mechanism = mechanism
        self._hash = SCRAM_HASHES[mechanism]
        self.user = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self._credential: ScramCredential | None = None
        self.extensions: dict[str, str] = {}

    def first(self, message: bytes) -> str:
        """Parse the client-first message; the user name it names."""
        text = message.decode("utf-8", "strict") if message else ""
        if not text.startswith(("n,", "y,")):
            raise ScramError("channel binding is not supported: the GS2 header must be "
                             "'n,' (or 'y,')")
        _, _, rest = text.partition(",")
        authzid, _, bare = rest.partition(",")
        attributes = _attributes(bare, self.extensions)
        if "n" not in attributes or "r" not in attributes or "m" in attributes:
            raise ScramError("client-first message needs n= and r= (and no m=)")
        self.user = _unescape_name(attributes["n"])
        if authzid and authzid != f"a={attributes['n']}":
            raise ScramError("the authorization id must be the user name")
        self._client_first_bare = bare
        self._nonce = attributes["r"] + base64.b64encode(
            secrets.token_bytes(_NONCE_BYTES)).decode()
        return self.user

    def use(self, credential: ScramCredential | None) -> bytes:
        """The server-first message, for the user's credential (None: an unknown user).

        An unknown user gets a made-up salt and the exchange goes on, failing
        at the proof: the answer does not tell who exists.
        """
        if credential is None:
            fake = hashlib.new(self._hash, b"folio-unknown-user:" + self.user.encode()).digest()
            credential = ScramCredential(self.mechanism, fake[:16], b"", b"", MIN_ITERATIONS)
        self._credential = credential
        self._server_first = (f"r={self._nonce},s={base64.b64encode(credential.salt).decode()}"
                              f",i={credential.iterations}")
        return self._server_first.encode()

    def final(self, message: bytes) -> bytes:
        """Check the client-final message's proof; the server-final message."""
        credential = self._credential
        if credential is None:
            raise ScramError("client-final message before client-first")
        text = message.decode("utf-8", "strict")
        without_proof, sep, proof_text = text.rpartition(",p=")
        if not sep:
            raise ScramError("client-final message has no proof")
        attributes = _attributes(without_proof)
        if attributes.get("r") != self._nonce:
            raise ScramError("the nonce does not match")
        if attributes.get("c") not in ("biws", "eSws"):  # base64 of "n,," and "y,,"
            raise ScramError("channel binding is not supported")
        try:
            proof = base64.b64decode(proof_text, validate=True)
        except ValueError:
            raise ScramError("the proof is not base64") from None
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}"
        signature = hmac.digest(credential.stored_key, auth_message.encode(), self._hash)
        if not credential.stored_key or len(proof) != len(signature):
            raise ScramError("authentication failed")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(hashlib.new(self._hash, client_key).digest(),
                                   credential.stored_key):
            raise ScramError("authentication failed")
        server_signature = hmac.digest(credential.server_key, auth_message.encode(),
                                       self._hash)
        return b"v=" + base64.b64encode(server_signature)
