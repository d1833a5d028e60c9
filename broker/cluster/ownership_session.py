"""What the metadata session's changes do to this broker's containers.

Part of ``ZooKeeperOwners`` (``zookeeper_owners``); the phases are
``broker.cluster.session_gate``'s. SUSPENDED (the connection is gone, the
session perhaps alive) pauses writes at once (``check_writable`` raises a
WrongHost without owner) and unloads nothing; CONNECTED again within the
session resumes them at once. LOST (it expired, its ephemeral nodes are
gone), or SUSPENDED for ``suspended_grace_s`` without a reconnection (kazoo
reports LOST only after reconnecting, so a broker cut off from ZooKeeper must
decide alone), stops serving every container (``ContainerClaims.stop_serving``):
another broker may own them now. After a reconnection the balance loop is
woken: it serves again the containers whose nodes are still ours, and after
LOST (its member node went with the session: ``BalanceLoop.left``, which
the owner calls after ``changed``) joins the balance anew.

``OwnershipSession`` owns the gate, the grace timer and whether the session
is connected.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from broker.cluster.container_claims import ContainerClaims, OwnIdentity
from broker.cluster.owner_cache import OwnerCache
from broker.cluster.session_gate import GRACE_PASSED, OwnershipPhase, SessionGate
from ledger.api import SessionState

__all__ = ["OwnershipSession"]

log = logging.getLogger(__name__)


class OwnershipSession:
    """The session's phase and what its changes do (module docstring).

    Args:
        identity: this process's record (its broker id names it in the log).
        claims: the held and served containers.
        cache: the owner nodes as last read.
        wake: wakes the balance loop.
        suspended_grace_s: how long SUSPENDED stays paused before the
            containers are given up as for LOST; 0: at once.
    """

    def __init__(self, identity: OwnIdentity, claims: ContainerClaims, cache: OwnerCache,
                 wake: Callable[[], None], suspended_grace_s: float) -> None:
        self._identity = identity
        self._claims = claims
        self._cache = cache
        self._wake = wake
        self._grace_s = suspended_grace_s
        self._gate = SessionGate(identity.broker_id)
        self._suspension: asyncio.TimerHandle | None = None
        #: Whether the session is connected (the balance loop steps only then).
        self.connected = True

    @property
    def phase(self) -> OwnershipPhase:
        """Serving, paused (SUSPENDED) or stopped (``broker.cluster.session_gate``)."""
        return self._gate.phase

    def rename(self, broker_id: str) -> None:
        """The broker was bound to ``broker_id`` (before start)."""
        self._gate.broker_id = broker_id

    def check_writable(self, segment: str) -> None:
        """Raise ``WrongHostError`` (no owner) while writes are paused (session SUSPENDED).

        Constant work (one attribute read): it guards every block.
        """
        if self._gate.paused:
            raise self._gate.refusal(segment)

    def changed(self, state: SessionState) -> None:
        """The store's session listener (the store calls it on the loop)."""
        log.info("broker %s: metadata session %s", self._identity.broker_id, state.value)
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
            self.connected = True
            self._cache.mark_all_dirty()
            self._wake()
            return
        self.connected = False
        if phase is OwnershipPhase.PAUSED:
            if self._grace_s > 0:
                # The session may still be alive: nobody can have taken our
                # containers yet, but we cannot know (kazoo noticed late), so
                # writes wait. Past the grace the session surely expired.
                self._suspension = asyncio.get_running_loop().call_later(
                    self._grace_s, self._grace_passed)
                return
            self._gate.move(GRACE_PASSED)  # no grace: give the containers up at once
        if state is SessionState.LOST:
            # Our ephemeral nodes are gone with the session.
            self._claims.forget_held()
            self._cache.forget()
        self._claims.stop_serving(state.value)

    def _grace_passed(self) -> None:
        self._suspension = None
        self._gate.move(GRACE_PASSED)
        self._claims.stop_serving("SUSPENDED for the session timeout")
