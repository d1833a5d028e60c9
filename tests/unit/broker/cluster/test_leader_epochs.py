"""Containers' leader epochs (``broker.cluster.leader_epochs``) through ``ContainerClaims``.

On a real metadata store (RocksDB in a temp dir), with lost answers injected
at the seam (``FaultyMetadataStore``): each new ownership of a container gets
a larger epoch than every ownership before it, published in its ownership
node, whatever answers are lost on the way; a node whose publication failed
is adopted and published on the next step.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from broker.cluster.container_claims import ContainerClaims
from broker.cluster.containers import OwnerRecord, epoch_path, owner_path
from broker.cluster.leader_epochs import UNPUBLISHED
from ledger.errors import MetadataUnavailableError
from ledger.metadata.rocksdb_store import RocksDBMetadataStore
from tests.support.faulty_metadata import Fault, FaultyMetadataStore
from tests.unit.broker.cluster.test_container_claims import Handover, _claims, _identity


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[FaultyMetadataStore]:
    inner = RocksDBMetadataStore(tmp_path / "metadata")
    yield FaultyMetadataStore(inner)
    await inner.close()


async def _node(store: FaultyMetadataStore, container: int) -> OwnerRecord:
    return OwnerRecord.from_bytes((await store.get(owner_path(container))).data)


async def _handed_over(claims: ContainerClaims, container: int) -> None:
    await claims.release(frozenset({container}))


async def test_each_new_owner_gets_a_larger_epoch_published_in_its_node(
        store: FaultyMetadataStore) -> None:
    first, first_cache, _ = _claims(store, Handover())
    second, second_cache, _ = _claims(store, Handover(), _identity("b2"))
    assert await first.claim(1)
    assert (await _node(store, 1)).leader_epoch == 0  # the first ownership ever
    assert first.record_of(1).leader_epoch == 0
    assert first_cache.owners[1][0].leader_epoch == 0
    await _handed_over(first, 1)
    assert await second.claim(1)
    assert (await _node(store, 1)).leader_epoch == 1
    assert second.record_of(1).leader_epoch == 1
    await second_cache.refresh()
    assert second_cache.owners[1][0].leader_epoch == 1
    await _handed_over(second, 1)
    assert await first.claim(1)
    assert first.record_of(1).leader_epoch == 2
    # Another container's epoch is its own.
    assert await second.claim(2)
    assert second.record_of(2).leader_epoch == 0
    # A loser bumps nothing: the winner's epoch stays the latest.
    assert not await second.claim(1)
    assert (await store.get(epoch_path(1))).version == 2
    await first_cache.refresh()
    assert first_cache.owners[1][0].leader_epoch == 2


@pytest.mark.parametrize("fault", [Fault.LOST_ANSWER, Fault.BEFORE])
async def test_a_bump_whose_answer_is_lost_still_grows_the_epoch(
        store: FaultyMetadataStore, fault: Fault) -> None:
    claims, _, _ = _claims(store, Handover())
    assert await claims.claim(0)
    await _handed_over(claims, 0)
    fired = store.fail("set", epoch_path(0).__eq__, fault)
    assert await claims.claim(0)
    assert fired == [epoch_path(0)]
    epoch = claims.record_of(0).leader_epoch
    # Read again and bumped again: a lost-but-applied bump burns one number.
    assert epoch == (2 if fault is Fault.LOST_ANSWER else 1)
    assert (await _node(store, 0)).leader_epoch == epoch
    assert (await store.get(epoch_path(0))).version == epoch


async def test_a_lost_publication_is_written_again(store: FaultyMetadataStore) -> None:
    claims, _, _ = _claims(store, Handover())
    fired = store.fail("set", owner_path(3).__eq__, Fault.LOST_ANSWER)
    assert await claims.claim(3)
    assert fired == [owner_path(3)]
    assert (await _node(store, 3)).leader_epoch == claims.record_of(3).leader_epoch == 0


async def test_an_unpublished_node_is_adopted_and_published(store: FaultyMetadataStore) -> None:
    claims, cache, _ = _claims(store, Handover())
    fired = store.fail("set", owner_path(2).__eq__, Fault.BEFORE, times=3)
    with pytest.raises(MetadataUnavailableError):
        await claims.claim(2)
    assert len(fired) == 3
    assert not claims.serves(2)  # never served before its epoch is known
    assert (await _node(store, 2)).leader_epoch == UNPUBLISHED
    await cache.refresh()
    assert await claims.adopt_own() == [2]
    assert claims.serves(2)
    epoch = claims.record_of(2).leader_epoch
    assert epoch > 0 and (await _node(store, 2)).leader_epoch == epoch


async def test_unpublished_records_and_earlier_builds_read_right() -> None:
    record = OwnerRecord("b1", "h:1", "inc", "h:9", leader_epoch=5)
    assert OwnerRecord.from_bytes(record.to_bytes()) == record
    pending = OwnerRecord("b1", "h:1", "inc", leader_epoch=UNPUBLISHED)
    assert OwnerRecord.from_bytes(pending.to_bytes()).leader_epoch == UNPUBLISHED
    # A record without the key (an earlier build's) has epoch 0, as that build reported.
    assert OwnerRecord.from_bytes(OwnerRecord("b1", "h:1", "inc").to_bytes()).leader_epoch == 0
