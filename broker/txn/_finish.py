"""The finisher: markers in every touched segment, then the final log records.

A commit is decided once its transactions are COMMITTING in memory; its
COMMITTING record makes the decision survive a crash. The markers and the
COMMITTED records follow, and a crash between them is finished on the next
start (a second marker changes nothing). An abort writes its ABORTING record,
then ABORT markers, then ABORTED (or TIMED_OUT). Finished transactions are
forgotten later by the maintenance tick (``broker.txn._timeouts``).

Finishing states finish. Each decided transaction (or commit group) is a
``Finishing`` job, kept until its final records are durable. A step that
fails (a log write or a marker whose outcome may be unknown: a bookie timed
out, the segment moved) leaves the job where it was, and the maintenance
``tick`` drives it again with backoff (``FINISH_RETRY_*``) until it ends,
whatever failed before. Every step may run twice: the decision record and
the final records are keyed (the latest wins), a second marker changes
nothing. The decision is never taken back: after a COMMITTING write that
failed, the record may have landed (a restart would then commit), so the
commit goes on rather than going back to OPEN.

A decision is reported only once its record is durable (issue 22): a
transaction is COMMITTING or ABORTING in memory before its decision record is
written, and a crash in that window replays it OPEN (its timeout then aborts
it). So a status read back (``GetTxnStatus``) and the refusal of a repeated
CommitTxn/AbortTxn wait in ``until_durable`` until the job's decision is
logged, or answer ``BrokerShuttingDownError`` (retriable) when the
coordinator forgot the transaction meanwhile (it stood down).

``TxnFinisher`` owns the jobs, their retry timers and the decision waiters;
it writes records through the ``TxnTable`` and markers through ``TxnMarkers``,
and runs its background work (records after a commit's answer, retries) as
tasks of the coordinator's ``BackgroundTasks``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence

from broker.errors import BrokerShuttingDownError
from broker.segments.entry import EntryKind
from broker.txn._markers import TxnMarkers
from broker.txn._table import TxnTable
from broker.txn._tasks import BackgroundTasks
from broker.txn.faults import NO_TXN_FAULTS, TxnFaults
from broker.txn.states import (
    LOG_FORMAT_VERSION,
    Finishing,
    Txn,
    TxnState,
    check_transition,
)
from ledger.records import dump_record
from txnbuffer.api import TxnId

__all__ = ["FINISH_RETRY_FIRST_MS", "FINISH_RETRY_MAX_MS", "TxnFinisher"]

log = logging.getLogger(__name__)

#: The first wait before a failed finishing step is tried again; doubled per failure.
FINISH_RETRY_FIRST_MS = 100
#: The longest wait between tries.
FINISH_RETRY_MAX_MS = 5_000


class TxnFinisher:
    """Drives decided transactions to their final records (a part of ``TxnCoordinator``).

    Args:
        table: the transactions and their log.
        markers: where markers are written.
        tasks: the coordinator's background tasks (``close`` waits for them).
        clock: seconds since the epoch (for the retry backoff).
        faults: hooks at the crash windows (tests only; ``broker.txn.faults``).
    """

    def __init__(self, table: TxnTable, markers: TxnMarkers, tasks: BackgroundTasks, *,
                 clock: Callable[[], float] = time.time,
                 faults: TxnFaults = NO_TXN_FAULTS) -> None:
        self._table = table
        self._markers = markers
        self._tasks = tasks
        self._clock = clock
        self._faults = faults
        #: Decided transactions not finished yet, by ``Finishing.key``.
        self._jobs: dict[str, Finishing] = {}
        #: Set (then replaced) when a decision record became durable or the jobs
        #: were forgotten: callers waiting in ``until_durable`` look again.
        self._decisions_changed = asyncio.Event()

    async def abort(self, txn: Txn, final: TxnState) -> None:
        """Abort the OPEN ``txn``: ABORTING, then (``drive``) markers and ``final``.

        Raises ``TxnStateError`` unless it is OPEN, or what a step raised (the
        job stays and is driven on).
        """
        check_transition(txn.name, txn.state, TxnState.ABORTING)
        txn.cancel_timer()
        txn.state = TxnState.ABORTING
        await txn.idle.wait()  # no marker before the appends in flight land
        await self.drive(self.decided_abort(txn.txn_id, final, logged=False))

    def decided_commit(self, txn_ids: Sequence[TxnId], group_key: str | None, *,
                       logged: bool) -> Finishing:
        """Register the commit of ``txn_ids`` (COMMITTING already) as a job."""
        return self._add(Finishing(tuple(txn_ids), TxnState.COMMITTED, group_key,
                                   logged=logged))

    def decided_abort(self, txn_id: TxnId, final: TxnState, *, logged: bool) -> Finishing:
        """Register the abort of ``txn_id`` (ABORTING already), ending ``final``, as a job."""
        return self._add(Finishing((txn_id,), final, None, logged=logged))

    def _add(self, job: Finishing) -> Finishing:
        self._jobs[job.key] = job
        return job

    def job(self, key: str) -> Finishing | None:
        """The job of the decision record ``key`` if it is not finished yet."""
        return self._jobs.get(key)

    def is_finishing(self, txn_id: TxnId) -> bool:
        """Whether a job of ``txn_id`` is not finished yet (its final record not durable)."""
        return any(txn_id in job.txn_ids for job in self._jobs.values())

    def decision_pending(self, txn: Txn) -> bool:
        """Whether ``txn`` is COMMITTING or ABORTING in memory only: no durable record says so.

        A crash now would take it back (the log replays it OPEN), so neither a
        status nor a refusal may report it as decided yet.
        """
        if txn.state not in (TxnState.COMMITTING, TxnState.ABORTING):
            return False
        return not any(job.logged for job in self._jobs.values() if txn.txn_id in job.txn_ids)

    async def until_durable(self, txn: Txn) -> None:
        """Return once ``txn``'s decision under way, if any, is in the log.

        Raises ``BrokerShuttingDownError`` (retriable) when the table forgot
        ``txn`` meanwhile (the coordinator stood down: its successor replays
        the log).
        """
        while self.decision_pending(txn) and self._table.find(txn.txn_id) is txn:
            await self._decisions_changed.wait()
        if self._table.find(txn.txn_id) is not txn:
            raise BrokerShuttingDownError(
                f"transaction {txn.name}: the coordinator stood down before its "
                f"{txn.state.name} record was logged; ask its successor")

    def _tell_decision_waiters(self) -> None:
        self._decisions_changed.set()
        self._decisions_changed = asyncio.Event()

    async def drive(self, job: Finishing, *, records_in_background: bool = False) -> None:
        """Take ``job`` as far as it goes; after a failure a timer (and the tick) tries again.

        With ``records_in_background`` the final records are written in the
        background once the markers are durable: the caller is answered then.
        Raises what the failed step raised (the job stays, to be driven on).
        """
        if job.running:
            return
        job.running = True
        try:
            await self._drive_steps(job, records_in_background)
        except BaseException as error:
            job.failures += 1
            delay = min(FINISH_RETRY_FIRST_MS << min(job.failures - 1, 16), FINISH_RETRY_MAX_MS)
            job.retry_at_ms = self._now_ms() + delay
            self._schedule_retry(job, delay)
            if isinstance(error, Exception):
                log.warning("transaction %s: finishing (%s) failed (%s); tried again in %d ms",
                            job.key, job.final.name, error, delay)
            raise
        finally:
            job.running = False
        if records_in_background and self._jobs.get(job.key) is job:
            # The commit is decided and visible (markers are): the caller is
            # answered now, the records follow; if they fail, a retry writes them.
            self._in_background(self.drive(job))

    def start_due(self, now_ms: int) -> list[asyncio.Task[None]]:
        """Drive, in the background, every job not under way whose retry time came."""
        return [self._in_background(self.drive(job)) for job in self._jobs.values()
                if not job.running and job.retry_at_ms <= now_ms]

    def stop_retries(self) -> None:
        """Cancel the retry timers (the jobs stay: ``start_due`` drives them on)."""
        for job in self._jobs.values():
            if job.timer is not None:
                job.timer.cancel()
                job.timer = None

    def clear(self) -> None:
        """Stop the retries and forget every job (the log keeps the decisions).

        Waiters in ``until_durable`` look again: those whose transaction the
        table forgot too (a stand-down clears it first) answer retriable.
        """
        self.stop_retries()
        self._jobs.clear()
        self._tell_decision_waiters()

    def _schedule_retry(self, job: Finishing, delay_ms: int) -> None:
        """Drive ``job`` again after ``delay_ms`` (the maintenance tick is the backstop)."""
        if job.timer is not None:
            job.timer.cancel()
        job.timer = asyncio.get_running_loop().call_later(delay_ms / 1000, self._retry, job)

    def _retry(self, job: Finishing) -> None:
        job.timer = None
        if self._jobs.get(job.key) is not job or job.running:
            return
        self._in_background(self.drive(job))

    async def _drive_steps(self, job: Finishing, records_in_background: bool) -> None:
        txns = [txn for txn in map(self._table.find, job.txn_ids) if txn is not None]
        commit = job.final is TxnState.COMMITTED
        if not job.logged:
            if job.group_key is not None:
                group = dump_record(LOG_FORMAT_VERSION, {"state": TxnState.COMMITTING.name,
                                                         "txns": [txn.name for txn in txns]},
                                    legacy_key="v")
                await self._table.write(job.group_key, group)
            else:
                await asyncio.gather(*(self._table.save(txn) for txn in txns))
            job.logged = True
            self._tell_decision_waiters()  # now a status may say COMMITTING / ABORTING
            if commit and self._faults.after_committing_logged is not None:
                # The crash window a restart must close: decided, no marker written yet.
                self._faults.after_committing_logged()
        if not job.marked:
            kind = EntryKind.COMMIT_MARKER if commit else EntryKind.ABORT_MARKER
            await asyncio.gather(*(self._markers.write(txn, kind) for txn in txns))
            now = self._now_ms()
            for txn in txns:
                txn.state = job.final
                txn.finished_ms = now
                txn.cancel_timer()
            job.marked = True
        if records_in_background:
            return  # ``drive`` writes them in the background
        await self._final_records(job, txns)

    async def _final_records(self, job: Finishing, txns: list[Txn]) -> None:
        # Concurrent writes: the log commits them as one entry. The group record
        # may go in the same entry: a COMMITTING transaction without it is
        # finished on start all the same.
        writes = [self._table.save(txn) for txn in txns]
        if job.group_key is not None:
            writes.append(self._table.write(job.group_key, None))
        await asyncio.gather(*writes)
        if self._jobs.get(job.key) is job:
            del self._jobs[job.key]

    @staticmethod
    async def _log_quietly(writes: Awaitable[object]) -> None:
        try:
            await writes
        except Exception as error:  # the maintenance tick writes them again
            log.warning("final transaction records not logged yet: %s", error)

    def _in_background(self, work: Awaitable[None]) -> asyncio.Task[None]:
        """``work`` as a background task (``close`` waits for it), its failure logged."""
        return self._tasks.spawn(self._log_quietly(work))

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)
