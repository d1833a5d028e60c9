"""Timeouts: a timer per OPEN transaction aborts it (TIMED_OUT) at its deadline.

The maintenance ``tick`` is the backstop: it finishes what a failure left
COMMITTING or ABORTING, aborts what a timer missed (a clock that is not the
event loop's) and forgets finished transactions.
"""

from __future__ import annotations

import asyncio
import logging

from broker.errors import TxnStateError
from broker.txn._finish import CoordinatorFinish
from broker.txn.states import Txn, TxnState

__all__ = ["CoordinatorTimeouts"]

log = logging.getLogger(__name__)

class CoordinatorTimeouts(CoordinatorFinish):
    """Deadlines and the maintenance tick (a part of ``TxnCoordinator``)."""

    async def tick(self) -> int:
        """Abort (TIMED_OUT) every OPEN transaction past its deadline; how many.

        First, every COMMITTING or ABORTING transaction whose last step
        failed is driven on once its backoff passed (``_finish``).

        Each transaction has a timer that aborts it at its deadline; this
        maintenance round is the backstop (an abort that failed, a clock that
        is not the event loop's).

        Also forgets finished transactions older than ``finished_retention_ms``
        (a tombstone in the log, which compaction then drops), so neither the
        log nor this coordinator's memory grows without bound; GetTxnStatus of
        a forgotten transaction answers NOT_FOUND.
        """
        now = self._now_ms()
        # Decided transactions a failure left COMMITTING or ABORTING (their
        # job kept its place): driven on, with backoff, until they end.
        await self._drive_due(now)
        await self._forget_finished(now)
        expired = [txn for txn in self._txns.values()
                   if txn.state is TxnState.OPEN and txn.deadline_ms <= now]
        for txn in expired:
            try:
                await self._abort(txn, TxnState.TIMED_OUT)
                log.info("transaction %s timed out and was aborted", txn.name)
            except TxnStateError:
                continue  # committed or aborted meanwhile
            except Exception as error:  # ABORTING now: the next ticks finish it
                log.warning("transaction %s timed out; its abort failed: %s", txn.name, error)
        return len(expired)

    def _schedule_timeout(self, txn: Txn) -> None:
        """Abort ``txn`` (TIMED_OUT) once its deadline passes, unless it finishes first."""
        self._cancel_timeout(txn)
        delay_s = max((txn.deadline_ms - self._now_ms()) / 1000, 0.001)
        txn.timer = asyncio.get_running_loop().call_later(delay_s, self._on_deadline, txn)

    def _on_deadline(self, txn: Txn) -> None:
        txn.timer = None
        if txn.state is not TxnState.OPEN:
            return
        if self._now_ms() < txn.deadline_ms:  # the clock is not the loop's: not yet
            self._schedule_timeout(txn)
            return
        task = asyncio.create_task(self._expire(txn))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _expire(self, txn: Txn) -> None:
        try:
            await self._abort(txn, TxnState.TIMED_OUT)
        except TxnStateError:
            return  # committed or aborted meanwhile
        except Exception as error:  # ABORTING now: the maintenance tick finishes it
            log.warning("transaction %s timed out but its abort failed: %s", txn.name, error)
            return
        log.info("transaction %s timed out and was aborted", txn.name)
