"""Timeouts and maintenance: a timer per OPEN transaction aborts it (TIMED_OUT) at its deadline.

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

``TxnTimeouts`` owns the retention of finished transactions; the timers
live on each ``Txn``. It reads and forgets transactions through the
``TxnTable`` and aborts through the ``TxnFinisher``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from broker.errors import TxnStateError
from broker.txn._finish import TxnFinisher
from broker.txn._table import TxnTable
from broker.txn._tasks import BackgroundTasks
from broker.txn.states import DEFAULT_FINISHED_RETENTION_MS, FINAL_STATES, Txn, TxnState

__all__ = ["TICK_WAIT_S", "TxnTimeouts", "check_finished_retention_ms"]

log = logging.getLogger(__name__)

#: How long one tick waits for the finishing it started (which goes on after).
TICK_WAIT_S = 5.0


def check_finished_retention_ms(finished_retention_ms: int) -> None:
    """``ValueError`` unless ``finished_retention_ms`` is >= 0."""
    if finished_retention_ms < 0:
        raise ValueError(f"finished_retention_ms must be >= 0, got {finished_retention_ms}")


class TxnTimeouts:
    """Deadlines and the maintenance tick (a part of ``TxnCoordinator``).

    Args:
        table: the transactions and their log.
        finisher: aborts what times out, drives what failed.
        tasks: the coordinator's background tasks (``close`` waits for them).
        clock: seconds since the epoch.
        finished_retention_ms: how long a finished transaction's status is kept.
    """

    def __init__(self, table: TxnTable, finisher: TxnFinisher, tasks: BackgroundTasks, *,
                 clock: Callable[[], float] = time.time,
                 finished_retention_ms: int = DEFAULT_FINISHED_RETENTION_MS) -> None:
        check_finished_retention_ms(finished_retention_ms)
        self._table = table
        self._finisher = finisher
        self._tasks = tasks
        self._clock = clock
        self._finished_retention_ms = finished_retention_ms

    async def tick(self) -> int:
        """Abort (TIMED_OUT) every OPEN transaction past its deadline; how many.

        First, every COMMITTING or ABORTING transaction whose last step
        failed is driven on once its backoff passed (``broker.txn._finish``).
        Both run in the background; the tick waits for them at most
        ``TICK_WAIT_S``.

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
        started = self._finisher.start_due(now)
        await self._forget_finished(now)
        expired = [txn for txn in self._table.transactions()
                   if txn.state is TxnState.OPEN and txn.deadline_ms <= now]
        # ``_expire`` makes each ABORTING before its first wait: the next tick
        # does not abort it again.
        started += [self._tasks.spawn(self._expire(txn)) for txn in expired]
        if started:
            await asyncio.wait(started, timeout=TICK_WAIT_S)
        return len(expired)

    def schedule(self, txn: Txn) -> None:
        """Abort ``txn`` (TIMED_OUT) once its deadline passes, unless it finishes first."""
        txn.cancel_timer()
        delay_s = max((txn.deadline_ms - self._now_ms()) / 1000, 0.001)
        txn.timer = asyncio.get_running_loop().call_later(delay_s, self._on_deadline, txn)

    def cancel_all(self) -> None:
        """Stop the timer of every known transaction (the coordinator closes)."""
        for txn in self._table.transactions():
            txn.cancel_timer()

    def _on_deadline(self, txn: Txn) -> None:
        txn.timer = None
        if txn.state is not TxnState.OPEN:
            return
        if self._now_ms() < txn.deadline_ms:  # the clock is not the loop's: not yet
            self.schedule(txn)
            return
        self._tasks.spawn(self._expire(txn))

    async def _expire(self, txn: Txn) -> None:
        try:
            await self._finisher.abort(txn, TxnState.TIMED_OUT)
        except TxnStateError:
            return  # committed or aborted meanwhile
        except Exception as error:  # ABORTING now: the maintenance tick finishes it
            log.warning("transaction %s timed out but its abort failed: %s", txn.name, error)
            return
        log.info("transaction %s timed out and was aborted", txn.name)

    async def _forget_finished(self, now_ms: int) -> None:
        horizon = now_ms - self._finished_retention_ms
        self._table.forget_closed_labels(horizon)
        for txn in [t for t in self._table.transactions() if t.state in FINAL_STATES]:
            if self._finisher.is_finishing(txn.txn_id):
                continue  # its final record is not durable yet
            if txn.finished_ms < 0:
                txn.finished_ms = now_ms  # logged before finished_ms existed: from now
            elif txn.finished_ms <= horizon:
                await self._table.write(txn.name, None)
                self._table.remove(txn)

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)
