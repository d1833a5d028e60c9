"""Finishing states finish (issue 22, item 2): a failed step never leaves COMMITTING or ABORTING.

Each case fails one step of a commit or an abort once, at a seam: the
transaction log's write (the decision record, the final record), applied and
then failed (its answer lost) or failed before it is applied, or one
segment's marker. The call may fail; the maintenance tick (and the retry
timer) then drives the transaction to COMMITTED or ABORTED, and a
read_committed reader of both segments gets past it; a new coordinator
replaying the log agrees.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest

from broker.api import Block, TopicConfig
from broker.segments.entry import EntryKind
from broker.system.compacted_topic import CompactedTopic
from broker.topics.manager import TopicManager
from broker.txn import _timeouts
from broker.txn import coordinator as coordinator_module
from broker.txn.coordinator import TXN_LOG_TOPIC, TxnCoordinator, TxnState
from ledger.errors import BookieUnavailableError
from tests.support.wait import wait_for_async
from tests.unit.broker.conftest import BrokerEnv, block, read_all
from txnbuffer.api import TxnId
from txnbuffer.txn_ids import txn_id_hex

pytestmark = pytest.mark.faults

SEGMENTS = ("t/0", "t/1")


class FailingLog:
    """Fails the ``index``-th write of the transaction log whose value matches, once."""

    def __init__(self, coordinator: TxnCoordinator, matches: Callable[[str, bytes | None], bool],
                 *, applied: bool) -> None:
        self._write = coordinator._log.write
        self._matches = matches
        self._applied = applied
        self.fired = 0
        coordinator._log.write = self.write  # type: ignore[method-assign]

    async def write(self, key: str, value: bytes | None) -> None:
        if self.fired == 0 and self._matches(key, value):
            self.fired += 1
            if self._applied:
                await self._write(key, value)
                raise BookieUnavailableError("injected: written, answer lost")
            raise BookieUnavailableError("injected: not written")
        await self._write(key, value)


class FailingMarkers:
    """Writes markers into the segments, failing the first one for ``segment`` of ``kind``."""

    def __init__(self, topics: TopicManager, segment: str, kind: EntryKind) -> None:
        self._topics = topics
        self._segment = segment
        self._kind = kind
        self.fired = 0

    async def __call__(self, name: str, txn_id: TxnId, kind: EntryKind) -> None:
        if self.fired == 0 and name == self._segment and kind is self._kind:
            self.fired += 1
            raise BookieUnavailableError(f"injected: marker in {name} not written")
        await (await self._topics.segment(name)).write_marker(kind, txn_id)


def _state(value: bytes | None) -> str:
    """The ``state`` of a transaction log record ("" for none or an unreadable one)."""
    if value is None:
        return ""
    try:
        record = json.loads(value)
    except ValueError:
        return ""
    return str(record.get("state", "")) if isinstance(record, dict) else ""


def _log_fault(state: str, *, group: bool | None = None) -> Callable[[str, bytes | None], bool]:
    def matches(key: str, value: bytes | None) -> bool:
        if group is not None and key.startswith("commit-") != group:
            return False
        return _state(value) == state
    return matches


async def _started(env: BrokerEnv) -> tuple[TopicManager, TxnCoordinator]:
    topics = env.manager()
    await topics.create_topic("t", 2, TopicConfig())
    coordinator = TxnCoordinator(topics, clock=env.clock)
    await coordinator.start()
    return topics, coordinator


async def _transaction(topics: TopicManager, coordinator: TxnCoordinator) -> TxnId:
    """A transaction with an event in each segment, then a plain event after it in each."""
    txn = await coordinator.begin(60_000)
    for index, name in enumerate(SEGMENTS):
        segment = await topics.segment(name)
        async with coordinator.writing(txn, name):
            await segment.append([block(index)], "", -1, txn_id=txn)
    for index, name in enumerate(SEGMENTS):
        await (await topics.segment(name)).append([Block(b"plain", 1)], f"w{index}", 0)
    return txn


async def _finished(env: BrokerEnv, topics: TopicManager, coordinator: TxnCoordinator,
                    txn: TxnId, final: TxnState) -> None:
    """Wait until the coordinator says ``final`` and the log holds it (group record gone)."""

    async def reached() -> bool:
        env.clock.advance_ms(10_000)  # past any backoff
        await coordinator.tick()
        if coordinator.status(txn).state is not final:
            return False
        txn_log = CompactedTopic(topics, TXN_LOG_TOPIC, maintain=False)  # read anew
        records = await txn_log.read_prefix("")
        name = txn_id_hex(txn)
        return (_state(records.get(name)) == final.name
                and "commit-" + name not in records)

    await wait_for_async(reached, f"the transaction {final.name}", timeout_s=30)


async def _read_committed_passes(topics: TopicManager, committed: bool) -> None:
    for index, name in enumerate(SEGMENTS):
        segment = await topics.segment(name)
        assert segment.committed_end == segment.end_offset == 2
        data = [b.data for b in await read_all(segment, 0)]
        assert data == ([block(index).data] if committed else []) + [b"plain"]


async def _replayed(env: BrokerEnv, coordinator: TxnCoordinator, txn: TxnId,
                    final: TxnState) -> None:
    await coordinator.close()
    again = TxnCoordinator(env.manager(), clock=env.clock)
    await again.start()
    assert again.status(txn).state is final
    await again.stand_down()


async def _run(env: BrokerEnv, action: str, make_fault: Callable[[TopicManager,
               TxnCoordinator], Any]) -> None:
    topics, coordinator = await _started(env)
    txn = await _transaction(topics, coordinator)
    fault = make_fault(topics, coordinator)
    final = TxnState.COMMITTED if action == "commit" else TxnState.ABORTED
    try:
        if action == "commit":
            await coordinator.commit([txn])
        else:
            await coordinator.abort(txn)
    except BookieUnavailableError:
        pass  # the caller may learn of the failure; the transaction goes on regardless
    assert fault.fired == 1
    assert coordinator.status(txn).state in (
        final, TxnState.COMMITTING if action == "commit" else TxnState.ABORTING)
    await _finished(env, topics, coordinator, txn, final)
    await _read_committed_passes(topics, action == "commit")
    await _replayed(env, coordinator, txn, final)


@pytest.mark.parametrize("applied", [True, False], ids=["answer-lost", "not-applied"])
@pytest.mark.parametrize(("action", "state", "group"), [
    ("commit", "COMMITTING", True), ("commit", "COMMITTED", False),
    ("abort", "ABORTING", None), ("abort", "ABORTED", None),
], ids=["commit-decision", "commit-final", "abort-decision", "abort-final"])
async def test_a_failed_log_write_still_finishes(env: BrokerEnv, action: str, state: str,
                                                group: bool | None, applied: bool) -> None:
    def fault(_topics: TopicManager, coordinator: TxnCoordinator) -> FailingLog:
        return FailingLog(coordinator, _log_fault(state, group=group), applied=applied)

    await _run(env, action, fault)


@pytest.mark.parametrize("segment", SEGMENTS)
@pytest.mark.parametrize("action", ["commit", "abort"])
async def test_a_failed_marker_still_finishes(env: BrokerEnv, action: str,
                                              segment: str) -> None:
    kind = EntryKind.COMMIT_MARKER if action == "commit" else EntryKind.ABORT_MARKER

    def fault(topics: TopicManager, coordinator: TxnCoordinator) -> FailingMarkers:
        markers = FailingMarkers(topics, segment, kind)
        coordinator.route_markers(markers)
        return markers

    await _run(env, action, fault)


async def test_a_timeout_abort_that_fails_still_finishes(env: BrokerEnv) -> None:
    # The case: a bookie down when the timeout's ABORTING record is written.
    topics, coordinator = await _started(env)
    txn = await _transaction(topics, coordinator)
    fault = FailingLog(coordinator, _log_fault("ABORTING"), applied=False)
    env.clock.advance_ms(60_001)
    await coordinator.tick()
    assert fault.fired == 1
    await _finished(env, topics, coordinator, txn, TxnState.TIMED_OUT)
    await _read_committed_passes(topics, committed=False)
    await _replayed(env, coordinator, txn, TxnState.TIMED_OUT)


async def test_standing_down_cancels_a_finish_whose_markers_wait_for_an_owner(
        env: BrokerEnv) -> None:
    # Nemesis seed 11: a retried abort's markers waited for segment owners the
    # broker learns only in its ownership step, which waited for this stand-down.
    topics, coordinator = await _started(env)
    txn = await _transaction(topics, coordinator)
    calls = 0
    no_owner = asyncio.Event()  # never set: no owner is ever known

    async def markers(_name: str, _txn_id: TxnId, _kind: EntryKind) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise BookieUnavailableError("injected: the first marker fails, the retry waits")
        await no_owner.wait()

    coordinator.route_markers(markers)
    with pytest.raises(BookieUnavailableError):
        await coordinator.abort(txn)

    async def retrying() -> bool:
        # The abort's own two markers (one failed, one waits), then the retry
        # timer's drive, in the background, waits on a marker too.
        return calls > len(SEGMENTS)

    await wait_for_async(retrying, "the abort retried in the background", timeout_s=60)
    await asyncio.wait_for(coordinator.stand_down(), timeout=60)  # returns: nothing waited on
    successor = TxnCoordinator(topics, clock=env.clock)  # the log decided; markers flow again
    await successor.start()
    await _finished(env, topics, successor, txn, TxnState.ABORTED)
    await _read_committed_passes(topics, committed=False)
    await successor.stand_down()


def _markers_once_owner_known(topics: TopicManager, coordinator: TxnCoordinator
                               ) -> tuple[asyncio.Event, list[str]]:
    """Route markers as a cluster does: each waits until its owner is known (the event).

    Returns the event and the segments whose marker has started waiting.
    """
    owner_known = asyncio.Event()
    waiting: list[str] = []

    async def markers(name: str, txn_id: TxnId, kind: EntryKind) -> None:
        waiting.append(name)
        await owner_known.wait()
        await (await topics.segment(name)).write_marker(kind, txn_id)

    coordinator.route_markers(markers)
    return owner_known, waiting


async def test_the_tick_does_not_wait_for_markers_whose_owner_is_unknown(
        env: BrokerEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    # In a cluster a marker is retried until its segment's owner is known and
    # writes it (broker.cluster.txn_routes). The tick is a maintenance hook:
    # awaiting a timeout's abort there held up the topics' maintenance round
    # (retention, rollover by age, compaction of system topics) for as long.
    monkeypatch.setattr(_timeouts, "TICK_WAIT_S", 0.05)
    topics, coordinator = await _started(env)
    txn = await _transaction(topics, coordinator)
    owner_known, waiting = _markers_once_owner_known(topics, coordinator)
    env.clock.advance_ms(60_001)  # past its deadline: the tick aborts it (TIMED_OUT)
    tick = asyncio.ensure_future(coordinator.tick())
    done, _ = await asyncio.wait({tick}, timeout=30)
    assert tick in done  # the old code waited as long as the markers did
    assert tick.result() == 1
    assert sorted(waiting) == list(SEGMENTS)  # the abort is under way, in the background
    assert coordinator.status(txn).state is TxnState.ABORTING
    assert await asyncio.wait_for(coordinator.tick(), timeout=30) == 0  # not aborted twice
    owner_known.set()
    await _finished(env, topics, coordinator, txn, TxnState.TIMED_OUT)
    await _read_committed_passes(topics, committed=False)
    await coordinator.close()


async def test_an_abort_whose_markers_wait_is_answered_once_decided(
        env: BrokerEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    # The nemesis, seed 17: two bookies and two brokers killed within 40 s kept
    # segments' owners unknown, the abort's markers waited, and the SDK's
    # abort timed out after 35 s. Once the ABORTING record is logged the abort
    # is decided: past ABORT_ANSWER_WAIT_S the caller is answered, the markers
    # follow (as Kafka's EndTxn answers once PREPARE_ABORT is logged).
    monkeypatch.setattr(coordinator_module, "ABORT_ANSWER_WAIT_S", 0.05)
    topics, coordinator = await _started(env)
    txn = await _transaction(topics, coordinator)
    owner_known, waiting = _markers_once_owner_known(topics, coordinator)
    await asyncio.wait_for(coordinator.abort(txn), timeout=30)  # the old code: never
    assert sorted(waiting) == list(SEGMENTS)  # decided: the markers are under way
    assert coordinator.status(txn).state is TxnState.ABORTING
    owner_known.set()
    await _finished(env, topics, coordinator, txn, TxnState.ABORTED)
    await _read_committed_passes(topics, committed=False)
    await coordinator.close()
