"""Finishing transactions: markers in every touched segment, then the final log records.

A commit is decided once its transactions are COMMITTING in memory; its
COMMITTING record makes the decision survive a crash. The markers and the
COMMITTED records follow, and a crash between them is finished on the next
start (a second marker changes nothing). An abort writes its ABORTING record,
then ABORT markers, then ABORTED (or TIMED_OUT). Finished transactions are
forgotten after ``finished_retention_ms`` (a tombstone in the log).

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
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Sequence

from broker.segments.entry import EntryKind
from broker.txn._core import CoordinatorCore
from broker.txn.states import (
    FINAL_STATES,
    LOG_FORMAT_VERSION,
    Finishing,
    Txn,
    TxnState,
    check_transition,
)
from ledger.records import dump_record
from txnbuffer.api import TxnId

__all__ = ["FINISH_RETRY_FIRST_MS", "FINISH_RETRY_MAX_MS", "CoordinatorFinish"]

log = logging.getLogger(__name__)

#: The first wait before a failed finishing step is tried again; doubled per failure.
FINISH_RETRY_FIRST_MS = 100
#: The longest wait between tries.
FINISH_RETRY_MAX_MS = 5_000


class CoordinatorFinish(CoordinatorCore):
    """Markers, final records, forgetting (a part of ``TxnCoordinator``)."""

    async def _abort(self, txn: Txn, final: TxnState) -> None:
        check_transition(txn.name, txn.state, TxnState.ABORTING)
        self._cancel_timeout(txn)
        txn.state = TxnState.ABORTING
        await txn.idle.wait()  # no marker before the appends in flight land
        job = Finishing((txn.txn_id,), final, None, logged=False)
        self._finishing[job.key] = job
        await self._drive(job)

    def _decided(self, txn_ids: Sequence[TxnId], group_key: str | None, *,
                 logged: bool) -> Finishing:
        """Register the commit of ``txn_ids`` (COMMITTING already) as a job."""
        job = Finishing(tuple(txn_ids), TxnState.COMMITTED, group_key, logged=logged)
        self._finishing[job.key] = job
        return job

    async def _finish_commit(self, txn_ids: Sequence[TxnId], group_key: str | None) -> None:
        """Markers, then COMMITTED records (a decision already logged: a replay)."""
        await self._drive(self._decided(txn_ids, group_key, logged=True))

    async def _finish_abort(self, txn: Txn, final: TxnState) -> None:
        """ABORT markers, then the final record (ABORTING already logged: a replay)."""
        job = Finishing((txn.txn_id,), final, None, logged=True)
        self._finishing[job.key] = job
        await self._drive(job)

    async def _drive(self, job: Finishing, *, records_in_background: bool = False) -> None:
        """Take ``job`` as far as it goes; after a failure a timer (and the tick) tries again.

        With ``records_in_background`` the final records are written in the
        background once the markers are durable: the caller is answered then.
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
        if records_in_background and self._finishing.get(job.key) is job:
            # The commit is decided and visible (markers are): the caller is
            # answered now, the records follow; if they fail, a retry writes them.
            self._in_background(self._drive(job))

    def _schedule_retry(self, job: Finishing, delay_ms: int) -> None:
        """Drive ``job`` again after ``delay_ms`` (the maintenance tick is the backstop)."""
        if job.timer is not None:
            job.timer.cancel()
        job.timer = asyncio.get_running_loop().call_later(delay_ms / 1000, self._retry, job)

    def _retry(self, job: Finishing) -> None:
        job.timer = None
        if self._finishing.get(job.key) is not job or job.running:
            return
        self._in_background(self._drive(job))

    def _stop_retries(self) -> None:
        for job in self._finishing.values():
            if job.timer is not None:
                job.timer.cancel()
                job.timer = None

    async def _drive_steps(self, job: Finishing, records_in_background: bool) -> None:
        txns = [self._txns[txn_id] for txn_id in job.txn_ids if txn_id in self._txns]
        commit = job.final is TxnState.COMMITTED
        if not job.logged:
            if job.group_key is not None:
                group = dump_record(LOG_FORMAT_VERSION, {"state": TxnState.COMMITTING.name,
                                                         "txns": [txn.name for txn in txns]},
                                    legacy_key="v")
                await self._log.write(job.group_key, group)
            else:
                await asyncio.gather(*(self._log.write(txn.name, txn.record()) for txn in txns))
            job.logged = True
            self._tell_decision_waiters()  # now a status may say COMMITTING / ABORTING
            if commit and self._faults.after_committing_logged is not None:
                # The crash window a restart must close: decided, no marker written yet.
                self._faults.after_committing_logged()
        if not job.marked:
            kind = EntryKind.COMMIT_MARKER if commit else EntryKind.ABORT_MARKER
            await asyncio.gather(*(self._markers(txn, kind) for txn in txns))
            now = self._now_ms()
            for txn in txns:
                txn.state = job.final
                txn.finished_ms = now
                self._cancel_timeout(txn)
            job.marked = True
        if records_in_background:
            return  # ``_drive`` writes them in the background
        await self._final_records(job, txns)

    async def _final_records(self, job: Finishing, txns: list[Txn]) -> None:
        # Concurrent writes: the log commits them as one entry. The group record
        # may go in the same entry: a COMMITTING transaction without it is
        # finished on start all the same.
        writes = [self._log.write(txn.name, txn.record()) for txn in txns]
        if job.group_key is not None:
            writes.append(self._log.write(job.group_key, None))
        await asyncio.gather(*writes)
        if self._finishing.get(job.key) is job:
            del self._finishing[job.key]

    @staticmethod
    async def _log_quietly(writes: Awaitable[object]) -> None:
        try:
            await writes
        except Exception as error:  # the maintenance tick writes them again
            log.warning("final transaction records not logged yet: %s", error)

    def _start_due(self, now_ms: int) -> list[asyncio.Task[None]]:
        """Drive, in the background, every job not under way whose retry time came."""
        return [self._in_background(self._drive(job)) for job in self._finishing.values()
                if not job.running and job.retry_at_ms <= now_ms]

    def _in_background(self, work: Awaitable[None]) -> asyncio.Task[None]:
        """``work`` as a task of this coordinator (``close`` waits for it), failures logged."""
        task = asyncio.ensure_future(self._log_quietly(work))
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    async def _markers(self, txn: Txn, kind: EntryKind) -> None:
        """The marker in every touched segment, written in parallel."""

        async def mark(name: str) -> None:
            if self._marker_writer is not None:  # a cluster: the segment's owner writes it
                await self._marker_writer(name, txn.txn_id, kind)
                return
            segment = await self._topics.segment(name)
            await segment.write_marker(kind, txn.txn_id)

        await asyncio.gather(*(mark(name) for name in txn.segments))

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
