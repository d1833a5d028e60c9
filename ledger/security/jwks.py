"""JWTs of an external identity provider, checked against its JWKS (Kafka's KIP-768).

An OpenID Connect provider (Keycloak, Auth0, Entra ID, Okta ...) signs its
access tokens with private keys it rotates, and publishes the public halves
as a JSON Web Key Set at a URL. ``JwksVerifier`` fetches that set, keeps it,
and checks a token as Kafka's broker-side OAUTHBEARER validator does:

- the signature, with the key named by the token's ``kid`` header, by an
  asymmetric algorithm only (``ASYMMETRIC``: RS*, PS*, ES*); ``none`` and
  every HS* are refused before any key is looked at, so a public key can
  never serve as an HMAC secret; a key's own ``alg`` (when the set names
  one) and type must match the token's algorithm;
- ``exp`` (required), ``nbf`` and ``iat`` with ``clock_skew_s`` of leeway;
- ``aud`` holding one of ``audience`` (when given), ``iss`` equal to
  ``issuer`` (when given);
- the principal: the ``sub_claim`` claim (a non-empty string), with the
  token's ``exp`` as its expiry;
- the scopes: the ``scope_claim`` claim (Kafka's
  ``sasl.oauthbearer.scope.claim.name``), a space-delimited string (RFC 6749
  3.3, RFC 9068) or a list of strings, kept on the principal; absent: none.
  A malformed one refuses the token, as Kafka's ``BrokerJwtValidator`` does.
  Kafka checks no scope itself; with ``required_scopes`` (a Folio addition)
  a token lacking any of them is refused, naming the missing ones.

The set is fetched when first needed and again once ``refresh_ms`` old (at
most one fetch at a time: while one is under way, checks use the keys held,
or wait for it when none are held or their ``kid`` is new). A token
whose ``kid`` is not in the set makes one more fetch, at most one per
``MISSING_KID_REFETCH_S``, so rotated keys are found at once while made-up
key ids cannot make the broker hammer the provider. A fetch is bounded by
``FETCH_TIMEOUT_S``; a failed one keeps the keys already held (tokens of
known keys still pass) and is retried after a backoff growing from
``RETRY_BACKOFF_S`` to ``RETRY_BACKOFF_MAX_S`` (Kafka's
``sasl.oauthbearer.jwks.endpoint.retry.backoff[.max].ms``). A token that needs
keys the broker cannot get is refused with a message naming the endpoint
and why, never held.

Where the set is read from (``check_jwks_url``): ``https://`` anywhere,
``http://`` only on a loopback host (a local sidecar or a test: Kafka
insists on https), or ``file:`` (a path kept up to date by something else,
re-read on the same schedule). An https endpoint's certificate is checked
against the system's CAs, or only against ``ca_file`` when given (a private
CA's bundle; read again at each fetch, so a replaced bundle needs no restart).

Checking a token costs about 1 ms (PyJWT's parsing, then the signature), and
the gRPC port checks one per call: the principals of accepted tokens are
kept (at most ``tokens.CACHE_SIZE``, by the token's text) until the key set
is replaced by a fetch, and a kept one is still refused once its ``exp``
(plus the leeway) passes.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, Final

from ledger.security.tokens import CACHE_SIZE, Principal, TokenError, _jwt

__all__ = ["ASYMMETRIC", "JwksSettings", "JwksVerifier", "check_jwks_url"]

log = logging.getLogger(__name__)

#: The algorithms a JWKS key may verify: asymmetric only.
ASYMMETRIC: Final = frozenset({"RS256", "RS384", "RS512", "PS256", "PS384", "PS512",
                               "ES256", "ES384", "ES512"})
#: The longest a fetch of the set may take (seconds).
FETCH_TIMEOUT_S: Final = 5.0
#: The largest key set read (bytes).
MAX_JWKS_BYTES: Final = 1 << 20
#: An unknown ``kid`` refetches the set at most this often (seconds).
MISSING_KID_REFETCH_S: Final = 1.0
RETRY_BACKOFF_S: Final = 0.1
RETRY_BACKOFF_MAX_S: Final = 10.0
_LOOPBACK_NAMES: Final = frozenset({"localhost", "localhost.localdomain"})


def check_jwks_url(url: str) -> None:
    """Refuse a URL the set may not be read from (``ValueError`` saying why)."""
    parsed = urllib.parse.urlparse(url)
    if parsed.scheme == "file":
        if not parsed.path:
            raise ValueError(f"JWKS URL {url!r}: a file: URL needs a path (file:/etc/jwks.json)")
        return
    if parsed.scheme not in ("https", "http") or not parsed.hostname:
        raise ValueError(f"JWKS URL {url!r}: give an https:// URL (or file:/path)")
    if parsed.scheme == "http" and not _loopback(parsed.hostname):
        raise ValueError(f"JWKS URL {url!r}: plain http is accepted only on a loopback host "
                         "(keys read over plain text could be forged): use https://")


def _loopback(host: str) -> bool:
    if host.lower() in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class JwksSettings:
    """What a JWKS verifier checks (see the module docstring).

    Attributes:
        url: where the key set is read (``check_jwks_url``).
        audience: accepted ``aud`` values; empty: ``aud`` is not checked.
        issuer: the required ``iss``; empty: not checked.
        sub_claim: the claim naming the principal.
        clock_skew_s: leeway on ``exp``, ``nbf`` and ``iat``.
        refresh_ms: the set is fetched again once this old.
        scope_claim: the claim holding the token's scopes.
        required_scopes: scopes every token must have; empty: none checked.
        ca_file: PEM CA bundle the https endpoint's certificate must chain to;
            empty: the system's CAs.
    """

    url: str
    audience: tuple[str, ...] = ()
    issuer: str = ""
    sub_claim: str = "sub"
    clock_skew_s: int = 30
    refresh_ms: int = 3_600_000
    scope_claim: str = "scope"
    required_scopes: tuple[str, ...] = ()
    ca_file: str = ""

    def __post_init__(self) -> None:
        check_jwks_url(self.url)
        if not self.sub_claim:
            raise ValueError("the subject claim name must not be empty")
        if not self.scope_claim:
            raise ValueError("the scope claim name must not be empty")
        if any(not scope or scope.split() != [scope] for scope in self.required_scopes):
            raise ValueError(f"a required scope must be a non-empty word without spaces, got "
                             f"{list(self.required_scopes)}")
        if self.ca_file and urllib.parse.urlparse(self.url).scheme != "https":
            raise ValueError(f"a CA file for the JWKS endpoint's TLS needs an https:// URL, "
                             f"not {self.url!r}")
        if self.clock_skew_s < 0 or self.refresh_ms <= 0:
            raise ValueError("the clock skew must be >= 0 and the JWKS refresh interval > 0")


def _read(url: str, ca_file: str = "") -> bytes:
    """The set's bytes (blocking: run in a thread). ``OSError`` or ``ValueError`` on failure.

    ``ca_file``: the only CAs an https endpoint's certificate may chain to.
    """
    parsed = urllib.parse.urlparse(url)
    if parsed.scheme == "file":
        with open(urllib.request.url2pathname(parsed.path), "rb") as file:
            return file.read(MAX_JWKS_BYTES + 1)
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    opener = _OPENER if not ca_file else urllib.request.build_opener(
        _CheckedRedirects, urllib.request.HTTPSHandler(context=ca_context(ca_file)))
    with opener.open(request, timeout=FETCH_TIMEOUT_S) as answer:
        data: bytes = answer.read(MAX_JWKS_BYTES + 1)
        return data


def ca_context(ca_file: str) -> ssl.SSLContext:
    """A client context trusting only the CAs in ``ca_file``.

    Raises ``OSError`` (``ssl.SSLError`` among them) naming the file when it
    cannot be read or holds no PEM certificate.
    """
    try:
        return ssl.create_default_context(cafile=ca_file)
    except ssl.SSLError as error:
        raise ssl.SSLError(f"the JWKS CA file {ca_file} holds no PEM CA certificate "
                           f"({error.reason or error})") from None
    except OSError as error:
        raise OSError(f"cannot read the JWKS CA file {ca_file}: "
                      f"{error.strerror or error}") from None


class _CheckedRedirects(urllib.request.HTTPRedirectHandler):
    """Follows a redirect only to a URL the set may be read from (no https -> remote http)."""

    def redirect_request(self, req: urllib.request.Request, fp: Any, code: int, msg: str,
                         headers: Any, newurl: str) -> urllib.request.Request | None:
        try:
            check_jwks_url(newurl)
            if urllib.parse.urlparse(newurl).scheme == "file":
                raise ValueError("a file: URL")
        except ValueError as error:
            fp.close()  # (urllib closes it only when it follows the redirect)
            raise ValueError(f"redirected to a refused URL: {error}") from None
        return super().redirect_request(req, fp, code, msg, headers, newurl)


_OPENER: Final = urllib.request.build_opener(_CheckedRedirects)


def parse_jwks(data: bytes) -> dict[str, dict[str, Any]]:
    """Key id -> JWK of the signing keys (RSA, EC) in a set's bytes. ``ValueError`` if none."""
    if len(data) > MAX_JWKS_BYTES:
        raise ValueError(f"the key set is larger than {MAX_JWKS_BYTES} bytes")
    try:
        document = json.loads(data)
    except (ValueError, UnicodeDecodeError) as error:
        raise ValueError(f"not JSON ({error})") from None
    keys = document.get("keys") if isinstance(document, dict) else None
    if not isinstance(keys, list):
        raise ValueError("not a JWK set (no 'keys' list)")
    found: dict[str, dict[str, Any]] = {}
    for key in keys:
        if not isinstance(key, dict) or key.get("kty") not in ("RSA", "EC"):
            continue  # symmetric (oct) and unknown kinds are never used
        if key.get("use", "sig") != "sig" or key.get("alg", "RS256") not in ASYMMETRIC:
            continue
        found[str(key.get("kid", ""))] = key
    if not found:
        raise ValueError("the set holds no RSA or EC signing key")
    return found


class JwksVerifier:
    """Checks external JWTs against a provider's key set (see the module docstring).

    Args:
        settings: the URL and the claims' rules.
        clock: seconds since the epoch (``exp``; injectable for tests).
        monotonic: for the refresh and refetch timing (injectable for tests).
        read: reads the set's bytes, blocking (injectable for fault tests);
            default: over https with ``settings.ca_file``'s CAs, or a file.

    Raises ``ValueError`` when ``settings.ca_file`` cannot be read (checked
    here, so a broker does not start with a CA file it could never use).
    """

    def __init__(self, settings: JwksSettings, *, clock: Callable[[], float] = time.time,
                 monotonic: Callable[[], float] = time.monotonic,
                 read: Callable[[str], bytes] | None = None) -> None:
        if settings.ca_file:
            try:
                ca_context(settings.ca_file)
            except OSError as error:
                raise ValueError(str(error)) from None
        self.settings = settings
        self._clock = clock
        self._monotonic = monotonic
        self._read = read if read is not None else partial(_read, ca_file=settings.ca_file)
        self._jwt = _jwt()
        self._keys: dict[str, dict[str, Any]] = {}
        self._built: dict[tuple[int, str], Any] = {}  # (id of a held JWK, algorithm) -> key
        self._fetched_at: float | None = None  # monotonic time of the last good fetch
        self._tried_at: float | None = None  # ... of the last attempt, good or not
        self._backoff_s = 0.0
        self._last_error = ""
        self._lock = asyncio.Lock()
        self._accepted: dict[str, Principal] = {}  # token -> principal, for the set held
        self.fetches = 0  # attempts made (for tests and logs)

    async def verify(self, token: str) -> Principal:
        """The principal ``token`` proves. ``TokenError`` (never quoting the token) if not."""
        if token in self._accepted:
            await self._refresh(stale_only=True)  # a new set forgets the accepted tokens
            kept = self._accepted.get(token)
            if kept is not None:
                assert kept.expires_at is not None  # ``exp`` is required
                if self._clock() > kept.expires_at + self.settings.clock_skew_s:
                    del self._accepted[token]
                    raise TokenError("the token has expired")
                return kept
        principal = await self._verify(token)
        if len(self._accepted) >= CACHE_SIZE:
            self._accepted.clear()
        self._accepted[token] = principal
        return principal

    async def _verify(self, token: str) -> Principal:
        jwt = self._jwt
        try:
            header = jwt.get_unverified_header(token)
        except jwt.InvalidTokenError as error:
            raise TokenError(f"the token is not a valid JWT ({type(error).__name__})") from None
        algorithm = header.get("alg")
        if algorithm not in ASYMMETRIC:
            raise TokenError(f"the token's algorithm {str(algorithm)[:16]!r} is not accepted "
                             f"(only asymmetric ones: {', '.join(sorted(ASYMMETRIC))})")
        kid = header.get("kid", "")
        key = await self._key(str(kid) if kid is not None else "", algorithm)
        return self._check(token, key, algorithm)

    async def _key(self, kid: str, algorithm: str) -> Any:
        """The public key for ``kid``, fetching the set when stale or when ``kid`` is new."""
        await self._refresh(stale_only=True)
        jwk = self._pick(kid)
        if jwk is None and self._may_refetch():
            await self._refresh(stale_only=False)
            jwk = self._pick(kid)
        if jwk is None:
            shown = kid[:64] if kid else "(none)"
            why = f"; the last fetch failed: {self._last_error}" if self._last_error else ""
            held = "no keys" if not self._keys else f"{len(self._keys)} key(s)"
            raise TokenError(f"the token's key id {shown!r} is not in the JWKS of "
                             f"{self.settings.url} ({held} held{why})")
        if jwk.get("alg", algorithm) != algorithm or \
                jwk["kty"] != ("EC" if algorithm.startswith("ES") else "RSA"):
            named = f"{jwk['kty']} {jwk.get('alg', '')}".strip()
            raise TokenError(f"the token's algorithm {algorithm} does not match its key "
                             f"({named})")
        # Building a key from its JWK costs about 1 ms: kept per key and algorithm
        # until the set is replaced (``id(jwk)`` is a dict of the set held now).
        built = self._built.get((id(jwk), algorithm))
        if built is not None:
            return built
        try:
            built = self._jwt.PyJWK(jwk, algorithm).key
        except self._jwt.PyJWKError as error:
            raise TokenError(f"the JWKS key for the token is unusable ({error})") from None
        self._built[(id(jwk), algorithm)] = built
        return built

    def _pick(self, kid: str) -> dict[str, Any] | None:
        if kid:
            return self._keys.get(kid)
        # No kid: only a set of one key says which key is meant (as jose4j does).
        return next(iter(self._keys.values())) if len(self._keys) == 1 else None

    def _may_refetch(self) -> bool:
        return self._tried_at is None or \
            self._monotonic() - self._tried_at >= max(MISSING_KID_REFETCH_S, self._backoff_s)

    async def _refresh(self, *, stale_only: bool) -> None:
        """Fetch the set if it is stale (or, ``stale_only`` False, anyway); one fetch at a time."""
        if stale_only and self._keys and self._lock.locked():
            return  # a fetch is under way: the held keys serve meanwhile, nobody waits
        async with self._lock:
            now = self._monotonic()
            if stale_only:
                fresh = (self._fetched_at is not None and
                         now - self._fetched_at < self.settings.refresh_ms / 1000)
                backing_off = (self._tried_at is not None and
                               now - self._tried_at < self._backoff_s)
                if fresh or backing_off:
                    return
            elif not self._may_refetch():
                return  # another check refetched meanwhile
            self._tried_at = now
            self.fetches += 1
            try:
                # A blocking read in a thread, bounded by its own timeout and by
                # this wait (a hung file system cannot hold a SASL exchange).
                data = await asyncio.wait_for(asyncio.to_thread(self._read, self.settings.url),
                                              FETCH_TIMEOUT_S + 1)
                keys = parse_jwks(data)
            except (OSError, ValueError, TimeoutError, urllib.error.URLError) as error:
                self._failed(error)
                return
            self._keys, self._fetched_at = keys, self._monotonic()
            self._built, self._accepted = {}, {}
            self._backoff_s, self._last_error = 0.0, ""

    def _failed(self, error: BaseException) -> None:
        """Keep the keys held; back off before the next attempt."""
        text = str(error) or type(error).__name__
        if isinstance(error, TimeoutError):
            text = f"timed out after {FETCH_TIMEOUT_S:g} s"
        self._last_error = text[:200]
        self._backoff_s = min(max(self._backoff_s * 2, RETRY_BACKOFF_S), RETRY_BACKOFF_MAX_S)
        log.warning("cannot fetch the JWKS of %s (%s); keeping the %d key(s) held",
                    self.settings.url, self._last_error, len(self._keys))

    def _check(self, token: str, key: Any, algorithm: str) -> Principal:
        """Signature and claims (``exp`` against the injectable clock)."""
        jwt, settings = self._jwt, self.settings
        try:
            claims = jwt.decode(
                token, key, algorithms=[algorithm], leeway=settings.clock_skew_s,
                audience=list(settings.audience) or None, issuer=settings.issuer or None,
                options={"require": ["exp"], "verify_exp": False,
                         "verify_aud": bool(settings.audience)})
        except jwt.InvalidSignatureError:
            raise TokenError("the token's signature does not verify with its JWKS key") from None
        except jwt.MissingRequiredClaimError as error:
            raise TokenError(f"the token has no {error.claim!r} claim") from None
        except jwt.InvalidAudienceError:
            raise TokenError(f"the token's audience is not one of "
                             f"{', '.join(settings.audience)}") from None
        except jwt.InvalidIssuerError:
            raise TokenError(f"the token's issuer is not {settings.issuer}") from None
        except jwt.ImmatureSignatureError:
            raise TokenError("the token is not valid yet (nbf or iat in the future)") from None
        except jwt.InvalidTokenError as error:
            raise TokenError(f"the token is not a valid JWT ({type(error).__name__})") from None
        expires = claims.get("exp")
        if not isinstance(expires, int | float):
            raise TokenError("the token's 'exp' claim is not a number")
        if self._clock() > expires + settings.clock_skew_s:
            raise TokenError("the token has expired")
        role = claims.get(settings.sub_claim)
        if not isinstance(role, str) or not role:
            raise TokenError(f"the token's {settings.sub_claim!r} claim (the principal) must "
                             "be a non-empty string")
        scopes = _scopes(claims.get(settings.scope_claim), settings.scope_claim)
        missing = [scope for scope in settings.required_scopes if scope not in scopes]
        if missing:
            held = " ".join(sorted(scopes))[:200] or "none"
            raise TokenError(f"the token lacks the required scope(s) {' '.join(missing)} "
                             f"(its {settings.scope_claim!r} claim holds: {held})")
        return Principal(role, float(expires), scopes=scopes)


def _scopes(value: object, claim: str) -> frozenset[str]:
    """The scopes of a scope claim: a space-delimited string or a list of strings (None: none)."""
    if value is None:
        return frozenset()
    if isinstance(value, str):
        return frozenset(value.split())
    if isinstance(value, list) and all(isinstance(item, str) and item.strip()
                                       for item in value):
        return frozenset(item.strip() for item in value)
    raise TokenError(f"the token's {claim!r} claim (its scopes) must be a space-delimited "
                     "string or a list of non-empty strings")
