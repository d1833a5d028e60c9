"""``OwnershipSession`` alone, wired by hand to claims on a real metadata store (RocksDB).

The session's reports are given to ``changed`` as the store would: SUSPENDED
pauses writes and keeps the containers, CONNECTED resumes and wakes the loop,
the grace passing or LOST give the containers up.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from broker.cluster.container_claims import ContainerClaims, OwnIdentity
from broker.cluster.containers import OwnerRecord
from broker.cluster.owner_cache import OwnerCache
from broker.cluster.ownership_session import OwnershipSession
from broker.cluster.session_gate import OwnershipPhase
from broker.errors import WrongHostError
from ledger.api import SessionState
from ledger.metadata.rocksdb_store import RocksDBMetadataStore
from tests.support.wait import wait_for_async

P = OwnershipPhase


class Handover:
    def __init__(self) -> None:
        self.dropped: list[frozenset[int]] = []

    async def release(self, containers: frozenset[int]) -> None:
        pass

    def drop(self, containers: frozenset[int]) -> None:
        self.dropped.append(containers)


class Parts:
    """A session over claims of two containers, and what it woke."""

    def __init__(self, store: RocksDBMetadataStore, grace_s: float) -> None:
        self.handover = Handover()
        self.wakes = 0
        identity = OwnIdentity(OwnerRecord("b1", "b1:7070", uuid.uuid4().hex))
        self.cache = OwnerCache(store, 2, lambda: None)
        self.claims = ContainerClaims(store, identity, self.handover, self.cache, 10.0)
        self.session = OwnershipSession(identity, self.claims, self.cache, self._wake, grace_s)

    def _wake(self) -> None:
        self.wakes += 1

    async def claim_both(self) -> None:
        for container in (0, 1):
            assert await self.claims.claim(container)
        self.handover.dropped.clear()


def _phase(parts: Parts) -> OwnershipPhase:
    """The phase now (a call, so mypy does not narrow it from one assertion to the next)."""
    return parts.session.phase


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[RocksDBMetadataStore]:
    opened = RocksDBMetadataStore(tmp_path / "metadata")
    yield opened
    await opened.close()


async def test_suspended_pauses_writes_and_connected_resumes_them(
        store: RocksDBMetadataStore) -> None:
    parts = Parts(store, grace_s=3600)
    await parts.claim_both()
    parts.session.check_writable("t/0")
    parts.session.changed(SessionState.SUSPENDED)
    assert _phase(parts) is P.PAUSED and not parts.session.connected
    with pytest.raises(WrongHostError) as refused:
        parts.session.check_writable("t/0")
    assert refused.value.owner == ""
    assert parts.claims.served() == frozenset({0, 1})  # nothing unloaded
    parts.session.changed(SessionState.SUSPENDED)  # reported again: still paused
    parts.session.changed(SessionState.CONNECTED)
    assert _phase(parts) is P.SERVING and parts.session.connected
    parts.session.check_writable("t/0")
    assert parts.wakes == 1
    assert parts.claims.served() == frozenset({0, 1}) and parts.handover.dropped == []


async def test_suspended_past_the_grace_gives_the_containers_up(
        store: RocksDBMetadataStore) -> None:
    parts = Parts(store, grace_s=0.05)
    await parts.claim_both()
    parts.session.changed(SessionState.SUSPENDED)

    async def stopped() -> bool:
        return parts.session.phase is P.STOPPED

    await wait_for_async(stopped, "the grace passes")
    assert parts.claims.served() == frozenset()
    assert parts.claims.held() == frozenset({0, 1})  # the nodes may still be ours
    assert parts.handover.dropped == [frozenset({0, 1})]


async def test_suspended_without_grace_and_lost(store: RocksDBMetadataStore) -> None:
    parts = Parts(store, grace_s=0)
    await parts.claim_both()
    parts.session.changed(SessionState.SUSPENDED)  # no grace: given up at once
    assert _phase(parts) is P.STOPPED
    assert parts.claims.served() == frozenset() and parts.claims.held() == frozenset({0, 1})
    parts.session.changed(SessionState.LOST)
    assert parts.claims.held() == frozenset()  # the ephemeral nodes went with the session
    assert parts.cache.owners == {}
    parts.session.changed(SessionState.CONNECTED)  # a new session: the loop claims anew
    assert _phase(parts) is P.SERVING and parts.wakes == 1


async def test_rename_names_the_broker_in_the_refusal(store: RocksDBMetadataStore) -> None:
    parts = Parts(store, grace_s=3600)
    parts.session.rename("broker-7")
    parts.session.changed(SessionState.SUSPENDED)
    with pytest.raises(WrongHostError, match="broker broker-7 lost its metadata-store"):
        parts.session.check_writable("t/0")
    parts.session.changed(SessionState.CONNECTED)
