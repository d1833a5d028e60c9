"""The auto-recovery worker: audit (if elected), then re-replicate marked ledgers.

Every ``folio bookie --metadata-url`` runs one (``--no-auto-recovery`` turns
it off). Once per period each worker:

1. tries to be the auditor (``/autorecovery/auditor``, ephemeral: the first
   worker to create it audits until its session ends, then another takes
   over); the auditor marks the ledgers of bookies lost for good;
2. reads the marks and, for each ledger it can lock (ephemeral lock node:
   several workers never copy the same ledger at once), re-replicates its
   closed fragments (``replicator``) and clears the mark once nothing is left.

A mark whose ledger cannot be finished now (the last ensemble of an open
ledger, no spare live bookie, a bookie failing) stays, and is tried again the
next period. Errors are logged, never raised: a worker outlives any failure
of ZooKeeper or a bookie and goes on the next period.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from ledger import metrics
from ledger.api import BookieClient, MetadataStore
from ledger.autorecovery.auditor import Auditor
from ledger.autorecovery.config import AutoRecoveryConfig
from ledger.autorecovery.marks import UnderReplicationMarks
from ledger.autorecovery.replicator import replicate_ledger
from ledger.client.directory import BookieDirectory
from ledger.errors import LedgerError
from ledger.metadata.cluster_layout import BOOKIES_AVAILABLE_PATH

__all__ = ["AutoRecoveryWorker"]

log = logging.getLogger(__name__)


class AutoRecoveryWorker:
    """One worker; ``run`` until cancelled, or ``run_once`` per call (tests).

    Args:
        store: the cluster's metadata store (the process's session).
        worker_id: this worker's id in lock and auditor nodes (the bookie's id).
        connect: makes a client for a bookie id (``GrpcBookieClient``).
        config: grace period and period.
    """

    def __init__(self, store: MetadataStore, worker_id: str, *,
                 connect: Callable[[str], BookieClient], config: AutoRecoveryConfig) -> None:
        self._store = store
        self._worker_id = worker_id
        self._config = config
        self._marks = UnderReplicationMarks(store)
        self._bookies = BookieDirectory(connect=connect)
        self._auditor = Auditor(store, grace_ms=config.auto_recovery_grace_ms,
                                rescan_interval_s=12 * config.auto_recovery_interval_ms / 1000)
        self.is_auditor = False

    async def run(self) -> None:
        """Work once per period until cancelled; closes the bookie clients at the end."""
        period_s = self._config.auto_recovery_interval_ms / 1000
        log.info("auto-recovery worker %s: grace %.0f s, period %.1f s", self._worker_id,
                 self._config.auto_recovery_grace_ms / 1000, period_s)
        try:
            while True:
                await self.run_once()
                await asyncio.sleep(period_s)
        finally:
            with contextlib.suppress(LedgerError):
                await self._bookies.close()

    async def run_once(self) -> int:
        """One period's work; returns how many marks are left (also the gauge's value)."""
        try:
            await self._audit()
            return await self._replicate_marked()
        except LedgerError as error:
            log.warning("auto-recovery worker %s: %s (trying again next period)",
                        self._worker_id, error)
            return -1
        except Exception:  # a bug: say so loudly, but keep the worker (and the bookie) alive
            log.exception("auto-recovery worker %s failed unexpectedly", self._worker_id)
            return -1

    async def _audit(self) -> None:
        auditor = await self._marks.elect_auditor(self._worker_id)
        if auditor != self.is_auditor:
            log.info("auto-recovery worker %s %s the auditor", self._worker_id,
                     "is" if auditor else "is no longer")
            self._auditor.reset()
        self.is_auditor = auditor
        if auditor:
            await self._auditor.check()

    async def _replicate_marked(self) -> int:
        ledger_ids = await self._marks.ledger_ids()
        metrics.set_under_replicated(len(ledger_ids))
        if not ledger_ids:
            return 0
        live = await self._store.children(BOOKIES_AVAILABLE_PATH)
        left = len(ledger_ids)
        for ledger_id in ledger_ids:
            if not await self._marks.claim(ledger_id, self._worker_id):
                continue  # another worker has it
            try:
                if await self._replicate(ledger_id, live):
                    left -= 1
            finally:
                await self._marks.release(ledger_id)
        metrics.set_under_replicated(left)
        return left

    async def _replicate(self, ledger_id: int, live: list[str]) -> bool:
        mark = await self._marks.get(ledger_id)
        if mark is None:
            return True  # cleared by another worker meanwhile
        lost = mark.lost_bookies - set(live)  # a bookie that came back holds its copies
        try:
            result = await replicate_ledger(self._store, self._bookies, ledger_id, lost, live)
        except LedgerError as error:
            log.warning("ledger %d: re-replication failed: %s (trying again next period)",
                        ledger_id, error)
            return False
        if not result.done:
            log.info("ledger %d stays under-replicated for now: %s", ledger_id, result.left)
            return False
        if await self._marks.clear(mark):
            log.info("ledger %d has its write quorum again (%d entries copied)",
                     ledger_id, result.entries)
            return True
        return False
