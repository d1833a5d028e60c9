"""CreateDelegationToken (38, v1-v3), Renew (39, v1-v2), Expire (40, v1-v2), Describe (41, v1-v3).

Kafka's delegation tokens (KIP-48) on the tokens of the metadata store
(``broker.kafka.sasl.delegation``), with Kafka's rules (``KafkaApis`` and
``DelegationTokenManager``):

- Every request needs a connection authenticated by something else than a
  token: no principal (a PLAINTEXT listener, SSL without client
  certificates) or a token-authenticated one answers
  DELEGATION_TOKEN_REQUEST_NOT_ALLOWED.
- Without a delegation token secret the broker answers
  DELEGATION_TOKEN_AUTH_DISABLED (Kafka without ``delegation.token.secret.key``).
- Create: the owner is the requester unless v3 names another
  (``owner_principal_name``), which needs Kafka's CREATE_TOKENS on that user:
  here a super-user (Folio grants hold no USER resources), else
  DELEGATION_TOKEN_AUTHORIZATION_FAILED. Owner and renewers must be of type
  ``User`` (INVALID_PRINCIPAL_TYPE). ``max_lifetime_ms`` <= 0 or above the
  broker's maximum takes the maximum; the expiry is the expiry time after
  issue, at most the maximum.
- Renew and Expire name the token by its HMAC: none matches
  DELEGATION_TOKEN_NOT_FOUND; a caller neither its owner nor a renewer
  DELEGATION_TOKEN_OWNER_MISMATCH; a token past its expiry
  DELEGATION_TOKEN_EXPIRED (Kafka checks only the maximum and leaves a token
  past its expiry renewable until its sweep; here it is dead at once, as it
  no longer authenticates). Renew sets the expiry to now + the period (< 0:
  the broker's expiry time), at most the maximum; Expire with a period < 0
  deletes the token now, else sets the expiry to now + the period.
- Describe lists the tokens of the named owners (null: all), each only to
  its owner, its renewers and super-users (Kafka's DESCRIBE on the token or
  DESCRIBE_TOKENS on its owner), HMAC included, as Kafka does.

The store unreachable answers REQUEST_TIMED_OUT (retriable): a creation may
have been stored (the client never learns it; it dies at its expiry), a
renewal or expiry may have applied (a retry sets it again from its own now).
"""

from __future__ import annotations

import datetime
from dataclasses import replace
from typing import Any, Final

from kio.schema.errors import ErrorCode

from broker.kafka.access import CLUSTER, allowed, role_of
from broker.kafka.context import KafkaContext
from broker.kafka.dispatch import Api, Call
from broker.kafka.messages import build, nested, response_class
from broker.kafka.sasl.delegation import DelegationToken, DelegationTokens, TokenPrincipal
from ledger.errors import LedgerError

__all__ = ["CREATE_KEY", "DESCRIBE_KEY", "EXPIRE_KEY", "RENEW_KEY", "ROWS"]

CREATE_KEY: Final = 38
RENEW_KEY: Final = 39
EXPIRE_KEY: Final = 40
DESCRIBE_KEY: Final = 41
USER: Final = "User"
_ZERO: Final = datetime.timedelta(0)
_NONE_MS: Final = -1


def _time(ms: int) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC)


def _refusal(context: KafkaContext, call: Call) -> tuple[ErrorCode, str] | None:
    """Why no token request is served on this connection, None if it is."""
    if call.principal is None:
        return (ErrorCode.delegation_token_request_not_allowed, "delegation token requests "
                "need an authenticated connection (SASL, or SSL with a client certificate)")
    if isinstance(call.principal, TokenPrincipal):
        return (ErrorCode.delegation_token_request_not_allowed, "a connection authenticated "
                "by a delegation token may not manage delegation tokens")
    if _tokens(context) is None:
        return (ErrorCode.delegation_token_auth_disabled, "delegation tokens are off: the "
                "broker has no --kafka-delegation-token-secret-file")
    return None


def _tokens(context: KafkaContext) -> DelegationTokens | None:
    return None if context.security is None else context.security.tokens


def _super_user(context: KafkaContext, call: Call) -> bool:
    """Kafka's CREATE_TOKENS / DESCRIBE_TOKENS on a user: the super-users' here."""
    role = role_of(call)
    if role is None:
        return False
    if context.authorizer is not None:
        return allowed(context, call, CLUSTER, "")
    return context.security is not None and role in context.security.super_users


async def handle_create(context: KafkaContext, call: Call) -> Any:
    """Make a token for the requester (or, for a super-user, the named owner)."""
    cls = response_class(CREATE_KEY, call.version)
    request = call.request
    requester = role_of(call) or ""
    owner_type = getattr(request, "owner_principal_type", None) or USER
    owner = getattr(request, "owner_principal_name", None) or requester

    def answer(code: ErrorCode, token: DelegationToken | None = None,
               hmac: bytes = b"") -> Any:
        return build(cls, error_code=code, principal_type=owner_type, principal_name=owner,
                     token_requester_principal_type=USER,
                     token_requester_principal_name=requester,
                     issue_timestamp=_time(token.issue_ms if token else _NONE_MS),
                     expiry_timestamp=_time(token.expiry_ms if token else _NONE_MS),
                     max_timestamp=_time(token.max_ms if token else _NONE_MS),
                     token_id=token.token_id if token else "", hmac=hmac, throttle_time=_ZERO)

    refused = _refusal(context, call)
    if refused is not None:
        return answer(refused[0])
    if owner != requester and not _super_user(context, call):
        return answer(ErrorCode.delegation_token_authorization_failed)
    if owner_type != USER or any(renewer.principal_type != USER
                                 for renewer in request.renewers):
        return answer(ErrorCode.invalid_principal_type)
    tokens = _tokens(context)
    assert tokens is not None  # _refusal checked it
    max_lifetime_ms = int(request.max_lifetime.total_seconds() * 1000)
    token = tokens.new_token(owner, requester,
                             tuple(renewer.principal_name for renewer in request.renewers),
                             max_lifetime_ms)
    try:
        await tokens.store.create(token)
    except LedgerError:
        # Unknown outcome: maybe stored; never answered, it dies at its expiry.
        return answer(ErrorCode.request_timed_out)
    return answer(ErrorCode.none, token, tokens.hmac(token.token_id))


async def _change(context: KafkaContext, call: Call, key: int, period_ms: int) -> Any:
    """Renew (``key`` 39) or expire (40) the token of the request's HMAC."""
    cls = response_class(key, call.version)

    def answer(code: ErrorCode, expiry_ms: int = _NONE_MS) -> Any:
        return build(cls, error_code=code, expiry_timestamp=_time(expiry_ms),
                     throttle_time=_ZERO)

    refused = _refusal(context, call)
    if refused is not None:
        return answer(refused[0])
    tokens = _tokens(context)
    assert tokens is not None
    role = role_of(call) or ""
    deleted: list[bool] = []

    def edit(token: DelegationToken) -> DelegationToken | None:
        now = tokens.now_ms()
        if not token.owner_or_renewer(role):
            raise _RefusedError(ErrorCode.delegation_token_owner_mismatch)
        if token.expired(now):
            raise _RefusedError(ErrorCode.delegation_token_expired)
        if key == EXPIRE_KEY and period_ms < 0:
            deleted.append(True)
            return None  # expire now: deleted
        period = tokens.expiry_time_ms if key == RENEW_KEY and period_ms < 0 else period_ms
        return replace(token, expiry_ms=min(token.max_ms, now + period))

    try:
        found = await tokens.by_hmac(call.request.hmac)
        if found is None:
            return answer(ErrorCode.delegation_token_not_found)
        changed = await tokens.store.change(found.token_id, edit)
    except _RefusedError as refusal:
        return answer(refusal.code)
    except LedgerError:
        return answer(ErrorCode.request_timed_out)  # maybe applied: the client retries
    if changed is None:
        if not deleted:  # gone between the lookup and the change (expired elsewhere)
            return answer(ErrorCode.delegation_token_not_found)
        return answer(ErrorCode.none, tokens.now_ms())
    return answer(ErrorCode.none, changed.expiry_ms)


class _RefusedError(Exception):
    """A renewal or expiry refused on the token as read (nothing written)."""

    def __init__(self, code: ErrorCode) -> None:
        super().__init__(code.name)
        self.code = code


async def handle_renew(context: KafkaContext, call: Call) -> Any:
    """Extend a token's expiry (owner or renewer), at most to its maximum."""
    return await _change(context, call, RENEW_KEY,
                         int(call.request.renew_period.total_seconds() * 1000))


async def handle_expire(context: KafkaContext, call: Call) -> Any:
    """Bring a token's expiry forward (owner or renewer); a period < 0 deletes it now."""
    return await _change(context, call, EXPIRE_KEY,
                         int(call.request.expiry_time_period.total_seconds() * 1000))


async def handle_describe(context: KafkaContext, call: Call) -> Any:
    """The live tokens of the named owners that the caller may see."""
    cls = response_class(DESCRIBE_KEY, call.version)
    token_cls = nested(cls, "DescribedDelegationToken")
    renewer_cls = nested(cls, "DescribedDelegationTokenRenewer")
    refused = _refusal(context, call)
    if refused is not None:
        return build(cls, error_code=refused[0], tokens=(), throttle_time=_ZERO)
    tokens = _tokens(context)
    assert tokens is not None
    role = role_of(call) or ""
    owners = call.request.owners
    named = None if owners is None else {owner.principal_name for owner in owners
                                         if owner.principal_type == USER}
    sees_all = _super_user(context, call)
    try:
        stored = await tokens.store.all()
    except LedgerError:
        return build(cls, error_code=ErrorCode.request_timed_out, tokens=(),
                     throttle_time=_ZERO)
    now = tokens.now_ms()
    out = []
    for token in stored:
        if token.expired(now):
            continue  # dead: the sweep removes it
        if named is not None and not any(token.owner_or_renewer(owner) for owner in named):
            continue
        if not (sees_all or token.owner_or_renewer(role)):
            continue
        out.append(build(
            token_cls, principal_type=USER, principal_name=token.owner,
            token_requester_principal_type=USER, token_requester_principal_name=token.requester,
            issue_timestamp=token.issue_ms, expiry_timestamp=token.expiry_ms,
            max_timestamp=token.max_ms, token_id=token.token_id,
            hmac=tokens.hmac(token.token_id),
            renewers=tuple(build(renewer_cls, principal_type=USER, principal_name=renewer)
                           for renewer in token.renewers)))
    return build(cls, error_code=ErrorCode.none, tokens=tuple(out), throttle_time=_ZERO)


ROWS = (
    Api(CREATE_KEY, "CreateDelegationToken", 1, 3, handle_create),
    Api(RENEW_KEY, "RenewDelegationToken", 1, 2, handle_renew),
    Api(EXPIRE_KEY, "ExpireDelegationToken", 1, 2, handle_expire),
    Api(DESCRIBE_KEY, "DescribeDelegationToken", 1, 3, handle_describe),
)
