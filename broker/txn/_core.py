"""The state of a ``TxnCoordinator`` and what every part of it uses.

``CoordinatorCore`` holds the fields (the transactions by id and by label,
closed labels, the log on ``_txnlog``, background tasks, the injected faults)
and the helpers the parts share. The parts (``_finish``, ``_timeouts``,
``_replay``) are mixins on it, composed in ``broker.txn.coordinator``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from broker.errors import (
    BrokerShuttingDownError,
    TxnLabelClosedError,
    TxnNotFoundError,
    TxnStateError,
)
from broker.segments.entry import EntryKind
from broker.system.compacted_topic import CompactedTopic
from broker.topics.manager import TopicManager
from broker.txn.faults import NO_TXN_FAULTS, TxnFaults
from broker.txn.states import (
    DEFAULT_FINISHED_RETENTION_MS,
    TXN_LOG_TOPIC,
    Finishing,
    Txn,
    TxnState,
)
from txnbuffer.api import TxnId
from txnbuffer.txn_ids import txn_id_hex

__all__ = ["CoordinatorCore", "MarkerWriter"]

T = TypeVar("T")

#: Writes one marker (segment name, txn id, kind) wherever the segment is served,
#: returning once it is durable (a cluster: ``broker.txn.markers.ClusterMarkers``).
MarkerWriter = Callable[[str, TxnId, EntryKind], Awaitable[None]]


class CoordinatorCore:
    """The fields of a coordinator and the helpers its parts share (see ``TxnCoordinator``)."""

    def __init__(self, topics: TopicManager, *,
                 clock: Callable[[], float] = time.time,
                 finished_retention_ms: int = DEFAULT_FINISHED_RETENTION_MS,
                 faults: TxnFaults = NO_TXN_FAULTS,
                 markers: MarkerWriter | None = None) -> None:
        if finished_retention_ms < 0:
            raise ValueError(f"finished_retention_ms must be >= 0, got {finished_retention_ms}")
        self._finished_retention_ms = finished_retention_ms
        self._topics = topics
        self._faults = faults
        #: None: markers go to this broker's own segments (standalone).
        self._marker_writer = markers
        self._log = CompactedTopic(topics, TXN_LOG_TOPIC)
        self._clock = clock
        self._txns: dict[TxnId, Txn] = {}
        #: Ids of the known transactions of each label.
        self._labelled: dict[str, set[TxnId]] = {}
        #: Labels closed by ``abort_labelled(close=True)``: when (ms since the epoch).
        self._closed_labels: dict[str, int] = {}
        #: Decided transactions not finished yet, by ``Finishing.key`` (``_finish``).
        self._finishing: dict[str, Finishing] = {}
        #: Timeout aborts and COMMITTED log writes under way (``close`` waits for them).
        self._background: set[asyncio.Future[Any]] = set()
        #: Set (then replaced) when a decision record became durable or everything
        #: was forgotten: callers waiting in ``_until_durable`` look again.
        self._decisions_changed = asyncio.Event()

    async def _run_to_end(self, work: Coroutine[Any, Any, T]) -> T:
        """``work``, run to its end even when the caller is cancelled.

        A commit or abort must not stop halfway because the call that asked
        for it went away (a connection cut cancels its handler): stopped after
        its COMMITTING record, the transaction would stay COMMITTING without
        markers until a restart, and read_committed readers would wait at it.
        The caller that is still there gets the result or the error; ``close``
        waits for the work of callers that went away.
        """
        return await asyncio.shield(self._start_to_end(work))

    def _start_to_end(self, work: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        """``work`` as a task that runs to its end whoever waits for it (``_run_to_end``)."""
        task = asyncio.ensure_future(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        task.add_done_callback(_retrieve)
        return task

    def _tell_decision_waiters(self) -> None:
        self._decisions_changed.set()
        self._decisions_changed = asyncio.Event()

    def _decision_pending(self, txn: Txn) -> bool:
        """Whether ``txn`` is COMMITTING or ABORTING in memory only: no durable record says so.

        A crash now would take it back (the log replays it OPEN), so neither a
        status nor a refusal may report it as decided yet.
        """
        if txn.state not in (TxnState.COMMITTING, TxnState.ABORTING):
            return False
        return not any(job.logged for job in self._finishing.values()
                       if txn.txn_id in job.txn_ids)

    async def _until_durable(self, txn: Txn) -> None:
        """Return once ``txn``'s decision under way, if any, is in the log.

        Raises ``BrokerShuttingDownError`` (retriable) when the coordinator
        forgot it meanwhile (it stood down: its successor replays the log).
        """
        while self._decision_pending(txn) and self._txns.get(txn.txn_id) is txn:
            await self._decisions_changed.wait()
        if self._txns.get(txn.txn_id) is not txn:
            raise BrokerShuttingDownError(
                f"transaction {txn.name}: the coordinator stood down before its "
                f"{txn.state.name} record was logged; ask its successor")

    @staticmethod
    def _cancel_timeout(txn: Txn) -> None:
        if txn.timer is not None:
            txn.timer.cancel()
            txn.timer = None

    def _check_not_closed(self, label: str) -> None:
        if label and label in self._closed_labels:
            raise TxnLabelClosedError(label)

    def _add(self, txn: Txn) -> None:
        self._txns[txn.txn_id] = txn
        if txn.label:
            self._labelled.setdefault(txn.label, set()).add(txn.txn_id)

    def _remove(self, txn: Txn) -> None:
        del self._txns[txn.txn_id]
        same = self._labelled.get(txn.label)
        if same is not None:
            same.discard(txn.txn_id)
            if not same:
                del self._labelled[txn.label]

    def _get(self, txn_id: TxnId) -> Txn:
        """The transaction ``txn_id``; ``TxnNotFoundError`` if it is not known."""
        txn = self._txns.get(txn_id)
        if txn is None:
            raise TxnNotFoundError(txn_id_hex(txn_id))
        return txn

    def _check_open(self, txn: Txn) -> None:
        if txn.state is not TxnState.OPEN:
            raise TxnStateError(txn.name, TxnState.OPEN.name, txn.state.name)

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)


def _retrieve(task: asyncio.Future[Any]) -> None:
    """Mark the error of work whose caller went away as seen (the caller still there raises it)."""
    if not task.cancelled():
        task.exception()
