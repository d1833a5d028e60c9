"""TxnFinisher alone: decided transactions driven to their final records, retried on failure.

On a real table (its log on a real ``TopicManager``), real markers (this
broker's segments, or a writer that fails once), real background tasks.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from broker.api import TopicConfig
from broker.errors import BrokerShuttingDownError, TxnStateError
from broker.segments.entry import EntryKind
from broker.system.compacted_topic import CompactedTopic
from broker.topics.manager import TopicManager
from broker.txn._finish import FINISH_RETRY_FIRST_MS, TxnFinisher
from broker.txn._markers import MarkerWriter, TxnMarkers
from broker.txn._table import TxnTable
from broker.txn._tasks import BackgroundTasks
from broker.txn.faults import NO_TXN_FAULTS, TxnFaults
from broker.txn.states import GROUP_PREFIX, TXN_LOG_TOPIC, Txn, TxnState
from ledger.errors import BookieUnavailableError
from tests.unit.broker.conftest import BrokerEnv, FakeClock, block
from txnbuffer.api import TxnId

SEGMENTS = ("t/0", "t/1")


class Parts:
    """A finisher with the collaborators the coordinator would pass it."""

    def __init__(self, topics: TopicManager, clock: FakeClock, *,
                 faults: TxnFaults = NO_TXN_FAULTS, writer: MarkerWriter | None = None) -> None:
        self.topics = topics
        self.clock = clock
        self.table = TxnTable(CompactedTopic(topics, TXN_LOG_TOPIC))
        self.tasks = BackgroundTasks()
        self.finisher = TxnFinisher(self.table, TxnMarkers(topics, writer), self.tasks,
                                    clock=clock, faults=faults)

    async def open_txn(self, number: int) -> Txn:
        """An OPEN transaction, logged, with an entry in each segment."""
        txn = Txn((0, number), TxnState.OPEN, 10**15)
        self.table.add(txn)
        await self.table.save(txn)
        for index, name in enumerate(SEGMENTS):
            await self.table.register_segment(txn, name)
            segment = await self.topics.segment(name)
            await segment.append([block(index)], "", -1, txn_id=txn.txn_id)
        return txn

    async def logged(self) -> dict[str, str]:
        """Each record's state as a new reader of the log sees it."""
        records = await CompactedTopic(self.topics, TXN_LOG_TOPIC,
                                       maintain=False).read_prefix("")
        return {key: json.loads(value)["state"] for key, value in records.items()}

    async def committed_ends(self) -> list[int]:
        return [(await self.topics.segment(name)).committed_end for name in SEGMENTS]


@pytest.fixture
async def parts(env: BrokerEnv) -> Parts:
    topics = env.manager()
    await topics.create_topic("t", 2, TopicConfig())
    return Parts(topics, env.clock)


async def test_abort_marks_then_logs_the_final_state(parts: Parts) -> None:
    txn = await parts.open_txn(1)
    await parts.finisher.abort(txn, TxnState.TIMED_OUT)
    assert txn.state is TxnState.TIMED_OUT
    assert txn.finished_ms == int(parts.clock() * 1000)
    assert await parts.committed_ends() == [1, 1]  # the aborted entries are passed
    assert (await parts.logged())[txn.name] == "TIMED_OUT"
    assert parts.finisher.job(txn.name) is None
    assert not parts.finisher.is_finishing(txn.txn_id)


async def test_abort_refuses_what_is_not_open(parts: Parts) -> None:
    txn = await parts.open_txn(1)
    txn.state = TxnState.COMMITTING
    with pytest.raises(TxnStateError):
        await parts.finisher.abort(txn, TxnState.ABORTED)
    assert parts.finisher.job(txn.name) is None


async def test_a_commit_group_is_decided_before_any_marker(env: BrokerEnv) -> None:
    topics = env.manager()
    await topics.create_topic("t", 2, TopicConfig())
    seen: list[list[int]] = []
    segments = [await topics.segment(name) for name in SEGMENTS]
    faults = TxnFaults(after_committing_logged=lambda: seen.append(
        [segment.committed_end for segment in segments]))
    parts = Parts(topics, env.clock, faults=faults)
    first, second = await parts.open_txn(1), await parts.open_txn(2)
    for txn in (first, second):
        txn.state = TxnState.COMMITTING
    group_key = GROUP_PREFIX + first.name
    job = parts.finisher.decided_commit([first.txn_id, second.txn_id], group_key, logged=False)
    assert parts.finisher.job(group_key) is job
    assert parts.finisher.is_finishing(second.txn_id)
    await parts.finisher.drive(job)
    assert seen == [[0, 0]]  # the hook ran once the group record was durable, before markers
    assert (first.state, second.state) == (TxnState.COMMITTED, TxnState.COMMITTED)
    assert await parts.committed_ends() == [2, 2]
    logged = await parts.logged()
    assert (logged[first.name], logged[second.name]) == ("COMMITTED", "COMMITTED")
    assert group_key not in logged  # the group record is deleted with the final records
    assert parts.finisher.job(group_key) is None


async def test_records_in_background_answer_once_marked(parts: Parts) -> None:
    txn = await parts.open_txn(1)
    txn.state = TxnState.COMMITTING
    job = parts.finisher.decided_commit([txn.txn_id], None, logged=False)
    await parts.finisher.drive(job, records_in_background=True)
    assert txn.state is TxnState.COMMITTED  # marked: visible
    await parts.tasks.wait()  # the final record follows in the background
    assert (await parts.logged())[txn.name] == "COMMITTED"
    assert parts.finisher.job(txn.name) is None


@pytest.mark.faults
async def test_a_failed_marker_is_driven_again_after_its_backoff(env: BrokerEnv) -> None:
    topics = env.manager()
    await topics.create_topic("t", 2, TopicConfig())
    failures: list[str] = []

    async def writer(name: str, txn_id: TxnId, kind: EntryKind) -> None:
        if name == "t/1" and not failures:
            failures.append(name)
            raise BookieUnavailableError("injected: marker not written")
        await (await topics.segment(name)).write_marker(kind, txn_id)

    parts = Parts(topics, env.clock, writer=writer)
    txn = await parts.open_txn(1)
    with pytest.raises(BookieUnavailableError):
        await parts.finisher.abort(txn, TxnState.ABORTED)
    parts.finisher.stop_retries()  # no yield since the failure: the timer has not fired
    job = parts.finisher.job(txn.name)
    assert job is not None and job.timer is None
    assert (job.failures, job.logged, job.marked) == (1, True, False)
    now = int(env.clock() * 1000)
    assert job.retry_at_ms == now + FINISH_RETRY_FIRST_MS
    assert txn.state is TxnState.ABORTING  # decided, never taken back
    assert parts.finisher.start_due(now) == []  # not due yet
    env.clock.advance_ms(FINISH_RETRY_FIRST_MS)
    started = parts.finisher.start_due(now + FINISH_RETRY_FIRST_MS)
    assert len(started) == 1
    await started[0]
    assert parts.table.get(txn.txn_id).state is TxnState.ABORTED  # driven on
    assert (await parts.logged())[txn.name] == "ABORTED"
    assert not parts.finisher.is_finishing(txn.txn_id)


@pytest.mark.faults
async def test_clear_forgets_the_jobs(env: BrokerEnv) -> None:
    topics = env.manager()
    await topics.create_topic("t", 2, TopicConfig())

    async def writer(_name: str, _txn_id: TxnId, _kind: EntryKind) -> None:
        raise BookieUnavailableError("injected: no owner")

    parts = Parts(topics, env.clock, writer=writer)
    txn = await parts.open_txn(1)
    with pytest.raises(BookieUnavailableError):
        await parts.finisher.abort(txn, TxnState.ABORTED)
    job = parts.finisher.job(txn.name)
    assert job is not None and job.timer is not None  # a retry is scheduled
    timer = job.timer
    parts.finisher.clear()
    assert timer.cancelled()
    assert parts.finisher.job(txn.name) is None
    assert not parts.finisher.is_finishing(txn.txn_id)
    assert (await parts.logged())[txn.name] == "ABORTING"  # the log keeps the decision


async def _yield_often() -> None:
    for _ in range(50):  # no timing: nothing here can end before the next step
        await asyncio.sleep(0)


async def test_a_decision_waiter_returns_once_the_decision_is_logged(parts: Parts) -> None:
    txn = await parts.open_txn(1)
    await parts.finisher.until_durable(txn)  # OPEN: nothing to wait for
    txn.state = TxnState.COMMITTING
    assert parts.finisher.decision_pending(txn)  # in memory only, no job yet
    job = parts.finisher.decided_commit([txn.txn_id], None, logged=False)
    assert parts.finisher.decision_pending(txn)  # a job, its record not logged
    waiter = asyncio.ensure_future(parts.finisher.until_durable(txn))
    await _yield_often()
    assert not waiter.done()
    await parts.finisher.drive(job)
    await waiter
    assert not parts.finisher.decision_pending(txn)
    assert (await parts.logged())[txn.name] == "COMMITTED"


async def test_a_replayed_decision_is_durable_already(parts: Parts) -> None:
    txn = await parts.open_txn(1)
    txn.state = TxnState.ABORTING
    parts.finisher.decided_abort(txn.txn_id, TxnState.ABORTED, logged=True)
    assert not parts.finisher.decision_pending(txn)
    await parts.finisher.until_durable(txn)


async def test_a_decision_waiter_answers_retriable_once_forgotten(parts: Parts) -> None:
    txn = await parts.open_txn(1)
    txn.state = TxnState.ABORTING
    parts.finisher.decided_abort(txn.txn_id, TxnState.ABORTED, logged=False)
    waiter = asyncio.ensure_future(parts.finisher.until_durable(txn))
    await _yield_often()
    assert not waiter.done()
    parts.table.clear()  # a stand-down: the table first, then the jobs
    parts.finisher.clear()
    with pytest.raises(BrokerShuttingDownError, match="stood down before its ABORTING"):
        await waiter
