"""Timeouts: a timer per OPEN transaction aborts it (TIMED_OUT) at its deadline.

The maintenance ``tick`` is the backstop: it finishes what a failure left
COMMITTING or ABORTING, aborts what a timer missed (a clock that is not the
event loop's) and forgets finished transactions. The finishing it starts runs
in the background (tasks of the coordinator): the tick waits for it at most
``TICK_WAIT_S``. In a cluster a marker is retried until its segment's owner
is known and writes it (``broker.cluster.txn_routes``), which can take a
session timeout or more; the tick is a maintenance hook of the topics, whose
round (retention, rollover by age, compaction of system topics) must not wait
as long. Nothing is cancelled at the bound: an abort cut short before its
job is registered would stay ABORTING with nothing to drive it on.
"""

from __future__ import annotations

import asyncio
import logging

from broker.errors import TxnStateError
from broker.txn._finish import CoordinatorFinish
from broker.txn.states import FINAL_STATES, Txn, TxnState

__all__ = ["TICK_WAIT_S", "CoordinatorTimeouts"]

log = logging.getLogger(__name__)

#: How long one tick waits for the finishing it started (which goes on after).
TICK_WAIT_S = 5.0


class CoordinatorTimeouts(CoordinatorFinish):
    """Deadlines and the maintenance tick (a part of ``TxnCoordinator``)."""

    async def tick(self) -> int:
        """Abort (TIMED_OUT) every OPEN transaction past its deadline; how many.

        First, every COMMITTING or ABORTING transaction whose last step
        failed is driven on once its backoff passed (``_finish``). Both run
        in the background; the tick waits for them at most ``TICK_WAIT_S``.

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
        started = self._start_due(now)
        await self._forget_finished(now)
        expired = [txn for txn in self._txns.values()
                   if txn.state is TxnState.OPEN and txn.deadline_ms <= now]
        # ``_expire`` makes each ABORTING before its first wait: the next tick
        # does not abort it again.
        started += [self._in_background(self._expire(txn)) for txn in expired]
        if started:
            await asyncio.wait(started, timeout=TICK_WAIT_S)
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

    async def _forget_finished(self, now_ms: int) -> None:
        horizon = now_ms - self._finished_retention_ms
        for label in [k for k, closed in self._closed_labels.items() if closed <= horizon]:
            del self._closed_labels[label]
        for txn in [t for t in self._txns.values() if t.state in FINAL_STATES]:
            if any(txn.txn_id in job.txn_ids for job in self._finishing.values()):
                continue  # its final record is not durable yet
            if txn.finished_ms < 0:
                txn.finished_ms = now_ms  # logged before finished_ms existed: from now
            elif txn.finished_ms <= horizon:
                await self._log.write(txn.name, None)
                self._remove(txn)
