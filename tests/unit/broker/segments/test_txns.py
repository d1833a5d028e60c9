"""SegmentTxns alone: the transaction check, the committed end, the buffer's recovery.

Without a snapshot store the part has no buffer (a system topic's segment).
With one (the broker's, a system topic on ``BrokerEnv``) the entries it is told
of move the committed end; a store that fails (a fault wrapper at the seam)
fails the recovery and the segment's life with it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import pytest

from broker.errors import InvalidArgumentError, WrongHostError
from broker.segments.entry import EntryKind
from broker.segments.life import ResidenceEvent, SegmentLife
from broker.segments.offset_index import LedgerSpan
from broker.segments.pipeline import PendingEntry
from broker.segments.txns import SegmentTxns
from broker.system.snapshot_store import snapshot_store
from ledger.errors import LedgerError
from tests.unit.broker.conftest import BrokerEnv
from tests.unit.broker.segments.parts_kit import wired
from txnbuffer.api import SnapshotStore, TxnId

T1: TxnId = (0, 1)


class FailingSnapshots:
    """A ``SnapshotStore`` whose reads wait for ``gate``, then raise ``failure`` if set."""

    def __init__(self, inner: SnapshotStore) -> None:
        self.inner = inner
        self.gate = asyncio.Event()
        self.failure: Exception | None = None

    @property
    def max_record_bytes(self) -> int:
        return self.inner.max_record_bytes

    async def write(self, key: str, value: bytes | None) -> None:
        await self.inner.write(key, value)

    async def read_prefix(self, prefix: str) -> Mapping[str, bytes]:
        await self.gate.wait()
        if self.failure is not None:
            raise self.failure
        return await self.inner.read_prefix(prefix)


def _entry(span: LedgerSpan, base: int, events: int, kind: EntryKind,
           txn_id: TxnId | None) -> PendingEntry:
    future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    return PendingEntry(span, base, events, 0, future, kind, txn_id)


async def test_without_a_store_the_segment_takes_no_transactions() -> None:
    wakes: list[None] = []
    txns = SegmentTxns("t/0", None, None, SegmentLife("t/0", sealed=False),
                       lambda: wakes.append(None))
    assert txns.buffer is None
    with pytest.raises(InvalidArgumentError, match="takes no transactions"):
        txns.check()
    assert txns.committed_end(3, 9) == 9
    assert txns.keep_open([LedgerSpan(1, 0), LedgerSpan(2, 5)], 2) == 2
    await txns.recovered()  # at once: nothing to recover
    await txns.maybe_snapshot()
    txns.ledgers_deleted(1)
    assert wakes == []


async def test_open_transactions_hold_the_committed_end_and_their_ledgers(
        env: BrokerEnv) -> None:
    parts = await wired(env, txns=True)
    txns = parts.txns
    buffer = txns.buffer
    assert buffer is not None and buffer.ready
    txns.check()
    ledger_id = parts.chain.spans[-1].ledger_id
    span = LedgerSpan(ledger_id, 0)
    txns.note_durable(_entry(span, 0, 2, EntryKind.DATA, None), 0)
    assert txns.committed_end(0, 2) == 2
    txns.note_durable(_entry(span, 2, 3, EntryKind.TXN_DATA, T1), 1)
    assert buffer.ongoing_count == 1
    assert txns.committed_end(0, 9) == 2  # T1's first entry, at offset 2
    # Retention keeps the ledger holding T1's entries and every one after it.
    spans = [LedgerSpan(ledger_id - 1, 0), span]
    assert txns.keep_open(spans, 2) == 1
    txns.note_durable(_entry(span, 5, 0, EntryKind.COMMIT_MARKER, T1), 2)
    assert buffer.ongoing_count == 0
    assert txns.committed_end(0, 9) == 9
    assert txns.keep_open(spans, 2) == 2


async def test_until_recovered_nothing_is_committed_and_no_ledger_deleted(
        env: BrokerEnv) -> None:
    parts = await wired(env)
    store = FailingSnapshots(snapshot_store(env.manager()))
    txns = SegmentTxns("t/0", store, None, parts.life, parts.wake)
    txns.start_recovery(parts.chain, parts.reads.reader)
    assert txns.committed_end(4, 9) == 4
    assert txns.keep_open(parts.chain.spans, 1) == 0
    store.gate.set()
    await txns.recovered()
    assert txns.committed_end(4, 9) == 9
    assert parts.life.usable


async def test_a_failed_recovery_fails_the_segment_and_wakes_its_readers(
        env: BrokerEnv) -> None:
    parts = await wired(env)
    store = FailingSnapshots(snapshot_store(env.manager()))
    store.failure = LedgerError("snapshot store unavailable")
    store.gate.set()
    txns = SegmentTxns("t/0", store, None, parts.life, parts.wake)
    wakes = parts.wakes
    txns.start_recovery(parts.chain, parts.reads.reader)
    with pytest.raises(LedgerError, match="snapshot store unavailable"):
        await txns.recovered()
    assert parts.life.failure is store.failure and not parts.life.usable
    assert parts.wakes == wakes + 1


async def test_a_stopped_recovery_answers_why_the_segment_is_gone(env: BrokerEnv) -> None:
    parts = await wired(env)
    store = FailingSnapshots(snapshot_store(env.manager()))  # its gate stays shut
    txns = SegmentTxns("t/0", store, None, parts.life, parts.wake)
    txns.start_recovery(parts.chain, parts.reads.reader)
    parts.life.move(ResidenceEvent.ABANDON)
    txns.stop_recovery()
    with pytest.raises(WrongHostError):
        await txns.recovered()
