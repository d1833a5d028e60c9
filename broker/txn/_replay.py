"""Start: replay the transaction log and finish what a crash left COMMITTING or ABORTING.

An unreadable record is skipped and left in place for diagnosis: its
transaction is unknown from then on (its commit or abort answers NOT_FOUND),
so nothing is made visible for it.

``TxnReplay`` owns nothing of its own: it reads the log, fills the
``TxnTable``, registers the decided transactions with the ``TxnFinisher``,
sets the OPEN ones' timers (``TxnTimeouts``) and drives the decisions.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Coroutine
from typing import Any

from broker.errors import InvalidArgumentError
from broker.segments.names import is_system_topic
from broker.system.compacted_topic import CompactedTopic
from broker.txn._finish import TxnFinisher
from broker.txn._markers import TxnMarkers
from broker.txn._table import TxnTable
from broker.txn._tasks import BackgroundTasks
from broker.txn._timeouts import TxnTimeouts
from broker.txn.states import GROUP_PREFIX, LOG_FORMAT_VERSION, Finishing, Txn, TxnState
from ledger.records import load_record
from txnbuffer.api import TxnId
from txnbuffer.txn_ids import txn_id_from_hex

__all__ = ["TxnReplay"]

log = logging.getLogger(__name__)


class TxnReplay:
    """Replaying the log on start (a part of ``TxnCoordinator``).

    Args:
        log: the transaction log, read here (the ``table`` writes it).
        table: filled with the transactions of the log.
        finisher: takes the decided ones over.
        timeouts: times the OPEN ones.
        markers: whether markers go to other brokers (then driven in the background).
        tasks: the coordinator's background tasks.
    """

    def __init__(self, log: CompactedTopic, table: TxnTable, finisher: TxnFinisher,
                 timeouts: TxnTimeouts, markers: TxnMarkers, tasks: BackgroundTasks) -> None:
        self._log = log
        self._table = table
        self._finisher = finisher
        self._timeouts = timeouts
        self._markers = markers
        self._tasks = tasks

    async def start(self) -> None:
        """Replay the log; finish every COMMITTING and ABORTING transaction."""
        records = await self._log.read_prefix("")
        groups: list[tuple[str, list[TxnId]]] = []
        for key, value in records.items():
            try:
                group = self._replay_record(key, value)
            except (ValueError, KeyError, TypeError, InvalidArgumentError) as error:
                # Skipped, and left in place for diagnosis (docs/broker.md, "System
                # topics"): the transaction is unknown from now on, so its commit
                # or abort answers NOT_FOUND and nothing is made visible for it.
                log.error("transaction log %s: skipped the unreadable record of key %r at "
                          "offset %s: %s: %s", self._log.segment_name, key,
                          self._log.offset_of(key), type(error).__name__, error)
                continue
            if group is not None:
                groups.append((key, group))
        jobs: list[Finishing] = []
        for key, group in groups:
            # A transaction already COMMITTED (or forgotten) needs nothing more.
            known = [txn for txn in map(self._table.find, group)
                     if txn is not None and txn.state is not TxnState.COMMITTED]
            for txn in known:
                txn.state = TxnState.COMMITTING
            log.info("finishing the commit of %d transactions after a restart", len(known))
            jobs.append(self._finisher.decided_commit([txn.txn_id for txn in known], key,
                                                      logged=True))
        for txn in self._table.transactions():
            if txn.state is TxnState.COMMITTING and not any(
                    txn.txn_id in job.txn_ids for job in jobs):
                # Its group record is gone: finish anyway.
                jobs.append(self._finisher.decided_commit([txn.txn_id], None, logged=True))
            elif txn.state is TxnState.ABORTING:
                log.info("finishing the abort of transaction %s after a restart", txn.name)
                jobs.append(self._finisher.decided_abort(txn.txn_id, TxnState.ABORTED,
                                                         logged=True))
            elif txn.state is TxnState.OPEN:
                self._timeouts.schedule(txn)
        if not self._markers.routed:
            # Markers in this broker's own segments: done here; one that fails
            # stays COMMITTING or ABORTING for the maintenance tick to finish.
            for job in jobs:
                with contextlib.suppress(Exception):
                    await self._finisher.drive(job)
            return
        # A cluster: markers go to other brokers, and one that cannot be reached yet
        # (its segments moving after a crash) must not keep the coordinator from
        # serving. The decided transactions stay COMMITTING/ABORTING (GetTxnStatus
        # says so: decided) until their markers land; the maintenance tick drives
        # those that fail; a later stand_down waits.
        for job in jobs:
            self._tasks.spawn(self._finish_quietly(self._finisher.drive(job)))

    @staticmethod
    async def _finish_quietly(work: Coroutine[Any, Any, None]) -> None:
        try:
            await work
        except Exception as error:  # the maintenance tick drives it on
            log.warning("a decided transaction was not finished after the take-over "
                        "(the maintenance tick tries again): %s", error)

    def _replay_record(self, key: str, value: bytes) -> list[TxnId] | None:
        """Take one log record in: a transaction, or (returned) a commit group's txn ids.

        Raises ValueError, KeyError, TypeError or InvalidArgumentError for a record it
        cannot read.
        """
        # Earlier builds kept the version under "v" (ledger.records).
        data = load_record(value, "transaction log record", (LOG_FORMAT_VERSION,),
                           legacy_key="v")
        if key.startswith(GROUP_PREFIX):
            return [txn_id_from_hex(t) for t in data["txns"]]
        segments = [str(name) for name in data["segments"]]
        # A segment of a system topic never belongs in a transaction (only an old
        # log could name one): markers there would land in the broker's own state.
        kept = [name for name in segments if not is_system_topic(name.partition("/")[0])]
        if kept != segments:
            log.error("transaction log %s: transaction %s named system segments %s; "
                      "they are left out", self._log.segment_name, key,
                      sorted(set(segments) - set(kept)))
        txn = Txn(txn_id_from_hex(key), TxnState[data["state"]],
                   int(data["deadline_ms"]), kept, label=str(data.get("label", "")),
                   finished_ms=int(data.get("finished_ms", -1)))
        self._table.add(txn)
        return None
