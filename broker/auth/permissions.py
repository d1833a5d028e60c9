"""The permission model: grants of actions on topics and reader groups, and their table.

A resource is named exactly (``orders.eu``) or by prefix (``orders.*``:
every name starting with ``orders.``; ``*``: every name). Actions:

- ``produce``: append to the topic (Produce, Append, writes in a transaction);
- ``consume``: read the topic; use a reader group (join, heartbeat, update);
- ``admin``: create, reconfigure, scale, seal, truncate or delete the topic;
  delete the reader group; grant and revoke permissions on what it covers.

Any permission on a topic lets a role look it up (GetTopic, its segments),
which writers and readers need before they write or read.

The stored form is JSON with a format version (``FORMAT_VERSION``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from typing import Any, Final

from broker.errors import InvalidArgumentError
from ledger.records import RecordFormatError, dump_record, load_record

__all__ = ["FORMAT_VERSION", "AclTable", "Action", "Grant", "ResourceKind", "check_pattern"]

#: The stored JSON's ``version``.
FORMAT_VERSION: Final = 1
#: Longest role or resource pattern.
MAX_NAME_CHARS: Final = 256


class Action(Enum):
    """What a grant allows."""

    PRODUCE = "produce"
    CONSUME = "consume"
    ADMIN = "admin"


class ResourceKind(Enum):
    """What a grant is on."""

    TOPIC = "topic"
    GROUP = "group"


def check_pattern(pattern: str, what: str = "resource") -> None:
    """Raise ``InvalidArgumentError`` unless ``pattern`` is a name, ``prefix*`` or ``*``."""
    if not 1 <= len(pattern) <= MAX_NAME_CHARS:
        raise InvalidArgumentError(f"{what} must be 1 to {MAX_NAME_CHARS} characters, "
                                   f"got {len(pattern)}")
    if "*" in pattern[:-1]:
        raise InvalidArgumentError(f"{what} {pattern!r}: '*' may only end a prefix "
                                   "(orders.* or *)")


def _matches(pattern: str, name: str) -> bool:
    if pattern.endswith("*"):
        return name.startswith(pattern[:-1])
    return name == pattern


def _covers(pattern: str, other: str) -> bool:
    """Whether every name ``other`` matches is matched by ``pattern``."""
    if pattern.endswith("*"):
        return other.startswith(pattern[:-1])
    return other == pattern


@dataclass(frozen=True, slots=True)
class Grant:
    """Role ``role`` may do ``actions`` on ``kind`` resources matching ``pattern``."""

    role: str
    kind: ResourceKind
    pattern: str
    actions: frozenset[Action]

    def to_json(self) -> dict[str, Any]:
        """The stored form."""
        return {"role": self.role, "kind": self.kind.value, "pattern": self.pattern,
                "actions": sorted(action.value for action in self.actions)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Grant:
        """From the stored form."""
        return cls(data["role"], ResourceKind(data["kind"]), data["pattern"],
                   frozenset(Action(action) for action in data["actions"]))


class AclTable:
    """An immutable snapshot of every grant, indexed by role."""

    def __init__(self, grants: Iterable[Grant] = (), version: int = -1) -> None:
        self.grants: tuple[Grant, ...] = tuple(grants)
        #: The metadata node's version this snapshot was read at (-1: none yet).
        self.version = version
        self._by_role: dict[str, list[Grant]] = {}
        for grant in self.grants:
            self._by_role.setdefault(grant.role, []).append(grant)

    def allows(self, role: str, kind: ResourceKind, name: str, action: Action) -> bool:
        """Whether ``role`` may do ``action`` on the resource ``name``."""
        return any(grant.kind is kind and action in grant.actions
                   and _matches(grant.pattern, name)
                   for grant in self._by_role.get(role, ()))

    def allows_any(self, role: str, kind: ResourceKind, name: str) -> bool:
        """Whether ``role`` has any permission on the resource ``name``."""
        return any(grant.kind is kind and _matches(grant.pattern, name)
                   for grant in self._by_role.get(role, ()))

    def covers(self, role: str, kind: ResourceKind, pattern: str, action: Action) -> bool:
        """Whether ``role`` may do ``action`` on every name ``pattern`` matches."""
        return any(grant.kind is kind and action in grant.actions
                   and _covers(grant.pattern, pattern)
                   for grant in self._by_role.get(role, ()))

    def with_grant(self, grant: Grant) -> AclTable:
        """This table with ``grant``'s actions added to the role's grant on the same pattern."""
        merged = set(grant.actions)
        kept = []
        for old in self.grants:
            if (old.role, old.kind, old.pattern) == (grant.role, grant.kind, grant.pattern):
                merged |= old.actions
            else:
                kept.append(old)
        return AclTable([*kept, Grant(grant.role, grant.kind, grant.pattern,
                                      frozenset(merged))], self.version)

    def without(self, role: str, kind: ResourceKind, pattern: str,
                actions: frozenset[Action]) -> AclTable:
        """This table with ``actions`` taken from the role's grant on ``pattern``."""
        kept = []
        for old in self.grants:
            if (old.role, old.kind, old.pattern) == (role, kind, pattern):
                left = old.actions - actions
                if left:
                    kept.append(Grant(role, kind, pattern, frozenset(left)))
            else:
                kept.append(old)
        return AclTable(kept, self.version)

    def encode(self) -> bytes:
        """The stored form: versioned JSON, grants in a stable order."""
        grants = sorted((grant.to_json() for grant in self.grants),
                        key=lambda item: (item["role"], item["kind"], item["pattern"]))
        # "version": for brokers of earlier builds (ledger.records).
        return dump_record(FORMAT_VERSION, {"grants": grants}, legacy_key="version")

    @classmethod
    def decode(cls, data: bytes, version: int) -> AclTable:
        """From the stored form. Raises ``ValueError`` for an unknown format."""
        if not data:
            return cls((), version)
        try:
            # Earlier builds kept the version under "version" (ledger.records).
            document = load_record(data, "permissions", (FORMAT_VERSION,),
                                   legacy_key="version")
        except RecordFormatError as error:
            raise ValueError(f"permissions stored in format {error.version!r}; "
                             f"this broker reads format {FORMAT_VERSION} ({error})") from None
        return cls((Grant.from_json(item) for item in document["grants"]), version)
