"""Folio's grants as Kafka ACL bindings, and back: what DescribeAcls, CreateAcls, DeleteAcls see.

A grant (role, kind, pattern, actions) is one Kafka ACL binding per action:
principal ``User:<role>``, host ``*``, ALLOW, on

- a topic: ``produce`` is WRITE, ``consume`` READ, ``admin`` ALTER;
- a group-kind resource: ``consume`` is READ and ``admin`` DELETE on the
  GROUP, ``produce`` is WRITE on the TRANSACTIONAL_ID of that name
  (``broker.kafka.access``'s mapping);

named LITERAL (``orders.eu``; ``*`` is Kafka's LITERAL wildcard too) or
PREFIXED (Folio's ``orders.*`` is PREFIXED ``orders.``). A creation maps
back; ALL is every action the resource type has here. What Folio's grants
cannot hold is refused with a message saying why (``AclRefusedError``): DENY,
a host other than ``*``, a principal type other than ``User``, other resource
types (CLUSTER rights are the super-users'), other operations.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from broker.auth.permissions import AclTable, Action, ResourceKind

__all__ = ["AclRefusedError", "Binding", "bindings_of", "grant_of", "matches"]

# Kafka's enums (org.apache.kafka.common.resource / acl).
ANY: Final = 1
RESOURCE_TOPIC: Final = 2
RESOURCE_GROUP: Final = 3
RESOURCE_CLUSTER: Final = 4
RESOURCE_TRANSACTIONAL_ID: Final = 5
PATTERN_MATCH: Final = 2
PATTERN_LITERAL: Final = 3
PATTERN_PREFIXED: Final = 4
OP_ALL: Final = 2
OP_READ: Final = 3
OP_WRITE: Final = 4
OP_DELETE: Final = 6
OP_ALTER: Final = 7
PERMISSION_ALLOW: Final = 3

_RESOURCE_NAMES: Final = {0: "UNKNOWN", 1: "ANY", 2: "TOPIC", 3: "GROUP", 4: "CLUSTER",
                          5: "TRANSACTIONAL_ID", 6: "DELEGATION_TOKEN", 7: "USER"}
_OPERATION_NAMES: Final = {0: "UNKNOWN", 1: "ANY", 2: "ALL", 3: "READ", 4: "WRITE",
                           5: "CREATE", 6: "DELETE", 7: "ALTER", 8: "DESCRIBE",
                           9: "CLUSTER_ACTION", 10: "DESCRIBE_CONFIGS", 11: "ALTER_CONFIGS",
                           12: "IDEMPOTENT_WRITE", 13: "CREATE_TOKENS", 14: "DESCRIBE_TOKENS"}

#: (Kafka resource type, operation) <-> (Folio kind, action).
_OPERATIONS: Final[dict[tuple[int, int], tuple[ResourceKind, Action]]] = {
    (RESOURCE_TOPIC, OP_WRITE): (ResourceKind.TOPIC, Action.PRODUCE),
    (RESOURCE_TOPIC, OP_READ): (ResourceKind.TOPIC, Action.CONSUME),
    (RESOURCE_TOPIC, OP_ALTER): (ResourceKind.TOPIC, Action.ADMIN),
    (RESOURCE_GROUP, OP_READ): (ResourceKind.GROUP, Action.CONSUME),
    (RESOURCE_GROUP, OP_DELETE): (ResourceKind.GROUP, Action.ADMIN),
    (RESOURCE_TRANSACTIONAL_ID, OP_WRITE): (ResourceKind.GROUP, Action.PRODUCE),
}
_BACK: Final = {value: key for key, value in _OPERATIONS.items()}
_SERVED_TYPES: Final = (RESOURCE_TOPIC, RESOURCE_GROUP, RESOURCE_TRANSACTIONAL_ID)


class AclRefusedError(ValueError):
    """An ACL Folio's grants cannot hold; the message says why (answered INVALID_REQUEST)."""


@dataclass(frozen=True, slots=True)
class Binding:
    """One Kafka ACL binding (always host ``*`` and ALLOW here)."""

    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    operation: int
    host: str = "*"
    permission_type: int = PERMISSION_ALLOW

    @property
    def role(self) -> str:
        """The Folio role of ``User:<role>``."""
        return self.principal.removeprefix("User:")

    @property
    def kind(self) -> ResourceKind:
        """The Folio resource kind the binding is granted on."""
        return _OPERATIONS[self.resource_type, self.operation][0]

    @property
    def action(self) -> Action:
        """The Folio action the binding is."""
        return _OPERATIONS[self.resource_type, self.operation][1]

    @property
    def pattern(self) -> str:
        """The Folio pattern: the name, ``prefix*``, or ``*``."""
        if self.pattern_type == PATTERN_PREFIXED:
            return self.resource_name + "*"
        return self.resource_name


def bindings_of(table: AclTable) -> list[Binding]:
    """Every grant of ``table`` as Kafka bindings, one per action, in a stable order."""
    out = []
    for grant in table.grants:
        if grant.pattern == "*":
            name, pattern_type = "*", PATTERN_LITERAL
        elif grant.pattern.endswith("*"):
            name, pattern_type = grant.pattern[:-1], PATTERN_PREFIXED
        else:
            name, pattern_type = grant.pattern, PATTERN_LITERAL
        for action in sorted(grant.actions, key=lambda item: item.value):
            resource_type, operation = _BACK[grant.kind, action]
            out.append(Binding(resource_type, name, pattern_type, f"User:{grant.role}",
                               operation))
    return sorted(out, key=lambda b: (b.resource_type, b.resource_name, b.pattern_type,
                                      b.principal, b.operation))


def grant_of(creation: Any) -> list[Binding]:
    """The bindings a CreateAcls creation stands for (ALL: several). ``AclRefusedError``."""
    if creation.permission_type != PERMISSION_ALLOW:
        raise AclRefusedError("Folio grants only allow: DENY (and other permission types) "
                              "are not supported; revoke the ALLOW instead")
    if creation.host != "*":
        raise AclRefusedError(f"Folio grants hold no host: use host '*', not "
                              f"{creation.host!r}")
    principal = creation.principal or ""
    role = principal.removeprefix("User:")
    if not principal.startswith("User:") or not role or "*" in role:
        raise AclRefusedError(f"principal must be User:<role> naming one role, got "
                              f"{principal!r}")
    resource_type = creation.resource_type
    if resource_type not in _SERVED_TYPES:
        raise AclRefusedError(
            f"resource type {_RESOURCE_NAMES.get(resource_type, resource_type)} is not "
            "supported: Folio grants name topics, groups and transactional ids; the "
            "cluster's rights are the super-users' (--super-users)")
    name = creation.resource_name or ""
    pattern_type = getattr(creation, "resource_pattern_type", PATTERN_LITERAL)
    if pattern_type not in (PATTERN_LITERAL, PATTERN_PREFIXED):
        raise AclRefusedError("pattern type must be LITERAL or PREFIXED")
    if not name or ("*" in name and (pattern_type == PATTERN_PREFIXED or name != "*")):
        raise AclRefusedError(f"resource name {name!r}: give a name, a PREFIXED prefix, or "
                              "the LITERAL wildcard '*' ('*' nowhere else)")
    operations = ([op for (kind, op) in _OPERATIONS if kind == resource_type]
                  if creation.operation == OP_ALL else [creation.operation])
    if (resource_type, operations[0]) not in _OPERATIONS:
        accepted = ", ".join(_OPERATION_NAMES[op] for (kind, op) in _OPERATIONS
                             if kind == resource_type)
        raise AclRefusedError(
            f"operation {_OPERATION_NAMES.get(creation.operation, creation.operation)} on "
            f"{_RESOURCE_NAMES[resource_type]} has no Folio action: use {accepted} or ALL")
    return [Binding(resource_type, name, pattern_type, principal, op) for op in operations]


def matches(binding: Binding, acl_filter: Any) -> bool:
    """Whether ``binding`` matches a DescribeAcls request or a DeleteAcls filter."""
    if acl_filter.permission_type not in (ANY, PERMISSION_ALLOW):
        return False
    if acl_filter.resource_type_filter not in (ANY, binding.resource_type):
        return False
    if acl_filter.operation not in (ANY, binding.operation):
        return False
    if acl_filter.principal_filter is not None and acl_filter.principal_filter != \
            binding.principal:
        return False
    if acl_filter.host_filter is not None and acl_filter.host_filter != binding.host:
        return False
    return _name_matches(binding, acl_filter.resource_name_filter,
                         getattr(acl_filter, "pattern_type_filter", PATTERN_LITERAL))


def _name_matches(binding: Binding, name: str | None, pattern_type: int) -> bool:
    if pattern_type == PATTERN_MATCH:  # every binding that applies to the resource ``name``
        if name is None:
            return True
        if binding.pattern_type == PATTERN_PREFIXED:
            return name.startswith(binding.resource_name)
        return binding.resource_name in (name, "*")
    if pattern_type not in (ANY, binding.pattern_type):
        return False
    return name is None or name == binding.resource_name
