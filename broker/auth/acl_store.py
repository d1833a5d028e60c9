"""The grants in the metadata store: one node, changed by compare-and-set, watched.

All grants live in one node, ``/folio/acl`` (``AclTable.encode``: versioned
JSON), so a change is one atomic compare-and-set and every broker reads the
same table; a grant table is small (ZooKeeper's 1 MB node limit is tens of
thousands of grants). Each broker keeps the decoded table in memory
(``table``) for its checks, which read no store: the store is touched only
when permissions change. A one-shot watch (re-armed on every firing, as
ZooKeeper's are) reloads the table when another broker changed it; this
broker's own changes take effect at once (``broker.watched_table``, shared
with the Kafka client quotas; a reload that fails is retried with backoff).

It uses only ``ledger.api.MetadataStore``, so the embedded RocksDB store and
the ZooKeeper one serve it alike.
"""

from __future__ import annotations

from collections.abc import Callable

from broker.auth.permissions import AclTable, Action, Grant, ResourceKind, check_pattern
from broker.errors import InvalidArgumentError
from broker.metadata_paths import ACL_PATH
from broker.watched_table import WatchedTable
from ledger.api import MetadataStore
from ledger.errors import BadVersionError

__all__ = ["ACL_PATH", "AclStore"]


class AclStore:
    """The broker's view of the grants: ``table`` now, and grant/revoke by compare-and-set."""

    def __init__(self, store: MetadataStore) -> None:
        self._node = WatchedTable(store, ACL_PATH, AclTable(), "the permissions")

    @property
    def table(self) -> AclTable:
        """The grants as last read or changed here."""
        return self._node.table

    async def start(self) -> None:
        """Create the node if missing, read it and watch it."""
        await self._node.start()

    async def close(self) -> None:
        """Stop watching."""
        await self._node.close()

    async def _change(self, edit: Callable[[AclTable], AclTable]) -> AclTable:
        try:
            return await self._node.change(edit)
        except BadVersionError:
            raise InvalidArgumentError(
                "the permissions changed too often meanwhile; try again") from None

    async def grant(self, grant: Grant) -> AclTable:
        """Add ``grant``'s actions (merged with the role's on the same pattern)."""
        _check(grant.role, grant.pattern, grant.actions)
        return await self._change(lambda table: table.with_grant(grant))

    async def revoke(self, role: str, kind: ResourceKind, pattern: str,
                     actions: frozenset[Action]) -> AclTable:
        """Take ``actions`` from the role's grant on exactly ``pattern`` (no-op if absent)."""
        _check(role, pattern, actions)
        return await self._change(lambda table: table.without(role, kind, pattern, actions))


def _check(role: str, pattern: str, actions: frozenset[Action]) -> None:
    check_pattern(role, "role")
    if "*" in role:
        raise InvalidArgumentError(f"role {role!r}: a role is a name, not a pattern")
    check_pattern(pattern)
    if not actions:
        raise InvalidArgumentError("name at least one action: produce, consume, admin")
