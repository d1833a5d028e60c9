"""A BookieDirectory fed by the cluster's bookie registrations (``/bookies/available``).

In a cluster a broker gets no ``--bookies`` list: it watches the children of
``/bookies/available`` (``cluster_layout``), one ephemeral node per live
bookie, and places each new ledger's ensemble on E of them at random
(``BookieDirectory.choose``; fewer than E: ``NotEnoughBookiesError`` from the
ledger client). A bookie whose node vanished (stopped, crashed, or cut from
ZooKeeper past its session timeout) gets no new ledgers; ledgers already on it
are still read through a client made on demand from its id (its address).

The watch is one-shot, so each event re-reads the children and sets a new
one. After the store's session expired (watches lost) or reconnected, the
list is read again. Reads happen only on those events, never per append.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from ledger.api import BookieClient, EventType, MetadataStore, SessionState
from ledger.client.directory import BookieDirectory
from ledger.errors import LedgerError
from ledger.metadata.cluster_layout import BOOKIES_AVAILABLE_PATH
from ledger.tasks import cancel_and_wait

__all__ = ["RegistryBookieDirectory"]

log = logging.getLogger(__name__)


class RegistryBookieDirectory(BookieDirectory):
    """Live bookies from the registry; ``start`` reads them and keeps watching.

    Args:
        store: the cluster's metadata store.
        connect: makes a client for a bookie id (its ``host:port``), e.g.
            ``GrpcBookieClient``.
        quarantine_ms: as ``BookieDirectory``.
    """

    def __init__(self, store: MetadataStore, *, connect: Callable[[str], BookieClient],
                 quarantine_ms: int = 60_000) -> None:
        super().__init__(connect=connect, quarantine_ms=quarantine_ms)
        self._store = store
        self._refresh_task: asyncio.Task[None] | None = None
        self._again = False
        self._closed = False
        self.changed = asyncio.Event()
        """Set at every refresh that changed the list (tests wait on it; clear to reuse)."""

    async def start(self) -> None:
        """Read the live bookies and watch them. Raises ``MetadataError`` if the store fails."""
        await self._refresh()
        self._store.add_session_listener(self._on_session)

    def _on_children(self, event: EventType, path: str) -> None:
        self._schedule()

    def _on_session(self, state: SessionState) -> None:
        if state is SessionState.CONNECTED:
            self._schedule()

    def _schedule(self) -> None:
        # On the store's loop. One refresh at a time; an event during one asks for another.
        if self._closed:
            return
        if self._refresh_task is not None and not self._refresh_task.done():
            self._again = True
            return
        self._refresh_task = asyncio.get_running_loop().create_task(self._refresh_loop())

    async def _refresh_loop(self) -> None:
        while True:
            self._again = False
            try:
                await self._refresh()
            except LedgerError as error:
                # The session listener schedules another refresh once reconnected.
                log.warning("cannot read the live bookies: %s", error)
            if not self._again or self._closed:
                return

    async def _refresh(self) -> None:
        names = await self._store.children(BOOKIES_AVAILABLE_PATH, watch=self._on_children)
        before = set(self.available_bookies())
        self.set_available(names)
        if set(names) != before:
            log.info("live bookies: %s", ", ".join(names) or "none")
            self.changed.set()

    def available_bookies(self) -> list[str]:
        """The registered bookies, quarantined ones included."""
        return list(self._available)

    async def close(self) -> None:
        """Stop watching and close every bookie client."""
        self._closed = True
        self._store.remove_session_listener(self._on_session)
        if self._refresh_task is not None:
            with contextlib.suppress(LedgerError):
                await cancel_and_wait(self._refresh_task)
        await super().close()
