"""The server interceptor that authenticates each call once, before its handler runs.

``AuthInterceptor`` reads the ``authorization: Bearer <jwt>`` metadata of a
call (a unary call or a whole stream), verifies it (``tokens.TokenVerifier``,
or on the broker ``bearer.BearerTokens``: Folio's key and an identity
provider's JWKS, the same object the Kafka port's OAUTHBEARER checks with)
and either lets the call through or answers it itself:

- no token, or a malformed, forged, expired one, or a provider's token
  whose key is not in its JWKS (the message says why, e.g. that the last
  fetch of the set failed) or that lacks a required scope: UNAUTHENTICATED;
- a role not in ``allowed_roles`` (when given; the bookie's brokers): PERMISSION_DENIED.

Messages never quote the token or the key. Health checking and server
reflection stay open (``OPEN_SERVICES``), so load balancers and ``grpcurl
list`` work without a token; they reveal only which services exist and
whether they serve.

With ``authorize`` (the broker's ``broker.auth``), a passed call's handler is
handed over with the principal to be wrapped by per-RPC authorisation.
Nothing here runs per message of a stream.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Collection
from typing import TYPE_CHECKING, Any, Final, TypeAlias

import grpc

from ledger.security.bearer import BearerTokens
from ledger.security.tokens import Principal, TokenError, TokenVerifier

__all__ = ["OPEN_SERVICES", "AuthInterceptor", "Authorize", "bearer_token", "refusing_handler"]

log = logging.getLogger(__name__)

#: Services callable without a token: health checking and reflection.
OPEN_SERVICES: Final = frozenset({
    "grpc.health.v1.Health",
    "grpc.reflection.v1alpha.ServerReflection",
    "grpc.reflection.v1.ServerReflection",
})

if TYPE_CHECKING:
    Handler: TypeAlias = grpc.RpcMethodHandler[Any, Any]
else:  # not subscriptable at run time
    Handler = grpc.RpcMethodHandler
#: Wraps a passed call's handler with authorisation: (method, principal, handler) -> handler.
Authorize = Callable[[str, Principal, Handler], Handler]


def bearer_token(metadata: Any) -> str | None:
    """The token of an ``authorization: Bearer ...`` entry of ``metadata``, else None."""
    for key, value in metadata or ():
        if key == "authorization":
            text = value.decode("latin-1") if isinstance(value, bytes) else value
            scheme, _, token = text.strip().partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
            return ""
    return None


def refusing_handler(handler: Handler, code: grpc.StatusCode, message: str) -> Handler:
    """A handler of ``handler``'s kind that ends the call with ``code`` and ``message``."""

    async def refuse(_request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        await context.abort(code, message)

    async def refuse_stream(_request: Any,
                            context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        await context.abort(code, message)
        yield  # pragma: no cover - abort raises

    streaming = handler.response_streaming
    factory: Any
    if handler.request_streaming:
        factory = (grpc.stream_stream_rpc_method_handler if streaming
                   else grpc.stream_unary_rpc_method_handler)
    else:
        factory = (grpc.unary_stream_rpc_method_handler if streaming
                   else grpc.unary_unary_rpc_method_handler)
    return factory(refuse_stream if streaming else refuse,  # type: ignore[no-any-return]
                   request_deserializer=handler.request_deserializer,
                   response_serializer=handler.response_serializer)


class AuthInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[type-arg]
    """Authenticates every call but health and reflection; see the module docstring.

    Args:
        verifier: checks the tokens (a provider's token may wait for its key
            set's fetch, bounded by ``jwks.FETCH_TIMEOUT_S``).
        allowed_roles: only these roles may call (None: any authenticated role).
        authorize: wraps a passed call's handler (per-RPC permissions).
    """

    def __init__(self, verifier: TokenVerifier | BearerTokens, *,
                 allowed_roles: Collection[str] | None = None,
                 authorize: Authorize | None = None) -> None:
        self._verifier = (verifier if isinstance(verifier, BearerTokens)
                          else BearerTokens(verifier, None))
        self._allowed = None if allowed_roles is None else frozenset(allowed_roles)
        self._authorize = authorize

    async def intercept_service(
        self, continuation: Callable[[grpc.HandlerCallDetails], Awaitable[Handler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> Handler:
        method: str = handler_call_details.method
        service = method.split("/")[1] if method.count("/") >= 2 else ""
        handler = await continuation(handler_call_details)
        if handler is None or service in OPEN_SERVICES:
            return handler
        metadata = handler_call_details.invocation_metadata
        token = bearer_token(metadata)
        if not token:
            why = ("no token: send 'authorization: Bearer <token>' call metadata"
                   if token is None else "the authorization metadata is not 'Bearer <token>'")
            return refusing_handler(handler, grpc.StatusCode.UNAUTHENTICATED, why)
        try:
            principal = await self._verifier.verify(token)
        except TokenError as error:
            log.info("refused %s: %s", method, error)
            return refusing_handler(handler, grpc.StatusCode.UNAUTHENTICATED, str(error))
        if self._allowed is not None and principal.role not in self._allowed:
            role = principal.role if len(principal.role) <= 64 else principal.role[:64] + "..."
            log.warning("refused %s to role %r (not one of the allowed roles)", method, role)
            return refusing_handler(
                handler, grpc.StatusCode.PERMISSION_DENIED, f"role {role!r} may not call {service}")
        if self._authorize is not None:
            return self._authorize(method, principal, handler)
        return handler
