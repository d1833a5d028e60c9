"""A commit or abort whose caller goes away (a cut client's call) still runs to its end.

Stopped after its COMMITTING record, a commit would leave the transaction
COMMITTING without markers until a restart: read_committed readers would wait
at its first entry, and a client that asked ``GetTxnStatus`` (COMMITTING means
"it will be visible") would count it as committed (tests/faults/
test_txn_full_faults.py saw such a read stall).
"""

from __future__ import annotations

import asyncio

import pytest

from broker.api import TopicConfig
from broker.topics.manager import TopicManager
from broker.txn.coordinator import TxnCoordinator, TxnState
from broker.txn.faults import TxnFaults
from tests.support.wait import wait_for_async
from tests.unit.broker.conftest import BrokerEnv, block
from txnbuffer.api import TxnId


async def _write(coordinator: TxnCoordinator, topics: TopicManager, txn: TxnId) -> None:
    segment = await topics.segment("t/0")
    async with coordinator.writing(txn, "t/0"):
        await segment.append([block(0)], "", -1, txn_id=txn)


async def _visible(topics: TopicManager) -> list[bytes]:
    segment = await topics.segment("t/0")
    return [b.data for b in (await segment.read(0, 1 << 20)).blocks]


async def test_a_commit_whose_caller_is_cancelled_after_committing_still_commits(
    env: BrokerEnv,
) -> None:
    topics = env.manager()
    await topics.create_topic("t", 1, TopicConfig())
    callers: list[asyncio.Task[None]] = []

    def cancel_caller() -> None:  # the caller exists by the time the commit gets here
        callers[0].cancel()

    # The caller goes away in the window between the COMMITTING record and the markers.
    faults = TxnFaults(after_committing_logged=cancel_caller)
    coordinator = TxnCoordinator(topics, clock=env.clock, faults=faults)
    await coordinator.start()
    try:
        txn = await coordinator.begin(60_000)
        await _write(coordinator, topics, txn)
        callers.append(asyncio.create_task(coordinator.commit([txn])))
        with pytest.raises(asyncio.CancelledError):
            await callers[0]

        async def committed() -> bool:
            return coordinator.status(txn).state is TxnState.COMMITTED

        await wait_for_async(committed, "the commit finished without its caller")
        assert await _visible(topics) == [block(0).data]  # the markers were written
    finally:
        await coordinator.close()


async def test_an_abort_whose_caller_is_cancelled_still_aborts(env: BrokerEnv) -> None:
    topics = env.manager()
    await topics.create_topic("t", 1, TopicConfig())
    coordinator = TxnCoordinator(topics, clock=env.clock)
    await coordinator.start()
    try:
        txn = await coordinator.begin(60_000)
        await _write(coordinator, topics, txn)
        caller = asyncio.create_task(coordinator.abort(txn))
        await asyncio.sleep(0)  # the abort began (ABORTING in memory)
        caller.cancel()
        with pytest.raises(asyncio.CancelledError):
            await caller

        async def aborted() -> bool:
            return coordinator.status(txn).state is TxnState.ABORTED

        await wait_for_async(aborted, "the abort finished without its caller")
        later = await coordinator.begin(60_000)  # the segment goes on past the abort
        await _write(coordinator, topics, later)
        await coordinator.commit([later])
        assert await _visible(topics) == [block(0).data]  # only the committed one's block
    finally:
        await coordinator.close()
