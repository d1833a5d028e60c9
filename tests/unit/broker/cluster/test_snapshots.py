"""Snapshots placed with their segments: the placement rule, key routing, ownership, moving.

``ContainerSnapshotStore`` on real RocksDB metadata and a real in-process
bookie (``BrokerEnv``). Two topic managers on the same stack stand for two
brokers of a cluster: whichever loads a segment fences the other's copy, as
on separate machines.
"""

from __future__ import annotations

import zlib

import pytest

from broker.cluster.containers import SNAPSHOT_TOPIC, container_of
from broker.cluster.owned_topics import TopicsHandover
from broker.cluster.snapshots import (
    SNAPSHOT_FENCED_WRITES,
    SNAPSHOT_NOT_OWNER,
    ContainerSnapshotStore,
    snapshot_segment_of,
)
from broker.errors import NoSuchSegmentError, TopicNotFoundError, WrongHostError
from broker.system.snapshot_store import SNAPSHOT_TOPIC as STANDALONE_TOPIC
from broker.topics.manager import TopicManager
from tests.unit.broker.conftest import BrokerEnv
from tests.unit.txnbuffer.conftest import MemorySegmentLog
from txnbuffer import EntryKind, TransactionBuffer

COUNT = 4


class Owner:
    """Which containers a fake broker serves (what ``ZooKeeperOwners.owns`` answers)."""

    def __init__(self, containers: set[int]) -> None:
        self.containers = containers

    def __call__(self, segment: str) -> bool:
        return container_of(segment, COUNT) in self.containers


def segments_by_container() -> dict[int, str]:
    """A user segment name in each container."""
    found: dict[int, str] = {}
    for i in range(1000):
        found.setdefault(container_of(f"orders/{i}", COUNT), f"orders/{i}")
        if len(found) == COUNT:
            return found
    raise AssertionError("no segment name for some container")


def broker(env: BrokerEnv, owns: Owner) -> tuple[TopicManager, ContainerSnapshotStore]:
    stores: list[ContainerSnapshotStore] = []

    def factory(topics: TopicManager) -> ContainerSnapshotStore:
        stores.append(ContainerSnapshotStore(topics, COUNT, owns))
        return stores[-1]

    manager = TopicManager(env.ledgers, env.store, txn_store_factory=factory,
                           reload_fenced=True, clock=env.clock)
    manager.txn_snapshot_store()
    return manager, stores[0]


def loaded(manager: TopicManager) -> set[str]:
    return {segment.name for segment in manager.loaded_segments()}


def test_snapshot_segment_n_is_in_container_n() -> None:
    assert STANDALONE_TOPIC == SNAPSHOT_TOPIC  # one topic: standalone uses its segment 0
    for count in (1, 4, 16):
        assert [container_of(f"{SNAPSHOT_TOPIC}/{n}", count) for n in range(count)] == list(
            range(count))
    assert snapshot_segment_of("orders/3", 16) == f"{SNAPSHOT_TOPIC}/{zlib.crc32(b'orders/3') % 16}"
    # Only "<topic>/<decimal>" takes the rule; other names hash as any other.
    assert container_of(f"{SNAPSHOT_TOPIC}x/1", 16) == zlib.crc32(
        f"{SNAPSHOT_TOPIC}x/1".encode()) % 16


async def test_each_segments_chunks_go_to_its_containers_snapshot_segment(
        env: BrokerEnv) -> None:
    manager, store = broker(env, Owner(set(range(COUNT))))
    try:
        named = segments_by_container()
        for container, segment in named.items():
            await store.write(f"{segment}-1", b"chunk %d" % container)
            await store.write(f"{segment}-end", b"end %d" % container)
        info = await manager.get_topic(SNAPSHOT_TOPIC)
        assert len(info.segments) == COUNT  # created with one segment per container
        for container, segment in named.items():
            # In the container's own segment, and only there.
            assert await store.topic(container).read_prefix("") == {
                f"{segment}-1": b"chunk %d" % container, f"{segment}-end": b"end %d" % container}
            assert await store.read_prefix(f"{segment}-") == {
                f"{segment}-1": b"chunk %d" % container, f"{segment}-end": b"end %d" % container}
        await store.write(f"{named[0]}-1", None)
        assert await store.read_prefix(f"{named[0]}-") == {f"{named[0]}-end": b"end 0"}
        with pytest.raises(ValueError, match="not a transaction-buffer snapshot key"):
            await store.write("nodash", b"x")
    finally:
        await manager.close()


async def test_a_non_owner_neither_reads_nor_writes_nor_loads_the_snapshot_segment(
        env: BrokerEnv) -> None:
    named = segments_by_container()
    owner, owner_store = broker(env, Owner({0, 1, 2, 3}))
    other, other_store = broker(env, Owner({1, 2, 3}))  # container 0 is not its
    try:
        await owner_store.write(f"{named[0]}-end", b"owner's")
        reads = SNAPSHOT_NOT_OWNER.labels("read")._value.get()
        writes = SNAPSHOT_NOT_OWNER.labels("write")._value.get()
        assert await other_store.read_prefix(f"{named[0]}-") == {}  # it replays instead
        with pytest.raises(WrongHostError) as refused:
            await other_store.write(f"{named[0]}-end", b"other's")
        assert refused.value.segment == f"{SNAPSHOT_TOPIC}/0"
        assert SNAPSHOT_NOT_OWNER.labels("read")._value.get() == reads + 1
        assert SNAPSHOT_NOT_OWNER.labels("write")._value.get() == writes + 1
        assert f"{SNAPSHOT_TOPIC}/0" not in loaded(other)  # nothing fenced
        # The owner's copy was never fenced: it writes on.
        fenced = SNAPSHOT_FENCED_WRITES.labels("0")._value.get()
        await owner_store.write(f"{named[0]}-end", b"owner's again")
        assert await owner_store.read_prefix(f"{named[0]}-") == {
            f"{named[0]}-end": b"owner's again"}
        assert SNAPSHOT_FENCED_WRITES.labels("0")._value.get() == fenced
    finally:
        await owner.close()
        await other.close()


async def test_the_snapshot_moves_with_its_container_and_the_buffer_recovers_there(
        env: BrokerEnv) -> None:
    segment = segments_by_container()[2]
    first_owns, second_owns = Owner({0, 1, 2, 3}), Owner(set())
    first, first_store = broker(env, first_owns)
    second, second_store = broker(env, second_owns)
    try:
        log = MemorySegmentLog()
        buffer = TransactionBuffer(segment, first_store)
        await buffer.recover(log)
        for txn in (1, 2):
            buffer.on_entry(log.append(EntryKind.TXN_DATA, (0, txn)))
        buffer.on_entry(log.append(EntryKind.ABORT_MARKER, (0, 1)))
        buffer.on_entry(log.append(EntryKind.COMMIT_MARKER, (0, 2)))
        await buffer.take_snapshot()
        assert f"{SNAPSHOT_TOPIC}/2" in loaded(first)
        # A handover of container 2: the first lets it go, the second claims it.
        first_owns.containers.discard(2)
        await TopicsHandover(first, COUNT, first_store).release(frozenset({2}))
        assert f"{SNAPSHOT_TOPIC}/2" not in loaded(first)
        second_owns.containers.add(2)
        TopicsHandover(second, COUNT, second_store).drop(frozenset({2}))
        moved = TransactionBuffer(segment, second_store)
        # The log is replayed after the snapshot's max_read_position only: drop
        # what came before, so the aborted set below can come from the snapshot alone.
        log.delete_through(log.ledger_id)
        await moved.recover(log)
        assert {txn for _, txn in moved.aborted_txns()} == {(0, 1)}
        assert moved.max_read_position == buffer.max_read_position
        # The new owner snapshots on; the first, asked again later, sees its writes.
        moved.on_entry(log.append(EntryKind.TXN_DATA, (0, 3)))
        moved.on_entry(log.append(EntryKind.ABORT_MARKER, (0, 3)))
        await moved.take_snapshot()
        second_owns.containers.discard(2)
        await TopicsHandover(second, COUNT, second_store).release(frozenset({2}))
        first_owns.containers.add(2)
        TopicsHandover(first, COUNT, first_store).drop(frozenset({2}))
        again = TransactionBuffer(segment, first_store)
        await again.recover(MemorySegmentLog())
        assert {txn for _, txn in again.aborted_txns()} == {(0, 1), (0, 3)}
    finally:
        await first.close()
        await second.close()


async def test_one_container_is_the_standalone_layout(env: BrokerEnv) -> None:
    """With one container the snapshots are where standalone keeps them: ``<topic>/0``."""
    standalone = env.manager()
    await standalone.txn_snapshot_store().write("orders/0-end", b"written standalone")
    await standalone.close()
    manager = TopicManager(env.ledgers, env.store, clock=env.clock,
                           txn_store_factory=lambda topics: ContainerSnapshotStore(
                               topics, 1, lambda _segment: True))
    try:
        assert await manager.txn_snapshot_store().read_prefix("orders/0-") == {
            "orders/0-end": b"written standalone"}
        assert len((await manager.get_topic(SNAPSHOT_TOPIC)).segments) == 1
    finally:
        await manager.close()


async def test_a_fenced_snapshot_write_is_counted(env: BrokerEnv) -> None:
    """What the counter catches: two brokers writing one snapshot segment fence each other.

    Ownership never allows it (each container has one owner); here both
    believe they own container 1, as the single snapshot topic made every
    broker do before snapshots were placed with their segments.
    """
    segment = segments_by_container()[1]
    first, first_store = broker(env, Owner({1}))
    second, second_store = broker(env, Owner({1}))
    try:
        await first_store.write(f"{segment}-end", b"first")
        await second_store.write(f"{segment}-end", b"second")  # loads it: fences the first
        fenced = SNAPSHOT_FENCED_WRITES.labels("1")._value.get()
        with pytest.raises(WrongHostError):
            await first_store.write(f"{segment}-end", b"first again")
        assert SNAPSHOT_FENCED_WRITES.labels("1")._value.get() == fenced + 1
    finally:
        await first.close()
        await second.close()


async def test_a_one_segment_topic_of_an_older_build_is_replaced_by_container_0s_owner(
        env: BrokerEnv) -> None:
    named = segments_by_container()
    old = env.manager()  # an older cluster build: the one-segment (standalone) layout
    await old.txn_snapshot_store().write(f"{named[2]}-end", b"old layout")
    await old.close()
    not_zero, not_zero_store = broker(env, Owner({1, 2, 3}))
    owner, owner_store = broker(env, Owner({0}))
    try:
        # Until it is replaced: no snapshot read (replay), writes fail, nothing deleted
        # by a broker that does not own container 0.
        assert await not_zero_store.read_prefix(f"{named[2]}-") == {}
        with pytest.raises(NoSuchSegmentError):
            await not_zero_store.write(f"{named[2]}-end", b"new")
        await not_zero_store.maintain()
        assert len((await not_zero.get_topic(SNAPSHOT_TOPIC)).segments) == 1
        await owner_store.maintain()  # the owner of container 0 replaces it
        with pytest.raises(TopicNotFoundError):
            await owner.get_topic(SNAPSHOT_TOPIC)
        await not_zero_store.write(f"{named[2]}-end", b"new")
        assert len((await not_zero.get_topic(SNAPSHOT_TOPIC)).segments) == COUNT
        assert await not_zero_store.read_prefix(f"{named[2]}-") == {
            f"{named[2]}-end": b"new"}
        await owner_store.maintain()  # checked once per claim: never deletes the new one
        TopicsHandover(owner, COUNT, owner_store).drop(frozenset({0}))
        await owner_store.maintain()
        assert len((await owner.get_topic(SNAPSHOT_TOPIC)).segments) == COUNT
        await owner_store.write(f"{named[0]}-end", b"zero")
        assert await owner_store.read_prefix(f"{named[0]}-") == {f"{named[0]}-end": b"zero"}
    finally:
        await not_zero.close()
        await owner.close()
