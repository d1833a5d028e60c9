"""A watched cache of who owns each container and which brokers take part in the balance.

Every answer the services need (``owns``, ``owner_of``, ``brokers``) comes
from here, from memory: the metadata store is read only when a watch says a
node changed (one-shot watches, as in ZooKeeper: a fired watch marks the
node dirty, and the next ``refresh`` reads it again and sets a new watch).
After a session loss or a reconnection everything is marked dirty, because
watches may have been lost with the connection.

Watch callbacks may run on another thread (kazoo's); they only mark and wake,
through the event loop's ``call_soon_threadsafe``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from broker.cluster.containers import MEMBERS_PATH, OwnerRecord, member_path, owner_path
from ledger.api import EventType, MetadataStore
from ledger.errors import LedgerError, MetadataUnavailableError, NoNodeError

__all__ = ["OwnerCache"]

log = logging.getLogger(__name__)

_MEMBERS = "members"
#: Reads of the members' parent before giving up (it keeps being created and deleted).
_MEMBERS_ATTEMPTS = 5


class OwnerCache:
    """Container owners and balance members, kept by watches.

    Args:
        store: the shared metadata store.
        container_count: the cluster's number of containers.
        on_change: called (on the loop) after a watch marked something dirty.
    """

    def __init__(self, store: MetadataStore, container_count: int,
                 on_change: Callable[[], None]) -> None:
        self._store = store
        self._count = container_count
        self._on_change = on_change
        self._loop = asyncio.get_running_loop()
        #: container -> (record, node version) of its ownership node.
        self.owners: dict[int, tuple[OwnerRecord, int]] = {}
        #: broker id -> its member record.
        self.members: dict[str, OwnerRecord] = {}
        self._dirty_containers: set[int] = set(range(container_count))
        self._members_dirty = True

    @property
    def container_count(self) -> int:
        return self._count

    def mark_all_dirty(self) -> None:
        """Read everything again on the next refresh (watches may be lost)."""
        self._dirty_containers = set(range(self._count))
        self._members_dirty = True

    def forget(self) -> None:
        """Drop what is cached (the session is lost: it all may be stale)."""
        self.owners.clear()
        self.members.clear()
        self.mark_all_dirty()

    def owner(self, container: int) -> OwnerRecord | None:
        """The container's owner to name to a client; None when unowned or unknown now.

        Unknown while a watch has said the node changed and it is not read
        again yet (the ownership loop may be busy with a handover for seconds):
        the metadata knows better than the cache then, and a WrongHost naming
        the owner read before (a broker that may be gone) would send clients
        to it. They look the owner up instead (``LookupSegment``, with backoff).
        """
        if container in self._dirty_containers:
            return None
        found = self.owners.get(container)
        return None if found is None else found[0]

    def set_owner(self, container: int, record: OwnerRecord | None, version: int = 0) -> None:
        """Record an ownership change this broker made itself (its watch follows)."""
        if record is None:
            self.owners.pop(container, None)
        else:
            self.owners[container] = (record, version)

    async def refresh(self) -> bool:
        """Read what watches marked dirty, setting new watches. Whether anything was read."""
        read = False
        if self._members_dirty:
            self._members_dirty = False
            read = True
            try:
                await self._read_members()
            except BaseException:
                self._members_dirty = True
                raise
        while self._dirty_containers:
            # Read together (one round trip, not one per node): a broker gone
            # leaves several nodes, and their new owners wait for this.
            dirty = sorted(self._dirty_containers)
            self._dirty_containers.difference_update(dirty)
            read = True
            try:
                results = await asyncio.gather(*(self._read_owner(c) for c in dirty),
                                               return_exceptions=True)
            except BaseException:  # cancelled: nothing known was read
                self._dirty_containers.update(dirty)
                raise
            failed = [(c, r) for c, r in zip(dirty, results, strict=True)
                      if isinstance(r, BaseException)]
            if failed:
                self._dirty_containers.update(c for c, _ in failed)
                raise failed[0][1]
        return read

    async def read_now(self, container: int) -> OwnerRecord | None:
        """The container's owner by a fresh read of its node (no watch, cache untouched).

        For a lookup while the cache knows none (``owner`` is None): the
        ownership loop that refreshes the cache may be busy taking a container
        over, and a new owner's clients wait for its name. None when unowned or
        unreadable now (the client asks again).
        """
        try:
            node = await self._store.get(owner_path(container))
        except LedgerError:  # NoNodeError (unowned) or the store unreachable
            return None
        return OwnerRecord.from_bytes(node.data)

    async def _read_members(self) -> None:
        names = await self._member_names()
        members: dict[str, OwnerRecord] = {}
        for name in names:
            known = self.members.get(name)
            if known is not None:
                members[name] = known
                continue
            try:
                node = await self._store.get(member_path(name))
            except NoNodeError:
                continue
            members[name] = OwnerRecord.from_bytes(node.data)
        self.members = members

    async def _member_names(self) -> list[str]:
        """The members' names, with a child watch set (or a watch on the missing parent).

        The parent may be created between the two reads (a broker joining
        while this one starts): then ``get`` finds it and sets only a data
        watch, which no join fires; its children are read again, so a child
        watch is set and the members already there are seen. (Read once,
        this broker saw no member for good and kept every container: the
        chart's Kafka test in CI.)
        """
        for _attempt in range(_MEMBERS_ATTEMPTS):
            try:
                return await self._store.children(MEMBERS_PATH, watch=self._watch(_MEMBERS))
            except NoNodeError:
                pass
            try:
                await self._store.get(MEMBERS_PATH, watch=self._watch(_MEMBERS))
            except NoNodeError:
                return []  # the watch on the missing parent: its creation wakes us
        raise MetadataUnavailableError(
            f"{MEMBERS_PATH}: created and deleted too often to read its children")

    async def _read_owner(self, container: int) -> None:
        try:
            node = await self._store.get(owner_path(container),
                                         watch=self._watch(container))
        except NoNodeError:
            self.owners.pop(container, None)
            return
        self.owners[container] = (OwnerRecord.from_bytes(node.data), node.version)

    def _watch(self, what: int | str) -> Callable[[EventType, str], None]:
        def fired(event: EventType, path: str) -> None:
            self._loop.call_soon_threadsafe(self._mark, what)
        return fired

    def _mark(self, what: int | str) -> None:
        if what == _MEMBERS:
            self._members_dirty = True
        elif isinstance(what, int):
            self._dirty_containers.add(what)
        self._on_change()
