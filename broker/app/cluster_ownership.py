"""A cluster broker's ownership wiring: containers claimed, segments gated, handed over.

``serve_ledgers`` gets a ``ClusterOwnership`` in cluster mode (``folio broker
--metadata-url``). It makes the topic manager reload segments fenced by
another broker (``reload_fenced``), wraps the topics the public services see
in ``OwnedTopics`` (WrongHost for segments of containers this broker does not
serve), and answers ``SegmentOwners`` from ``ZooKeeperOwners``. Once the
server is bound and registered (``start``), the broker joins the balance of
containers; asked to stop, it hands every container over (``stop``) before
the server stops taking calls, so clients move to the new owners while this
broker still answers them with WrongHost.
"""

from __future__ import annotations

from broker.api import Topics
from broker.cluster.owned_topics import OwnedTopics, TopicsHandover
from broker.cluster.zookeeper_owners import ZooKeeperOwners
from broker.groups.heartbeats import HeartbeatBoard
from broker.groups.liveness import GroupLiveness
from broker.topics.manager import TopicManager
from ledger.api import MetadataStore

__all__ = ["GROUP_KEY_PREFIX", "ClusterOwnership"]

#: A reader group is swept by the owner of the container of this prefix + its name.
GROUP_KEY_PREFIX = "_readergroup/"


class ClusterOwnership:
    """Container ownership of one cluster broker (see the module docstring).

    Args:
        store: the cluster's metadata store.
        container_count: the cluster's number of containers (its layout).
        session_timeout_ms: the metadata session timeout: a broker cut off
            from ZooKeeper stops serving once it has passed.
    """

    def __init__(self, store: MetadataStore, container_count: int,
                 session_timeout_ms: int) -> None:
        self._store = store
        self._count = container_count
        self._session_timeout_ms = session_timeout_ms
        self._owners: ZooKeeperOwners | None = None

    @property
    def owners(self) -> ZooKeeperOwners:
        if self._owners is None:
            raise RuntimeError("ClusterOwnership.attach first")
        return self._owners

    def attach(self, topics: TopicManager) -> Topics:
        """The topics as the public services must see them (``OwnedTopics``)."""
        owners = ZooKeeperOwners(self._store, self._count, "", "",
                                 TopicsHandover(topics, self._count),
                                 suspended_grace_s=self._session_timeout_ms / 1000)
        self._owners = owners
        return OwnedTopics(topics, owners.owns, owners.owner_of)

    def share_liveness(self, liveness: GroupLiveness) -> None:
        """Reader group liveness across brokers: heartbeats in the store, one sweeper per group.

        A group is swept by the owner of the container of ``_readergroup/<name>``
        (``broker.groups.heartbeats``).
        """
        owners = self.owners
        liveness.share(HeartbeatBoard(self._store),
                       lambda group: owners.owns(f"{GROUP_KEY_PREFIX}{group}"))

    async def start(self, address: str) -> None:
        """Join the balance as ``address`` (the broker's id and client address)."""
        self.owners.bind(address, address)
        await self.owners.start()

    async def stop(self) -> None:
        """Hand every container over and leave the balance."""
        if self._owners is not None:
            await self._owners.stop()
