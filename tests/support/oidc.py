"""A stand-in OpenID Connect provider for tests: signing keys, their JWKS, served over HTTP.

``Provider`` makes RSA and EC keys, publishes a chosen subset as a JWK set,
and signs tokens with any of them (a ``kid`` header naming the key).
``JwksServer`` serves the current set from a real ``http.server`` on a
loopback port 0, in a thread, over HTTPS when given a certificate
(``tests.support.certs``); the provider's ``down`` makes it answer 503,
its ``redirect_to`` a 302. Also the two
tokens PyJWT refuses to make: ``unsigned`` (alg ``none``) and
``hs256_with_public_key`` (the published public key used as an HMAC secret).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

__all__ = ["ISSUER", "JwksServer", "Provider", "hs256_with_public_key", "unsigned"]

ISSUER = "https://idp.example"


class Provider:
    """Keys, their published set, and tokens signed with them."""

    def __init__(self) -> None:
        self.keys: dict[str, Any] = {}
        self.published: list[str] = []
        self.down = False
        self.reads = 0

    def add_rsa(self, kid: str, *, publish: bool = True) -> None:
        self.keys[kid] = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        if publish:
            self.published.append(kid)

    def add_ec(self, kid: str) -> None:
        self.keys[kid] = ec.generate_private_key(ec.SECP256R1())
        self.published.append(kid)

    def jwks(self) -> bytes:
        """The published keys as a JWK set."""
        keys = []
        for kid in self.published:
            key = self.keys[kid]
            if isinstance(key, rsa.RSAPrivateKey):
                jwk = json.loads(RSAAlgorithm.to_jwk(key.public_key()))
                jwk["alg"] = "RS256"
            else:
                jwk = json.loads(ECAlgorithm.to_jwk(key.public_key()))
                jwk["alg"] = "ES256"
            keys.append({**jwk, "kid": kid, "use": "sig"})
        return json.dumps({"keys": keys}).encode()

    def read(self, _url: str) -> bytes:
        """The set, as ``JwksVerifier``'s reader (``OSError`` while ``down``)."""
        self.reads += 1
        if self.down:
            raise OSError("connection refused")
        return self.jwks()

    def token(self, kid: str, *, algorithm: str = "", **claims: Any) -> str:
        """A token signed with key ``kid``: sub app, aud kafka, 10 minutes (None drops a claim)."""
        key = self.keys[kid]
        algorithm = algorithm or ("RS256" if isinstance(key, rsa.RSAPrivateKey) else "ES256")
        body = {"sub": "app", "iss": ISSUER, "aud": "kafka", "iat": int(time.time()),
                "exp": int(time.time()) + 600, **claims}
        body = {name: value for name, value in body.items() if value is not None}
        return jwt.encode(body, key, algorithm=algorithm, headers={"kid": kid})


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _claims(role: str) -> str:
    return _b64(json.dumps({"sub": role, "iss": ISSUER, "aud": "kafka",
                            "exp": int(time.time()) + 600}).encode())


def unsigned(kid: str, role: str = "admin") -> str:
    """A token with alg ``none`` and no signature."""
    header = _b64(json.dumps({"alg": "none", "typ": "JWT", "kid": kid}).encode())
    return f"{header}.{_claims(role)}."


def hs256_with_public_key(provider: Provider, kid: str, role: str = "admin") -> str:
    """A token MACed with the published public key (PEM) as the HS256 secret."""
    public = provider.keys[kid].public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    header = _b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": kid}).encode())
    body = _claims(role)
    mac = hmac.new(public, f"{header}.{body}".encode(), hashlib.sha256).digest()
    return f"{header}.{body}.{_b64(mac)}"


class JwksServer:
    """``provider``'s set over HTTP on 127.0.0.1 port 0 (``url``); close with ``close``.

    ``tls``: (certificate chain, key) files: served over HTTPS instead.
    """

    def __init__(self, provider: Provider, *, tls: tuple[Path, Path] | None = None) -> None:
        self.provider = provider
        self.requests = 0
        self.redirect_to = ""  # answer 302 to this URL instead
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server.requests += 1
                if server.redirect_to:
                    self.send_response(302)
                    self.send_header("Location", server.redirect_to)
                    self.end_headers()
                    return
                if server.provider.down:
                    self.send_error(503, "down for the test")
                    return
                body = server.provider.jwks()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # quiet

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        scheme = "http"
        if tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(str(tls[0]), str(tls[1]))
            self._http.socket = context.wrap_socket(self._http.socket, server_side=True)
            scheme = "https"
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)
        self._thread.start()
        self.url = f"{scheme}://127.0.0.1:{self._http.server_address[1]}/jwks.json"

    def close(self) -> None:
        self._http.shutdown()
        self._http.server_close()
        self._thread.join(10)
