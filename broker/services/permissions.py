"""The permission RPCs of ``folio.v1.Admin``: decode, call ``AclStore``, encode.

A mixin of ``AdminServicer`` (one gRPC service, one servicer), kept apart so
the topic calls and the permission calls each stay small. Who may call them
is ``broker.auth.rpc_table``'s business, checked before these run.
"""

from __future__ import annotations

from typing import Any

import grpc

from broker.auth.acl_store import AclStore
from broker.auth.permissions import Action, Grant, ResourceKind
from broker.errors import BrokerError, InvalidArgumentError
from broker.services._servicer import abort_with
from folio.api.v1 import admin_pb2

__all__ = ["PermissionCalls", "grant_message"]

_Context = grpc.aio.ServicerContext[Any, Any]

_KINDS = {admin_pb2.RESOURCE_KIND_TOPIC: ResourceKind.TOPIC,
          admin_pb2.RESOURCE_KIND_GROUP: ResourceKind.GROUP}
_KIND_NUMBERS = {kind: number for number, kind in _KINDS.items()}
_ACTIONS = {admin_pb2.PERMISSION_PRODUCE: Action.PRODUCE,
            admin_pb2.PERMISSION_CONSUME: Action.CONSUME,
            admin_pb2.PERMISSION_ADMIN: Action.ADMIN}
_ACTION_NUMBERS = {action: number for number, action in _ACTIONS.items()}


def _grant(message: admin_pb2.PermissionGrant) -> Grant:
    kind = _KINDS.get(message.kind)
    if kind is None:
        raise InvalidArgumentError("grant.kind must be RESOURCE_KIND_TOPIC or "
                                   "RESOURCE_KIND_GROUP")
    actions = set()
    for number in message.permissions:
        action = _ACTIONS.get(number)
        if action is None:
            raise InvalidArgumentError(f"unknown permission {number} (produce, consume, admin)")
        actions.add(action)
    return Grant(message.role, kind, message.resource, frozenset(actions))


def grant_message(grant: Grant) -> admin_pb2.PermissionGrant:
    """The wire form of ``grant``, permissions in a stable order."""
    return admin_pb2.PermissionGrant(
        role=grant.role, kind=_KIND_NUMBERS[grant.kind], resource=grant.pattern,
        permissions=sorted(_ACTION_NUMBERS[action] for action in grant.actions))


class PermissionCalls:
    """GrantPermission, RevokePermission and ListPermissions over an ``AclStore``."""

    _acls: AclStore | None

    def _store(self) -> AclStore:
        if self._acls is None:
            raise InvalidArgumentError("this broker keeps no permissions")
        return self._acls

    async def GrantPermission(
        self, request: admin_pb2.GrantPermissionRequest, context: _Context
    ) -> admin_pb2.PermissionGrant:
        try:
            grant = _grant(request.grant)
            table = await self._store().grant(grant)
        except BrokerError as error:
            await abort_with(context, error)
        merged = next(item for item in table.grants
                      if (item.role, item.kind, item.pattern)
                      == (grant.role, grant.kind, grant.pattern))
        return grant_message(merged)

    async def RevokePermission(
        self, request: admin_pb2.RevokePermissionRequest, context: _Context
    ) -> admin_pb2.RevokePermissionResponse:
        try:
            grant = _grant(request.grant)
            await self._store().revoke(grant.role, grant.kind, grant.pattern, grant.actions)
        except BrokerError as error:
            await abort_with(context, error)
        return admin_pb2.RevokePermissionResponse()

    async def ListPermissions(
        self, request: admin_pb2.ListPermissionsRequest, context: _Context
    ) -> admin_pb2.ListPermissionsResponse:
        try:
            grants = self._store().table.grants
        except BrokerError as error:
            await abort_with(context, error)
        chosen = sorted((grant for grant in grants if not request.role
                         or grant.role == request.role),
                        key=lambda grant: (grant.role, grant.kind.value, grant.pattern))
        return admin_pb2.ListPermissionsResponse(grants=[grant_message(g) for g in chosen])
