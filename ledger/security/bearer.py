"""The bearer tokens a broker accepts: Folio's JWTs, an identity provider's, or both.

One ``BearerTokens`` serves a broker's two ports: the gRPC interceptor
(``ledger.security.interceptor``) and the Kafka listener's OAUTHBEARER and
PLAIN hold the same object (``broker.app.broker_parts.AclsPart.tokens``), so
the provider's key set is fetched and kept once. A bookie's interceptor
wraps its ``TokenVerifier`` in one of its own.

Kafka gives a listener one OAUTHBEARER validator; Folio's may hold two, and
picks one per token by its header, never by trying both:

- a token with a ``kid`` (key id) header goes to the external provider's
  key set (``ledger.security.jwks.JwksVerifier``, ``--kafka-oauth-jwks-url``):
  every OIDC provider names its signing key, so rotation works;
- a token without one goes to Folio's key (``--auth-token-secret-file`` or
  ``--auth-token-public-key-file``, ``TokenVerifier``):
  ``folio token create`` writes no ``kid``.

With only one of them configured, every token goes to it (a JWKS of a single
key also verifies a token without ``kid``). Either way the principal is a
role (Folio's ``sub``; the provider's ``--kafka-oauth-sub-claim``), and the
grants and super-users apply to it alike: an operator who trusts a provider
trusts it to name roles, ``admin`` included.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from ledger.security.jwks import JwksVerifier
from ledger.security.tokens import Principal, TokenError, TokenVerifier

__all__ = ["BearerTokens"]


class BearerTokens:
    """Checks a bearer token with Folio's key or the provider's key set (module docstring).

    Args:
        folio: Folio's token verifier, None without a token key.
        external: the provider's key set, None without ``--kafka-oauth-jwks-url``.
    """

    def __init__(self, folio: TokenVerifier | None, external: JwksVerifier | None) -> None:
        if folio is None and external is None:
            raise ValueError("a token check needs Folio's key or a JWKS URL")
        self.folio = folio
        self.external = external

    async def verify(self, token: str) -> Principal:
        """The principal ``token`` proves; ``TokenError`` if it does not."""
        if self.external is not None and (self.folio is None or _names_a_key(token)):
            return await self.external.verify(token)
        if self.folio is None:  # (unreachable: one of them is set)
            raise TokenError("no token key configured")
        return self.folio.verify(token)


def _names_a_key(token: str) -> bool:
    """Whether the token's header has a ``kid`` (an unreadable header: no).

    Only the route: the verifier chosen parses the token strictly (PyJWT's
    parse of a header costs about 0.3 ms, this one a few microseconds).
    """
    segment = token.split(".", 1)[0]
    try:
        header: Any = json.loads(base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4)))
    except (ValueError, binascii.Error):
        return False
    return isinstance(header, dict) and "kid" in header

