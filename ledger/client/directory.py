"""BookieDirectory: the bookies a ledger client may place ledgers on, and how to reach any bookie.

Standalone passes the one in-process bookie; ``folio broker --bookies``
passes gRPC clients; in a cluster ``registry_directory.RegistryBookieDirectory``
learns them from the bookies' registrations in the metadata store. A bookie
that failed an add is left out of new placements for a quarantine period,
unless too few others are left.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable

from ledger.api import BookieClient
from ledger.errors import BookieUnavailableError

__all__ = ["BookieDirectory"]


class BookieDirectory:
    """Bookie clients by id, with placement choice.

    Args:
        bookies: the bookies available for new ledgers.
        connect: makes a client for a bookie id met in ledger metadata but not
            in ``bookies`` (e.g. ``GrpcBookieClient``); without it such ids are
            unreachable.
        quarantine_ms: how long a failed bookie is chosen last for placements.
        clock: monotonic seconds; injectable for tests.
    """

    def __init__(
        self, bookies: Iterable[BookieClient] = (), *,
        connect: Callable[[str], BookieClient] | None = None,
        quarantine_ms: int = 60_000, clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._clients: dict[str, BookieClient] = {}
        self._available: list[str] = []
        self._connect = connect
        self._quarantine_s = quarantine_ms / 1000
        self._clock = clock
        self._failed_at: dict[str, float] = {}
        self._departure_listeners: list[Callable[[str], None]] = []
        for bookie in bookies:
            self.add(bookie)

    def add(self, bookie: BookieClient) -> None:
        """Make ``bookie`` available for placements."""
        self._clients[bookie.bookie_id] = bookie
        if bookie.bookie_id not in self._available:
            self._available.append(bookie.bookie_id)

    def set_available(self, bookie_ids: Iterable[str]) -> None:
        """Make exactly ``bookie_ids`` available for placements (a registry's live bookies).

        Clients of bookies no longer available are kept: ledgers placed on
        them are still read (or recovered) through them. Each bookie that
        leaves is reported to the departure listeners.
        """
        available = list(dict.fromkeys(bookie_ids))
        departed = [bookie_id for bookie_id in self._available if bookie_id not in available]
        self._available = available
        for bookie_id in departed:
            for listener in list(self._departure_listeners):
                listener(bookie_id)

    def add_departure_listener(self, listener: Callable[[str], None]) -> None:
        """Call ``listener(bookie_id)`` when a bookie leaves the available ones.

        Called from ``set_available`` (on the event loop in a cluster); it must not block.
        """
        self._departure_listeners.append(listener)

    def bookie(self, bookie_id: str) -> BookieClient:
        """The client for ``bookie_id`` (the same object every time)."""
        client = self._clients.get(bookie_id)
        if client is None:
            if self._connect is None:
                raise BookieUnavailableError(f"no way to reach bookie {bookie_id}")
            client = self._clients[bookie_id] = self._connect(bookie_id)
        return client

    def mark_failed(self, bookie_id: str) -> None:
        """Choose ``bookie_id`` last for placements, for the quarantine period."""
        self._failed_at[bookie_id] = self._clock()

    def mark_recovered(self, bookie_id: str) -> None:
        """End ``bookie_id``'s quarantine now (its storage takes writes again, say)."""
        self._failed_at.pop(bookie_id, None)

    def available(self) -> list[str]:
        """Bookies that may take new ledgers now."""
        now = self._clock()
        return [
            bookie_id for bookie_id in self._available
            if now - self._failed_at.get(bookie_id, -self._quarantine_s) >= self._quarantine_s
        ]

    def choose(self, count: int, *, exclude: set[str] | frozenset[str] = frozenset()) -> list[str]:
        """Up to ``count`` distinct registered bookies not in ``exclude``, at random.

        Bookies out of quarantine first; quarantined ones only to make up the
        count when too few others are left, as BookKeeper's ``newEnsemble``
        does: with E bookies in all, one that failed an add while it restarted
        (a rolling restart) must be usable again as soon as it is back, not a
        whole quarantine period later.
        """
        healthy = set(self.available())
        candidates = [bookie_id for bookie_id in self._available if bookie_id not in exclude]
        first = [bookie_id for bookie_id in candidates if bookie_id in healthy]
        chosen = random.sample(first, min(count, len(first)))
        if len(chosen) < count:
            rest = [bookie_id for bookie_id in candidates if bookie_id not in healthy]
            chosen += random.sample(rest, min(count - len(chosen), len(rest)))
        return chosen

    async def close(self) -> None:
        """Close every client."""
        for client in self._clients.values():
            await client.close()
