"""The containers this broker holds and serves: claims, adoptions, releases (ZooKeeper nodes).

Part of ``ZooKeeperOwners`` (``zookeeper_owners``). ``ContainerClaims`` owns
the two sets the ownership turns on: the containers whose ephemeral node this
process created and has not deleted (*held*) and those of them it serves now
(*served*: not being released, session fine). A node is this process's when
it carries its incarnation (``OwnIdentity``), whatever broker id it names.

- **Claim**: create the container's ephemeral ownership node; whoever creates
  it first owns the container. A create whose answer is unknown (connection
  loss) is read back on the same session before anything is decided. The
  winner then bumps the container's leader epoch and writes it into its node
  (``broker.cluster.leader_epochs``) before serving the container.
- **Adopt**: a node of this incarnation no claim finished (its answer was
  lost, or the epoch's publication failed) gets its epoch published and is
  served as if claimed.
- **Resume**: after a reconnection within the session, held containers whose
  node is still ours are served again.
- **Release**: stop serving at once (WrongHost from then on), let the
  segments close (``ContainerHandover.release``, bounded), then delete the
  node (only if it is still this process's).
- **Stop serving** (the session is in trouble): drop the served containers'
  segments without touching the store (``ContainerHandover.drop``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import Protocol

from broker.cluster.containers import OwnerRecord, owner_path
from broker.cluster.leader_epochs import UNPUBLISHED, ContainerEpochs
from broker.cluster.owner_cache import OwnerCache
from ledger.api import MetadataStore
from ledger.errors import (
    BadVersionError,
    LedgerError,
    MetadataUnavailableError,
    NodeExistsError,
    NoNodeError,
)

__all__ = ["ContainerClaims", "ContainerHandover", "OwnIdentity"]

log = logging.getLogger(__name__)


class ContainerHandover(Protocol):
    """What ownership changes do to the segments loaded on this broker."""

    async def release(self, containers: frozenset[int]) -> None:
        """Close the loaded segments of ``containers`` gracefully and forget them.

        Appends already under way finish (and are acknowledged); later ones
        are refused WrongHost.
        """
        ...

    def drop(self, containers: frozenset[int]) -> None:
        """Forget the loaded segments of ``containers`` at once, without the store.

        Appends not yet handed to the ledger fail WrongHost; the ledgers stay
        open, to be fenced by the next owner.
        """
        ...


class OwnIdentity:
    """This broker as its ownership nodes name it; ``record`` is replaced by a bind."""

    def __init__(self, record: OwnerRecord) -> None:
        self.record = record

    @property
    def broker_id(self) -> str:
        return self.record.broker_id

    def ours(self, record: OwnerRecord) -> bool:
        """Whether ``record`` is this process's (its incarnation), not another's."""
        return record.incarnation == self.record.incarnation


class ContainerClaims:
    """The held and served containers, and the node writes that change them.

    Args:
        store: the shared metadata store (its session proves ownership).
        identity: this process's record.
        handover: unloads segments when containers go.
        cache: the owner nodes as last read (kept up to date with our changes).
        release_timeout_s: the longest a graceful release waits for segments.
    """

    def __init__(self, store: MetadataStore, identity: OwnIdentity, handover: ContainerHandover,
                 cache: OwnerCache, release_timeout_s: float) -> None:
        self._store = store
        self._identity = identity
        self._handover = handover
        self._cache = cache
        self._release_timeout_s = release_timeout_s
        #: Containers whose node this process created and has not deleted.
        self._held: set[int] = set()
        #: The held containers served now (not being released, session fine).
        self._active: set[int] = set()
        #: How many times the served set changed (claims, releases, stops).
        self.changes = 0
        self._epochs = ContainerEpochs(store)
        #: Our published ownership record of each held container (its leader epoch).
        self._records: dict[int, OwnerRecord] = {}

    def serves(self, container: int) -> bool:
        """Whether this broker serves ``container`` now."""
        return container in self._active

    def served(self) -> frozenset[int]:
        """The containers this broker serves now."""
        return frozenset(self._active)

    def record_of(self, container: int) -> OwnerRecord:
        """Our ownership record of a held container (with its leader epoch)."""
        return self._records.get(container, self._identity.record)

    def held(self) -> frozenset[int]:
        """The containers whose node this process created and has not deleted."""
        return frozenset(self._held)

    def forget_held(self) -> None:
        """The session is LOST: our ephemeral nodes are gone with it."""
        self._held.clear()
        self._records.clear()

    async def claim(self, container: int) -> bool:
        """Create the container's node; whether it is ours (served: take it over)."""
        path = owner_path(container)
        record = dataclasses.replace(self._identity.record, leader_epoch=UNPUBLISHED)
        try:
            await self._store.create(path, record.to_bytes(), make_parents=True,
                                     ephemeral=True)
        except NodeExistsError:
            # Another broker was first, or the node is ours: a create whose
            # answer was lost, retried. Only the node's incarnation tells.
            if not await self._is_own(path):
                return False  # another broker's; its node's watch tells us
        except MetadataUnavailableError:
            # Unknown: the node may exist. Read it back on the same session (it
            # sees the create if it was ever applied); a read that fails too
            # raises, and the next step's refresh adopts the node if it is ours.
            if not await self._is_own(path):
                return False  # not created: a later step claims it again
        # Ours. An error publishing the epoch leaves the node unpublished and
        # ours: the next step adopts it (``adopt_own``) and publishes again.
        published = await self._epochs.publish(container, record)
        if published is None:
            return False  # our session expired meanwhile: the node is gone
        self._claimed(container, published)
        return True

    async def _is_own(self, path: str) -> bool:
        """Whether ``path`` exists and carries this process's incarnation."""
        try:
            node = await self._store.get(path)
        except NoNodeError:
            return False
        return self._identity.ours(OwnerRecord.from_bytes(node.data))

    async def adopt_own(self) -> list[int]:
        """Serve containers whose node is ours although no claim finished (a lost answer).

        ``plan`` counts a node of this incarnation as this broker's, so it never
        claims it again: else nobody serves it until the session changes. The
        epoch is published first (bumped again: the claim may have bumped it
        already, and a burnt number is harmless); if that fails, the next step
        tries again.
        """
        adopted = []
        for container, (record, _version) in sorted(self._cache.owners.items()):
            if self._identity.ours(record) and container not in self._held:
                log.info("broker %s: container %d's node is ours (a claim's answer was "
                         "lost); serving it", self._identity.broker_id, container)
                try:
                    published = await self._epochs.publish(
                        container, dataclasses.replace(self._identity.record,
                                                       leader_epoch=UNPUBLISHED))
                except LedgerError as error:  # still ours and not held: the next step
                    log.info("broker %s: container %d's epoch not published: %s",
                             self._identity.broker_id, container, error)
                    continue
                if published is not None:
                    self._claimed(container, published)
                    adopted.append(container)
        return adopted

    def _claimed(self, container: int, record: OwnerRecord) -> None:
        # Segments of the container left from an earlier ownership are stale.
        self._handover.drop(frozenset({container}))
        self._held.add(container)
        self._active.add(container)
        self._records[container] = record
        self._cache.set_owner(container, record)
        self.changes += 1
        log.info("broker %s owns container %d", self._identity.broker_id, container)

    def resume_held(self) -> list[int]:
        """After a reconnection within the session: serve again what is still ours.

        A container is held but not served only after ``stop_serving`` dropped
        its segments (and stood a coordinator down): serving it again is a
        take-over like a claim, so the caller runs ``on_claimed`` for those
        returned (else a resumed coordinator is never seated again: every
        transaction call is WrongHost to this broker).
        """
        resumed = []
        for container in sorted(self._held - self._active):
            found = self._cache.owners.get(container)
            if found is not None and self._identity.ours(found[0]):
                self._active.add(container)
                self.changes += 1
                log.info("broker %s: serving container %d again", self._identity.broker_id,
                         container)
                resumed.append(container)
            elif found is None:
                self._held.discard(container)
                self._records.pop(container, None)
        return resumed

    async def release(self, containers: frozenset[int]) -> None:
        """Stop serving ``containers`` at once, close their segments, delete their nodes."""
        self._active.difference_update(containers)  # WrongHost from now on
        try:
            await asyncio.wait_for(self._handover.release(containers),
                                   self._release_timeout_s)
        except Exception as error:  # the nodes go anyway: the next owner fences
            log.warning("broker %s: containers %s not closed cleanly: %s",
                        self._identity.broker_id, sorted(containers), error)
        for container in sorted(containers):
            await self.delete_own(owner_path(container))
            self._held.discard(container)
            self._records.pop(container, None)
            self._cache.set_owner(container, None)
            log.info("broker %s released container %d", self._identity.broker_id, container)
        self.changes += 1

    async def delete_own(self, path: str) -> None:
        """Delete ``path`` if it is this process's node (never another broker's)."""
        try:
            node = await self._store.get(path)
            if self._identity.ours(OwnerRecord.from_bytes(node.data)):
                # Between the get and the delete the node could only change if our
                # session expired and another broker claimed the container, and an
                # expired session's requests fail: this never deletes theirs.
                await self._store.delete(path, node.version)
        except (NoNodeError, BadVersionError):
            pass
        except LedgerError as error:  # unreachable or closed: the node goes with the session
            log.info("broker %s: %s not deleted: %s", self._identity.broker_id, path, error)

    def stop_serving(self, why: str) -> None:
        """Serve nothing (the session is in trouble): drop the segments, keep the nodes."""
        dropped = frozenset(self._active)
        self._active.clear()
        if dropped:
            log.warning("broker %s: stopped serving containers %s (session %s)",
                        self._identity.broker_id, sorted(dropped), why)
            self._handover.drop(dropped)
        self.changes += 1
