"""The ownership loop: join the balance, then step towards the target assignment.

Part of ``ZooKeeperOwners`` (``zookeeper_owners``). ``BalanceLoop`` owns this
broker's membership of the balance (its ephemeral member node), the
background task and the take-overs (``broker.cluster.takeovers``). A step
refreshes the owner cache, joins if not a member, serves again or adopts
what is ours (``ContainerClaims``), plans the moves (``broker.cluster.balance``),
releases and claims accordingly, then takes over what it took (and retries
the take-overs that failed). It steps after every change it is woken for, and
once per ``tick_s`` in case a change was missed; a failed step (the store
unreachable) is tried again on the next.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from broker.cluster.balance import plan
from broker.cluster.container_claims import ContainerClaims, OwnIdentity
from broker.cluster.containers import OwnerRecord, member_path
from broker.cluster.owner_cache import OwnerCache
from broker.cluster.ownership_session import OwnershipSession
from broker.cluster.takeovers import TakeOvers
from ledger.api import MetadataStore
from ledger.errors import BadVersionError, NodeExistsError, NoNodeError
from ledger.tasks import cancel_and_wait

__all__ = ["BalanceLoop"]

log = logging.getLogger(__name__)


class BalanceLoop:
    """This broker's steps in the balance, in a background task (module docstring).

    Args:
        store: the shared metadata store.
        identity: this process's record.
        cache: the owner and member nodes as last read.
        claims: the held and served containers.
        session: whether the session is connected (no step otherwise).
        wake: set to step now (a watch fired, the session came back).
        tick_s: step at least this often.
        on_claimed: awaited after each claim (``TakeOvers``).
    """

    def __init__(self, store: MetadataStore, identity: OwnIdentity, cache: OwnerCache,
                 claims: ContainerClaims, session: OwnershipSession, wake: asyncio.Event,
                 tick_s: float, on_claimed: Callable[[int], Awaitable[None]] | None) -> None:
        self._store = store
        self._identity = identity
        self._cache = cache
        self._claims = claims
        self._session = session
        self._wake = wake
        self._tick_s = tick_s
        self._takeovers = TakeOvers(identity.broker_id, on_claimed)
        self._member = False
        self._leaving = False
        self._task: asyncio.Task[None] | None = None

    @property
    def started(self) -> bool:
        """Whether ``start`` ran (and ``stop`` did not)."""
        return self._task is not None

    def rename(self, broker_id: str) -> None:
        """The broker was bound to ``broker_id`` (before start)."""
        self._takeovers.broker_id = broker_id  # (its failures named the broker "" before)

    def left(self) -> None:
        """The session expired: our member node is gone with it (join again)."""
        self._member = False

    async def start(self) -> None:
        """Take a first step, then go on in the background.

        The first step is taken before returning, so a broker alone owns every
        container once started (a ready line printed after it is true).
        """
        try:
            await self._step()
        except Exception as error:  # the background loop tries again
            log.info("broker %s: first ownership step failed: %s", self._identity.broker_id,
                     error)
        self._task = asyncio.create_task(self._run(),
                                         name=f"ownership {self._identity.broker_id}")

    async def stop(self) -> None:
        """Step no more, then leave the balance (delete the member node first)."""
        self._leaving = True
        if self._task is not None:
            # First: no step of the balance may claim or join while we leave.
            await cancel_and_wait(self._task)
            self._task = None
        if self._member:
            with contextlib.suppress(Exception):
                await self._claims.delete_own(member_path(self._identity.broker_id))
            self._member = False

    async def _run(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self._tick_s)
            self._wake.clear()
            if not self._session.connected or self._leaving:
                continue
            try:
                await self._step()
            except Exception as error:  # the store is unreachable: try on the next tick
                log.info("broker %s: ownership step failed (%s); trying again",
                         self._identity.broker_id, error)
                self._cache.mark_all_dirty()

    async def _step(self) -> None:
        await self._cache.refresh()
        if not self._member:
            await self._join()
            await self._cache.refresh()
        # Every container is served before any is taken over: a slow take-over
        # (the coordinator replays its log) must not hold back the others' claims.
        taken = self._claims.resume_held()
        taken += await self._claims.adopt_own()
        failure: Exception | None = None
        try:
            owners = {container: self._owner_key(record)
                      for container, (record, _v) in self._cache.owners.items()}
            members = set(self._cache.members)
            if self._member:  # our own node exists even if a read missed it
                members.add(self._identity.broker_id)
            moves = plan(self._identity.broker_id, sorted(members), owners,
                         self._cache.container_count)
            if moves.release:
                log.info("broker %s: members %s, releasing %s", self._identity.broker_id,
                         sorted(members), list(moves.release))
                await self._claims.release(frozenset(moves.release))
            claims = await asyncio.gather(*(self._claims.claim(c) for c in moves.claim),
                                          return_exceptions=True)  # (one round trip)
            taken += [c for c, claimed in zip(moves.claim, claims, strict=True) if claimed is True]
            failure = next((e for e in claims if isinstance(e, Exception)), None)
        except Exception as error:  # those claimed before are served: take them over
            failure = error
        for container in [*taken, *self._takeovers.again(self._claims.served(), taken)]:
            if self._claims.serves(container):
                await self._takeovers.run(container)
        if failure is not None:
            raise failure

    def _owner_key(self, record: OwnerRecord) -> str:
        if record.broker_id == self._identity.broker_id and not self._identity.ours(record):
            return f"{record.broker_id} (a previous process)"
        return record.broker_id

    async def _join(self) -> None:
        path = member_path(self._identity.broker_id)
        try:
            await self._store.create(path, self._identity.record.to_bytes(),
                                     make_parents=True, ephemeral=True)
        except NodeExistsError:
            # A previous process of ours, or our own create whose reply was lost:
            # delete it only when it is not ours (its session lingers otherwise).
            node = await self._store.get(path)
            if not self._identity.ours(OwnerRecord.from_bytes(node.data)):
                with contextlib.suppress(NoNodeError, BadVersionError):
                    await self._store.delete(path, node.version)
                return  # joined on a later step
        self._member = True
        log.info("broker %s joined the balance of %d containers", self._identity.broker_id,
                 self._cache.container_count)
