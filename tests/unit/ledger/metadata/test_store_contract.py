"""The MetadataStore contract (ledger/api.py), run against every scheme of the registry.

Each store is opened by URL through ``ledger.metadata.stores.open_store``, as
the processes open theirs: ``rocksdb``: the embedded store on real RocksDB in
a tmp dir (``rocksdb:///...``); ``zk``: ``ZooKeeperMetadataStore`` on the
session's real ZooKeeper server, in a fresh chroot (``zk://...``).
Store-specific behaviour (the embedded store's reopen and per-parent
counters, ZooKeeper sessions) is tested in test_rocksdb_store*.py and
tests/cluster/test_zookeeper_store.py.

Watches are delivered inline by the embedded store and on the loop by the
ZooKeeper store, so each test waits (with a deadline) for the events it expects.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from ledger.api import EventType, MetadataStore, Versioned
from ledger.client.ledger_ids import allocate_ledger_id
from ledger.errors import (
    BadVersionError,
    InvalidArgumentError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
)
from ledger.metadata.rocksdb_store import RocksDBMetadataStore
from ledger.metadata.stores import SCHEMES, open_store
from ledger.metadata.zookeeper_store import ZooKeeperMetadataStore
from tests.support.wait import wait_for_async
from tests.unit.ledger.metadata.conftest import Recorder


# The ZooKeeper case starts a ZooKeeper JVM (zk_url): not in `make unit`.
@pytest.fixture(params=["rocksdb", pytest.param("zk", marks=pytest.mark.processes)])
def store_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_every_scheme_is_covered() -> None:
    assert sorted(SCHEMES) == ["rocksdb", "zk"]  # a new scheme: add it to store_kind


@pytest.fixture
def store_url(store_kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """The URL of a fresh, empty store; opening it again opens a second session on it."""
    if store_kind == "rocksdb":
        return f"rocksdb://{tmp_path / 'metadata'}"
    return str(request.getfixturevalue("zk_url"))


@pytest.fixture
def open_again(store_url: str) -> Iterator[Callable[[], object]]:
    """Opens a second session on the same data: a new store (the embedded one reopens)."""
    yield lambda: open_store(store_url, create=True)


async def _open(open_again: Callable[[], object]) -> MetadataStore:
    made = open_again()
    assert asyncio.iscoroutine(made)
    opened: MetadataStore = await made
    assert isinstance(opened, RocksDBMetadataStore | ZooKeeperMetadataStore)
    return opened


@pytest.fixture
async def store(open_again: Callable[[], object]) -> AsyncIterator[MetadataStore]:
    opened = await _open(open_again)
    yield opened
    await opened.close()


async def _events(watch: Recorder, count: int) -> None:
    async def enough() -> bool:
        return len(watch.events) >= count

    await wait_for_async(enough, f"{count} watch events (got {watch.events})", timeout_s=30)


async def _no_more(store: MetadataStore, watch: Recorder, count: int) -> None:
    # A round trip through the store after the change: an event that was going to
    # fire has been delivered by then (ZooKeeper sends watch events before replies).
    await store.exists("/")
    await asyncio.sleep(0)
    assert len(watch.events) == count, watch.events


async def test_root_exists_and_is_empty(store: MetadataStore) -> None:
    assert await store.exists("/")
    assert await store.get("/") == Versioned(data=b"", version=0)
    assert await store.children("/") == []
    with pytest.raises(NodeExistsError):
        await store.create("/")
    with pytest.raises(InvalidArgumentError):
        await store.delete("/")


async def test_create_get_exists(store: MetadataStore) -> None:
    assert await store.create("/a", b"hello") == "/a"
    assert await store.get("/a") == Versioned(data=b"hello", version=0)
    assert await store.exists("/a")
    assert not await store.exists("/b")
    with pytest.raises(NoNodeError):
        await store.get("/missing")
    with pytest.raises(NodeExistsError):
        await store.create("/a", b"second")
    with pytest.raises(NoNodeError):
        await store.create("/x/y/z")
    assert not await store.exists("/x")


async def test_make_parents(store: MetadataStore) -> None:
    assert await store.create("/x/y/z", b"leaf", make_parents=True) == "/x/y/z"
    assert await store.get("/x/y") == Versioned(data=b"", version=0)
    await store.set("/x", b"kept", 0)
    await store.create("/x/y/w", make_parents=True)
    assert await store.get("/x") == Versioned(data=b"kept", version=1)
    assert await store.children("/x/y") == ["w", "z"]


async def test_compare_and_set(store: MetadataStore) -> None:
    await store.create("/n", b"v0")
    assert await store.set("/n", b"v1", 0) == 1
    with pytest.raises(BadVersionError) as caught:
        await store.set("/n", b"lost", 0)
    assert (caught.value.path, caught.value.expected, caught.value.actual) == ("/n", 0, 1)
    assert await store.set("/n", b"v2", -1) == 2
    assert await store.get("/n") == Versioned(data=b"v2", version=2)
    with pytest.raises(NoNodeError):
        await store.set("/missing", b"x", -1)
    with pytest.raises(InvalidArgumentError):
        await store.set("/n", b"x", -2)
    with pytest.raises(InvalidArgumentError):
        await store.set("/n", "text", -1)  # type: ignore[arg-type]


async def test_delete(store: MetadataStore) -> None:
    await store.create("/d", b"x")
    await store.set("/d", b"y", 0)
    with pytest.raises(BadVersionError):
        await store.delete("/d", 0)
    await store.delete("/d", 1)
    assert not await store.exists("/d")
    with pytest.raises(NoNodeError):
        await store.delete("/d")
    await store.create("/p/c", make_parents=True)
    with pytest.raises(NotEmptyError):
        await store.delete("/p")
    await store.delete("/p/c")
    await store.delete("/p")
    assert await store.children("/") == []


async def test_children_sorted(store: MetadataStore) -> None:
    for path in ["/a/bc", "/a/b", "/a/b/d", "/a/b.x", "/a/a", "/ab", "/a/é", "/a/B"]:
        await store.create(path, make_parents=True)
    assert await store.children("/a") == ["B", "a", "b", "b.x", "bc", "é"]
    assert await store.children("/a/b") == ["d"]
    assert await store.children("/") == ["a", "ab"]
    with pytest.raises(NoNodeError):
        await store.children("/nope")


async def test_raw_bytes_and_bad_paths(store: MetadataStore) -> None:
    payload = bytes(range(256)) * 4
    await store.create("/raw", payload)
    assert (await store.get("/raw")).data == payload
    for path in ["", "a", "/a/", "//a", "/a/./b", "/a\x00b"]:
        with pytest.raises(InvalidArgumentError):
            await store.create(path)
        with pytest.raises(InvalidArgumentError):
            await store.get(path)


async def test_sequential_names_increase(store: MetadataStore) -> None:
    await store.create("/q")
    names = [await store.create("/q/item-", sequential=True) for _ in range(3)]
    assert len(set(names)) == 3
    assert names == sorted(names)
    for name in names:
        prefix, digits = name[:len("/q/item-")], name[len("/q/item-"):]
        assert prefix == "/q/item-" and len(digits) == 10 and digits.isdigit()
    assert (await store.create("/q/", sequential=True)).startswith("/q/")


async def test_ephemeral_nodes_vanish_with_the_session(
    store: MetadataStore, open_again: Callable[[], object], store_kind: str,
) -> None:
    await store.create("/reg", make_parents=True)
    owner = store if store_kind == "rocksdb" else await _open(open_again)
    await owner.create("/reg/me", b"addr", ephemeral=True)
    assert await owner.get("/reg/me") == Versioned(data=b"addr", version=0)
    with pytest.raises(InvalidArgumentError):
        await owner.create("/reg/me/child")
    await owner.close()
    reader = await _open(open_again) if store_kind == "rocksdb" else store
    try:
        assert not await reader.exists("/reg/me")
        assert await reader.exists("/reg")
    finally:
        if reader is not store:
            await reader.close()


async def test_data_watch_fires_once(store: MetadataStore) -> None:
    await store.create("/w", b"0")
    watch = Recorder()
    await store.get("/w", watch=watch)
    await store.get("/w", watch=watch)  # the same callback twice: fires once
    await store.set("/w", b"1", 0)
    await _events(watch, 1)
    await store.set("/w", b"2", 1)
    await _no_more(store, watch, 1)
    assert watch.events == [(EventType.CHANGED, "/w")]
    deleted = Recorder()
    await store.get("/w", watch=deleted)
    await store.delete("/w")
    await _events(deleted, 1)
    assert deleted.events == [(EventType.DELETED, "/w")]


async def test_watch_on_missing_node_fires_on_create(store: MetadataStore) -> None:
    watch = Recorder()
    with pytest.raises(NoNodeError):
        await store.get("/later", watch=watch)
    await store.create("/later")
    await _events(watch, 1)
    await store.set("/later", b"x", 0)
    await _no_more(store, watch, 1)
    assert watch.events == [(EventType.CREATED, "/later")]


async def test_child_watch(store: MetadataStore) -> None:
    await store.create("/p")
    watch = Recorder()
    assert await store.children("/p", watch=watch) == []
    await store.create("/p/a")
    await _events(watch, 1)
    await store.create("/p/b")
    await _no_more(store, watch, 1)
    assert watch.events == [(EventType.CHILDREN, "/p")]
    again = Recorder()
    await store.children("/p", watch=again)
    await store.delete("/p/a")
    await _events(again, 1)
    assert again.events == [(EventType.CHILDREN, "/p")]


async def test_raising_watch_does_not_break_the_store(store: MetadataStore) -> None:
    def broken(event: EventType, path: str) -> None:
        raise RuntimeError(f"broken watcher saw {event.value} {path}")

    await store.create("/w")
    after = Recorder()
    await store.get("/w", watch=broken)
    await store.get("/w", watch=after)
    assert await store.set("/w", b"x", 0) == 1
    await _events(after, 1)
    assert await store.get("/w") == Versioned(data=b"x", version=1)


async def test_concurrent_cas_has_one_winner(store: MetadataStore) -> None:
    await store.create("/cas", b"start")
    results = await asyncio.gather(
        *(store.set("/cas", b"task %d" % index, 0) for index in range(10)),
        return_exceptions=True,
    )
    winners = [index for index, result in enumerate(results) if result == 1]
    assert len(winners) == 1
    assert all(isinstance(result, BadVersionError) for index, result in enumerate(results)
               if index != winners[0])
    assert await store.get("/cas") == Versioned(data=b"task %d" % winners[0], version=1)


async def test_ledger_ids_from_concurrent_tasks_are_distinct(store: MetadataStore) -> None:
    ids = await asyncio.gather(*(allocate_ledger_id(store) for _ in range(20)))
    assert sorted(ids) == list(range(1, 21))
