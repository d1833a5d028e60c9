"""SaslHandshake (key 17, v1) and SaslAuthenticate (key 36, v0-v2): one connection's SASL state.

These two rows are answered by the connection's ``SaslSession`` (the state
of a handshake lives with the connection, not in the listener's context):
the rows' own handler refuses with ILLEGAL_SASL_STATE, which a listener
without SASL answers. SaslHandshake v0 (raw SASL frames after the
handshake) is not served: every current client (librdkafka, kafka-python,
the Java client) uses v1 and SaslAuthenticate.

Before authentication only ApiVersions, SaslHandshake and SaslAuthenticate
are served; anything else closes the connection (as Kafka's broker does).
A refused handshake or authentication is answered (UNSUPPORTED_SASL_MECHANISM
with the mechanisms served, or SASL_AUTHENTICATION_FAILED with the reason),
then the connection is closed.

**Session lifetime (KIP-368).** A token's session ends when the token
expires: SaslAuthenticate v1+ tells the client ``session_lifetime_ms``, and a
client that does not re-authenticate in time (a new SaslHandshake and
SaslAuthenticate on the same connection, for the same role) has its
connection closed when the lifetime passes. SCRAM and client-certificate
sessions last as long as the connection.
"""

from __future__ import annotations

import datetime
import time
from typing import Any

from kio.schema.errors import ErrorCode

from broker.kafka.context import KafkaContext
from broker.kafka.dispatch import Api, Call
from broker.kafka.messages import build, response_class
from broker.kafka.sasl.mechanisms import Exchange, SaslRefusedError
from broker.kafka.sasl.security import KafkaSecurity
from ledger.security.tokens import Principal

__all__ = ["OPEN_KEYS", "ROWS", "SASL_AUTHENTICATE_KEY", "SASL_HANDSHAKE_KEY", "SaslSession"]

SASL_HANDSHAKE_KEY = 17
SASL_AUTHENTICATE_KEY = 36
#: What a connection may ask before it has authenticated.
OPEN_KEYS = frozenset({18, SASL_HANDSHAKE_KEY, SASL_AUTHENTICATE_KEY})


class SaslSession:
    """One connection's authentication: the exchange under way, the principal, its deadline.

    Attributes:
        principal: who the connection authenticated as (None: not yet).
        deadline: ``time.monotonic()`` after which the session has ended (None: never).
        close_after: the last answer refused: send it, then close the connection.
    """

    def __init__(self, security: KafkaSecurity, peer: str,
                 principal: Principal | None = None) -> None:
        self._security = security
        self._peer = peer
        self._exchange: Exchange | None = None
        self.principal = principal
        self.deadline: float | None = None
        self.close_after = False

    @property
    def authenticated(self) -> bool:
        """Whether the connection may make other requests now."""
        return self.principal is not None and not self.expired()

    def expired(self) -> bool:
        """Whether the session's lifetime has passed."""
        return self.deadline is not None and time.monotonic() >= self.deadline

    def refuse(self, reason: str, detail: str) -> None:
        """Count and log a refusal; the connection closes after its answer."""
        self.close_after = True
        self._security.refusals.refused(reason, self._peer, detail)

    async def answer(self, call: Call) -> Any:
        """The answer to a SaslHandshake or SaslAuthenticate request."""
        if call.api_key == SASL_HANDSHAKE_KEY:
            return self._handshake(call)
        return await self._authenticate(call)

    def _handshake(self, call: Call) -> Any:
        cls = response_class(SASL_HANDSHAKE_KEY, call.version)
        authenticator = self._security.authenticator
        served = () if authenticator is None else authenticator.mechanisms
        mechanism = call.request.mechanism
        exchange = None if authenticator is None else authenticator.start(mechanism)
        if exchange is None:
            self.refuse("unsupported_mechanism", f"mechanism {mechanism!r} is not served")
            return build(cls, error_code=ErrorCode.unsupported_sasl_mechanism,
                         mechanisms=tuple(served))
        self._exchange = exchange
        return build(cls, error_code=ErrorCode.none, mechanisms=tuple(served))

    async def _authenticate(self, call: Call) -> Any:
        cls = response_class(SASL_AUTHENTICATE_KEY, call.version)
        exchange = self._exchange
        if exchange is None:
            self.refuse("bad_message", "SaslAuthenticate before SaslHandshake")
            return build(cls, error_code=ErrorCode.illegal_sasl_state,
                         error_message="SaslAuthenticate before SaslHandshake", auth_bytes=b"",
                         session_lifetime=datetime.timedelta(0))
        try:
            answer = await exchange.step(call.request.auth_bytes)
            lifetime_ms = 0
            if exchange.principal is not None:
                lifetime_ms = self._authenticated(exchange.principal)
        except SaslRefusedError as error:
            self._exchange = None
            self.refuse(error.reason, str(error))
            return build(cls, error_code=ErrorCode.sasl_authentication_failed,
                         error_message=str(error), auth_bytes=b"",
                         session_lifetime=datetime.timedelta(0))
        return build(cls, error_code=ErrorCode.none, error_message=None, auth_bytes=answer,
                     session_lifetime=datetime.timedelta(milliseconds=lifetime_ms))

    def _authenticated(self, principal: Principal) -> int:
        """Take ``principal``; its session lifetime in ms (0: no limit)."""
        self._exchange = None
        if self.principal is not None and principal.role != self.principal.role:
            raise SaslRefusedError("bad_credentials", "re-authentication may not change the "
                                   "role")
        lifetime_ms = 0
        deadline = None
        if principal.expires_at is not None:
            remaining_s = principal.expires_at - time.time()
            if remaining_s <= 0:
                raise SaslRefusedError("expired_token", "authentication failed: the token "
                                       "has expired")
            lifetime_ms = max(1, int(remaining_s * 1000))
            deadline = time.monotonic() + remaining_s
        self.principal = principal
        self.deadline = deadline
        return lifetime_ms


async def _no_session(_context: KafkaContext, call: Call) -> Any:
    """Reached only on a listener without SASL: the state is illegal there."""
    if call.api_key == SASL_HANDSHAKE_KEY:
        return build(response_class(SASL_HANDSHAKE_KEY, call.version),
                     error_code=ErrorCode.unsupported_sasl_mechanism, mechanisms=())
    return build(response_class(SASL_AUTHENTICATE_KEY, call.version),
                 error_code=ErrorCode.illegal_sasl_state,
                 error_message="this listener does not use SASL", auth_bytes=b"",
                 session_lifetime=datetime.timedelta(0))


ROWS = (
    Api(SASL_HANDSHAKE_KEY, "SaslHandshake", 1, 1, _no_session),
    Api(SASL_AUTHENTICATE_KEY, "SaslAuthenticate", 0, 2, _no_session),
)
