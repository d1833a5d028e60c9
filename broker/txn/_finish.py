"""Finishing transactions: markers in every touched segment, then the final log records.

A commit is decided once its COMMITTING record is durable; the markers and
the COMMITTED records follow, and a crash between them is finished on the next
start (a second marker changes nothing). An abort writes its ABORTING record,
then ABORT markers, then ABORTED (or TIMED_OUT). Finished transactions are
forgotten after ``finished_retention_ms`` (a tombstone in the log).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Sequence

from broker.segments.entry import EntryKind
from broker.txn._core import CoordinatorCore
from broker.txn.states import FINAL_STATES, Txn, TxnState, check_transition
from txnbuffer.api import TxnId

__all__ = ["CoordinatorFinish"]

log = logging.getLogger(__name__)

class CoordinatorFinish(CoordinatorCore):
    """Markers, final records, forgetting (a part of ``TxnCoordinator``)."""

    async def _abort(self, txn: Txn, final: TxnState) -> None:
        check_transition(txn.name, txn.state, TxnState.ABORTING)
        self._cancel_timeout(txn)
        txn.state = TxnState.ABORTING
        await txn.idle.wait()
        await self._log.write(txn.name, txn.record())
        await self._finish_abort(txn, final)

    async def _finish_commit(self, txn_ids: Sequence[TxnId], group_key: str | None, *,
                             wait_for_log: bool = True) -> None:
        """Markers, then COMMITTED records with the group record (``group_key``) deleted.

        Without ``wait_for_log`` the records are written in the background.
        """
        txns = [self._txns[txn_id] for txn_id in txn_ids]
        await asyncio.gather(*(self._markers(txn, EntryKind.COMMIT_MARKER) for txn in txns))
        now = self._now_ms()
        for txn in txns:
            txn.state = TxnState.COMMITTED
            txn.finished_ms = now
            self._cancel_timeout(txn)
        # Concurrent writes: the log commits them as one entry. The group record
        # may go in the same entry: a COMMITTING transaction without it is
        # finished on start all the same.
        writes = [self._log.write(txn.name, txn.record()) for txn in txns]
        if group_key is not None:
            writes.append(self._log.write(group_key, None))
        if wait_for_log:
            await asyncio.gather(*writes)
            return
        # The commit is decided (COMMITTING is durable) and visible (markers are):
        # the caller is answered now, the records follow. A crash before they land
        # finishes the commit again on start, which changes nothing.
        task = asyncio.ensure_future(self._log_quietly(asyncio.gather(*writes)))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    @staticmethod
    async def _log_quietly(writes: Awaitable[object]) -> None:
        try:
            await writes
        except Exception as error:  # the next start finishes the commit again
            log.warning("COMMITTED records not logged (finished again on restart): %s", error)

    async def _finish_abort(self, txn: Txn, final: TxnState) -> None:
        await self._markers(txn, EntryKind.ABORT_MARKER)
        self._cancel_timeout(txn)
        txn.state = final
        txn.finished_ms = self._now_ms()
        await self._log.write(txn.name, txn.record())

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
            if txn.finished_ms < 0:
                txn.finished_ms = now_ms  # logged before finished_ms existed: from now
            elif txn.finished_ms <= horizon:
                await self._log.write(txn.name, None)
                self._remove(txn)
