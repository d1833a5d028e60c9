"""Permissions as the SDK sees them: ``PermissionGrant`` and its wire form.

A grant gives a role (a token's ``sub``) actions on a topic or a reader
group named exactly or by prefix (``orders.*``; ``*`` is every name):
``produce``, ``consume``, ``admin`` (``docs/security.md``). The calls are
``Client.grant_permission``, ``revoke_permission`` and ``list_permissions``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

from folio.errors import InvalidArgumentError

if TYPE_CHECKING:  # the stubs load protobuf: imported where a grant is converted
    from folio.api.v1 import admin_pb2

__all__ = ["ACTIONS", "PermissionGrant", "grant_from_proto", "grant_to_proto"]

#: The actions a grant may hold.
ACTIONS: Final = ("produce", "consume", "admin")

Kind = Literal["topic", "group"]


def _stubs() -> Any:
    from folio.api.v1 import admin_pb2  # noqa: PLC0415

    return admin_pb2


def _kinds() -> dict[str, admin_pb2.ResourceKind.ValueType]:
    stubs = _stubs()
    return {"topic": stubs.RESOURCE_KIND_TOPIC, "group": stubs.RESOURCE_KIND_GROUP}


def _action_numbers() -> dict[str, admin_pb2.Permission.ValueType]:
    stubs = _stubs()
    return {"produce": stubs.PERMISSION_PRODUCE, "consume": stubs.PERMISSION_CONSUME,
            "admin": stubs.PERMISSION_ADMIN}


@dataclass(frozen=True, slots=True)
class PermissionGrant:
    """``role`` may do ``actions`` on the ``kind`` resources ``resource`` names.

    Attributes:
        role: the role (a token's ``sub`` claim).
        kind: ``"topic"`` or ``"group"`` (a reader group).
        resource: a name, a prefix ending in ``*`` (``orders.*``), or ``*``.
        actions: some of ``produce``, ``consume``, ``admin``, sorted.
    """

    role: str
    kind: Kind
    resource: str
    actions: tuple[str, ...]


def _actions(actions: Iterable[str]) -> list[admin_pb2.Permission.ValueType]:
    numbers: list[admin_pb2.Permission.ValueType] = []
    known = _action_numbers()
    for action in actions:
        number = known.get(action.strip().lower())
        if number is None:
            raise InvalidArgumentError(f"unknown action {action!r}: use {', '.join(ACTIONS)}")
        numbers.append(number)
    if not numbers:
        raise InvalidArgumentError(f"name at least one action: {', '.join(ACTIONS)}")
    return numbers


def grant_to_proto(role: str, kind: Kind, resource: str,
                   actions: Iterable[str]) -> admin_pb2.PermissionGrant:
    """The wire form. Raises ``InvalidArgumentError`` for an unknown kind or action."""
    number = _kinds().get(kind)
    if number is None:
        raise InvalidArgumentError(f"kind must be 'topic' or 'group', not {kind!r}")
    message: admin_pb2.PermissionGrant = _stubs().PermissionGrant(
        role=role, kind=number, resource=resource, permissions=_actions(actions))
    return message


def grant_from_proto(message: admin_pb2.PermissionGrant) -> PermissionGrant:
    """From the wire form."""
    kind: Kind = "group" if message.kind == _stubs().RESOURCE_KIND_GROUP else "topic"
    names = {number: name for name, number in _action_numbers().items()}
    actions = tuple(sorted(names[number] for number in message.permissions if number in names))
    return PermissionGrant(message.role, kind, message.resource, actions)
