"""The auditor: notice bookies lost for good and mark the ledgers they held.

A bookie is *lost* when it is registered in ``/bookies/all`` but has been
missing from ``/bookies/available`` for longer than the grace period, as this
auditor saw it: the clock starts when the auditor first finds it missing (an
auditor that just took over starts every clock afresh, which delays recovery
by up to one grace period, never hastens it). A bookie that comes back within
the grace period is forgotten; its ledgers never needed anything.

For every lost bookie the auditor reads every ledger's metadata and marks the
ledgers whose ensembles (any fragment) name it (``marks``). It scans again
whenever the set of lost bookies changes, and every ``rescan_interval_s``
besides (a ledger placed on a bookie just before it vanished, by a broker
that had not yet seen it go). Only the auditor scans: one full read of the
ledgers per change, not one per worker.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from ledger.api import MetadataStore
from ledger.autorecovery.fragments import ledger_bookies
from ledger.autorecovery.marks import UnderReplicationMarks
from ledger.errors import InvalidArgumentError, NoNodeError
from ledger.metadata.cluster_layout import BOOKIES_ALL_PATH, BOOKIES_AVAILABLE_PATH
from ledger.metadata.ledger_metadata import (
    LEDGERS_PATH,
    LedgerMetadata,
    ledger_id_from_name,
    ledger_path,
)

__all__ = ["Auditor"]

log = logging.getLogger(__name__)


class Auditor:
    """Finds lost bookies and marks their ledgers; ``check`` once per period.

    Args:
        store: the cluster's metadata store.
        grace_ms: how long a bookie may be missing before it is lost.
        rescan_interval_s: scan the ledgers at least this often while a bookie is lost.
        clock: monotonic seconds (injectable for tests).
    """

    def __init__(self, store: MetadataStore, *, grace_ms: int, rescan_interval_s: float = 60.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._store = store
        self._marks = UnderReplicationMarks(store)
        self._grace_s = grace_ms / 1000
        self._rescan_interval_s = rescan_interval_s
        self._clock = clock
        self._missing_since: dict[str, float] = {}
        self._scanned: frozenset[str] = frozenset()
        self._scanned_at = 0.0

    def reset(self) -> None:
        """Forget every clock (this worker stopped being the auditor)."""
        self._missing_since.clear()
        self._scanned = frozenset()

    async def lost_bookies(self) -> frozenset[str]:
        """Registered bookies missing from the live ones for longer than the grace period."""
        registered = set(await self._store.children(BOOKIES_ALL_PATH))
        missing = registered - set(await self._store.children(BOOKIES_AVAILABLE_PATH))
        now = self._clock()
        for bookie in list(self._missing_since):
            if bookie not in missing:
                log.info("bookie %s is back", bookie)
                del self._missing_since[bookie]
        for bookie in missing:
            self._missing_since.setdefault(bookie, now)
        return frozenset(bookie for bookie, since in self._missing_since.items()
                         if now - since >= self._grace_s)

    async def check(self) -> tuple[frozenset[str], int]:
        """One audit: the lost bookies, and how many ledgers this audit newly marked."""
        lost = await self.lost_bookies()
        now = self._clock()
        if not lost or (lost == self._scanned
                        and now - self._scanned_at < self._rescan_interval_s):
            self._scanned = lost
            return lost, 0
        if lost - self._scanned:
            log.warning("bookies lost for good (missing > %.0f s): %s; marking their ledgers "
                        "for re-replication", self._grace_s, ", ".join(sorted(lost)))
        marked = await self.mark_ledgers(lost)
        self._scanned, self._scanned_at = lost, now
        return lost, marked

    async def mark_ledgers(self, lost: frozenset[str]) -> int:
        """Mark every ledger whose ensembles name a bookie of ``lost``; the count marked."""
        try:
            names = await self._store.children(LEDGERS_PATH)
        except NoNodeError:
            return 0
        marked = 0
        for name in names:
            try:
                ledger_id = ledger_id_from_name(name)
            except InvalidArgumentError:
                continue  # idgen, not a ledger
            try:
                node = await self._store.get(ledger_path(ledger_id))
            except NoNodeError:
                continue  # deleted meanwhile
            held = ledger_bookies(LedgerMetadata.from_bytes(node.data)) & lost
            if held and await self._marks.mark(ledger_id, held):
                marked += 1
        if marked:
            log.info("marked %d ledgers under-replicated", marked)
        return marked
