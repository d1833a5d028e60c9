"""``ZooKeeperOwners``: this broker's part in the cluster's container ownership.

It answers ``SegmentOwners`` from an ``OwnerCache`` (memory, no metadata
round trip per call) and moves this broker towards the target assignment
(``broker.cluster.balance``) after every change it is told of, and once per
``tick_s`` in case a change was missed:

- **Claim**: create the container's ephemeral ownership node. Whoever creates
  it first owns the container. The segments are loaded lazily on first use,
  and loading a segment opens its last ledger with recovery (fencing the
  previous owner on the bookies) before anything is appended, then goes on in
  a new ledger by compare-and-set of the segment record
  (``broker.segments.recovery``).
- **Release** (a joining broker needs its share, or this one stops): stop
  serving the container at once (``owns`` is false, so new calls get
  WrongHost with owner ""), let the segments finish the appends under way and
  close their ledgers (``ContainerHandover.release``), then delete the node.
  The next owner's recovery then finds closed ledgers: nothing to fence.
- **Session** (``broker.cluster.session_gate``): SUSPENDED (the connection
  is gone, the session perhaps alive) pauses writes at once (``check_writable``
  raises a WrongHost without owner) and unloads nothing; CONNECTED again
  within the session resumes them at once. LOST (it expired, its ephemeral
  nodes are gone), or SUSPENDED for ``suspended_grace_s`` without a
  reconnection (kazoo reports LOST only after reconnecting, so a broker cut
  off from ZooKeeper must decide alone), stops serving every container, and
  the loaded segments are dropped without touching the store
  (``ContainerHandover.drop``): another broker may own them now. After a
  reconnection the containers whose nodes are still ours are served again;
  after LOST the broker joins the balance anew.

``stop`` leaves the balance (deletes its member node first, so the others
count it out) and hands every container over before returning.

Layout: composed parts, each owning its state. ``container_claims``
(``ContainerClaims``: the held and served containers and the node writes
that change them, claim, adopt, resume, release, stop serving; and
``OwnIdentity``, this process's record); ``ownership_session``
(``OwnershipSession``: the session gate, the grace timer, what SUSPENDED,
LOST and CONNECTED do); ``balance_loop`` (``BalanceLoop``: the member node,
the steps towards the plan, the take-overs, the background task); the
``OwnerCache`` (``owner_cache``) of the nodes as last read. ``ZooKeeperOwners``
builds them and answers ``SegmentOwners`` from them.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable

from broker.cluster.balance_loop import BalanceLoop
from broker.cluster.container_claims import ContainerClaims, ContainerHandover, OwnIdentity
from broker.cluster.containers import OwnerRecord, container_of
from broker.cluster.owner_cache import OwnerCache
from broker.cluster.owners import BrokerInfo
from broker.cluster.ownership_session import OwnershipSession
from broker.cluster.session_gate import OwnershipPhase
from broker.errors import WrongHostError
from ledger.api import MetadataStore, SessionState

__all__ = ["ContainerHandover", "ZooKeeperOwners"]

#: How long a graceful release waits for a container's segments to close.
DEFAULT_RELEASE_TIMEOUT_S = 10.0


class ZooKeeperOwners:
    """Container ownership for one broker (implements ``SegmentOwners``).

    Args:
        store: the shared metadata store (its session proves ownership).
        container_count: the cluster's number of containers (``/cluster``).
        broker_id: this broker's stable id.
        address: the address clients should use for this broker.
        handover: unloads segments when containers go.
        tick_s: plan again at least this often.
        release_timeout_s: the longest a graceful release waits for segments.
        suspended_grace_s: how long a SUSPENDED session (connection lost, the
            session perhaps alive) stays paused (writes refused, nothing
            unloaded) before the containers are given up as for LOST; 0: give
            them up at once. The broker sets it to the session timeout: by
            then the session has surely expired, and kazoo cannot report LOST
            before it reconnects.
        on_claimed: awaited after each claim (the container is served already),
            e.g. to move the transaction coordinator here.
    """

    def __init__(self, store: MetadataStore, container_count: int, broker_id: str,
                 address: str, handover: ContainerHandover, *, tick_s: float = 1.0,
                 release_timeout_s: float = DEFAULT_RELEASE_TIMEOUT_S,
                 suspended_grace_s: float = 0.0,
                 on_claimed: Callable[[int], Awaitable[None]] | None = None) -> None:
        if container_count <= 0:
            raise ValueError(f"container_count must be positive, got {container_count}")
        self._store = store
        self._count = container_count
        self._identity = OwnIdentity(OwnerRecord(broker_id, address, uuid.uuid4().hex))
        wake = asyncio.Event()  # the loop's: the cache's watches and the session set it
        self._cache = OwnerCache(store, container_count, wake.set)
        self._claims = ContainerClaims(store, self._identity, handover, self._cache,
                                       release_timeout_s)
        self._session = OwnershipSession(self._identity, self._claims, self._cache, wake.set,
                                         suspended_grace_s)
        self._loop = BalanceLoop(store, self._identity, self._cache, self._claims,
                                 self._session, wake, tick_s, on_claimed)

    # -- SegmentOwners -------------------------------------------------------

    def owns(self, segment: str) -> bool:
        return self._claims.serves(container_of(segment, self._count))

    def owner_of(self, segment: str) -> str:
        container = container_of(segment, self._count)
        if self._claims.serves(container):
            return self._identity.record.address
        found = self._cache.owner(container)  # None while a watch says it changed
        if found is None or self._identity.ours(found):
            return ""  # unowned, or ours but not served (released, session trouble)
        return found.address

    async def lookup(self, segment: str) -> str:
        """``owner_of``, or while memory names none, the owner by a fresh read (LookupSegment)."""
        known = self.owner_of(segment)
        if known or self.owns(segment):
            return known
        record = await self._cache.read_now(container_of(segment, self._count))
        if record is None or self._identity.ours(record):
            return ""  # unowned, or ours but not served (released, session trouble)
        return record.address

    def brokers(self) -> list[BrokerInfo]:
        owned: dict[str, list[int]] = {}
        for container, (record, _version) in self._cache.owners.items():
            owned.setdefault(record.broker_id, []).append(container)
        return [BrokerInfo(member, record.address, tuple(sorted(owned.get(member, []))))
                for member, record in sorted(self._cache.members.items())]

    @property
    def container_count(self) -> int:
        return self._count

    # -- more of the same, for the app and tests --------------------------------

    def check(self, segment: str) -> None:
        """Raise ``WrongHostError`` (with the owner when known) unless this broker serves it."""
        if not self.owns(segment):
            raise WrongHostError(segment, self.owner_of(segment))

    def check_writable(self, segment: str) -> None:
        """Raise ``WrongHostError`` (no owner) while writes are paused (session SUSPENDED).

        Constant work (one attribute read): it guards every block.
        """
        self._session.check_writable(segment)

    @property
    def phase(self) -> OwnershipPhase:
        """Serving, paused (SUSPENDED) or stopped (``broker.cluster.session_gate``)."""
        return self._session.phase

    def bind(self, broker_id: str, address: str, kafka: str = "",
             kafka_listeners: tuple[tuple[str, str], ...] = ()) -> None:
        """Set this broker's id, client address and Kafka address ("": none; known once bound).

        ``kafka_listeners``: every Kafka listener's address by name (``OwnerRecord``).
        """
        if self._loop.started:
            raise RuntimeError("bind before start")
        self._session.rename(broker_id)
        self._loop.rename(broker_id)
        self._identity.record = OwnerRecord(broker_id, address,
                                            self._identity.record.incarnation, kafka,
                                            kafka_listeners=kafka_listeners)

    def owner_record(self, segment: str) -> OwnerRecord | None:
        """The record of the broker serving ``segment`` now, None while none is known.

        From memory (the cache), as ``owner_of``: this broker's own record
        when it serves the segment.
        """
        return self.container_owner(container_of(segment, self._count))

    def container_owner(self, container: int) -> OwnerRecord | None:
        """``owner_record`` of a container (with its leader epoch)."""
        if self._claims.serves(container):
            return self._claims.record_of(container)
        found = self._cache.owners.get(container)
        if found is None or self._identity.ours(found[0]):
            return None
        return found[0]

    def member_records(self) -> list[OwnerRecord]:
        """The records of the brokers taking part in the balance (from memory), by id."""
        return [record for _member, record in sorted(self._cache.members.items())]

    @property
    def record(self) -> OwnerRecord:
        """This broker's own record."""
        return self._identity.record

    @property
    def broker_id(self) -> str:
        return self._identity.broker_id

    @property
    def address(self) -> str:
        return self._identity.record.address

    def served_containers(self) -> frozenset[int]:
        """The containers this broker serves now."""
        return self._claims.served()

    # -- life -----------------------------------------------------------------

    async def start(self) -> None:
        """Join the balance, take a first step, and go on in the background.

        The first step is taken before returning, so a broker alone owns every
        container once started (a ready line printed after it is true).
        """
        if not self._loop.started:
            self._store.add_session_listener(self.session_changed)
            await self._loop.start()

    async def stop(self) -> None:
        """Leave the balance, hand every container over, then stop."""
        self._store.remove_session_listener(self.session_changed)
        await self._loop.stop()
        held = self._claims.held()
        if held and self._session.connected:
            await self._claims.release(held)

    def session_changed(self, state: SessionState) -> None:
        """The store's session listener (the store calls it on the loop)."""
        self._session.changed(state)
        if state is SessionState.LOST:
            self._loop.left()  # its member node went with the session: join again

    async def _claim(self, container: int) -> bool:
        """Claim one container now (``ContainerClaims.claim``; tests of lost answers)."""
        return await self._claims.claim(container)
