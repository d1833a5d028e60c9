"""The transaction coordinator: transaction ids, states, the transaction log, markers, timeouts.

States and transitions: ``broker.txn.states`` (a table; a bad move raises
``TxnStateError`` naming the expected and the actual state).

Every change is first written to the transaction log, the compacted system
topic ``_txnlog``, keyed by the txn id (32 hex digits): a versioned JSON record
with the state, the timeout deadline and the segments the transaction touched.
A ``CommitTxn`` of several transactions writes ONE record first, keyed
``commit-<first txn id>``, naming them all in COMMITTING: once it is durable the
commit is decided for all of them together. Then the COMMIT markers go to every
touched segment, then each transaction's record says COMMITTED and the group
record is deleted. Abort is the same with ABORT markers (one transaction).

A transaction may carry a label (``begin(timeout_ms, label)``, kept in its log
record; a record without one has none). ``abort_labelled(label, keep)`` aborts
every OPEN transaction of a label except those in ``keep``, in parallel: a
job that begins one labelled transaction per task sweeps, after its commit,
those whose ids never reached it, instead of leaving them (and the
read_committed readers they hold) to their timeouts. With ``close`` the label
is closed too: a later ``begin`` with it raises ``TxnLabelClosedError``, so a
task still running when its job ended cannot leave a transaction open after
the sweep. Closed labels are kept in memory only, for
``finished_retention_ms``.

A step that fails (a log write that may or may not have landed, a marker)
never takes a decision back: the transaction stays COMMITTING or ABORTING and
is driven on with backoff until it ends (``broker.txn._finish``). A crash after the
COMMITTING (or ABORTING) record and before the final one is finished on the
next start (``start`` replays the log): markers are written
again, which is harmless (a second commit marker changes nothing in a segment's
transaction buffer, a second abort marker moves nothing that matters).

Appends of a transaction go through ``writing``: it refuses unless the
transaction is OPEN, registers the segment (a log write when it is new), and
counts the append in flight; commit and abort change the state in memory
first (later appends are refused) and wait for those in flight before writing
markers, so no transactional entry lands after its transaction's marker.

Every txn id taken or returned here is a ``txnbuffer.api.TxnId``; the
servicers (``broker.services``) convert from and to the 16 wire bytes, the log
records spell it in hex (``txnbuffer.txn_ids``).

Layout: composed parts, each owning its state (Kafka's
``TransactionCoordinator`` holds a ``TransactionStateManager`` and a
``TransactionMarkerChannelManager`` the same way). ``states`` (the state
enum, transition table, in-memory record and log format); ``_table``
(``TxnTable``: the transactions by id and label, closed labels, their log
writes); ``_markers`` (``TxnMarkers``: where markers go); ``_tasks``
(``BackgroundTasks``: work that runs to its end whoever waits);
``_finish`` (``TxnFinisher``: the decided transactions' jobs, markers and
final records, retried with backoff); ``_timeouts`` (``TxnTimeouts``:
deadlines, the maintenance tick, forgetting finished transactions);
``_replay`` (``TxnReplay``: start). ``TxnCoordinator`` here builds them,
passing each its collaborators, and makes the calls the servicers make.
Crash windows are tested by injection (``broker.txn.faults``), never by a
hook of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence

from broker.errors import InvalidArgumentError, TxnStateError
from broker.system.compacted_topic import CompactedTopic
from broker.topics.manager import TopicManager
from broker.txn._finish import TxnFinisher
from broker.txn._markers import MarkerWriter, TxnMarkers
from broker.txn._replay import TxnReplay
from broker.txn._table import TxnTable
from broker.txn._tasks import BackgroundTasks
from broker.txn._timeouts import TxnTimeouts, check_finished_retention_ms
from broker.txn.faults import NO_TXN_FAULTS, TxnFaults
from broker.txn.states import (
    DEFAULT_FINISHED_RETENTION_MS,
    DEFAULT_TXN_TIMEOUT_MS,
    GROUP_PREFIX,
    LOG_FORMAT_VERSION,
    MAX_TXN_LABEL_BYTES,
    MAX_TXN_TIMEOUT_MS,
    TXN_LOG_TOPIC,
    Txn,
    TxnState,
    TxnStatus,
    check_label,
    check_transition,
)
from txnbuffer.api import TxnId
from txnbuffer.txn_ids import txn_id_from_bytes

__all__ = [
    "DEFAULT_FINISHED_RETENTION_MS",
    "DEFAULT_TXN_TIMEOUT_MS",
    "LOG_FORMAT_VERSION",
    "MAX_TXN_LABEL_BYTES",
    "MAX_TXN_TIMEOUT_MS",
    "TXN_LOG_TOPIC",
    "TxnCoordinator",
    "TxnState",
    "TxnStatus",
    "check_transition",
]

log = logging.getLogger(__name__)

#: How long ``abort`` waits for the markers once its decision is logged.
ABORT_ANSWER_WAIT_S = 10.0


class TxnCoordinator:
    """Transactions of the broker, logged in ``_txnlog`` on ``topics``.

    Args:
        topics: the broker's topics (segments get the markers).
        clock: seconds since the epoch (for timeouts).
        finished_retention_ms: how long a finished transaction's status is kept.
        faults: hooks at the crash windows (tests only; ``broker.txn.faults``).
        markers: writes a marker where its segment is served (a cluster);
            None: in this broker's own segments.
    """

    def __init__(self, topics: TopicManager, *,
                 clock: Callable[[], float] = time.time,
                 finished_retention_ms: int = DEFAULT_FINISHED_RETENTION_MS,
                 faults: TxnFaults = NO_TXN_FAULTS,
                 markers: MarkerWriter | None = None) -> None:
        # Before the log registers its maintenance hook with ``topics``.
        check_finished_retention_ms(finished_retention_ms)
        self._clock = clock
        #: The transaction log: the table writes it, the replay reads it.
        self._log = CompactedTopic(topics, TXN_LOG_TOPIC)
        self._tasks = BackgroundTasks()
        self._table = TxnTable(self._log)
        self._markers = TxnMarkers(topics, markers)
        self._finisher = TxnFinisher(self._table, self._markers, self._tasks,
                                     clock=clock, faults=faults)
        self._timeouts = TxnTimeouts(self._table, self._finisher, self._tasks, clock=clock,
                                     finished_retention_ms=finished_retention_ms)
        self._replay = TxnReplay(self._log, self._table, self._finisher, self._timeouts,
                                 self._markers, self._tasks)

    def route_markers(self, markers: MarkerWriter) -> None:
        """Write markers through ``markers`` (a cluster: the segments' owners write them)."""
        self._markers.route(markers)

    async def start(self) -> None:
        """Replay the log; finish every COMMITTING and ABORTING transaction (``_replay``)."""
        await self._replay.start()

    async def tick(self) -> int:
        """The maintenance round (``TxnTimeouts.tick``): how many OPEN transactions timed out."""
        return await self._timeouts.tick()

    async def take_over(self) -> None:
        """Forget everything in memory and replay the log again (cluster: the coordinator moved).

        The caller has unloaded the log's segment first, so it is loaded
        afresh (recovery fences the previous coordinator's ledger) and every
        record the previous coordinator wrote is replayed, as at startup.
        """
        await self.stand_down()
        await self.start()

    async def stand_down(self) -> None:
        """Stop and forget every transaction in memory (cluster: the coordinator runs elsewhere).

        No timeout fires here any more, so this broker writes nothing to the
        log; ``take_over`` brings the state back from the log.

        Finishing under way is cancelled, not waited for: whoever takes the
        coordinator over (another broker, or this one after a resumed session)
        replays the decision from the log and drives it to its end. Waiting
        could deadlock: in a cluster a marker waits for its segment's owner,
        which this broker learns in its ownership step, and that step waits
        for this stand-down before it takes the coordinator over again
        (nemesis seed 11: a transaction ABORTING for good).
        """
        self._tasks.cancel()
        await self.close()
        self._table.clear()
        # Stops the retries the cancelled drives scheduled of their own, and
        # tells the decision waiters (after the table: they answer retriable,
        # the successor decides).
        self._finisher.clear()
        self._log.forget()

    async def close(self) -> None:
        """Stop the timeout and retry timers; wait out the aborts and log writes under way."""
        self._timeouts.cancel_all()
        self._finisher.stop_retries()
        await self._tasks.wait()

    async def begin(self, timeout_ms: int, label: str = "") -> TxnId:
        """A new OPEN transaction, aborted (TIMED_OUT) once ``timeout_ms`` passes.

        ``label`` (at most ``MAX_TXN_LABEL_BYTES``) names it for ``abort_labelled``.
        """
        if timeout_ms < 0:
            raise InvalidArgumentError(f"timeout_ms must be >= 0, got {timeout_ms}")
        check_label(label)
        self._table.check_not_closed(label)
        timeout_ms = min(timeout_ms or DEFAULT_TXN_TIMEOUT_MS, MAX_TXN_TIMEOUT_MS)
        txn_id = txn_id_from_bytes(uuid.uuid4().bytes)
        assert txn_id is not None  # a version-4 UUID has bits set: never all zero
        txn = Txn(txn_id, TxnState.OPEN, self._now_ms() + timeout_ms, label=label)
        await self._table.save(txn)
        self._table.add(txn)
        self._timeouts.schedule(txn)
        if self._table.is_closed(label):  # closed while its record was written
            with contextlib.suppress(TxnStateError):
                await self._finisher.abort(txn, TxnState.ABORTED)
            self._table.check_not_closed(label)
        return txn_id

    def status(self, txn_id: TxnId) -> TxnStatus:
        """The transaction's state, touched segments and label. ``TxnNotFoundError``.

        From memory: COMMITTING or ABORTING may not be durable yet (a client
        asks ``durable_status``).
        """
        txn = self._table.get(txn_id)
        return TxnStatus(txn.state, tuple(txn.segments), txn.deadline_ms, txn.label)

    async def durable_status(self, txn_id: TxnId) -> TxnStatus:
        """``status``, once a commit or abort under way is in the log (``GetTxnStatus``).

        A client reads the status back after a decision call whose outcome is
        unknown: COMMITTING must mean the commit survives a crash (the log
        replays it), never a decision still held in memory only, which a
        crash takes back (replayed OPEN, then timed out: a commit the client
        counted as done would be lost). So this waits for the decision record.

        Raises:
            TxnNotFoundError: unknown.
            BrokerShuttingDownError: the coordinator stood down meanwhile.
        """
        await self._finisher.until_durable(self._table.get(txn_id))
        return self.status(txn_id)

    def count_by_state(self) -> dict[str, int]:
        """How many transactions are in each state, by lower-case state name (for metrics)."""
        counts: dict[str, int] = {}
        for txn in self._table.transactions():
            name = txn.state.name.lower()
            counts[name] = counts.get(name, 0) + 1
        return counts

    @contextlib.asynccontextmanager
    async def writing(self, txn_id: TxnId, segment: str,
                      loaded: object = None) -> AsyncIterator[None]:
        """Around one transactional append: OPEN only, ``segment`` registered (logged) first.

        ``loaded`` (the segment object written to) is not needed here: on one
        broker a segment never moves (``broker.txn.participant`` needs it).
        """
        txn = self._table.get(txn_id)
        if txn.state is not TxnState.OPEN:
            raise TxnStateError(txn.name, TxnState.OPEN.name, txn.state.name)
        # Counted at once: a commit from now on waits for this append.
        txn.in_flight += 1
        txn.idle.clear()
        try:
            await self._table.register_segment(txn, segment)
            yield
        finally:
            txn.in_flight -= 1
            if txn.in_flight == 0:
                txn.idle.set()

    async def register_segment(self, txn_id: TxnId, segment: str) -> None:
        """Log ``segment`` as touched by the OPEN transaction ``txn_id`` (a cluster's owner asks).

        The segment's owner (``broker.txn.participant``) counts the appends in
        flight itself; here the registration counts while it is logged, so a
        commit or abort decided meanwhile waits for it and then marks the
        segment. Once this returns the segment is in the log record.

        Raises:
            TxnNotFoundError, TxnStateError: unknown, or not OPEN.
            InternalTopicError: a segment of a system topic.
        """
        async with self.writing(txn_id, segment):  # counted while logged, nothing appended
            pass

    async def commit(self, txn_ids: Sequence[TxnId]) -> None:
        """Commit the transactions together: one COMMITTING record, markers, COMMITTED.

        Runs to its end even if the caller is cancelled (``BackgroundTasks.run_to_end``).
        """
        for txn_id in dict.fromkeys(txn_ids):
            # A repeated call (its first answer lost) is refused as decided only
            # once that decision is durable (``durable_status`` says why). Waited
            # for here, by the caller: ``close`` waits for the work run to its end.
            txn = self._table.find(txn_id)
            if txn is not None:
                await self._finisher.until_durable(txn)
        await self._tasks.run_to_end(self._commit(txn_ids))

    async def _commit(self, txn_ids: Sequence[TxnId]) -> None:
        if not txn_ids:
            raise InvalidArgumentError("CommitTxn needs at least one txn_id")
        unique = list(dict.fromkeys(txn_ids))
        txns = [self._table.get(txn_id) for txn_id in unique]
        for txn in txns:
            check_transition(txn.name, txn.state, TxnState.COMMITTING)
        for txn in txns:
            txn.state = TxnState.COMMITTING  # later appends are refused from here on
        for txn in txns:
            await txn.idle.wait()  # no marker before the appends in flight land
        # Decided from here on: a COMMITTING write that fails may still have
        # landed (a restart would commit), so the maintenance tick finishes the
        # commit rather than the transactions going back to OPEN (``TxnFinisher``).
        job = self._finisher.decided_commit([txn.txn_id for txn in txns],
                                            GROUP_PREFIX + txns[0].name, logged=False)
        await self._finisher.drive(job, records_in_background=True)

    async def abort(self, txn_id: TxnId) -> None:
        """Abort an OPEN transaction: ABORTING record, ABORT markers, ABORTED.

        Runs to its end even if the caller is cancelled (``BackgroundTasks.run_to_end``).
        The caller waits for the markers for up to ``ABORT_ANSWER_WAIT_S``
        once the ABORTING record is logged; past that it is answered (the
        abort is decided, as Kafka's EndTxn answers once its PREPARE_ABORT is
        logged) and the markers and the ABORTED record follow, retried until
        written (the status says ABORTING until then). A marker waits for its
        segment's owner, which faults can keep unknown for longer than a call
        waits (the nemesis, seed 17: two bookies and two brokers killed within
        40 s; the SDK's abort timed out after 35 s).
        """
        txn = self._table.get(txn_id)
        # Refused as decided only once durable (``commit``, ``durable_status``).
        await self._finisher.until_durable(txn)
        task = self._tasks.start_to_end(self._finisher.abort(txn, TxnState.ABORTED))
        while True:
            done, _pending = await asyncio.wait({task}, timeout=ABORT_ANSWER_WAIT_S)
            if done:
                return task.result()
            job = self._finisher.job(txn.name)
            if job is not None and job.logged:
                log.info("transaction %s: ABORTING logged, its markers not all written "
                         "after %.0f s; answered, they follow", txn.name, ABORT_ANSWER_WAIT_S)
                return None

    async def abort_labelled(self, label: str, keep: Sequence[TxnId] = (), *,
                             close: bool = False) -> list[TxnId]:
        """Abort every OPEN transaction labelled ``label`` but those in ``keep``; their ids.

        The aborts run in parallel (their log records share appends). One
        that is decided meanwhile (a commit, its timeout) is left out. With
        ``close``, ``begin`` refuses the label from now on (module docstring).

        Raises:
            InvalidArgumentError: an empty or too long label.
            BrokerError, LedgerError: an abort failed (after the others ended);
                calling again aborts what is still OPEN.
        """
        if not label:
            raise InvalidArgumentError("AbortTxns needs a label")
        check_label(label)
        kept = set(keep)
        if close:
            self._table.close_label(label, self._now_ms())
        txns = [txn for txn in self._table.labelled(label)
                if txn.txn_id not in kept and txn.state is TxnState.OPEN]
        results = await asyncio.gather(
            *(self._tasks.run_to_end(self._finisher.abort(txn, TxnState.ABORTED))
              for txn in txns),
            return_exceptions=True)
        aborted: list[TxnId] = []
        failure: BaseException | None = None
        for txn, result in zip(txns, results, strict=True):
            if result is None:
                aborted.append(txn.txn_id)
            elif not isinstance(result, TxnStateError) and failure is None:
                failure = result
        if failure is not None:
            raise failure
        if aborted:
            log.info("aborted %d open transactions labelled %r", len(aborted), label)
        return aborted

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)
