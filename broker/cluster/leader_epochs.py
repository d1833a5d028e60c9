"""Leader epochs of containers: a number that grows each time a container gets a new owner.

Kafka clients hold a *leader epoch* per partition (KIP-101, KIP-320): it grows
whenever leadership moves, so a client can tell a stale leader from a new one
(FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH) and a newer Metadata answer from
an older one. A Kafka partition of Folio is a segment, led by the owner of its
container, so the epoch is the container's: every partition of a container
has its epoch (docs/kafka.md, "Leader epochs").

The epoch of an ownership is the version of the persistent node
``/containers/<n>/epoch`` after the new owner bumped it (``epoch_path``): a
ZooKeeper version only grows, so the epoch never goes back, and it survives
every broker. Only the owner bumps it, *after* its ephemeral ownership node
exists (a claim is decided by that create), so the bumps are ordered as the
ownerships are: a later owner always gets a larger epoch. The owner then writes
the epoch into its ownership node's record (``OwnerRecord.leader_epoch``),
where every broker's owner cache sees it; the container is served only once
that is done. Until then the record says -1: Kafka's Metadata names no leader
(LEADER_NOT_AVAILABLE, clients ask again).

Crash and unknown-outcome windows (all fine, epochs may skip numbers):

- The owner dies after the create, before or after the bump: its ephemeral
  node goes with its session; a bump it made is burnt, the next owner bumps
  past it.
- A bump whose answer is lost (``MetadataUnavailableError``) may have been
  applied: the node is read again and bumped again (nobody else bumps it
  while we own the container, so a second bump only burns one number).
- A lost answer to the record write is written again (our own ephemeral
  node: the write is idempotent).
- A claim that ends in an error leaves our node with -1; the next step adopts
  it (``ContainerClaims.adopt_own``) and publishes the epoch then.
"""

from __future__ import annotations

import dataclasses
import logging

from broker.cluster.containers import OwnerRecord, epoch_path, owner_path
from ledger.api import MetadataStore
from ledger.errors import BadVersionError, MetadataUnavailableError, NodeExistsError, NoNodeError

__all__ = ["UNPUBLISHED", "ContainerEpochs"]

log = logging.getLogger(__name__)

#: ``OwnerRecord.leader_epoch`` of a node whose claim has not published its epoch yet.
UNPUBLISHED = -1
#: Attempts at a bump or a write whose answers were lost, before giving up this step.
_ATTEMPTS = 3


class ContainerEpochs:
    """Bumps and publishes a container's leader epoch when this broker takes it.

    Args:
        store: the shared metadata store.
    """

    def __init__(self, store: MetadataStore) -> None:
        self._store = store

    async def publish(self, container: int, record: OwnerRecord) -> OwnerRecord | None:
        """Bump the container's epoch and write it into our ownership node; the record written.

        Call only after creating the container's ownership node (``record``:
        ours). None when the node is no longer ours (our session expired).
        Raises ``MetadataUnavailableError`` when the store keeps failing (the
        node stays unpublished: a later step adopts it again).
        """
        epoch = await self._bump(container)
        published = dataclasses.replace(record, leader_epoch=epoch)
        if not await self._write(owner_path(container), published):
            return None
        log.info("container %d: leader epoch %d", container, epoch)
        return published

    async def _bump(self, container: int) -> int:
        path = epoch_path(container)
        failure: Exception | None = None
        for _attempt in range(_ATTEMPTS):
            try:
                node = await self._store.get(path)
            except NoNodeError:
                try:
                    await self._store.create(path, b"", make_parents=True)
                except NodeExistsError:
                    continue  # created by an earlier attempt whose answer was lost
                except MetadataUnavailableError as error:
                    failure = error  # maybe created: read again
                    continue
                return 0  # the first ownership of this container ever
            try:
                return await self._store.set(path, b"", node.version)
            except BadVersionError:
                continue  # our own earlier bump (its answer lost) landed: read again
            except MetadataUnavailableError as error:
                failure = error  # maybe applied: read again, bump again
        raise MetadataUnavailableError(
            f"{path}: leader epoch not bumped after {_ATTEMPTS} attempts") from failure

    async def _write(self, path: str, record: OwnerRecord) -> bool:
        """Write ``record`` into ``path`` if the node is still ours; whether it was."""
        failure: Exception | None = None
        for _attempt in range(_ATTEMPTS):
            try:
                node = await self._store.get(path)
                if OwnerRecord.from_bytes(node.data).incarnation != record.incarnation:
                    return False
                # Compare-and-set on the version read: between the get and the
                # set the node could change only if our session expired and
                # another broker claimed the container; then the set fails.
                await self._store.set(path, record.to_bytes(), node.version)
                return True
            except NoNodeError:
                return False  # gone with our session
            except BadVersionError:
                continue  # our own earlier write (its answer lost) landed, or not ours: read
            except MetadataUnavailableError as error:
                failure = error  # maybe applied: read again
        raise MetadataUnavailableError(
            f"{path}: leader epoch not published after {_ATTEMPTS} attempts") from failure
