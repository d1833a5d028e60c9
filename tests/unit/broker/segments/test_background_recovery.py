"""A loaded segment takes appends while its transaction buffer still recovers.

``LedgerSegment.load`` recovers the buffer in the background (its replay can
take seconds after a failover): ``TopicManager.writable_segment`` answers once
the ledger chain is recovered, ``TopicManager.segment`` (reads) once the
buffer is too. The snapshot store here is a gate (a fault wrapper at the
seam): its reads wait until the test opens it, so "still recovering" is a
state the test holds, not a race.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import pytest

from broker.api import TopicConfig
from broker.errors import WrongHostError
from broker.segments.entry import EntryKind
from broker.segments.segment import LedgerSegment
from broker.system.snapshot_store import snapshot_store
from broker.topics.manager import TopicManager
from ledger.errors import LedgerError
from tests.unit.broker.conftest import BrokerEnv, block, read_all
from txnbuffer.api import SnapshotStore

T1 = (0, 1)
T2 = (0, 2)


class GatedSnapshots:
    """A ``SnapshotStore`` whose reads wait for ``gate`` (or raise ``failure``)."""

    def __init__(self, inner: SnapshotStore) -> None:
        self.inner = inner
        self.gate = asyncio.Event()
        self.waiting = asyncio.Event()
        self.failure: Exception | None = None

    @property
    def max_record_bytes(self) -> int:
        return self.inner.max_record_bytes

    async def write(self, key: str, value: bytes | None) -> None:
        await self.inner.write(key, value)

    async def read_prefix(self, prefix: str) -> Mapping[str, bytes]:
        self.waiting.set()
        await self.gate.wait()
        if self.failure is not None:
            raise self.failure
        return await self.inner.read_prefix(prefix)


async def _crashed_with_open_txn(env: BrokerEnv) -> None:
    """Segment t/0: plain block 0, then T1's first entry (open), then a crash."""
    first = env.manager()
    await first.create_topic("t", 1, TopicConfig())
    segment = await first.segment("t/0")
    await segment.append([block(0)], "", -1)
    await segment.append([block(1)], "", -1, txn_id=T1)
    env.abandon(first)
    await env.restart()


def _gated_manager(env: BrokerEnv) -> tuple[TopicManager, list[GatedSnapshots]]:
    made: list[GatedSnapshots] = []

    def factory(topics: TopicManager) -> SnapshotStore:
        made.append(GatedSnapshots(snapshot_store(topics)))
        return made[-1]

    manager = TopicManager(env.ledgers, env.store, txn_store_factory=factory,
                           clock=env.clock)
    return manager, made


async def _still_waits(task: asyncio.Task[LedgerSegment]) -> None:
    for _ in range(20):  # loop turns, not time: nothing may finish it while the gate is shut
        await asyncio.sleep(0)
    assert not task.done()


async def test_appends_go_on_while_the_buffer_recovers(env: BrokerEnv) -> None:
    await _crashed_with_open_txn(env)
    manager, gates = _gated_manager(env)
    try:
        segment = await manager.writable_segment("t/0", "Append")
        await gates[0].waiting.wait()  # the recovery is under way, held at the snapshot
        buffer = segment.txn_buffer
        assert buffer is not None and not buffer.ready
        # Appends are taken and acknowledged meanwhile: plain, T1's second
        # entry, and T2's first (its offset must be known once recovered).
        assert (await segment.append([block(2)], "w", 0)).offset == 2
        await segment.append([block(3)], "", -1, txn_id=T1)
        t2_first = (await segment.append([block(4)], "", -1, txn_id=T2)).offset
        assert segment.committed_end == segment.start_offset  # unknown: nothing claimed
        reader = asyncio.create_task(manager.segment("t/0"))
        await _still_waits(reader)
        gates[0].gate.set()
        assert await reader is segment and buffer.ready
        # T1 (open before the crash) holds read_committed at its first entry.
        assert segment.committed_end == 1
        assert [b.data for b in await read_all(segment, 0)] == [block(0).data]
        await segment.write_marker(EntryKind.COMMIT_MARKER, T1)
        # T2 began while the buffer recovered: it holds them now, at its first entry.
        assert segment.committed_end == t2_first
        await segment.write_marker(EntryKind.COMMIT_MARKER, T2)
        assert segment.committed_end == segment.end_offset == 5
        assert [b.data for b in await read_all(segment, 0)] == [
            block(i).data for i in range(5)]
    finally:
        await manager.close()


async def test_a_failed_recovery_fails_the_segment_and_it_loads_again(
        env: BrokerEnv) -> None:
    await _crashed_with_open_txn(env)
    manager, gates = _gated_manager(env)
    try:
        first = await manager.writable_segment("t/0", "Append")
        await gates[0].waiting.wait()
        gates[0].failure = LedgerError("bookies unreachable")
        gates[0].gate.set()
        with pytest.raises(LedgerError, match="bookies unreachable"):
            await manager.segment("t/0")
        assert not first.usable
        gates[0].failure = None
        again = await manager.segment("t/0")  # loaded again, recovered this time
        assert again is not first
        buffer = again.txn_buffer
        assert buffer is not None and buffer.ready and again.committed_end == 1
    finally:
        await manager.close()


async def test_a_hand_over_ends_the_recovery(env: BrokerEnv) -> None:
    await _crashed_with_open_txn(env)
    manager, gates = _gated_manager(env)
    try:
        segment = await manager.writable_segment("t/0", "Append")
        await gates[0].waiting.wait()
        reader = asyncio.create_task(segment.recovered())
        await segment.hand_over()
        with pytest.raises(WrongHostError):
            await reader
    finally:
        await manager.close()
