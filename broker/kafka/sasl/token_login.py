"""Which credential one SCRAM exchange checks: a SCRAM user's, or a delegation token's.

Kafka's clients ask for a delegation token with the SCRAM extension
``tokenauth=true`` in the client-first message (KIP-48); the user name is
then the token id, the password the token's HMAC in base64, and the
connection authenticates as the token's owner (``TokenPrincipal``).

librdkafka, kafka-python and kafkajs cannot send that extension, so a user
name that is no SCRAM user but names a delegation token is taken as that
token too (a Folio addition): a SCRAM user of the same name always wins, so
a token never stands in for a user. Token ids are random, so the two meet
only if someone names a user after a token.

A token past its expiry is refused once its proof is checked (so only who
holds the HMAC learns it expired): ``principal`` returns None and the
exchange refuses with ``expired_token``. The expiry is the one read when the
exchange started.
"""

from __future__ import annotations

from broker.kafka.sasl.credentials import ScramCredentialStore
from broker.kafka.sasl.delegation import DelegationToken, DelegationTokens, principal_of
from broker.kafka.sasl.scram import ScramCredential
from ledger.security.tokens import Principal

__all__ = ["ScramLookup"]


class ScramLookup:
    """One exchange's credential and principal (see the module docstring).

    Args:
        credentials: the SCRAM users.
        tokens: the delegation tokens (None: not served, ``tokenauth`` finds nothing).
    """

    def __init__(self, credentials: ScramCredentialStore,
                 tokens: DelegationTokens | None) -> None:
        self._credentials = credentials
        self._tokens = tokens
        self.token: DelegationToken | None = None

    async def credential(self, user: str, mechanism: str,
                         extensions: dict[str, str]) -> ScramCredential | None:
        """The credential the client must prove it knows; None: no such user or token."""
        if extensions.get("tokenauth", "").lower() != "true":
            credential = await self._credentials.lookup(user, mechanism)
            if credential is not None or self._tokens is None:
                return credential
        if self._tokens is None:
            return None
        self.token = await self._tokens.store.get(user)
        if self.token is None:
            return None
        return self._tokens.credential(self.token.token_id, mechanism)

    def principal(self, user: str) -> Principal | None:
        """Who the exchange authenticated (its proof checked); None: the token has expired."""
        if self.token is None:
            return Principal(user)
        assert self._tokens is not None  # a token is found only with them
        if self.token.expired(self._tokens.now_ms()):
            return None
        return principal_of(self.token)
