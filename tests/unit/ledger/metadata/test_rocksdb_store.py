"""Tests of the embedded RocksDB MetadataStore and of ledger id allocation, on real RocksDB."""

from __future__ import annotations

import asyncio
import sys

import pytest

from ledger.api import EventType, MetadataStore, Versioned
from ledger.errors import (
    BadVersionError,
    InvalidArgumentError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
)
from ledger.metadata.rocksdb_store import RocksDBMetadataStore
from tests.unit.ledger.metadata.conftest import (
    REPO_ROOT,
    Recorder,
)


def test_is_a_metadata_store(data_dir: str) -> None:
    def accepts(metadata_store: MetadataStore) -> MetadataStore:
        return metadata_store

    metadata_store = RocksDBMetadataStore(data_dir)
    assert accepts(metadata_store) is metadata_store
    asyncio.run(metadata_store.close())


# -- basic operations -----------------------------------------------------------------


async def test_root_always_exists(store: RocksDBMetadataStore) -> None:
    assert await store.exists("/")
    assert await store.get("/") == Versioned(data=b"", version=0)
    assert await store.children("/") == []
    with pytest.raises(NodeExistsError):
        await store.create("/")
    with pytest.raises(InvalidArgumentError):
        await store.delete("/")


async def test_create_and_get(store: RocksDBMetadataStore) -> None:
    assert await store.create("/a", b"hello") == "/a"
    assert await store.get("/a") == Versioned(data=b"hello", version=0)
    assert await store.exists("/a")
    assert not await store.exists("/b")
    assert await store.create("/a/empty") == "/a/empty"
    assert await store.get("/a/empty") == Versioned(data=b"", version=0)
    with pytest.raises(NoNodeError):
        await store.get("/missing")


async def test_create_existing_and_missing_parent(store: RocksDBMetadataStore) -> None:
    await store.create("/a", b"first")
    with pytest.raises(NodeExistsError):
        await store.create("/a", b"second")
    assert await store.get("/a") == Versioned(data=b"first", version=0)
    with pytest.raises(NoNodeError):
        await store.create("/x/y/z")
    assert not await store.exists("/x")


async def test_make_parents(store: RocksDBMetadataStore) -> None:
    assert await store.create("/x/y/z", b"leaf", make_parents=True) == "/x/y/z"
    assert await store.get("/x") == Versioned(data=b"", version=0)
    assert await store.get("/x/y") == Versioned(data=b"", version=0)
    assert await store.get("/x/y/z") == Versioned(data=b"leaf", version=0)
    # Existing parents are left as they are.
    await store.set("/x", b"kept", 0)
    await store.create("/x/y/w", make_parents=True)
    assert await store.get("/x") == Versioned(data=b"kept", version=1)
    assert await store.children("/x/y") == ["w", "z"]


async def test_set_compare_and_set(store: RocksDBMetadataStore) -> None:
    await store.create("/n", b"v0")
    assert await store.set("/n", b"v1", 0) == 1
    with pytest.raises(BadVersionError) as caught:
        await store.set("/n", b"lost", 0)
    assert (caught.value.path, caught.value.expected, caught.value.actual) == ("/n", 0, 1)
    assert await store.get("/n") == Versioned(data=b"v1", version=1)
    assert await store.set("/n", b"v2", -1) == 2
    assert await store.set("/n", b"v3", 2) == 3
    assert await store.get("/n") == Versioned(data=b"v3", version=3)
    with pytest.raises(NoNodeError):
        await store.set("/missing", b"x", -1)
    with pytest.raises(InvalidArgumentError):
        await store.set("/n", b"x", -2)
    with pytest.raises(InvalidArgumentError):
        await store.set("/n", "text", -1)  # type: ignore[arg-type]


async def test_delete_with_version(store: RocksDBMetadataStore) -> None:
    await store.create("/d", b"x")
    await store.set("/d", b"y", 0)
    with pytest.raises(BadVersionError) as caught:
        await store.delete("/d", 0)
    assert (caught.value.path, caught.value.expected, caught.value.actual) == ("/d", 0, 1)
    assert await store.exists("/d")
    await store.delete("/d", 1)
    assert not await store.exists("/d")
    with pytest.raises(NoNodeError):
        await store.delete("/d")
    await store.create("/e")
    await store.delete("/e")  # -1: any version
    assert not await store.exists("/e")


async def test_delete_refuses_node_with_children(store: RocksDBMetadataStore) -> None:
    await store.create("/p/c", make_parents=True)
    with pytest.raises(NotEmptyError):
        await store.delete("/p")
    assert await store.exists("/p")
    await store.delete("/p/c")
    await store.delete("/p")
    assert not await store.exists("/p")


async def test_delete_with_prefix_sharing_sibling(store: RocksDBMetadataStore) -> None:
    # "/x/bc" and "/x/b.d" share the prefix "/x/b" but are not children of "/x/b".
    await store.create("/x/b", make_parents=True)
    await store.create("/x/bc")
    await store.create("/x/b.d")
    await store.delete("/x/b")
    assert await store.children("/x") == ["b.d", "bc"]


async def test_children_sorted_without_grandchildren(store: RocksDBMetadataStore) -> None:
    for path in ["/a/bc", "/a/b", "/a/b/d", "/a/b/c", "/a/b.x", "/a/a", "/ab", "/a/é", "/a/B"]:
        await store.create(path, make_parents=True)
    await store.create("/a/b/c/deep/deeper", make_parents=True)
    assert await store.children("/a") == ["B", "a", "b", "b.x", "bc", "é"]
    assert await store.children("/a/b") == ["c", "d"]
    assert await store.children("/a/bc") == []
    assert await store.children("/") == ["a", "ab"]
    with pytest.raises(NoNodeError):
        await store.children("/nope")


async def test_data_is_raw_bytes(store: RocksDBMetadataStore) -> None:
    payload = bytes(range(256)) * 4
    await store.create("/raw", payload)
    assert (await store.get("/raw")).data == payload
    await store.set("/raw", bytearray(b"\x00\x01"), 0)  # type: ignore[arg-type]
    assert (await store.get("/raw")).data == b"\x00\x01"


@pytest.mark.parametrize(
    "path",
    ["", "a", "a/b", "/a/", "//a", "/a//b", "/.", "/a/./b", "/a/..", "/a\x00b", "/\ud800"],
)
async def test_invalid_paths_are_refused(store: RocksDBMetadataStore, path: str) -> None:
    with pytest.raises(InvalidArgumentError):
        await store.create(path)
    with pytest.raises(InvalidArgumentError):
        await store.get(path)
    with pytest.raises(InvalidArgumentError):
        await store.exists(path)
    with pytest.raises(InvalidArgumentError):
        await store.set(path, b"", -1)
    with pytest.raises(InvalidArgumentError):
        await store.delete(path)
    with pytest.raises(InvalidArgumentError):
        await store.children(path)
    assert await store.children("/") == []


# -- sequential nodes -------------------------------------------------------------------


async def test_sequential_counter_survives_deletes_and_reopen(data_dir: str) -> None:
    store = RocksDBMetadataStore(data_dir)
    await store.create("/q")
    first = await store.create("/q/item-", b"one", sequential=True)
    second = await store.create("/q/item-", sequential=True)
    assert (first, second) == ("/q/item-0000000000", "/q/item-0000000001")
    assert await store.get(first) == Versioned(data=b"one", version=0)
    await store.create("/q/plain")  # not sequential: takes no number
    await store.delete(first)
    await store.delete(second)
    assert await store.create("/q/item-", sequential=True) == "/q/item-0000000002"
    # One counter per parent, whatever the name prefix.
    assert await store.create("/q/other-", sequential=True) == "/q/other-0000000003"
    await store.close()

    store = RocksDBMetadataStore(data_dir)
    assert await store.create("/q/item-", sequential=True) == "/q/item-0000000004"
    assert await store.children("/q") == [
        "item-0000000002", "item-0000000004", "other-0000000003", "plain",
    ]
    await store.close()


async def test_sequential_counters_are_per_parent(store: RocksDBMetadataStore) -> None:
    assert await store.create("/r/", sequential=True, make_parents=True) == "/r/0000000000"
    assert await store.create("/s/n", sequential=True, make_parents=True) == "/s/n0000000000"
    assert await store.create("/r/", sequential=True) == "/r/0000000001"
    assert await store.create("/seq", sequential=True) == "/seq0000000000"
    with pytest.raises(NoNodeError):
        await store.create("/missing/n", sequential=True)


async def test_sequential_counter_restarts_with_recreated_parent(
    store: RocksDBMetadataStore,
) -> None:
    # As ZooKeeper does: the counter belongs to the parent node and goes with it.
    await store.create("/q/n", sequential=True, make_parents=True)
    await store.delete("/q/n0000000000")
    await store.delete("/q")
    await store.create("/q")
    assert await store.create("/q/n", sequential=True) == "/q/n0000000000"


# -- ephemeral nodes --------------------------------------------------------------------


async def test_ephemeral_nodes_vanish_at_close(data_dir: str) -> None:
    store = RocksDBMetadataStore(data_dir)
    await store.create("/owners")
    await store.create("/owners/e1", b"me", ephemeral=True)
    sequential = await store.create("/owners/e-", ephemeral=True, sequential=True)
    await store.create("/owners/persistent", b"stays")
    assert await store.children("/owners") == ["e-0000000000", "e1", "persistent"]
    assert sequential == "/owners/e-0000000000"
    watch = Recorder()
    await store.get("/owners/e1", watch=watch)
    await store.close()
    assert watch.events == [(EventType.DELETED, "/owners/e1")]

    store = RocksDBMetadataStore(data_dir)
    assert await store.children("/owners") == ["persistent"]
    assert await store.get("/owners/persistent") == Versioned(data=b"stays", version=0)
    await store.close()


@pytest.mark.processes
async def test_ephemeral_nodes_of_a_crashed_process_vanish_on_open(data_dir: str) -> None:
    script = (
        "import asyncio, os\n"
        "from ledger.metadata.rocksdb_store import RocksDBMetadataStore\n"
        "async def main():\n"
        f"    store = RocksDBMetadataStore({data_dir!r})\n"
        "    await store.create('/owners/gone', b'x', ephemeral=True, make_parents=True)\n"
        "    await store.create('/owners/kept', b'y')\n"
        "    os._exit(0)  # crash: no close()\n"
        "asyncio.run(main())\n"
    )
    crashing = await asyncio.create_subprocess_exec(
        sys.executable, "-c", script, cwd=REPO_ROOT, stderr=asyncio.subprocess.PIPE,
    )
    _, stderr = await crashing.communicate()
    assert crashing.returncode == 0, stderr.decode()

    store = RocksDBMetadataStore(data_dir)
    assert await store.children("/owners") == ["kept"]
    assert not await store.exists("/owners/gone")
    # The name is free again, as after a ZooKeeper session expiry.
    await store.create("/owners/gone", ephemeral=True)
    await store.close()


async def test_ephemeral_node_cannot_have_children(store: RocksDBMetadataStore) -> None:
    await store.create("/eph", ephemeral=True)
    with pytest.raises(InvalidArgumentError):
        await store.create("/eph/child")
    with pytest.raises(InvalidArgumentError):
        await store.create("/eph/a/b", make_parents=True)
    assert await store.children("/eph") == []


async def test_deleted_ephemeral_is_not_deleted_again(data_dir: str) -> None:
    store = RocksDBMetadataStore(data_dir)
    await store.create("/e", ephemeral=True)
    await store.delete("/e")
    await store.create("/e", b"persistent now")
    await store.close()
    store = RocksDBMetadataStore(data_dir)
    assert await store.get("/e") == Versioned(data=b"persistent now", version=0)
    await store.close()


# -- watches ----------------------------------------------------------------------------
