"""The transaction coordinator: transaction ids, states, the transaction log, markers, timeouts.

States and transitions (anything else raises ``TxnStateError`` naming the
expected and the actual state)::

    OPEN -> COMMITTING -> COMMITTED
    OPEN -> ABORTING   -> ABORTED | TIMED_OUT

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

A crash after the COMMITTING (or ABORTING) record and before the final one is
finished on the next start (``start`` replays the log): markers are written
again, which is harmless (a second commit marker changes nothing in a segment's
transaction buffer, a second abort marker moves nothing that matters).

Appends of a transaction go through ``writing``: it refuses unless the
transaction is OPEN, registers the segment (a log write when it is new), and
counts the append in flight; commit and abort change the state in memory
first (later appends are refused) and wait for those in flight before writing
markers, so no transactional entry lands after its transaction's marker.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum

from broker.errors import (
    InvalidArgumentError,
    TxnLabelClosedError,
    TxnNotFoundError,
    TxnStateError,
)
from broker.segments.entry import EntryKind
from broker.segments.names import is_system_topic
from broker.segments.transactions import check_txn_id
from broker.system.compacted_topic import CompactedTopic
from broker.topics.internal import refuse_internal_segment
from broker.topics.manager import TopicManager
from broker.txn.faults import NO_TXN_FAULTS, TxnFaults

__all__ = [
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

TXN_LOG_TOPIC = "_txnlog"
LOG_FORMAT_VERSION = 1
#: ``BeginTxn`` with timeout_ms 0.
DEFAULT_TXN_TIMEOUT_MS = 60_000
#: Longest timeout honoured.
MAX_TXN_TIMEOUT_MS = 24 * 3600 * 1000
#: Longest transaction label accepted, in UTF-8 bytes.
MAX_TXN_LABEL_BYTES = 256
_GROUP_PREFIX = "commit-"


#: How long a finished transaction's status is kept (GetTxnStatus), in ms.
DEFAULT_FINISHED_RETENTION_MS = 3_600_000


class TxnState(Enum):
    """A transaction's state (values as ``folio.v1.TxnState``)."""

    OPEN = 1
    COMMITTING = 2
    COMMITTED = 3
    ABORTING = 4
    ABORTED = 5
    TIMED_OUT = 6


_TRANSITIONS: dict[TxnState, frozenset[TxnState]] = {
    TxnState.OPEN: frozenset({TxnState.COMMITTING, TxnState.ABORTING}),
    TxnState.COMMITTING: frozenset({TxnState.COMMITTED}),
    TxnState.ABORTING: frozenset({TxnState.ABORTED, TxnState.TIMED_OUT}),
    TxnState.COMMITTED: frozenset(),
    TxnState.ABORTED: frozenset(),
    TxnState.TIMED_OUT: frozenset(),
}

#: States a transaction never leaves.
_FINAL = frozenset(state for state, to in _TRANSITIONS.items() if not to)


def check_transition(txn_id: str, actual: TxnState, target: TxnState) -> None:
    """Raise ``TxnStateError`` unless ``actual -> target`` is in the transition table."""
    if target not in _TRANSITIONS[actual]:
        expected = " or ".join(sorted(s.name for s, to in _TRANSITIONS.items() if target in to))
        raise TxnStateError(txn_id, expected, actual.name)


@dataclass(slots=True)
class _Txn:
    txn_id: bytes
    state: TxnState
    deadline_ms: int
    segments: list[str] = field(default_factory=list)
    #: ``BeginTxnRequest.label``; "" for none.
    label: str = ""
    #: When it reached COMMITTED, ABORTED or TIMED_OUT (ms since the epoch); -1 before.
    finished_ms: int = -1
    in_flight: int = 0
    #: Fires at the deadline (OPEN only).
    timer: asyncio.TimerHandle | None = None
    idle: asyncio.Event = field(default_factory=asyncio.Event)
    #: Per touched segment: its registration and appends pass in call order.
    locks: dict[str, asyncio.Lock] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.idle.set()  # no append in flight

    @property
    def name(self) -> str:
        return self.txn_id.hex()

    def record(self) -> bytes:
        return json.dumps({"v": LOG_FORMAT_VERSION, "state": self.state.name,
                           "deadline_ms": self.deadline_ms,
                           "segments": self.segments,
                           "finished_ms": self.finished_ms, "label": self.label}).encode()


@dataclass(frozen=True, slots=True)
class TxnStatus:
    """What ``GetTxnStatus`` answers."""

    state: TxnState
    segments: tuple[str, ...]
    deadline_ms: int
    label: str = ""


class TxnCoordinator:
    """Transactions of the broker, logged in ``_txnlog`` on ``topics``.

    Args:
        topics: the broker's topics (segments get the markers).
        clock: seconds since the epoch (for timeouts).
        finished_retention_ms: how long a finished transaction's status is kept.
        faults: hooks at the crash windows (tests only; ``broker.txn.faults``).
    """

    def __init__(self, topics: TopicManager, *,
                 clock: Callable[[], float] = time.time,
                 finished_retention_ms: int = DEFAULT_FINISHED_RETENTION_MS,
                 faults: TxnFaults = NO_TXN_FAULTS) -> None:
        if finished_retention_ms < 0:
            raise ValueError(f"finished_retention_ms must be >= 0, got {finished_retention_ms}")
        self._finished_retention_ms = finished_retention_ms
        self._topics = topics
        self._faults = faults
        self._log = CompactedTopic(topics, TXN_LOG_TOPIC)
        self._clock = clock
        self._txns: dict[bytes, _Txn] = {}
        #: Ids of the known transactions of each label.
        self._labelled: dict[str, set[bytes]] = {}
        #: Labels closed by ``abort_labelled(close=True)``: when (ms since the epoch).
        self._closed_labels: dict[str, int] = {}
        #: Timeout aborts and COMMITTED log writes under way (``close`` waits for them).
        self._background: set[asyncio.Task[None]] = set()

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Replay the log; finish every COMMITTING and ABORTING transaction."""
        records = await self._log.read_prefix("")
        groups: list[tuple[str, list[bytes]]] = []
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
        for key, group in groups:
            # A transaction already COMMITTED (or forgotten) needs nothing more.
            known = [txn_id for txn_id in group if txn_id in self._txns
                     and self._txns[txn_id].state is not TxnState.COMMITTED]
            for txn_id in known:
                self._txns[txn_id].state = TxnState.COMMITTING
            log.info("finishing the commit of %d transactions after a restart", len(known))
            await self._finish_commit(known, key)
        for txn in list(self._txns.values()):
            if txn.state is TxnState.COMMITTING:  # its group record is gone: finish anyway
                await self._finish_commit([txn.txn_id], None)
            elif txn.state is TxnState.ABORTING:
                log.info("finishing the abort of transaction %s after a restart", txn.name)
                await self._finish_abort(txn, TxnState.ABORTED)
            elif txn.state is TxnState.OPEN:
                self._schedule_timeout(txn)

    def _replay_record(self, key: str, value: bytes) -> list[bytes] | None:
        """Take one log record in: a transaction, or (returned) a commit group's txn ids.

        Raises ValueError, KeyError, TypeError or InvalidArgumentError for a record it
        cannot read.
        """
        data = json.loads(value)
        if not isinstance(data, dict):
            raise TypeError(f"a JSON object was expected, got {type(data).__name__}")
        if data.get("v") != LOG_FORMAT_VERSION:
            raise ValueError(f"unknown version {data.get('v')!r}")
        if key.startswith(_GROUP_PREFIX):
            return [check_txn_id(bytes.fromhex(t)) for t in data["txns"]]
        segments = [str(name) for name in data["segments"]]
        # A segment of a system topic never belongs in a transaction (only an old
        # log could name one): markers there would land in the broker's own state.
        kept = [name for name in segments if not is_system_topic(name.partition("/")[0])]
        if kept != segments:
            log.error("transaction log %s: transaction %s named system segments %s; "
                      "they are left out", self._log.segment_name, key,
                      sorted(set(segments) - set(kept)))
        txn = _Txn(check_txn_id(bytes.fromhex(key)), TxnState[data["state"]],
                   int(data["deadline_ms"]), kept, label=str(data.get("label", "")),
                   finished_ms=int(data.get("finished_ms", -1)))
        self._add(txn)
        return None

    async def close(self) -> None:
        """Stop the timeout timers; wait out the aborts and log writes under way."""
        for txn in self._txns.values():
            self._cancel_timeout(txn)
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)

    # -------------------------------------------------------------- calls

    async def begin(self, timeout_ms: int, label: str = "") -> bytes:
        """A new OPEN transaction, aborted (TIMED_OUT) once ``timeout_ms`` passes.

        ``label`` (at most ``MAX_TXN_LABEL_BYTES``) names it for ``abort_labelled``.
        """
        if timeout_ms < 0:
            raise InvalidArgumentError(f"timeout_ms must be >= 0, got {timeout_ms}")
        _check_label(label)
        self._check_not_closed(label)
        timeout_ms = min(timeout_ms or DEFAULT_TXN_TIMEOUT_MS, MAX_TXN_TIMEOUT_MS)
        txn_id = uuid.uuid4().bytes
        txn = _Txn(txn_id, TxnState.OPEN, self._now_ms() + timeout_ms, label=label)
        await self._log.write(txn.name, txn.record())
        self._add(txn)
        self._schedule_timeout(txn)
        if label in self._closed_labels:  # closed while its record was written
            with contextlib.suppress(TxnStateError):
                await self._abort(txn, TxnState.ABORTED)
            self._check_not_closed(label)
        return txn_id

    def status(self, txn_id: bytes) -> TxnStatus:
        """The transaction's state, touched segments and label. ``TxnNotFoundError``."""
        txn = self._get(txn_id)
        return TxnStatus(txn.state, tuple(txn.segments), txn.deadline_ms, txn.label)

    def count_by_state(self) -> dict[str, int]:
        """How many transactions are in each state, by lower-case state name (for metrics)."""
        counts: dict[str, int] = {}
        for txn in list(self._txns.values()):
            name = txn.state.name.lower()
            counts[name] = counts.get(name, 0) + 1
        return counts

    @contextlib.asynccontextmanager
    async def writing(self, txn_id: bytes, segment: str) -> AsyncIterator[None]:
        """Around one transactional append: OPEN only, ``segment`` registered (logged) first."""
        txn = self._get(txn_id)
        self._check_open(txn)
        # Counted at once: a commit from now on waits for this append.
        txn.in_flight += 1
        txn.idle.clear()
        try:
            await self._register(txn, segment)
            yield
        finally:
            txn.in_flight -= 1
            if txn.in_flight == 0:
                txn.idle.set()

    async def _register(self, txn: _Txn, segment: str) -> None:
        """Log ``segment`` as touched by ``txn`` before its first entry there.

        One lock per (transaction, segment): registrations of several segments
        run at once (their log writes share one append), while appends to one
        segment pass in their call order (FIFO lock; taking a free lock does
        not yield), so none overtakes an earlier one of the same flow.
        """
        # The broker's own state never joins a transaction (only the public
        # Append path gets here, and it refuses system segments already).
        refuse_internal_segment(segment, "a transactional Append")
        lock = txn.locks.get(segment)
        if lock is None:
            lock = txn.locks[segment] = asyncio.Lock()
        async with lock:
            if segment in txn.segments:
                return
            txn.segments.append(segment)
            try:
                await self._log.write(txn.name, txn.record())
            except BaseException:
                txn.segments.remove(segment)
                raise

    async def commit(self, txn_ids: Sequence[bytes]) -> None:
        """Commit the transactions together: one COMMITTING record, markers, COMMITTED."""
        if not txn_ids:
            raise InvalidArgumentError("CommitTxn needs at least one txn_id")
        unique = list(dict.fromkeys(txn_ids))
        txns = [self._get(txn_id) for txn_id in unique]
        for txn in txns:
            check_transition(txn.name, txn.state, TxnState.COMMITTING)
        for txn in txns:
            txn.state = TxnState.COMMITTING  # later appends are refused from here on
        for txn in txns:
            await txn.idle.wait()
        group = json.dumps({"v": LOG_FORMAT_VERSION, "state": TxnState.COMMITTING.name,
                            "txns": [txn.name for txn in txns]}).encode()
        try:
            await self._log.write(_GROUP_PREFIX + txns[0].name, group)
        except BaseException:
            for txn in txns:
                txn.state = TxnState.OPEN
            raise
        if self._faults.after_committing_logged is not None:
            # The crash window a restart must close: decided, no marker written yet.
            self._faults.after_committing_logged()
        await self._finish_commit(unique, _GROUP_PREFIX + txns[0].name, wait_for_log=False)

    async def abort(self, txn_id: bytes) -> None:
        """Abort an OPEN transaction: ABORTING record, ABORT markers, ABORTED."""
        await self._abort(self._get(txn_id), TxnState.ABORTED)

    async def abort_labelled(self, label: str, keep: Sequence[bytes] = (), *,
                             close: bool = False) -> list[bytes]:
        """Abort every OPEN transaction labelled ``label`` but those in ``keep``; their ids.

        The aborts run in parallel (their log records share appends). One
        that is decided meanwhile (a commit, its timeout) is left out. With
        ``close``, ``begin`` refuses the label from now on (module docstring).

        Raises:
            InvalidArgumentError: an empty or too long label, a bad id in ``keep``.
            BrokerError, LedgerError: an abort failed (after the others ended);
                calling again aborts what is still OPEN.
        """
        if not label:
            raise InvalidArgumentError("AbortTxns needs a label")
        _check_label(label)
        kept = {check_txn_id(txn_id) for txn_id in keep}
        if close:
            self._closed_labels.setdefault(label, self._now_ms())
        txns = [self._txns[txn_id] for txn_id in sorted(self._labelled.get(label, ()))
                if txn_id not in kept]
        txns = [txn for txn in txns if txn.state is TxnState.OPEN]
        results = await asyncio.gather(*(self._abort(txn, TxnState.ABORTED) for txn in txns),
                                       return_exceptions=True)
        aborted: list[bytes] = []
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

    async def tick(self) -> int:
        """Abort (TIMED_OUT) every OPEN transaction past its deadline; how many.

        Each transaction has a timer that aborts it at its deadline; this
        maintenance round is the backstop (an abort that failed, a clock that
        is not the event loop's).

        Also forgets finished transactions older than ``finished_retention_ms``
        (a tombstone in the log, which compaction then drops), so neither the
        log nor this coordinator's memory grows without bound; GetTxnStatus of
        a forgotten transaction answers NOT_FOUND.
        """
        now = self._now_ms()
        await self._forget_finished(now)
        expired = [txn for txn in self._txns.values()
                   if txn.state is TxnState.OPEN and txn.deadline_ms <= now]
        for txn in expired:
            try:
                await self._abort(txn, TxnState.TIMED_OUT)
                log.info("transaction %s timed out and was aborted", txn.name)
            except TxnStateError:
                continue  # committed or aborted meanwhile
        return len(expired)

    # ----------------------------------------------------------- timeouts

    def _schedule_timeout(self, txn: _Txn) -> None:
        """Abort ``txn`` (TIMED_OUT) once its deadline passes, unless it finishes first."""
        self._cancel_timeout(txn)
        delay_s = max((txn.deadline_ms - self._now_ms()) / 1000, 0.001)
        txn.timer = asyncio.get_running_loop().call_later(delay_s, self._on_deadline, txn)

    @staticmethod
    def _cancel_timeout(txn: _Txn) -> None:
        if txn.timer is not None:
            txn.timer.cancel()
            txn.timer = None

    def _on_deadline(self, txn: _Txn) -> None:
        txn.timer = None
        if txn.state is not TxnState.OPEN:
            return
        if self._now_ms() < txn.deadline_ms:  # the clock is not the loop's: not yet
            self._schedule_timeout(txn)
            return
        task = asyncio.create_task(self._expire(txn))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _expire(self, txn: _Txn) -> None:
        try:
            await self._abort(txn, TxnState.TIMED_OUT)
        except TxnStateError:
            return  # committed or aborted meanwhile
        except Exception as error:  # the maintenance tick tries again
            log.warning("transaction %s timed out but its abort failed: %s", txn.name, error)
            return
        log.info("transaction %s timed out and was aborted", txn.name)

    # ------------------------------------------------------------ helpers

    async def _forget_finished(self, now_ms: int) -> None:
        horizon = now_ms - self._finished_retention_ms
        for label in [k for k, closed in self._closed_labels.items() if closed <= horizon]:
            del self._closed_labels[label]
        for txn in [t for t in self._txns.values() if t.state in _FINAL]:
            if txn.finished_ms < 0:
                txn.finished_ms = now_ms  # logged before finished_ms existed: from now
            elif txn.finished_ms <= horizon:
                await self._log.write(txn.name, None)
                self._remove(txn)

    async def _abort(self, txn: _Txn, final: TxnState) -> None:
        check_transition(txn.name, txn.state, TxnState.ABORTING)
        self._cancel_timeout(txn)
        txn.state = TxnState.ABORTING
        await txn.idle.wait()
        await self._log.write(txn.name, txn.record())
        await self._finish_abort(txn, final)

    async def _finish_commit(self, txn_ids: Sequence[bytes], group_key: str | None, *,
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

    async def _finish_abort(self, txn: _Txn, final: TxnState) -> None:
        await self._markers(txn, EntryKind.ABORT_MARKER)
        self._cancel_timeout(txn)
        txn.state = final
        txn.finished_ms = self._now_ms()
        await self._log.write(txn.name, txn.record())

    async def _markers(self, txn: _Txn, kind: EntryKind) -> None:
        """The marker in every touched segment, written in parallel."""

        async def mark(name: str) -> None:
            segment = await self._topics.segment(name)
            await segment.write_marker(kind, txn.txn_id)

        await asyncio.gather(*(mark(name) for name in txn.segments))

    def _check_not_closed(self, label: str) -> None:
        if label and label in self._closed_labels:
            raise TxnLabelClosedError(label)

    def _add(self, txn: _Txn) -> None:
        self._txns[txn.txn_id] = txn
        if txn.label:
            self._labelled.setdefault(txn.label, set()).add(txn.txn_id)

    def _remove(self, txn: _Txn) -> None:
        del self._txns[txn.txn_id]
        same = self._labelled.get(txn.label)
        if same is not None:
            same.discard(txn.txn_id)
            if not same:
                del self._labelled[txn.label]

    def _get(self, txn_id: bytes) -> _Txn:
        check_txn_id(txn_id)
        txn = self._txns.get(txn_id)
        if txn is None:
            raise TxnNotFoundError(txn_id.hex())
        return txn

    def _check_open(self, txn: _Txn) -> None:
        if txn.state is not TxnState.OPEN:
            raise TxnStateError(txn.name, TxnState.OPEN.name, txn.state.name)

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)


def _check_label(label: str) -> None:
    if len(label.encode()) > MAX_TXN_LABEL_BYTES:
        raise InvalidArgumentError(
            f"a transaction label is at most {MAX_TXN_LABEL_BYTES} bytes (UTF-8), got "
            f"{len(label.encode())}")
