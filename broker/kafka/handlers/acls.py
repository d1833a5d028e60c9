"""DescribeAcls (29), CreateAcls (30), DeleteAcls (31), v1-v3: Folio's grants as Kafka ACLs.

The grants are the broker's ``AclStore``'s, the same ones ``folio acl``
manages and both ports enforce; ``broker.kafka.acl_bindings`` maps them to
Kafka bindings and back. The rules are the gRPC rows' (one authorizer):
describing needs a super-user (``ListPermissions``), creating or deleting a
binding needs ``admin`` covering its topic or group pattern
(``GrantPermission``, ``RevokePermission``); a refusal answers
CLUSTER_AUTHORIZATION_FAILED, as Kafka does for Alter or Describe on the
cluster. Without authorisation (no token authentication) the three answer
SECURITY_DISABLED, as a Kafka broker without an authorizer does.

A creation of ALL is one grant of every action the resource type has; a
DeleteAcls filter revokes each binding it matches (ALLOW only: Folio has no
DENY ACLs, so a DENY filter matches none). Each change is one
compare-and-set of the grant node (``AclStore``); one that fails answers its
own error and the others stand. After an unknown outcome (the metadata store
unreachable) the client describes again: a grant is the same whether it was
made once or twice.
"""

from __future__ import annotations

import logging
from typing import Any

from kio.schema.errors import ErrorCode

from broker.auth.access import Access, Need
from broker.auth.permissions import Grant
from broker.errors import BrokerError
from broker.kafka.access import role_of
from broker.kafka.acl_bindings import AclRefusedError, Binding, bindings_of, grant_of, matches
from broker.kafka.context import KafkaContext
from broker.kafka.dispatch import Api, Call
from broker.kafka.handlers.coordination import ZERO
from broker.kafka.messages import build, nested, response_class
from ledger.errors import LedgerError

__all__ = ["CREATE_ACLS_KEY", "DELETE_ACLS_KEY", "DESCRIBE_ACLS_KEY", "ROWS"]

log = logging.getLogger(__name__)

DESCRIBE_ACLS_KEY = 29
CREATE_ACLS_KEY = 30
DELETE_ACLS_KEY = 31
_DISABLED = "token authentication is off on this broker: no grants are enforced"


def _refusal(context: KafkaContext, call: Call) -> tuple[ErrorCode, str] | None:
    """SECURITY_DISABLED without authorisation; None when the call may go on."""
    if context.authorizer is None:
        return ErrorCode.security_disabled, _DISABLED
    if role_of(call) is None:
        return (ErrorCode.cluster_authorization_failed,
                "an unauthenticated client may not manage ACLs")
    return None


def _may_alter(access: Access, role: str, binding: Binding) -> str | None:
    """Why ``role`` may not create or delete ``binding``; None if it may."""
    why = access.denial(role, Need.ADMIN, binding.kind, binding.pattern)
    return None if why is None else f"{why} (needed to change its ACLs)"


async def handle_describe_acls(context: KafkaContext, call: Call) -> Any:
    """The bindings matching the filter."""
    cls = response_class(DESCRIBE_ACLS_KEY, call.version)
    refusal = _refusal(context, call)
    access = context.authorizer
    if refusal is None and access is not None and not access.is_super_user(role_of(call) or ""):
        refusal = (ErrorCode.cluster_authorization_failed,
                   f"role {role_of(call)!r} is not a super-user: only they describe ACLs")
    if refusal is not None or access is None:
        code, message = refusal or (ErrorCode.security_disabled, _DISABLED)
        return build(cls, throttle_time=ZERO, error_code=code, error_message=message,
                     resources=())
    resource_cls = nested(cls, "DescribeAclsResource")
    acl_cls = nested(cls, "AclDescription")
    by_resource: dict[tuple[int, str, int], list[Any]] = {}
    for binding in bindings_of(access.table):
        if matches(binding, call.request):
            by_resource.setdefault(
                (binding.resource_type, binding.resource_name, binding.pattern_type), []).append(
                build(acl_cls, principal=binding.principal, host=binding.host,
                      operation=binding.operation, permission_type=binding.permission_type))
    resources = tuple(build(resource_cls, resource_type=kind, resource_name=name,
                            pattern_type=pattern, acls=tuple(acls))
                      for (kind, name, pattern), acls in by_resource.items())
    return build(cls, throttle_time=ZERO, error_code=ErrorCode.none, error_message=None,
                 resources=resources)


async def handle_create_acls(context: KafkaContext, call: Call) -> Any:
    """Grant each creation (its own result: refused ones do not stop the others)."""
    cls = response_class(CREATE_ACLS_KEY, call.version)
    result_cls = nested(cls, "AclCreationResult")
    results = []
    for creation in call.request.creations:
        code, message = await _create(context, call, creation)
        results.append(build(result_cls, error_code=code, error_message=message))
    return build(cls, throttle_time=ZERO, results=tuple(results))


async def _create(context: KafkaContext, call: Call,
                  creation: Any) -> tuple[ErrorCode, str | None]:
    refusal = _refusal(context, call)
    access = context.authorizer
    if refusal is not None or access is None:
        return refusal or (ErrorCode.security_disabled, _DISABLED)
    try:
        bindings = grant_of(creation)
    except AclRefusedError as error:
        return ErrorCode.invalid_request, str(error)
    role = role_of(call) or ""
    for binding in bindings:
        why = _may_alter(access, role, binding)
        if why is not None:
            return ErrorCode.cluster_authorization_failed, why
    first = bindings[0]
    try:
        await access.acls.grant(Grant(first.role, first.kind, first.pattern,
                                      frozenset(b.action for b in bindings)))
    except (BrokerError, LedgerError) as error:
        return _store_error(error)
    log.info("kafka: role %r granted %s on %s %r through CreateAcls", first.role,
             sorted(b.action.value for b in bindings), first.kind.value, first.pattern)
    return ErrorCode.none, None


async def handle_delete_acls(context: KafkaContext, call: Call) -> Any:
    """Revoke the bindings each filter matches; each filter answers what it removed."""
    cls = response_class(DELETE_ACLS_KEY, call.version)
    result_cls = nested(cls, "DeleteAclsFilterResult")
    matching_cls = nested(cls, "DeleteAclsMatchingAcl")
    results = []
    for acl_filter in call.request.filters:
        code, message, removed = await _delete(context, call, acl_filter)
        results.append(build(result_cls, error_code=code, error_message=message,
                             matching_acls=tuple(build(
                                 matching_cls, error_code=ErrorCode.none, error_message=None,
                                 resource_type=b.resource_type, resource_name=b.resource_name,
                                 pattern_type=b.pattern_type, principal=b.principal,
                                 host=b.host, operation=b.operation,
                                 permission_type=b.permission_type) for b in removed)))
    return build(cls, throttle_time=ZERO, filter_results=tuple(results))


async def _delete(context: KafkaContext, call: Call,
                  acl_filter: Any) -> tuple[ErrorCode, str | None, list[Binding]]:
    refusal = _refusal(context, call)
    access = context.authorizer
    if refusal is not None or access is None:
        code, message = refusal or (ErrorCode.security_disabled, _DISABLED)
        return code, message, []
    role = role_of(call) or ""
    matched = [binding for binding in bindings_of(access.table) if matches(binding, acl_filter)]
    for binding in matched:  # all or nothing per filter: no partial revocation
        why = _may_alter(access, role, binding)
        if why is not None:
            return ErrorCode.cluster_authorization_failed, why, []
    removed: list[Binding] = []
    for binding in matched:
        try:
            await access.acls.revoke(binding.role, binding.kind, binding.pattern,
                                     frozenset({binding.action}))
        except (BrokerError, LedgerError) as error:
            # Those revoked stay revoked; the client describes to see where it stopped.
            code, message = _store_error(error)
            return code, message, removed
        removed.append(binding)
    if removed:
        log.info("kafka: role %r revoked %d ACL(s) through DeleteAcls", role, len(removed))
    return ErrorCode.none, None, removed


def _store_error(error: BaseException) -> tuple[ErrorCode, str]:
    if isinstance(error, LedgerError) and error.retriable:
        return ErrorCode.request_timed_out, f"the metadata store did not answer: {error}"
    if isinstance(error, LedgerError):
        return ErrorCode.kafka_storage_error, str(error)
    return ErrorCode.invalid_request, str(error)


ROWS = (
    Api(DESCRIBE_ACLS_KEY, "DescribeAcls", 1, 3, handle_describe_acls),
    Api(CREATE_ACLS_KEY, "CreateAcls", 1, 3, handle_create_acls),
    Api(DELETE_ACLS_KEY, "DeleteAcls", 1, 3, handle_delete_acls),
)
