"""The transport-neutral check: may role R do what ``Need`` says on resource X?

Both front ends ask it: the gRPC rows (``rpc_table``, enforced by
``authorizer``) and every Kafka handler (``broker.kafka.access``). It reads
only ``AclStore.table`` (in memory) and the super-users.
"""

from __future__ import annotations

from collections.abc import Collection
from enum import Enum
from typing import Protocol

from broker.auth.permissions import AclTable, Action, Grant, ResourceKind
from broker.clip import clip

__all__ = ["MAX_ANSWERS", "Access", "Grants", "Need"]

#: Answers remembered per table (role x need x resource); emptied when full.
MAX_ANSWERS = 4096
#: Longest role and name (together) whose answer is kept: names are at most 256
#: characters in grants, 249 in Kafka; longer ones are refused anyway.
_MAX_CACHED_CHARS = 1024


class Need(Enum):
    """What a call needs, beyond a valid token."""

    PRODUCE = "produce"
    CONSUME = "consume"
    ADMIN = "admin"
    #: Any permission on the resource (look a topic up before writing or reading it).
    LOOKUP = "lookup"
    #: Nothing more (``rpc_table``'s docstring says which rows and why).
    AUTHENTICATED = "authenticated"
    #: A super-user role.
    SUPER_USER = "super-user"

    @property
    def action(self) -> Action | None:
        """The grant action this need is, if it is one."""
        return {Need.PRODUCE: Action.PRODUCE, Need.CONSUME: Action.CONSUME,
                Need.ADMIN: Action.ADMIN}.get(self)


class Grants(Protocol):
    """What the check reads and ACL admin changes: ``broker.auth.acl_store.AclStore``."""

    @property
    def table(self) -> AclTable:
        """The grants now."""
        ...

    async def grant(self, grant: Grant) -> AclTable:
        """Add ``grant``'s actions."""
        ...

    async def revoke(self, role: str, kind: ResourceKind, pattern: str,
                     actions: frozenset[Action]) -> AclTable:
        """Take ``actions`` from the role's grant on exactly ``pattern``."""
        ...


class Access:
    """Answers "may ``role`` do ``need`` on ``kind`` ``name``?" from the grants and super-users.

    Args:
        acls: the grants (its ``table`` is read on each check, never the store).
        super_users: roles that may do everything.
    """

    def __init__(self, acls: Grants, super_users: Collection[str] = ()) -> None:
        self.acls = acls
        self.super_users = frozenset(super_users)
        # Answers for the table they were made from: a Kafka Produce checks each
        # partition, and scanning a role's grants costs ~1 us per grant; a change
        # of the grants replaces the table, which empties the cache.
        self._answers: dict[tuple[str, Need, ResourceKind, str], str | None] = {}
        self._answered: AclTable | None = None

    @property
    def table(self) -> AclTable:
        """The grants now."""
        return self.acls.table

    def is_super_user(self, role: str) -> bool:
        """Whether ``role`` may do everything."""
        return role in self.super_users

    def denial(self, role: str, need: Need, kind: ResourceKind, name: str) -> str | None:
        """Why ``role`` may not do ``need`` on ``kind`` ``name``; None if it may.

        A ``name`` ending in ``*`` (a grant's pattern) needs a grant covering
        every name it matches.
        """
        if role in self.super_users or need is Need.AUTHENTICATED:
            return None
        if need is Need.SUPER_USER:
            return f"role {clip(role)!r} is not a super-user"
        table = self.acls.table
        if table is not self._answered:
            self._answers.clear()
            self._answered = table
        key = (role, need, kind, name)
        try:
            return self._answers[key]
        except KeyError:
            pass
        why = _denial(table, role, need, kind, name)
        if len(name) + len(role) <= _MAX_CACHED_CHARS:  # a long name is not kept
            if len(self._answers) >= MAX_ANSWERS:
                self._answers.clear()
            self._answers[key] = why
        return why

    def allows(self, role: str, need: Need, kind: ResourceKind, name: str) -> bool:
        """Whether ``role`` may do ``need`` on ``kind`` ``name``."""
        return self.denial(role, need, kind, name) is None

    def has_any(self, role: str, kind: ResourceKind, action: Action) -> bool:
        """Whether ``role`` may do ``action`` on at least one ``kind`` resource."""
        return role in self.super_users or any(
            grant.role == role and grant.kind is kind and action in grant.actions
            for grant in self.acls.table.grants)


def _denial(table: AclTable, role: str, need: Need, kind: ResourceKind, name: str) -> str | None:
    action = need.action
    if action is None:  # LOOKUP: any permission on it
        if table.allows_any(role, kind, name):
            return None
        return (f"role {clip(role)!r} has no permission on {kind.value} {clip(name)!r} "
                "(any of produce, consume, admin lets it look the topic up)")
    allowed = (table.covers(role, kind, name, action) if name.endswith("*")
               else table.allows(role, kind, name, action))
    if allowed:
        return None
    return f"role {clip(role)!r} lacks {action.value} permission on {kind.value} {clip(name)!r}"

