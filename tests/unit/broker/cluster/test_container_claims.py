"""``ContainerClaims`` alone, on a real metadata store (RocksDB in a temp dir).

Claims against nodes of another process, a create whose answer is lost (a
``FaultyMetadataStore`` at the seam), adopting and resuming our own nodes,
releasing (bounded by its timeout) and stopping serving.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from broker.cluster.container_claims import ContainerClaims, OwnIdentity
from broker.cluster.containers import OwnerRecord, owner_path
from broker.cluster.owner_cache import OwnerCache
from ledger.errors import NoNodeError
from ledger.metadata.rocksdb_store import RocksDBMetadataStore
from tests.support.faulty_metadata import Fault, FaultyMetadataStore
from tests.support.wait import wait_for_async

COUNT = 4


class Handover:
    """What the claims did to the segments: releases and drops, in order."""

    def __init__(self, release_wait: asyncio.Event | None = None) -> None:
        self.released: list[frozenset[int]] = []
        self.dropped: list[frozenset[int]] = []
        self._release_wait = release_wait

    async def release(self, containers: frozenset[int]) -> None:
        self.released.append(containers)
        if self._release_wait is not None:
            await self._release_wait.wait()

    def drop(self, containers: frozenset[int]) -> None:
        self.dropped.append(containers)


def _identity(broker_id: str = "b1") -> OwnIdentity:
    return OwnIdentity(OwnerRecord(broker_id, f"{broker_id}:7070", uuid.uuid4().hex))


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[FaultyMetadataStore]:
    inner = RocksDBMetadataStore(tmp_path / "metadata")
    yield FaultyMetadataStore(inner)
    await inner.close()


def _claims(store: FaultyMetadataStore, handover: Handover, identity: OwnIdentity | None = None,
            release_timeout_s: float = 10.0) -> tuple[ContainerClaims, OwnerCache, OwnIdentity]:
    identity = identity or _identity()
    cache = OwnerCache(store, COUNT, lambda: None)
    return (ContainerClaims(store, identity, handover, cache, release_timeout_s), cache,
            identity)


async def _owner(store: FaultyMetadataStore, container: int) -> OwnerRecord:
    return OwnerRecord.from_bytes((await store.get(owner_path(container))).data)


async def test_a_claim_wins_once_and_never_over_another_process(
        store: FaultyMetadataStore) -> None:
    handover = Handover()
    claims, cache, identity = _claims(store, handover)
    rival, _, _ = _claims(store, Handover(), _identity("b2"))
    assert await claims.claim(1)
    assert not await rival.claim(1)  # the node is b1's
    assert (await _owner(store, 1)).incarnation == identity.record.incarnation
    assert claims.served() == claims.held() == frozenset({1})
    assert rival.served() == frozenset()
    assert claims.serves(1) and not claims.serves(2)
    assert handover.dropped == [frozenset({1})]  # stale segments of an earlier ownership
    assert cache.owners[1][0] == identity.record
    assert await claims.claim(1)  # a retried create finds our own node: still ours


@pytest.mark.parametrize("fault", [Fault.LOST_ANSWER, Fault.BEFORE])
async def test_a_claim_whose_answer_is_unknown_reads_back(store: FaultyMetadataStore,
                                                          fault: Fault) -> None:
    claims, _, _ = _claims(store, Handover())
    fired = store.fail("create", owner_path(2).__eq__, fault)
    applied = fault is Fault.LOST_ANSWER
    assert await claims.claim(2) is applied
    assert fired == [owner_path(2)]
    assert claims.serves(2) is applied


async def test_our_node_no_claim_finished_is_adopted(store: FaultyMetadataStore) -> None:
    handover = Handover()
    claims, cache, identity = _claims(store, handover)
    await store.create(owner_path(3), identity.record.to_bytes(), make_parents=True,
                       ephemeral=True)
    other = _identity("b2")
    await store.create(owner_path(0), other.record.to_bytes(), make_parents=True,
                       ephemeral=True)
    await cache.refresh()
    assert await claims.adopt_own() == [3]
    assert claims.served() == frozenset({3})
    assert await claims.adopt_own() == []  # held now: nothing more


async def test_stop_serving_keeps_the_nodes_and_resume_serves_what_is_still_ours(
        store: FaultyMetadataStore) -> None:
    handover = Handover()
    claims, cache, _ = _claims(store, handover)
    for container in (0, 1):
        assert await claims.claim(container)
    claims.stop_serving("SUSPENDED")
    assert claims.served() == frozenset() and claims.held() == frozenset({0, 1})
    assert handover.dropped[-1] == frozenset({0, 1})
    await store.delete(owner_path(1))  # as if the session had expired meanwhile
    cache.mark_all_dirty()
    await cache.refresh()
    assert claims.resume_held() == [0]
    assert claims.served() == frozenset({0}) and claims.held() == frozenset({0})
    claims.forget_held()
    assert claims.held() == frozenset()


async def test_release_stops_serving_at_once_and_deletes_the_nodes(
        store: FaultyMetadataStore) -> None:
    closing = asyncio.Event()
    handover = Handover(closing)
    claims, cache, _ = _claims(store, handover)
    for container in (0, 1, 2):
        assert await claims.claim(container)
    release = asyncio.ensure_future(claims.release(frozenset({0, 1})))

    async def closing_segments() -> bool:
        return bool(handover.released)

    await wait_for_async(closing_segments, "the release waits for the segments")
    assert claims.served() == frozenset({2})  # WrongHost for 0 and 1 from now on
    closing.set()
    await release
    assert claims.held() == frozenset({2})
    assert handover.released == [frozenset({0, 1})]
    for container in (0, 1):
        with pytest.raises(NoNodeError):
            await store.get(owner_path(container))
        assert container not in cache.owners


async def test_a_release_whose_segments_never_close_is_bounded(
        store: FaultyMetadataStore) -> None:
    claims, _, _ = _claims(store, Handover(asyncio.Event()), release_timeout_s=0.05)
    assert await claims.claim(0)
    await claims.release(frozenset({0}))  # the node goes anyway: the next owner fences
    assert claims.held() == frozenset()
    with pytest.raises(NoNodeError):
        await store.get(owner_path(0))


async def test_delete_own_never_deletes_another_process_node(
        store: FaultyMetadataStore) -> None:
    claims, _, _ = _claims(store, Handover())
    rival, _, rival_identity = _claims(store, Handover(), _identity("b1"))  # a later process
    assert await rival.claim(1)
    await claims.delete_own(owner_path(1))
    assert (await _owner(store, 1)).incarnation == rival_identity.record.incarnation
    await claims.delete_own(owner_path(3))  # no node: nothing to do
