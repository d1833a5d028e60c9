"""LoadedSegments alone: loading once, caching, reloading, releasing, on real segments.

The table under test loads segments on the ledger stack of ``conftest.py``
(RocksDB metadata, an in-process bookie); a ``TopicManager`` on the same
stack only writes the topic records and holds the snapshot store's system
topic, and never loads the segments the table is tested with.
"""

from __future__ import annotations

import asyncio
import functools

import pytest

from broker.api import SegmentState, TopicConfig
from broker.errors import BrokerShuttingDownError, NoSuchSegmentError, WrongHostError
from broker.segments.names import segment_path
from broker.system.snapshot_store import snapshot_store
from broker.topics.loaded import LoadedSegments
from broker.topics.manager import TopicManager
from tests.support.wait import wait_for_async
from tests.unit.broker.conftest import SMALL, BrokerEnv, block
from txnbuffer.api import SnapshotPolicy, SnapshotStore

DAY_MS = 24 * 3600 * 1000


class Table:
    """A LoadedSegments on ``env`` with a switch for its owner's close and a factory count."""

    def __init__(self, env: BrokerEnv, topics: TopicManager, *,
                 reload_fenced: bool = False) -> None:
        self.closed = False
        self.stores_made = 0
        self._make = functools.partial(snapshot_store, topics)
        self.segments = LoadedSegments(
            env.ledgers, env.store, check_open=self._check_open, clock=env.clock,
            writer_expiry_ms=DAY_MS, txn_snapshots=SnapshotPolicy(),
            make_txn_store=self._make_store, reload_fenced=reload_fenced)

    def _check_open(self) -> None:
        if self.closed:
            raise BrokerShuttingDownError("the broker is shutting down")

    def _make_store(self) -> SnapshotStore:
        self.stores_made += 1
        return self._make()


async def test_loads_once_caches_and_makes_the_snapshot_store_once(env: BrokerEnv) -> None:
    topics = env.manager()
    await topics.create_topic("t", 2, TopicConfig())
    table = Table(env, topics)
    assert table.segments.get("t/0") is None
    first, again = await asyncio.gather(table.segments.segment("t/0"),
                                        table.segments.segment("t/0"))
    assert first is again is table.segments.get("t/0")
    other = await table.segments.segment("t/1")
    assert table.segments.loaded_segments() == [first, other]
    assert table.stores_made == 1
    assert (await first.append([block(0)], "w", 0)).offset == 0
    await table.segments.close()
    assert table.segments.loaded_segments() == []


async def test_unknown_segments_and_a_closed_owner_are_refused(env: BrokerEnv) -> None:
    topics = env.manager()
    await topics.create_topic("t", 1, TopicConfig())
    table = Table(env, topics)
    for name in ("t/1", "nope/0"):
        with pytest.raises(NoSuchSegmentError):
            await table.segments.segment(name)
    table.closed = True
    with pytest.raises(BrokerShuttingDownError):
        await table.segments.segment("t/0")
    with pytest.raises(BrokerShuttingDownError):
        await table.segments.open_segment_names()
    assert table.segments.loaded_segments() == []


async def test_a_segment_another_table_took_stays_failed_without_reload_fenced(
        env: BrokerEnv) -> None:
    topics = env.manager()
    await topics.create_topic("t", 1, SMALL)
    first, second = Table(env, topics), Table(env, topics)
    stale = await first.segments.segment("t/0")
    assert (await stale.append([block(0)], "w", 0)).offset == 0
    taken = await second.segments.segment("t/0")  # recovery fences the first's ledger
    with pytest.raises(WrongHostError):
        await stale.append([block(1)], "w", 1)
    assert await first.segments.segment("t/0") is stale  # reloading would fence the owner
    assert (await taken.append([block(1)], "w", 1)).offset == 1


async def test_with_reload_fenced_a_fenced_segment_loads_again_and_sees_the_writes(
        env: BrokerEnv) -> None:
    topics = env.manager()
    await topics.create_topic("t", 1, SMALL)
    first = Table(env, topics, reload_fenced=True)
    second = Table(env, topics, reload_fenced=True)
    stale = await first.segments.segment("t/0")
    taken = await second.segments.segment("t/0")
    assert (await taken.append([block(0, 3)], "w", 2)).offset == 0
    with pytest.raises(WrongHostError):
        await stale.append([block(1)], "x", 0)
    again = await first.segments.segment("t/0")
    assert again is not stale
    assert again.info().segment.end_offset == 3


async def test_a_watched_segment_deleted_elsewhere_is_forgotten(env: BrokerEnv) -> None:
    topics = env.manager()
    await topics.create_topic("t", 1, SMALL)
    table = Table(env, topics, reload_fenced=True)
    segment = await table.segments.segment("t/0")
    await topics.delete_topic("t")

    async def forgotten() -> bool:
        return table.segments.get("t/0") is None
    await wait_for_async(forgotten, "the table forgets the deleted segment")
    with pytest.raises(NoSuchSegmentError):
        await segment.append([block(0)], "w", 0)


async def test_release_and_drop_take_only_the_accepted_segments(env: BrokerEnv) -> None:
    topics = env.manager()
    await topics.create_topic("t", 3, SMALL)
    table = Table(env, topics)
    loaded = [await table.segments.segment(f"t/{n}") for n in range(3)]
    await table.segments.release_segments(lambda name: name == "t/0")
    table.segments.drop_segments(lambda name: name == "t/1")
    assert table.segments.loaded_segments() == [loaded[2]]
    for segment in loaded[:2]:
        with pytest.raises(WrongHostError):
            await segment.append([block(0)], "w", 0)
    assert (await loaded[2].append([block(0)], "w", 0)).offset == 0


async def test_open_segment_names_and_ensure_sealed(env: BrokerEnv) -> None:
    topics = env.manager()
    await topics.create_topic("t", 2, SMALL)
    await topics.create_topic("u", 1, SMALL)
    await topics.scale_topic("u", ["u/0"], [(0.0, 0.5), (0.5, 1.0)])
    table = Table(env, topics)
    assert await table.segments.open_segment_names() == ["t/0", "t/1", "u/1", "u/2"]
    # The manager's scale sealed u/0 through its own table; t/0 is sealed here.
    await table.segments.ensure_sealed("t", 0)
    segment = await table.segments.segment("t/0")
    assert segment.sealed
    assert (await topics.get_topic("t")).segments[0].state is SegmentState.OPEN


async def test_delete_segment_loaded_here_or_elsewhere(env: BrokerEnv) -> None:
    topics = env.manager()
    await topics.create_topic("t", 2, SMALL)
    here = Table(env, topics, reload_fenced=True)
    elsewhere = Table(env, topics, reload_fenced=True)  # another broker
    mine = await here.segments.segment("t/0")
    theirs = await elsewhere.segments.segment("t/1")
    await theirs.append([block(0)], "w", 0)
    ledger_ids = {ledger.ledger_id for ledger in theirs.info().ledgers}
    await here.segments.delete_segment("t", 0)
    assert here.segments.get("t/0") is None
    with pytest.raises(NoSuchSegmentError):
        await mine.append([block(0)], "w", 0)
    # Not loaded here: its ledger is fenced, then deleted with the record; the
    # other copy's watch sees the record go.
    await here.segments.delete_segment("t", 1)
    assert not await env.store.exists(segment_path("t", 1))
    assert not ledger_ids & set(env.bookie.ledger_ids())

    async def forgotten() -> bool:
        return elsewhere.segments.get("t/1") is None
    await wait_for_async(forgotten, "the other table forgets the deleted segment")
    with pytest.raises(NoSuchSegmentError):
        await theirs.append([block(1)], "w", 1)
    await here.segments.delete_segment("t", 1)  # gone already: nothing to do
    await elsewhere.segments.close()
