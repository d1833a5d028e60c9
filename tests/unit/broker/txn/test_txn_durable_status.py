"""A decision is reported only once it is durable (issue 22: read back, never assume).

The SDK reads a decision back with ``GetTxnStatus`` after a call whose outcome
is unknown, and takes a refusal "COMMITTING, expected OPEN" of a repeated
``CommitTxn`` as its first call's success. Both came from memory: a
coordinator says COMMITTING as soon as a commit starts, before its COMMITTING
record is in the log. A crash in that window replays the transaction OPEN (its
timeout then aborts it), so a client told "committed" lost its commit. Here the
decision record's write is held at a seam (the transaction log's ``write``):
until it lands, a status read and a repeated call wait; a replay of the log
meanwhile shows the transaction OPEN (the window is real); once it lands both
answer the decision.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from broker.api import TopicConfig
from broker.errors import BrokerShuttingDownError, TxnStateError
from broker.topics.manager import TopicManager
from broker.txn.coordinator import TxnCoordinator, TxnState
from tests.unit.broker.conftest import BrokerEnv, block
from txnbuffer.api import TxnId

pytestmark = pytest.mark.faults


class HeldLog:
    """Holds the transaction log's write of a record in ``state`` until ``release``."""

    def __init__(self, coordinator: TxnCoordinator, state: str) -> None:
        self._write = coordinator._log.write
        self._state = state
        self.reached = asyncio.Event()
        self.release = asyncio.Event()
        coordinator._log.write = self.write  # type: ignore[method-assign]

    async def write(self, key: str, value: bytes | None) -> None:
        if value is not None and json.loads(value).get("state") == self._state:
            self.reached.set()
            await self.release.wait()
        await self._write(key, value)


async def _open_transaction(env: BrokerEnv) -> tuple[TopicManager, TxnCoordinator, TxnId]:
    topics = env.manager()
    await topics.create_topic("t", 1, TopicConfig())
    coordinator = TxnCoordinator(topics, clock=env.clock)
    await coordinator.start()
    txn = await coordinator.begin(60_000)
    segment = await topics.segment("t/0")
    async with coordinator.writing(txn, "t/0"):
        await segment.append([block(0)], "", -1, txn_id=txn)
    return topics, coordinator, txn


async def _replayed_state(topics: TopicManager, env: BrokerEnv, txn: TxnId) -> TxnState:
    """What a coordinator starting now (after a crash) would hold: the log's word."""
    replay = TxnCoordinator(topics, clock=env.clock)
    await replay.start()
    try:
        return replay.status(txn).state
    finally:
        await replay.close()


async def _yield_often() -> None:
    for _ in range(50):  # no timing: nothing here can end while the write is held
        await asyncio.sleep(0)


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
async def test_a_decision_is_reported_once_its_record_is_durable(env: BrokerEnv,
                                                                  commit: bool) -> None:
    topics, coordinator, txn = await _open_transaction(env)
    pending, final = ((TxnState.COMMITTING, TxnState.COMMITTED) if commit
                      else (TxnState.ABORTING, TxnState.ABORTED))
    held = HeldLog(coordinator, pending.name)

    def decide() -> asyncio.Task[None]:
        return asyncio.ensure_future(coordinator.commit([txn]) if commit
                                     else coordinator.abort(txn))

    try:
        first = decide()
        await held.reached.wait()
        assert coordinator.status(txn).state is pending  # in memory only
        assert await _replayed_state(topics, env, txn) is TxnState.OPEN  # a crash: OPEN
        again = decide()  # a repeated call: its first answer was lost
        await _yield_often()
        assert not again.done()  # not refused as decided while a crash could undo it
        status = asyncio.ensure_future(coordinator.durable_status(txn))
        await _yield_often()
        assert not status.done()
        held.release.set()
        await first
        assert (await status).state in (pending, final)
        with pytest.raises(TxnStateError) as refused:
            await again
        assert refused.value.actual in (pending.name, final.name)
        assert await _replayed_state(topics, env, txn) in (pending, final)
    finally:
        held.release.set()
        await coordinator.close()


async def test_a_status_waiting_for_a_decision_is_answered_retriable_on_stand_down(
        env: BrokerEnv) -> None:
    _topics, coordinator, txn = await _open_transaction(env)
    held = HeldLog(coordinator, TxnState.COMMITTING.name)
    try:
        first = asyncio.ensure_future(coordinator.commit([txn]))
        await held.reached.wait()
        status = asyncio.ensure_future(coordinator.durable_status(txn))
        await _yield_often()
        assert not status.done()
        await coordinator.stand_down()  # the coordinator moves: its successor decides
        with pytest.raises(BrokerShuttingDownError):
            await status
        with pytest.raises(asyncio.CancelledError):
            await first
    finally:
        held.release.set()
        await coordinator.close()
