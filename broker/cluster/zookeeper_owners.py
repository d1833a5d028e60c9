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
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Protocol

from broker.cluster.balance import plan
from broker.cluster.containers import OwnerRecord, container_of, member_path, owner_path
from broker.cluster.owner_cache import OwnerCache
from broker.cluster.owners import BrokerInfo
from broker.cluster.session_gate import GRACE_PASSED, OwnershipPhase, SessionGate
from broker.cluster.takeovers import TakeOvers
from broker.errors import WrongHostError
from ledger.api import MetadataStore, SessionState
from ledger.errors import (
    BadVersionError,
    LedgerError,
    MetadataUnavailableError,
    NodeExistsError,
    NoNodeError,
)
from ledger.tasks import cancel_and_wait

__all__ = ["ContainerHandover", "ZooKeeperOwners"]

log = logging.getLogger(__name__)

#: How long a graceful release waits for a container's segments to close.
DEFAULT_RELEASE_TIMEOUT_S = 10.0


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
        self._id = broker_id
        self._address = address
        self._handover = handover
        self._tick_s = tick_s
        self._release_timeout_s = release_timeout_s
        self._suspended_grace_s = suspended_grace_s
        self._takeovers = TakeOvers(broker_id, on_claimed)
        self._suspension: asyncio.TimerHandle | None = None
        self._gate = SessionGate(broker_id)
        self._record = OwnerRecord(broker_id, address, uuid.uuid4().hex)
        self._wake = asyncio.Event()
        self._cache = OwnerCache(store, container_count, self._wake.set)
        #: Containers whose node this process created and has not deleted.
        self._held: set[int] = set()
        #: The held containers served now (not being released, session fine).
        self._active: set[int] = set()
        self._connected = True
        self._leaving = False
        self._member = False
        self._task: asyncio.Task[None] | None = None
        self.changes = 0

    # -- SegmentOwners -------------------------------------------------------

    def owns(self, segment: str) -> bool:
        return container_of(segment, self._count) in self._active

    def owner_of(self, segment: str) -> str:
        container = container_of(segment, self._count)
        if container in self._active:
            return self._address
        found = self._cache.owner(container)  # None while a watch says it changed
        if found is None or found.incarnation == self._record.incarnation:
            return ""  # unowned, or ours but not served (released, session trouble)
        return found.address

    async def lookup(self, segment: str) -> str:
        """``owner_of``, or while memory names none, the owner by a fresh read (LookupSegment)."""
        known = self.owner_of(segment)
        if known or self.owns(segment):
            return known
        record = await self._cache.read_now(container_of(segment, self._count))
        if record is None or record.incarnation == self._record.incarnation:
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
        if self._gate.paused:
            raise self._gate.refusal(segment)

    @property
    def phase(self) -> OwnershipPhase:
        """Serving, paused (SUSPENDED) or stopped (``broker.cluster.session_gate``)."""
        return self._gate.phase

    def bind(self, broker_id: str, address: str, kafka: str = "") -> None:
        """Set this broker's id, client address and Kafka address ("": none; known once bound)."""
        if self._task is not None:
            raise RuntimeError("bind before start")
        self._id, self._address = broker_id, address
        self._gate.broker_id = broker_id
        self._takeovers.broker_id = broker_id  # (its failures named the broker "" before)
        self._record = OwnerRecord(broker_id, address, self._record.incarnation, kafka)

    def owner_record(self, segment: str) -> OwnerRecord | None:
        """The record of the broker serving ``segment`` now, None while none is known.

        From memory (the cache), as ``owner_of``: this broker's own record
        when it serves the segment.
        """
        return self.container_owner(container_of(segment, self._count))

    def container_owner(self, container: int) -> OwnerRecord | None:
        """``owner_record`` of a container."""
        if container in self._active:
            return self._record
        found = self._cache.owners.get(container)
        if found is None or found[0].incarnation == self._record.incarnation:
            return None
        return found[0]

    def member_records(self) -> list[OwnerRecord]:
        """The records of the brokers taking part in the balance (from memory), by id."""
        return [record for _member, record in sorted(self._cache.members.items())]

    @property
    def record(self) -> OwnerRecord:
        """This broker's own record."""
        return self._record

    @property
    def broker_id(self) -> str:
        return self._id

    @property
    def address(self) -> str:
        return self._address

    def served_containers(self) -> frozenset[int]:
        """The containers this broker serves now."""
        return frozenset(self._active)

    # -- life -----------------------------------------------------------------

    async def start(self) -> None:
        """Join the balance, take a first step, and go on in the background.

        The first step is taken before returning, so a broker alone owns every
        container once started (a ready line printed after it is true).
        """
        if self._task is None:
            self._store.add_session_listener(self.session_changed)
            try:
                await self._step()
            except Exception as error:  # the background loop tries again
                log.info("broker %s: first ownership step failed: %s", self._id, error)
            self._task = asyncio.create_task(self._run(), name=f"ownership {self._id}")

    async def stop(self) -> None:
        """Leave the balance, hand every container over, then stop."""
        self._leaving = True
        self._store.remove_session_listener(self.session_changed)
        if self._task is not None:
            # First: no step of the balance may claim or join while we leave.
            await cancel_and_wait(self._task)
            self._task = None
        if self._member:
            with contextlib.suppress(Exception):
                await self._delete_own(member_path(self._id))
            self._member = False
        held = frozenset(self._held)
        if held and self._connected:
            await self._release(held)

    def session_changed(self, state: SessionState) -> None:
        """The store's session listener (the store calls it on the loop)."""
        log.info("broker %s: metadata session %s", self._id, state.value)
        before = self._gate.phase
        phase = self._gate.move(state)
        if phase is OwnershipPhase.PAUSED and before is OwnershipPhase.PAUSED:
            return  # reported again: the grace still counts from the first report
        if self._suspension is not None:
            self._suspension.cancel()
            self._suspension = None
        if state is SessionState.CONNECTED:
            # Within the session (PAUSED before) the containers were kept: writes
            # resume now. After STOPPED the next step serves again the held
            # containers whose nodes are still ours, or joins the balance anew.
            self._connected = True
            self._cache.mark_all_dirty()
            self._wake.set()
            return
        self._connected = False
        if phase is OwnershipPhase.PAUSED:
            if self._suspended_grace_s > 0:
                # The session may still be alive: nobody can have taken our
                # containers yet, but we cannot know (kazoo noticed late), so
                # writes wait. Past the grace the session surely expired.
                self._suspension = asyncio.get_running_loop().call_later(
                    self._suspended_grace_s, self._grace_passed)
                return
            self._gate.move(GRACE_PASSED)  # no grace: give the containers up at once
        if state is SessionState.LOST:
            # Our ephemeral nodes are gone with the session.
            self._held.clear()
            self._member = False
            self._cache.forget()
        self._stop_serving(state.value)

    def _grace_passed(self) -> None:
        self._suspension = None
        self._gate.move(GRACE_PASSED)
        self._stop_serving("SUSPENDED for the session timeout")

    def _stop_serving(self, why: str) -> None:
        dropped = frozenset(self._active)
        self._active.clear()
        if dropped:
            log.warning("broker %s: stopped serving containers %s (session %s)", self._id,
                        sorted(dropped), why)
            self._handover.drop(dropped)
        self.changes += 1

    async def _delete_own(self, path: str) -> None:
        """Delete ``path`` if it is this process's node (never another broker's)."""
        try:
            node = await self._store.get(path)
            if OwnerRecord.from_bytes(node.data).incarnation == self._record.incarnation:
                # Between the get and the delete the node could only change if our
                # session expired and another broker claimed the container, and an
                # expired session's requests fail: this never deletes theirs.
                await self._store.delete(path, node.version)
        except (NoNodeError, BadVersionError):
            pass
        except LedgerError as error:  # unreachable or closed: the node goes with the session
            log.info("broker %s: %s not deleted: %s", self._id, path, error)

    async def _run(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self._tick_s)
            self._wake.clear()
            if not self._connected or self._leaving:
                continue
            try:
                await self._step()
            except asyncio.CancelledError:
                raise
            except Exception as error:  # the store is unreachable: try on the next tick
                log.info("broker %s: ownership step failed (%s); trying again", self._id,
                         error)
                self._cache.mark_all_dirty()

    async def _step(self) -> None:
        await self._cache.refresh()
        if not self._member:
            await self._join()
            await self._cache.refresh()
        # Every container is served before any is taken over: a slow take-over
        # (the coordinator replays its log) must not hold back the others' claims.
        taken = self._resume_held()
        taken += self._adopt_own()
        failure: Exception | None = None
        try:
            owners = {container: self._owner_key(record)
                      for container, (record, _v) in self._cache.owners.items()}
            members = set(self._cache.members)
            if self._member:
                members.add(self._id)  # our own node exists even if a read missed it
            moves = plan(self._id, sorted(members), owners, self._count)
            if moves.release:
                log.info("broker %s: members %s, releasing %s", self._id, sorted(members),
                         list(moves.release))
                await self._release(frozenset(moves.release))
            claims = await asyncio.gather(*(self._claim(c) for c in moves.claim),
                                          return_exceptions=True)  # (one round trip)
            taken += [c for c, claimed in zip(moves.claim, claims, strict=True) if claimed is True]
            failure = next((e for e in claims if isinstance(e, Exception)), None)
        except Exception as error:  # those claimed before are served: take them over
            failure = error
        for container in [*taken, *self._takeovers.again(self._active, taken)]:
            if container in self._active:
                await self._takeovers.run(container)
        if failure is not None:
            raise failure

    def _owner_key(self, record: OwnerRecord) -> str:
        if record.broker_id == self._id and record.incarnation != self._record.incarnation:
            return f"{record.broker_id} (a previous process)"
        return record.broker_id

    def _resume_held(self) -> list[int]:
        """After a reconnection within the session: serve again what is still ours.

        A container is in ``_held`` but not ``_active`` only after
        ``_stop_serving`` dropped its segments (and stood a coordinator down):
        serving it again is a take-over like a claim, so the caller runs
        ``on_claimed`` for those returned (else a resumed coordinator is never
        seated again: every transaction call is WrongHost to this broker).
        """
        resumed = []
        for container in sorted(self._held - self._active):
            found = self._cache.owners.get(container)
            if found is not None and found[0].incarnation == self._record.incarnation:
                self._active.add(container)
                self.changes += 1
                log.info("broker %s: serving container %d again", self._id, container)
                resumed.append(container)
            elif found is None:
                self._held.discard(container)
        return resumed

    async def _join(self) -> None:
        try:
            await self._store.create(member_path(self._id), self._record.to_bytes(),
                                     make_parents=True, ephemeral=True)
        except NodeExistsError:
            # A previous process of ours, or our own create whose reply was lost:
            # delete it only when it is not ours (its session lingers otherwise).
            node = await self._store.get(member_path(self._id))
            if OwnerRecord.from_bytes(node.data).incarnation != self._record.incarnation:
                with contextlib.suppress(NoNodeError, BadVersionError):
                    await self._store.delete(member_path(self._id), node.version)
                return  # joined on a later step
        self._member = True
        log.info("broker %s joined the balance of %d containers", self._id, self._count)

    async def _claim(self, container: int) -> bool:
        """Create the container's node; whether it is ours (served: take it over)."""
        path = owner_path(container)
        try:
            await self._store.create(path, self._record.to_bytes(), make_parents=True,
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
        self._claimed(container)
        return True

    async def _is_own(self, path: str) -> bool:
        """Whether ``path`` exists and carries this process's incarnation."""
        try:
            node = await self._store.get(path)
        except NoNodeError:
            return False
        return OwnerRecord.from_bytes(node.data).incarnation == self._record.incarnation

    def _adopt_own(self) -> list[int]:
        """Serve containers whose node is ours although no claim finished (a lost answer).

        ``plan`` counts a node of this incarnation as this broker's, so it never
        claims it again: else nobody serves it until the session changes.
        """
        adopted = []
        for container, (record, _version) in sorted(self._cache.owners.items()):
            if record.incarnation == self._record.incarnation and container not in self._held:
                log.info("broker %s: container %d's node is ours (a claim's answer was "
                         "lost); serving it", self._id, container)
                self._claimed(container)
                adopted.append(container)
        return adopted

    def _claimed(self, container: int) -> None:
        # Segments of the container left from an earlier ownership are stale.
        self._handover.drop(frozenset({container}))
        self._held.add(container)
        self._active.add(container)
        self._cache.set_owner(container, self._record)
        self.changes += 1
        log.info("broker %s owns container %d", self._id, container)

    async def _release(self, containers: frozenset[int]) -> None:
        self._active.difference_update(containers)  # WrongHost from now on
        try:
            await asyncio.wait_for(self._handover.release(containers),
                                   self._release_timeout_s)
        except Exception as error:  # the nodes go anyway: the next owner fences
            log.warning("broker %s: containers %s not closed cleanly: %s", self._id,
                        sorted(containers), error)
        for container in sorted(containers):
            await self._delete_own(owner_path(container))
            self._held.discard(container)
            self._cache.set_owner(container, None)
            log.info("broker %s released container %d", self._id, container)
        self.changes += 1
