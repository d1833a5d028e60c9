"""The owner cache on a real ZooKeeper: a changed owner is never named from a stale read.

Issue 22: WrongHost named a broker that was gone while the metadata already
knew better. The cache reads an ownership node again only on its next
refresh, which the ownership loop may take seconds to reach (a handover in
progress); between the watch and that read the owner it holds may be the
dead one. ``OwnerCache.owner`` (what ``owner_of``, WrongHost and LookupSegment
answer from) says "unknown" then, so clients look the owner up instead.
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

from broker.cluster.containers import (
    MEMBERS_PATH,
    OwnerRecord,
    container_of,
    member_path,
    owner_path,
)
from broker.cluster.owner_cache import OwnerCache
from broker.cluster.zookeeper_owners import ZooKeeperOwners
from ledger.api import MetadataStore
from ledger.metadata.zookeeper_store import ZooKeeperMetadataStore

COUNT = 4
CONTAINER = 2


async def test_an_owner_a_watch_says_changed_is_unknown_until_read_again(zk_url: str) -> None:
    store = await ZooKeeperMetadataStore.connect(zk_url)
    try:
        gone = OwnerRecord("b1", "127.0.0.1:7071", "first")
        await store.create(owner_path(CONTAINER), gone.to_bytes(), make_parents=True)
        changed = asyncio.Event()
        cache = OwnerCache(store, COUNT, changed.set)
        await cache.refresh()
        assert cache.owner(CONTAINER) == gone

        successor = OwnerRecord("b2", "127.0.0.1:7072", "second")
        node = await store.get(owner_path(CONTAINER))
        await store.set(owner_path(CONTAINER), successor.to_bytes(), node.version)
        await asyncio.wait_for(changed.wait(), 30)  # the watch fired; not read again yet
        assert cache.owners[CONTAINER][0] == gone  # what the cache last read
        assert cache.owner(CONTAINER) is None      # ... is not named

        await cache.refresh()
        assert cache.owner(CONTAINER) == successor
        assert cache.owner(CONTAINER + 1) is None  # never owned
    finally:
        await store.close()


class _Handover:
    async def release(self, containers: frozenset[int]) -> None:
        pass

    def drop(self, containers: frozenset[int]) -> None:
        pass


async def test_lookup_names_a_new_owner_before_the_cache_reads_it(zk_url: str) -> None:
    # After a failover the new owner's clients ask LookupSegment; the broker
    # they ask may not have refreshed its cache yet (its ownership loop busy
    # with its own take-overs): a fresh read names the owner instead of "".
    store = await ZooKeeperMetadataStore.connect(zk_url)
    owners = ZooKeeperOwners(store, COUNT, "b1", "127.0.0.1:7071", _Handover())
    try:
        segment = next(f"t/{n}" for n in range(1000) if container_of(f"t/{n}", COUNT) == 2)
        other = next(f"t/{n}" for n in range(1000) if container_of(f"t/{n}", COUNT) == 3)
        mine = next(f"t/{n}" for n in range(1000) if container_of(f"t/{n}", COUNT) == 1)
        successor = OwnerRecord("b2", "127.0.0.1:7072", "second")
        await store.create(owner_path(2), successor.to_bytes(), make_parents=True)
        await store.create(owner_path(1), owners.record.to_bytes(), make_parents=True)
        assert owners.owner_of(segment) == ""  # never refreshed: memory knows nothing
        assert await owners.lookup(segment) == "127.0.0.1:7072"
        assert await owners.lookup(other) == ""  # unowned
        assert await owners.lookup(mine) == ""   # our node, but not served
    finally:
        await store.close()


class _JoinInTheWindow:
    """A store whose first listing of the members finds no parent, and a broker
    joins (creating it) before the caller's next read: the race of two brokers
    starting together."""

    def __init__(self, store: ZooKeeperMetadataStore, joining: OwnerRecord) -> None:
        self._store = store
        self._joining = joining
        self._first = True

    async def children(self, path: str, **kwargs: Any) -> list[str]:
        if self._first and path == MEMBERS_PATH:
            self._first = False
            try:
                return await self._store.children(path, **kwargs)
            finally:
                await self._store.create(member_path(self._joining.broker_id),
                                         self._joining.to_bytes(), make_parents=True)
        return await self._store.children(path, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


async def test_a_member_joining_while_the_first_read_finds_no_parent_is_seen(
        zk_url: str) -> None:
    # The chart's Kafka test in CI: one broker read "no /balance", the other
    # created it with its member node, and the first set only a data watch on
    # the parent (which no join fires): it never saw the other member, kept
    # all 16 containers, and the other waited for its share for good.
    store = await ZooKeeperMetadataStore.connect(zk_url)
    try:
        first = OwnerRecord("b1", "127.0.0.1:7071", "first")
        changed = asyncio.Event()
        cache = OwnerCache(cast(MetadataStore, _JoinInTheWindow(store, first)), COUNT,
                           changed.set)
        await cache.refresh()
        assert set(cache.members) == {"b1"}

        # And a child watch is set: a later join is told.
        later = OwnerRecord("b2", "127.0.0.1:7072", "second")
        await store.create(member_path("b2"), later.to_bytes())
        await asyncio.wait_for(changed.wait(), 30)
        await cache.refresh()
        assert set(cache.members) == {"b1", "b2"}
    finally:
        await store.close()
