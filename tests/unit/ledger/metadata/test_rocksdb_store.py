"""Tests of the embedded RocksDB MetadataStore and of ledger id allocation, on real RocksDB."""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from rocksdict import Options, Rdict

from ledger.api import EventType, MetadataStore, Versioned
from ledger.client.ledger_ids import IDGEN_PATH, allocate_ledger_id
from ledger.errors import (
    BadVersionError,
    InvalidArgumentError,
    MetadataError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
)
from ledger.metadata.rocksdb_store import RocksDBMetadataStore

REPO_ROOT = Path(__file__).resolve().parents[3]
THREAD_TIMEOUT_S = 30.0


class Recorder:
    """A watch callback that records what it saw."""

    def __init__(self) -> None:
        self.events: list[tuple[EventType, str]] = []

    def __call__(self, event: EventType, path: str) -> None:
        self.events.append((event, path))


@pytest.fixture
def data_dir(tmp_path: Path) -> str:
    return str(tmp_path / "metadata")


@pytest.fixture
async def store(data_dir: str) -> AsyncIterator[RocksDBMetadataStore]:
    metadata_store = RocksDBMetadataStore(data_dir)
    yield metadata_store
    await metadata_store.close()


def run_in_threads(count: int, target: object) -> list[object]:
    """Run ``target(index)`` on ``count`` threads started together; return results or errors."""
    assert callable(target)
    barrier = threading.Barrier(count, timeout=THREAD_TIMEOUT_S)
    results: list[object] = [None] * count

    def body(index: int) -> None:
        barrier.wait()
        try:
            results[index] = target(index)
        except Exception as error:
            results[index] = error

    threads = [threading.Thread(target=body, args=(index,)) for index in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(THREAD_TIMEOUT_S)
        assert not thread.is_alive()
    return results


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


async def test_data_watch_fires_once_on_change(store: RocksDBMetadataStore) -> None:
    await store.create("/w", b"0")
    watch = Recorder()
    assert await store.get("/w", watch=watch) == Versioned(data=b"0", version=0)
    await store.set("/w", b"1", 0)
    await store.set("/w", b"2", 1)
    await store.delete("/w")
    assert watch.events == [(EventType.CHANGED, "/w")]


async def test_data_watch_fires_on_delete(store: RocksDBMetadataStore) -> None:
    await store.create("/w")
    watch = Recorder()
    await store.get("/w", watch=watch)
    await store.delete("/w")
    assert watch.events == [(EventType.DELETED, "/w")]


async def test_data_watch_on_missing_node_fires_on_create(store: RocksDBMetadataStore) -> None:
    watch = Recorder()
    with pytest.raises(NoNodeError):
        await store.get("/later", watch=watch)
    assert watch.events == []
    await store.create("/later")
    await store.set("/later", b"x", 0)
    assert watch.events == [(EventType.CREATED, "/later")]


async def test_child_watch(store: RocksDBMetadataStore) -> None:
    await store.create("/p")
    watch = Recorder()
    assert await store.children("/p", watch=watch) == []
    await store.create("/p/a")
    await store.create("/p/b")
    assert watch.events == [(EventType.CHILDREN, "/p")]

    await store.children("/p", watch=watch)
    await store.set("/p", b"data changes are not child events", 0)
    await store.set("/p/a", b"nor are grandchild data changes", 0)
    await store.create("/p/a/grandchild")
    assert watch.events == [(EventType.CHILDREN, "/p")]
    await store.delete("/p/b")
    assert watch.events == [(EventType.CHILDREN, "/p")] * 2

    await store.delete("/p/a/grandchild")
    await store.delete("/p/a")
    await store.children("/p", watch=watch)
    await store.delete("/p")
    assert watch.events == [(EventType.CHILDREN, "/p")] * 2 + [(EventType.DELETED, "/p")]


async def test_child_watch_not_set_on_missing_node(store: RocksDBMetadataStore) -> None:
    watch = Recorder()
    with pytest.raises(NoNodeError):
        await store.children("/p", watch=watch)
    await store.create("/p")
    await store.create("/p/c")
    assert watch.events == []


async def test_make_parents_fires_watches_on_each_created_node(
    store: RocksDBMetadataStore,
) -> None:
    root_children = Recorder()
    middle_data = Recorder()
    await store.children("/", watch=root_children)
    with pytest.raises(NoNodeError):
        await store.get("/x/y", watch=middle_data)
    await store.create("/x/y/z", make_parents=True)
    assert root_children.events == [(EventType.CHILDREN, "/")]
    assert middle_data.events == [(EventType.CREATED, "/x/y")]


async def test_same_callback_set_twice_fires_once(store: RocksDBMetadataStore) -> None:
    await store.create("/w")
    watch = Recorder()
    await store.get("/w", watch=watch)
    await store.get("/w", watch=watch)
    await store.children("/w", watch=watch)
    await store.delete("/w")
    assert watch.events == [(EventType.DELETED, "/w")]


async def test_raising_callback_does_not_break_the_store(
    store: RocksDBMetadataStore, caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(event: EventType, path: str) -> None:
        raise RuntimeError(f"broken watcher saw {event.value} {path}")

    await store.create("/w")
    after = Recorder()
    await store.get("/w", watch=broken)
    await store.get("/w", watch=after)
    with caplog.at_level(logging.ERROR, logger="ledger.metadata.rocksdb_store"):
        assert await store.set("/w", b"x", 0) == 1
    assert after.events == [(EventType.CHANGED, "/w")]
    assert await store.get("/w") == Versioned(data=b"x", version=1)
    [record] = [r for r in caplog.records if r.name == "ledger.metadata.rocksdb_store"]
    assert record.levelno == logging.ERROR
    assert record.exc_info is not None
    assert isinstance(record.exc_info[1], RuntimeError)
    # The store goes on working, watches included.
    await store.get("/w", watch=after)
    await store.delete("/w")
    assert after.events == [(EventType.CHANGED, "/w"), (EventType.DELETED, "/w")]


async def test_callback_sees_the_change_and_may_call_the_store(
    store: RocksDBMetadataStore,
) -> None:
    # The callback runs after the write and outside the store's lock: a read
    # from another thread made inside it sees the new data (and does not deadlock).
    seen: list[Versioned] = []

    def read_back(event: EventType, path: str) -> None:
        reader = threading.Thread(target=lambda: seen.append(asyncio.run(store.get(path))))
        reader.start()
        reader.join(THREAD_TIMEOUT_S)
        assert not reader.is_alive()

    await store.create("/w", b"old")
    await store.get("/w", watch=read_back)
    await store.set("/w", b"new", 0)
    assert seen == [Versioned(data=b"new", version=1)]


# -- persistence, concurrency, opening --------------------------------------------------


async def test_persistence_across_reopen(data_dir: str) -> None:
    store = RocksDBMetadataStore(data_dir)
    await store.create("/ledgers/L1", b"meta", make_parents=True)
    await store.set("/ledgers/L1", b"meta2", 0)
    await store.set("/", b"root data", -1)
    await store.create("/gone")
    await store.delete("/gone")
    await store.close()

    async with RocksDBMetadataStore(data_dir) as reopened:
        assert await reopened.get("/ledgers/L1") == Versioned(data=b"meta2", version=1)
        assert await reopened.get("/") == Versioned(data=b"root data", version=1)
        assert await reopened.children("/") == ["ledgers"]
        assert not await reopened.exists("/gone")


async def test_concurrent_cas_from_tasks_has_one_winner(store: RocksDBMetadataStore) -> None:
    await store.create("/cas", b"start")
    results = await asyncio.gather(
        *(store.set("/cas", b"task %d" % index, 0) for index in range(10)),
        return_exceptions=True,
    )
    winners = [index for index, result in enumerate(results) if result == 1]
    assert len(winners) == 1
    losers = [result for result in results if not isinstance(result, int)]
    assert len(losers) == 9
    for loser in losers:
        assert isinstance(loser, BadVersionError)
        assert (loser.expected, loser.actual) == (0, 1)
    assert await store.get("/cas") == Versioned(data=b"task %d" % winners[0], version=1)


async def test_concurrent_cas_from_threads_has_one_winner(store: RocksDBMetadataStore) -> None:
    await store.create("/cas", b"start")
    results = run_in_threads(8, lambda index: asyncio.run(store.set("/cas", b"%d" % index, 0)))
    winners = [index for index, result in enumerate(results) if result == 1]
    assert len(winners) == 1
    for index, result in enumerate(results):
        if index != winners[0]:
            assert isinstance(result, BadVersionError)
            assert (result.expected, result.actual) == (0, 1)
    assert await store.get("/cas") == Versioned(data=b"%d" % winners[0], version=1)


async def test_concurrent_creates_from_threads_have_one_winner(
    store: RocksDBMetadataStore,
) -> None:
    results = run_in_threads(8, lambda index: asyncio.run(store.create("/lock", b"%d" % index)))
    assert results.count("/lock") == 1
    assert sum(isinstance(result, NodeExistsError) for result in results) == 7


async def test_concurrent_sequential_creates_get_distinct_names(
    store: RocksDBMetadataStore,
) -> None:
    await store.create("/q")
    results = run_in_threads(8, lambda _: asyncio.run(store.create("/q/n-", sequential=True)))
    assert sorted(str(result) for result in results) == [f"/q/n-{i:010d}" for i in range(8)]


async def test_closed_store_refuses_calls(data_dir: str) -> None:
    store = RocksDBMetadataStore(data_dir)
    await store.close()
    await store.close()  # idempotent
    with pytest.raises(MetadataError, match="closed"):
        await store.get("/")
    with pytest.raises(MetadataError, match="closed"):
        await store.create("/a")
    with pytest.raises(MetadataError, match="closed"):
        await store.exists("/")


async def test_second_open_in_process_fails_clearly(store: RocksDBMetadataStore) -> None:
    with pytest.raises(MetadataError, match="holds it open"):
        RocksDBMetadataStore(store.data_dir)
    # The first store is unaffected.
    await store.create("/still-works")
    assert await store.exists("/still-works")


async def test_open_held_by_another_process_fails_clearly(data_dir: str) -> None:
    script = (
        "import sys\n"
        "from ledger.metadata.rocksdb_store import RocksDBMetadataStore\n"
        f"store = RocksDBMetadataStore({data_dir!r})\n"
        "print('ready', flush=True)\n"
        "sys.stdin.read()\n"
    )
    holder = await asyncio.create_subprocess_exec(
        sys.executable, "-c", script, cwd=REPO_ROOT, stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert holder.stdout is not None
        assert await holder.stdout.readline() == b"ready\n"
        with pytest.raises(MetadataError, match="holds it open"):
            RocksDBMetadataStore(data_dir)
    finally:
        assert holder.stdin is not None
        holder.stdin.close()  # the holder exits at end of input
        await holder.wait()
    assert holder.returncode == 0
    # Once the holder is gone, the directory opens.
    async with RocksDBMetadataStore(data_dir) as store:
        assert await store.exists("/")


async def test_unknown_node_format_is_refused(data_dir: str) -> None:
    async with RocksDBMetadataStore(data_dir) as store:
        await store.create("/future", b"x")
    db = Rdict(data_dir, Options(raw_mode=True))
    db.put(b"n/future", bytes([9]) + bytes(9) + b"x")
    db.close()
    async with RocksDBMetadataStore(data_dir) as store:
        with pytest.raises(MetadataError, match="unknown format version 9"):
            await store.get("/future")


# -- ledger ids -------------------------------------------------------------------------


async def test_ledger_ids_increase_across_reopen(data_dir: str) -> None:
    store = RocksDBMetadataStore(data_dir)
    assert [await allocate_ledger_id(store) for _ in range(3)] == [1, 2, 3]
    assert await store.children("/ledgers") == ["idgen"]
    await store.close()
    store = RocksDBMetadataStore(data_dir)
    assert await allocate_ledger_id(store) == 4
    assert (await store.get(IDGEN_PATH)).version == 3
    await store.close()


async def test_ledger_ids_from_concurrent_threads_are_distinct(
    store: RocksDBMetadataStore,
) -> None:
    async def allocate_five() -> list[int]:
        return [await allocate_ledger_id(store) for _ in range(5)]

    results = run_in_threads(4, lambda _: asyncio.run(allocate_five()))
    allocated: list[int] = []
    for result in results:
        assert isinstance(result, list)
        assert result == sorted(result)
        assert len(set(result)) == 5
        allocated.extend(result)
    assert sorted(allocated) == list(range(1, 21))
    assert await allocate_ledger_id(store) == 21


async def test_ledger_ids_from_concurrent_tasks_are_distinct(
    store: RocksDBMetadataStore,
) -> None:
    allocated = await asyncio.gather(*(allocate_ledger_id(store) for _ in range(10)))
    assert sorted(allocated) == list(range(1, 11))
