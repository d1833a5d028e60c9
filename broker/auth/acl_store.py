"""The grants in the metadata store: one node, changed by compare-and-set, watched.

All grants live in one node, ``/folio/acl`` (``AclTable.encode``: versioned
JSON), so a change is one atomic compare-and-set and every broker reads the
same table; a grant table is small (ZooKeeper's 1 MB node limit is tens of
thousands of grants). Each broker keeps the decoded table in memory
(``table``) for its checks, which read no store: the store is touched only
when permissions change. A one-shot watch (re-armed on every firing, as
ZooKeeper's are) reloads the table when another broker changed it; this
broker's own changes take effect at once.

It uses only ``ledger.api.MetadataStore``, so the embedded RocksDB store and
the ZooKeeper one serve it alike.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Final

from broker.auth.permissions import AclTable, Action, Grant, ResourceKind, check_pattern
from broker.errors import InvalidArgumentError
from broker.metadata_paths import ACL_PATH
from ledger.api import EventType, MetadataStore
from ledger.errors import BadVersionError, NodeExistsError, NoNodeError

__all__ = ["ACL_PATH", "AclStore"]

log = logging.getLogger(__name__)

#: Compare-and-set attempts before a change gives up (others changing it meanwhile).
_MAX_ATTEMPTS: Final = 20


class AclStore:
    """The broker's view of the grants: ``table`` now, and grant/revoke by compare-and-set."""

    def __init__(self, store: MetadataStore) -> None:
        self._store = store
        self.table = AclTable()
        self._closed = False
        self._reloads: set[asyncio.Task[None]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None

    async def start(self) -> None:
        """Create the node if missing, read it and watch it."""
        self._loop = asyncio.get_running_loop()
        with contextlib.suppress(NodeExistsError):
            await self._store.create(ACL_PATH, AclTable().encode(), make_parents=True)
        await self._reload()

    async def close(self) -> None:
        """Stop watching."""
        self._closed = True
        for task in list(self._reloads):
            task.cancel()

    async def _reload(self) -> None:
        if self._closed:
            return
        try:
            node = await self._store.get(ACL_PATH, watch=self._changed)
        except NoNodeError:
            self.table = AclTable()
            return
        if node.version >= self.table.version:
            self.table = AclTable.decode(node.data, node.version)

    def _changed(self, _event: EventType, _path: str) -> None:
        # A watch callback must not block, and may come from the store's own
        # thread (ZooKeeper's): reload in a task on the broker's loop.
        if self._closed or self._loop is None:
            return
        with contextlib.suppress(RuntimeError):  # the loop closed: the broker stopped
            self._loop.call_soon_threadsafe(self._spawn_reload)

    def _spawn_reload(self) -> None:
        task = asyncio.get_running_loop().create_task(self._reload())
        self._reloads.add(task)
        task.add_done_callback(self._reloads.discard)

    async def _change(self, edit: Callable[[AclTable], AclTable]) -> AclTable:
        for _attempt in range(_MAX_ATTEMPTS):
            node = await self._store.get(ACL_PATH)
            current = AclTable.decode(node.data, node.version)
            changed = edit(current)
            try:
                version = await self._store.set(ACL_PATH, changed.encode(), node.version)
            except BadVersionError:
                continue  # another broker changed it meanwhile: apply to the new one
            self.table = AclTable(changed.grants, version)
            return self.table
        raise InvalidArgumentError("the permissions changed too often meanwhile; try again")

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
