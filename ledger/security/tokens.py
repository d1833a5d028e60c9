"""JWT tokens, as Pulsar uses them: verify on the servers, create for operators.

A token is a JWT whose ``sub`` claim is the **role** (what permissions are
granted to) and whose ``exp`` claim, when present, is enforced. Two kinds of
key, chosen by the server's settings:

- a shared secret (``--auth-token-secret-file``): HS256, the same file signs
  (``folio token create --secret-file``) and verifies;
- a key pair: the servers hold only the public key
  (``--auth-token-public-key-file``, RSA for RS256 or EC P-256 for ES256),
  the operator signs with the private key (``--private-key-file``).

Verifying a JWT costs tens of microseconds, so ``TokenVerifier`` keeps the
roles of the last tokens it verified (bounded), keyed by the token text; a
cached token is still refused once its ``exp`` passes. This runs once per
call or stream, never per event.

PyJWT (the ``security`` extra) is imported only when tokens are used, so a
server without authentication does not need it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = [
    "Principal",
    "TokenError",
    "TokenFile",
    "TokenSupportError",
    "TokenVerifier",
    "create_token",
    "load_signing_key",
    "parse_duration_s",
]

#: How many verified tokens a verifier remembers.
CACHE_SIZE: Final = 4096
#: Seconds of clock skew tolerated on ``exp`` and ``nbf``.
LEEWAY_S: Final = 5.0


class TokenError(Exception):
    """A token is missing, malformed, forged or expired (UNAUTHENTICATED)."""


class TokenSupportError(ValueError):
    """PyJWT is not installed (a setup error, shown as a usage error)."""


def _jwt() -> Any:
    try:
        import jwt  # noqa: PLC0415
    except ImportError:  # the `security` extra is part of `dev`; `make run` lacks it
        raise TokenSupportError("token authentication needs PyJWT: "
                                "pip install 'folio[security]'") from None
    return jwt


@dataclass(frozen=True, slots=True)
class Principal:
    """Who a call is from: its role, and when its token expires (None: never).

    ``scopes``: an identity provider's token's scopes (its scope claim,
    ``ledger.security.jwks``); empty for every other credential.
    """

    role: str
    expires_at: float | None = None
    scopes: frozenset[str] = field(default=frozenset(), kw_only=True)


def _read_key(path: str, what: str) -> bytes:
    try:
        with open(path, "rb") as file:
            data = file.read()
    except OSError as error:
        raise ValueError(f"cannot read {what} {path}: {error.strerror}") from None
    if not data.strip():
        raise ValueError(f"{what} {path} is empty")
    return data


def _public_algorithm(key: bytes, path: str) -> list[str]:
    from cryptography.hazmat.primitives.asymmetric import ec, rsa  # noqa: PLC0415
    from cryptography.hazmat.primitives.serialization import load_pem_public_key  # noqa: PLC0415

    try:
        loaded = load_pem_public_key(key)
    except ValueError as error:
        raise ValueError(f"public key file {path} holds no PEM public key ({error})") from None
    if isinstance(loaded, rsa.RSAPublicKey):
        return ["RS256"]
    if isinstance(loaded, ec.EllipticCurvePublicKey):
        return ["ES256"]
    raise ValueError(f"public key file {path}: only RSA (RS256) and EC (ES256) keys are supported")


class TokenVerifier:
    """Checks tokens against one key; remembers the last ones it accepted.

    Args:
        key: the HS256 secret, or a PEM public key.
        algorithms: what the key verifies (``HS256``, ``RS256`` or ``ES256``).
        clock: seconds since the epoch (injectable for tests).
    """

    def __init__(self, key: bytes, algorithms: list[str], *,
                 clock: Callable[[], float] = time.time,
                 reload: Callable[[], tuple[bytes, list[str]]] | None = None,
                 key_file: str = "") -> None:
        self._key = key
        self._algorithms = algorithms
        self._clock = clock
        self._cache: dict[str, Principal] = {}
        self._jwt = _jwt()
        # The key file is checked for a new key at most once a second.
        self._reload = reload
        self._key_file = key_file
        self._key_stamp = _stamp(key_file) if key_file else None
        self.monotonic: Callable[[], float] = time.monotonic
        self._checked = self.monotonic()

    @classmethod
    def from_files(cls, secret_file: str = "", public_key_file: str = "") -> TokenVerifier:
        """The verifier of ``--auth-token-secret-file`` or ``--auth-token-public-key-file``.

        Raises:
            ValueError: both or neither given, a file unreadable or not a key.
        """
        if bool(secret_file) == bool(public_key_file):
            raise ValueError("give one of auth_token_secret_file and "
                             "auth_token_public_key_file")
        def load() -> tuple[bytes, list[str]]:
            if secret_file:
                return _read_key(secret_file, "secret file").strip(), ["HS256"]
            key = _read_key(public_key_file, "public key file")
            return key, _public_algorithm(key, public_key_file)

        key, algorithms = load()
        return cls(key, algorithms, reload=load, key_file=secret_file or public_key_file)

    def _maybe_reload(self) -> None:
        """A changed key file replaces the key (tokens of the old key then fail)."""
        now = self.monotonic()
        if self._reload is None or now - self._checked < 1.0:
            return
        self._checked = now
        try:
            stamp = _stamp(self._key_file)
            if stamp == self._key_stamp:
                return
            self._key, self._algorithms = self._reload()
        except (OSError, ValueError):
            return  # being replaced, or bad: keep the old key until a good one is there
        self._key_stamp = stamp
        self._cache.clear()

    def verify(self, token: str) -> Principal:
        """The principal ``token`` proves. Raises ``TokenError`` (never the key in the text)."""
        self._maybe_reload()
        cached = self._cache.get(token)
        if cached is not None:
            if cached.expires_at is None or self._clock() <= cached.expires_at + LEEWAY_S:
                return cached
            del self._cache[token]
            raise TokenError("the token has expired")
        jwt = self._jwt
        try:
            # Expiry is checked below against the injectable clock.
            claims = jwt.decode(token, self._key, algorithms=self._algorithms,
                                leeway=LEEWAY_S,
                                options={"require": ["sub"], "verify_exp": False})
        except jwt.InvalidSignatureError:
            raise TokenError("the token's signature does not verify (signed with another "
                             "key?)") from None
        except jwt.InvalidAlgorithmError:
            raise TokenError(f"the token's algorithm is not accepted here (only "
                             f"{', '.join(self._algorithms)})") from None
        except jwt.MissingRequiredClaimError:
            raise TokenError("the token has no 'sub' claim (the role)") from None
        except jwt.InvalidTokenError as error:
            raise TokenError(f"the token is not a valid JWT ({type(error).__name__})") from None
        role = claims.get("sub")
        if not isinstance(role, str) or not role:
            raise TokenError("the token's 'sub' claim (the role) must be a non-empty string")
        expires = claims.get("exp")
        if expires is not None and not isinstance(expires, int | float):
            raise TokenError("the token's 'exp' claim is not a number")
        principal = Principal(role, None if expires is None else float(expires))
        if principal.expires_at is not None and \
                self._clock() > principal.expires_at + LEEWAY_S:
            raise TokenError("the token has expired")
        if len(self._cache) >= CACHE_SIZE:
            self._cache.clear()
        self._cache[token] = principal
        return principal


def _stamp(path: str) -> tuple[int, int]:
    stat = os.stat(path)
    return stat.st_mtime_ns, stat.st_size


def load_signing_key(secret_file: str = "", private_key_file: str = "") -> tuple[bytes, str]:
    """The key and algorithm ``folio token create`` signs with.

    Raises:
        ValueError: both or neither given, a file unreadable or not a key.
    """
    if bool(secret_file) == bool(private_key_file):
        raise ValueError("give one of --secret-file and --private-key-file")
    if secret_file:
        secret = _read_key(secret_file, "secret file").strip()
        if secret.startswith(b"-----BEGIN"):
            # PyJWT refuses a PEM key as an HMAC secret with a traceback-worthy error.
            raise ValueError(f"--secret-file {secret_file} holds a PEM key or certificate, "
                             "not an HS256 secret: give the secret the servers' "
                             "--auth-token-secret-file names (folio token create-secret-key "
                             "makes one), or sign with a private key: --private-key-file")
        return secret, "HS256"
    from cryptography.hazmat.primitives.asymmetric import ec, rsa  # noqa: PLC0415
    from cryptography.hazmat.primitives.serialization import (  # noqa: PLC0415
        load_pem_private_key,
    )

    data = _read_key(private_key_file, "private key file")
    try:
        key = load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as error:
        raise ValueError(f"private key file {private_key_file} holds no unencrypted PEM "
                         f"private key ({error})") from None
    if isinstance(key, rsa.RSAPrivateKey):
        return data, "RS256"
    if isinstance(key, ec.EllipticCurvePrivateKey):
        return data, "ES256"
    raise ValueError(f"private key file {private_key_file}: only RSA (RS256) and EC (ES256) "
                     "keys are supported")


def create_token(subject: str, key: bytes, algorithm: str, *, expiry_s: float | None = None,
                 clock: Callable[[], float] = time.time) -> str:
    """A signed JWT with ``sub`` = ``subject`` (and ``exp`` when ``expiry_s`` is given)."""
    if not subject:
        raise ValueError("the subject (role) must not be empty")
    now = clock()
    claims: dict[str, Any] = {"sub": subject, "iat": int(now)}
    if expiry_s is not None:
        if expiry_s <= 0:
            raise ValueError(f"the expiry must be positive, got {expiry_s} s")
        claims["exp"] = int(now + expiry_s)
    token: str = _jwt().encode(claims, key, algorithm=algorithm)
    return token


_UNITS: Final = {"s": 1, "m": 60, "h": 3600, "d": 86400, "y": 365 * 86400}


def parse_duration_s(text: str) -> float:
    """Seconds of ``30s``, ``15m``, ``1h``, ``7d``, ``1y`` or a plain number of seconds.

    Raises:
        ValueError: not such a duration, or not positive.
    """
    stripped = text.strip().lower()
    unit = _UNITS.get(stripped[-1:], None)
    number = stripped[:-1] if unit is not None else stripped
    try:
        value = float(number) * (unit or 1)
    except ValueError:
        raise ValueError(f"not a duration: {text!r} (e.g. 30s, 15m, 1h, 7d, 1y)") from None
    if value <= 0:
        raise ValueError(f"the duration must be positive, got {text!r}")
    return value


class TokenFile:
    """A token kept in a file, re-read when the file changes (checked at most once a second).

    Call it for the token to send. The broker sends its bookie token this way,
    so the token can be replaced before it expires without a restart.

    Raises (at construction and when a changed file is empty): ``ValueError``.
    """

    def __init__(self, path: str, *, check_interval_s: float = 1.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._path = path
        self._interval_s = check_interval_s
        self._clock = clock
        self._token = self._read()
        self._checked = clock()

    def _read(self) -> str:
        token = _read_key(self._path, "token file").decode("ascii", "replace").strip()
        self._stamp = self._stat()
        return token

    def _stat(self) -> tuple[int, int]:
        stat = os.stat(self._path)
        return stat.st_mtime_ns, stat.st_size

    def __call__(self) -> str:
        """The token now."""
        now = self._clock()
        if now - self._checked >= self._interval_s:
            self._checked = now
            try:
                if self._stat() != self._stamp:
                    self._token = self._read()
            except (OSError, ValueError):
                pass  # keep the last good token; the file is being replaced
        return self._token
