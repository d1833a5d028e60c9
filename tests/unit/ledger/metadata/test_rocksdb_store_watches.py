"""Watches, persistence, concurrency and ledger ids of the RocksDB MetadataStore (real RocksDB)."""

from __future__ import annotations

import asyncio
import logging
import sys
import threading

import pytest
from rocksdict import Options, Rdict

from ledger.api import EventType, Versioned
from ledger.client.ledger_ids import IDGEN_PATH, allocate_ledger_id
from ledger.errors import (
    BadVersionError,
    MetadataError,
    NodeExistsError,
    NoNodeError,
)
from ledger.metadata.rocksdb_store import RocksDBMetadataStore
from tests.unit.ledger.metadata.conftest import (
    REPO_ROOT,
    THREAD_TIMEOUT_S,
    Recorder,
    run_in_threads,
)


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


@pytest.mark.processes
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
