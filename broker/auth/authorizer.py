"""Enforcing ``rpc_table``: each authenticated call's handler, wrapped with its row's check.

``Authorizer.wrap`` is what ``ledger.security.interceptor.AuthInterceptor``
calls once per call with the caller's principal. For a call with one request
(unary, or the Read stream) the wrapper checks the row against the request
before the servicer runs: PERMISSION_DENIED names the role, the missing
permission and the resource, never the token. For the Append stream it
records a per-flow check in a context variable that the Append servicer
reads (``setup_check``): each ``SetupAppend`` is checked (a refused flow is
answered ``AppendFailed(PERMISSION_DENIED)``; the stream and its other flows
go on), and no block is.

Super-users pass every check. The grants come from ``AclStore.table``, in
memory: no store is read on a call.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Collection
from contextvars import ContextVar
from typing import Any

import grpc
from google.protobuf.message import Message

from broker.auth.access import Access
from broker.auth.acl_store import AclStore
from broker.auth.permissions import ResourceKind
from broker.auth.rpc_table import Need, Rule, rule_for, topic_of
from broker.errors import PermissionDeniedError
from ledger.security.interceptor import refusing_handler
from ledger.security.tokens import Principal

__all__ = ["Authorizer", "SetupCheck", "setup_check"]

log = logging.getLogger(__name__)

#: Checks one SetupAppend's segment; raises ``PermissionDeniedError``.
SetupCheck = Callable[[str], None]

_SETUP_CHECK: ContextVar[SetupCheck | None] = ContextVar("folio_setup_check", default=None)

_Context = grpc.aio.ServicerContext[Any, Any]

#: Wrapped handlers remembered (methods x roles).
_MAX_WRAPPED = 4096


def setup_check() -> SetupCheck | None:
    """The running Append call's per-flow check; None when authorisation is off."""
    return _SETUP_CHECK.get()


class Authorizer:
    """Checks calls against the grants and the super-users.

    Args:
        acls: the grants (its ``table`` is read on each check).
        super_users: roles that may do everything.
    """

    def __init__(self, acls: AclStore, super_users: Collection[str] = ()) -> None:
        #: The transport-neutral check, which the Kafka front end asks too.
        self.access = Access(acls, super_users)
        # (method, role) -> (the handler wrapped, the wrapper): a wrapper depends
        # only on those, so calls after the first reuse it (bounded).
        self._wrapped: dict[tuple[str, str], tuple[Any, Any]] = {}

    def denial(self, role: str, rule: Rule, request: Any) -> str | None:
        """Why ``role`` may not make this call; None if it may."""
        if rule.need in (Need.AUTHENTICATED, Need.SUPER_USER):
            return self.access.denial(role, rule.need, ResourceKind.TOPIC, "")
        for kind, name in rule.resources(request):
            why = self.access.denial(role, rule.need, kind, name)
            if why is not None:
                return why
        return None

    def setup_check(self, role: str, rule: Rule) -> SetupCheck:
        """The per-flow check of an Append stream by ``role``."""
        def check(segment: str) -> None:
            why = self.access.denial(role, rule.need, ResourceKind.TOPIC, topic_of(segment))
            if why is not None:
                raise PermissionDeniedError(why)
        return check

    def wrap(self, method: str, principal: Principal, handler: Any) -> Any:
        """``handler`` with the check of ``method``'s row for ``principal``."""
        key = (method, principal.role)
        cached = self._wrapped.get(key)
        if cached is not None and cached[0] is handler:
            return cached[1]
        wrapped = self._wrap(method, principal.role, handler)
        if len(self._wrapped) >= _MAX_WRAPPED:
            self._wrapped.clear()
        self._wrapped[key] = (handler, wrapped)
        return wrapped

    def _wrap(self, method: str, role: str, handler: Any) -> Any:
        rule = rule_for(method)
        if rule.per_flow:
            return _per_flow(handler, self.setup_check(role, rule))
        if self.access.is_super_user(role) or rule.need is Need.AUTHENTICATED:
            return handler

        async def refuse_if_denied(request: Any, context: _Context) -> None:
            if not isinstance(request, Message):
                return  # undecodable: the servicer's registration answers INVALID_ARGUMENT
            why = self.denial(role, rule, request)
            if why is not None:
                log.info("refused %s: %s", method, why)
                await context.abort(grpc.StatusCode.PERMISSION_DENIED, why)

        if handler.request_streaming:  # no such public RPC but Append: fail closed
            return _refusing(handler, f"{method} is not in the permission table")
        if handler.response_streaming:
            inner_stream = handler.unary_stream

            async def checked_stream(request: Any, context: _Context) -> AsyncIterator[Any]:
                await refuse_if_denied(request, context)
                async for response in inner_stream(request, context):
                    yield response

            return grpc.unary_stream_rpc_method_handler(
                checked_stream, request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer)
        inner = handler.unary_unary

        async def checked(request: Any, context: _Context) -> Any:
            await refuse_if_denied(request, context)
            return await inner(request, context)

        return grpc.unary_unary_rpc_method_handler(
            checked, request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer)


def _per_flow(handler: Any, check: SetupCheck) -> Any:
    inner = handler.stream_stream

    async def with_check(requests: Any, context: _Context) -> AsyncIterator[Any]:
        # Set in the call's own task, so the servicer (and the tasks it
        # starts, which copy the context) sees this call's check.
        _SETUP_CHECK.set(check)
        async for response in inner(requests, context):
            yield response

    return grpc.stream_stream_rpc_method_handler(
        with_check, request_deserializer=handler.request_deserializer,
        response_serializer=handler.response_serializer)


def _refusing(handler: Any, message: str) -> Any:
    return refusing_handler(handler, grpc.StatusCode.PERMISSION_DENIED, message)
