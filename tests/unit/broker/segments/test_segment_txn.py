"""Transactional entries on a LedgerSegment and its transaction buffer: isolation, recovery."""

from __future__ import annotations

import asyncio

import pytest

from broker.api import Isolation, ReadBlock, TopicConfig
from broker.errors import InvalidArgumentError
from broker.segments.entry import EntryKind
from broker.segments.segment import LedgerSegment
from broker.segments.transactions import check_txn_id
from broker.topics.manager import TopicManager
from tests.unit.broker.conftest import SMALL, BrokerEnv, block
from txnbuffer import EARLIEST

T1 = (0, 1)  # TxnId pairs: the wire's 16 bytes are decoded by the servicers
T2 = (0, 2)
T3 = (0, 3)


async def _segment(topics: TopicManager, config: TopicConfig = SMALL) -> LedgerSegment:
    await topics.create_topic("t", 1, config)
    return await topics.segment("t/0")


async def _read(segment: LedgerSegment, isolation: Isolation = Isolation.READ_COMMITTED,
                max_bytes: int = 4096, offset: int = 0) -> list[bytes]:
    """The data of every block served from ``offset`` up to where the reader must stop."""
    blocks: list[ReadBlock] = []
    while True:
        batch = await segment.read(offset, max_bytes, isolation)
        blocks.extend(batch.blocks)
        if batch.next_offset <= offset and not batch.blocks:
            return [b.data for b in blocks]
        offset = max(batch.next_offset, offset)
        if batch.blocks:
            offset = max(offset, batch.blocks[-1].offset + batch.blocks[-1].event_count)


def _data(*indexes: int) -> list[bytes]:
    return [block(i).data for i in indexes]


async def test_open_txn_holds_read_committed_until_commit(topics: TopicManager) -> None:
    segment = await _segment(topics)
    await segment.append([block(0)], "", -1)
    await segment.append([block(1)], "", -1, txn_id=T1)
    await segment.append([block(2)], "", -1)  # plain data after the open transaction
    await segment.append([block(3)], "", -1, txn_id=T1)
    assert await _read(segment) == _data(0)
    assert segment.committed_end == 1
    assert await _read(segment, Isolation.READ_UNCOMMITTED) == _data(0, 1, 2, 3)
    assert not await segment.wait_for_data(1, 0.01)
    assert await segment.wait_for_data(1, 0.01, Isolation.READ_UNCOMMITTED)
    waiter = asyncio.create_task(segment.wait_for_data(1, 30))
    for _ in range(10):  # loop turns, not time: nothing may wake the waiter before the commit
        await asyncio.sleep(0)
    assert not waiter.done()
    await segment.write_marker(EntryKind.COMMIT_MARKER, T1)
    assert await waiter
    assert segment.committed_end == segment.end_offset == 4
    assert await _read(segment) == _data(0, 1, 2, 3)
    assert await _read(segment, max_bytes=1) == _data(0, 1, 2, 3)
    # Markers take no offset and are never served.
    assert await _read(segment, Isolation.READ_UNCOMMITTED) == _data(0, 1, 2, 3)


async def test_aborted_never_visible(topics: TopicManager) -> None:
    segment = await _segment(topics)
    await segment.append([block(0)], "", -1, txn_id=T1)
    await segment.append([block(1)], "", -1, txn_id=T2)
    await segment.append([block(2)], "", -1, txn_id=T1)
    await segment.write_marker(EntryKind.ABORT_MARKER, T1)
    assert await _read(segment) == []
    await segment.write_marker(EntryKind.COMMIT_MARKER, T2)
    await segment.append([block(3)], "", -1)
    for max_bytes in (1, 4096):
        assert await _read(segment, max_bytes=max_bytes) == _data(1, 3)
    assert await _read(segment, Isolation.READ_UNCOMMITTED) == _data(0, 1, 2, 3)
    buffer = segment.txn_buffer
    assert buffer is not None and buffer.is_aborted((0, 1)) and not buffer.is_aborted((0, 2))


async def test_bad_txn_ids_and_marker_kinds(topics: TopicManager) -> None:
    segment = await _segment(topics)
    # Wire bytes become a TxnId at the edge (the servicers call check_txn_id).
    with pytest.raises(InvalidArgumentError, match="got 5 bytes"):
        check_txn_id(b"short")
    with pytest.raises(InvalidArgumentError, match="not all zero"):
        check_txn_id(bytes(16))
    assert check_txn_id((1).to_bytes(16, "big")) == T1
    with pytest.raises(InvalidArgumentError):
        await segment.write_marker(EntryKind.DATA, T1)


async def test_restart_recovers_buffer(env: BrokerEnv) -> None:
    first = env.manager()
    segment = await _segment(first)
    for i in range(30):  # several ledgers (SMALL rolls over at 1 KiB)
        await segment.append([block(i, size=100)], "", -1, txn_id=T1 if i % 2 else T2)
    await segment.write_marker(EntryKind.ABORT_MARKER, T1)
    buffer = segment.txn_buffer
    assert buffer is not None
    await buffer.take_snapshot()  # a snapshot, then more entries to replay after it
    await segment.append([block(30, size=100)], "", -1, txn_id=T3)
    await segment.write_marker(EntryKind.COMMIT_MARKER, T2)
    before = (buffer.aborted_txns(), buffer.max_read_position, segment.committed_end)
    assert await _read(segment) == [block(i, size=100).data for i in range(0, 30, 2)]
    env.abandon(first)  # a crash: no clean close
    await env.restart()
    again = await env.manager().segment("t/0")
    recovered = again.txn_buffer
    assert recovered is not None and recovered.ready
    assert (recovered.aborted_txns(), recovered.max_read_position,
            again.committed_end) == before
    assert recovered.max_read_position != EARLIEST
    assert await _read(again) == [block(i, size=100).data for i in range(0, 30, 2)]
    await again.write_marker(EntryKind.COMMIT_MARKER, T3)
    assert await _read(again) == [block(i, size=100).data for i in (*range(0, 30, 2), 30)]


async def test_retention_keeps_open_txn_and_drops_aborts(topics: TopicManager) -> None:
    segment = await _segment(topics)  # SMALL: a ledger rolls over once it holds 1 KiB
    await segment.append([block(0, size=2000)], "", -1, txn_id=T1)  # ledger A
    await segment.write_marker(EntryKind.ABORT_MARKER, T1)  # ledger B
    await segment.append([block(1, size=2000)], "", -1)  # ledger B
    await segment.append([block(2, size=2000)], "", -1, txn_id=T2)  # ledger C
    await segment.append([block(3, size=2000)], "", -1)  # ledger D
    buffer = segment.txn_buffer
    assert buffer is not None and buffer.aborted_count == 1
    await segment.truncate(segment.end_offset)
    # A and B (with T1's abort) went; C, holding open T2's first entry, stays.
    assert segment.start_offset == 2
    assert buffer.aborted_count == 0
    assert await _read(segment, offset=2) == []
    await segment.write_marker(EntryKind.COMMIT_MARKER, T2)
    assert await _read(segment, offset=2) == [block(i, size=2000).data for i in (2, 3)]
