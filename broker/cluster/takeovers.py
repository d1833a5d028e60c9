"""What taking a container over runs, and the take-overs that failed: tried again.

``ZooKeeperOwners`` serves a container as soon as it is claimed; the
take-over (``on_claimed``: e.g. seating the transaction coordinator, which
replays its log) runs after. It can fail (a bookie or ZooKeeper outage during
the replay): the container stays served (its segments load lazily), but what
the take-over seats must not stay unseated for as long as the container is
held, or every transaction call fails until the session changes (the
nemesis, seed 4). So a failed take-over is tried again on every ownership
step until it succeeds or the container is no longer served.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Collection

__all__ = ["TakeOvers"]

log = logging.getLogger(__name__)


class TakeOvers:
    """Runs ``on_claimed`` per taken container and keeps those whose run failed.

    ``broker_id`` names the broker in the log; its owner sets it again once
    the broker is bound (``ZooKeeperOwners.bind``).
    """

    def __init__(self, broker_id: str,
                 on_claimed: Callable[[int], Awaitable[None]] | None) -> None:
        self.broker_id = broker_id
        self._on_claimed = on_claimed
        #: Served containers whose take-over failed.
        self._unseated: set[int] = set()

    async def run(self, container: int) -> None:
        """Take ``container`` over; a failure is logged and the container kept for ``again``."""
        self._unseated.discard(container)
        if self._on_claimed is None:
            return
        try:
            await self._on_claimed(container)
        except Exception as error:
            self._unseated.add(container)
            log.warning("broker %s: taking over container %d failed (%s: %s); trying "
                        "again", self.broker_id, container, type(error).__name__, error)

    def again(self, active: Collection[int], taken: Collection[int]) -> list[int]:
        """The ``active`` containers whose take-over failed, to run again (not in ``taken``)."""
        self._unseated &= set(active)
        again = sorted(self._unseated - set(taken))
        for container in again:
            log.info("broker %s: taking over container %d again", self.broker_id, container)
        return again
