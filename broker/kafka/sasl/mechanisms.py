"""The SASL mechanisms: one exchange per mechanism, and the ``Authenticator`` that starts them.

An exchange takes the client's SaslAuthenticate bytes one message at a time
and answers the server's bytes; once it has authenticated, ``principal`` is
set. A refusal raises ``SaslRefusedError`` with a reason (the metric's
label) and a message (what the client is told; it never quotes a token, a
proof or a key).

- ``PLAIN`` (RFC 4616): ``authzid NUL user NUL password``, the password a
  Folio JWT (as KoP does); the user name, unless empty, must be the token's
  role, so a client's configured name cannot claim another role.
- ``OAUTHBEARER`` (RFC 7628): ``n,,^Aauth=Bearer <jwt>^A^A``; the JWT's
  ``sub`` is the role.
- ``SCRAM-SHA-256`` / ``SCRAM-SHA-512``: two round trips
  (``broker.kafka.sasl.scram``) against the credential read from the store,
  or a delegation token's (``broker.kafka.sasl.token_login``).
- ``GSSAPI`` (Kerberos V5, RFC 4752): ``broker.kafka.sasl.kerberos``, with
  the broker's keytab; the principal maps to the role by Kafka's
  principal-to-local rules.

Both token mechanisms verify with the process's ``BearerTokens``
(``ledger.security.bearer``), the very object the gRPC port's interceptor
holds: Folio's ``TokenVerifier`` (the same keys, the same ``exp`` rule and
leeway) and, with ``--kafka-oauth-jwks-url``, an identity provider's key set
(KIP-768; its scopes on the principal, required ones checked); the principal
keeps the token's expiry, which becomes the session lifetime (KIP-368).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from broker.kafka.sasl.credentials import ScramCredentialStore
from broker.kafka.sasl.delegation import DelegationTokens
from broker.kafka.sasl.scram import SCRAM_HASHES, ScramError, ScramServer
from broker.kafka.sasl.token_login import ScramLookup
from ledger.security.bearer import BearerTokens
from ledger.security.tokens import Principal, TokenError

if TYPE_CHECKING:
    from broker.kafka.sasl.kerberos import KerberosAcceptor

__all__ = ["Authenticator", "Exchange", "SaslRefusedError"]


class SaslRefusedError(Exception):
    """Authentication refused: ``reason`` labels the metric, the message goes to the client."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class Exchange(Protocol):
    """One mechanism's exchange on one connection."""

    principal: Principal | None

    async def step(self, message: bytes) -> bytes:
        """The answer to the client's next message (``SaslRefusedError`` when refused)."""
        ...


async def _verify(verifier: BearerTokens, token: str) -> Principal:
    try:
        return await verifier.verify(token)
    except TokenError as error:
        reason = "expired_token" if "expired" in str(error) else "bad_token"
        raise SaslRefusedError(reason, f"authentication failed: {error}") from None


class _Plain:
    def __init__(self, verifier: BearerTokens) -> None:
        self._verifier = verifier
        self.principal: Principal | None = None

    async def step(self, message: bytes) -> bytes:
        parts = message.split(b"\x00")
        if len(parts) != 3 or self.principal is not None:
            raise SaslRefusedError("bad_message", "PLAIN: expected authzid NUL user NUL password")
        authzid, user, password = (part.decode("utf-8", "replace") for part in parts)
        principal = await _verify(self._verifier, password)
        for name in (authzid, user):
            if name and name != principal.role:
                raise SaslRefusedError(
                    "bad_credentials", "authentication failed: PLAIN's user name must be the "
                    "token's role (its 'sub' claim) or empty")
        self.principal = principal
        return b""


class _OAuthBearer:
    def __init__(self, verifier: BearerTokens) -> None:
        self._verifier = verifier
        self.principal: Principal | None = None

    async def step(self, message: bytes) -> bytes:
        text = message.decode("utf-8", "replace")
        header, sep, rest = text.partition("\x01")
        if not sep or not header.startswith(("n,", "y,")) or self.principal is not None:
            raise SaslRefusedError("bad_message",
                                   "OAUTHBEARER: expected 'n,,\\x01auth=Bearer <token>\\x01\\x01'")
        token = None
        for pair in rest.split("\x01"):
            key, _, value = pair.partition("=")
            if key == "auth":
                scheme, _, token = value.strip().partition(" ")
                if scheme.lower() != "bearer":
                    token = None
        if not token:
            raise SaslRefusedError("bad_message", "OAUTHBEARER: no 'auth=Bearer <token>'")
        principal = await _verify(self._verifier, token.strip())
        authzid = header.split(",")[1] if header.count(",") >= 1 else ""
        if authzid.startswith("a=") and authzid[2:] != principal.role:
            raise SaslRefusedError("bad_credentials", "authentication failed: the "
                                   "authorization id must be the token's role")
        self.principal = principal
        return b""


class _Scram:
    def __init__(self, mechanism: str, credentials: ScramCredentialStore,
                 tokens: DelegationTokens | None) -> None:
        self._server = ScramServer(mechanism)
        self._lookup = ScramLookup(credentials, tokens)
        self._round = 0
        self.principal: Principal | None = None

    async def step(self, message: bytes) -> bytes:
        self._round += 1
        try:
            if self._round == 1:
                user = self._server.first(message)
                credential = await self._lookup.credential(user, self._server.mechanism,
                                                           self._server.extensions)
                return self._server.use(credential)
            if self._round == 2:
                answer = self._server.final(message)
                self.principal = self._lookup.principal(self._server.user)
                if self.principal is None:
                    raise SaslRefusedError("expired_token", "authentication failed: the "
                                           "delegation token has expired")
                return answer
        except ScramError as error:
            reason = ("bad_credentials" if str(error) == "authentication failed"
                      else "bad_message")
            raise SaslRefusedError(reason, f"authentication failed ({self._server.mechanism}"
                                   f"): {error}") from None
        except UnicodeDecodeError:
            raise SaslRefusedError("bad_message", "SCRAM messages must be UTF-8") from None
        raise SaslRefusedError("bad_message", "SCRAM: the exchange is already complete")


class Authenticator:
    """Starts exchanges for the mechanisms a listener serves.

    Args:
        mechanisms: the mechanisms served, in the order SaslHandshake lists them.
        verifier: checks JWTs (None: OAUTHBEARER and PLAIN are not served).
        credentials: the SCRAM credentials.
        tokens: the delegation tokens SCRAM also accepts (None: none).
        kerberos: the broker's Kerberos keys and rules (None: GSSAPI is not served).
    """

    def __init__(self, mechanisms: tuple[str, ...], verifier: BearerTokens | None,
                 credentials: ScramCredentialStore,
                 tokens: DelegationTokens | None = None,
                 kerberos: KerberosAcceptor | None = None) -> None:
        self.mechanisms = mechanisms
        self._verifier = verifier
        self.credentials = credentials
        self.tokens = tokens
        self._kerberos = kerberos

    def start(self, mechanism: str) -> Exchange | None:
        """A new exchange of ``mechanism``, None if it is not served."""
        if mechanism not in self.mechanisms:
            return None
        if mechanism in SCRAM_HASHES:
            return _Scram(mechanism, self.credentials, self.tokens)
        if mechanism == "GSSAPI":
            return None if self._kerberos is None else self._kerberos.start()
        if self._verifier is None:
            return None
        if mechanism == "PLAIN":
            return _Plain(self._verifier)
        if mechanism == "OAUTHBEARER":
            return _OAuthBearer(self._verifier)
        return None
