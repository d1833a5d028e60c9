"""The Append servicer's transactions: held blocks, their bounds, and failures mid-sequence.

The servicer is driven in-process (commands in, replies out) over a real
TopicManager, with a fake monotonic clock for the held-block time limit.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import grpc
import pytest

from broker.api import TopicConfig
from broker.services.append import AppendServicer
from broker.topics.manager import TopicManager
from folio.api.v1 import append_pb2
from folio.api.v1.block import encode_block
from tests.unit.broker.conftest import FakeClock, block, read_all

MIB = 1024 * 1024
_Reply = append_pb2.AppendReply


class _Stream:
    """One Append stream: ``send`` commands, ``reply`` waits for the next reply."""

    def __init__(self, servicer: AppendServicer) -> None:
        self._commands: asyncio.Queue[append_pb2.AppendCommand | None] = asyncio.Queue()
        self._replies: asyncio.Queue[_Reply] = asyncio.Queue()
        self.task = asyncio.create_task(self._run(servicer))

    async def _commands_iter(self) -> AsyncIterator[append_pb2.AppendCommand]:
        while (command := await self._commands.get()) is not None:
            yield command

    async def _run(self, servicer: AppendServicer) -> None:
        async for reply in servicer.Append(self._commands_iter(), None):  # type: ignore[arg-type]
            self._replies.put_nowait(reply)

    def setup(self, flow: int, writer_id: str = "w", segment: str = "t/0") -> None:
        self._commands.put_nowait(append_pb2.AppendCommand(
            request_id=flow << 32, setup_append=append_pb2.SetupAppend(
                segment=segment, writer_id=writer_id)))

    def block(self, flow: int, sequence: int, data: bytes, last: int, *, count: int = 1,
              end: bool = False) -> None:
        """Send ``data`` as the first payload of a valid block of ``count`` events."""
        packed = encode_block([data, *[b""] * (count - 1)])
        self._commands.put_nowait(append_pb2.AppendCommand(
            request_id=flow << 32 | sequence, append_block=append_pb2.AppendBlock(
                data=packed, event_count=count, last_event_number=last, end=end)))

    async def reply(self) -> _Reply:
        return await asyncio.wait_for(self._replies.get(), 30)

    async def settle(self) -> None:
        """Let the servicer read everything sent so far."""
        for _ in range(20):
            await asyncio.sleep(0)
        assert self._replies.empty()

    async def close(self) -> None:
        self._commands.put_nowait(None)
        await asyncio.wait_for(self.task, 30)

    async def kill(self) -> None:
        """End the call as gRPC does when the client goes away."""
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(1000.0)


@pytest.fixture
async def servicer(topics: TopicManager, clock: FakeClock) -> AppendServicer:
    await topics.create_topic("t", 1, TopicConfig())
    return AppendServicer(topics, asyncio.Event(), max_held_bytes=4 * MIB, max_held_ms=120_000,
                          clock=clock)


async def test_held_blocks_and_end_are_one_entry(topics: TopicManager,
                                                 servicer: AppendServicer) -> None:
    stream = _Stream(servicer)
    stream.setup(1)
    assert (await stream.reply()).append_setup.last_event_number == -1
    stream.block(1, 1, block(0, 2).data, 1, count=2)
    stream.block(1, 2, block(1).data, 2)
    await stream.settle()  # held blocks are not answered
    assert servicer.held.used > 0
    stream.block(1, 3, block(2, 3).data, 5, count=3, end=True)
    appended = (await stream.reply()).data_appended
    assert (appended.offset, appended.event_count, appended.event_number) == (0, 6, 5)
    assert servicer.held.used == 0
    segment = await topics.segment("t/0")
    assert segment.info().ledgers[-1].ledger_id == segment.info().ledgers[0].ledger_id
    assert [(b.offset, b.event_count) for b in await read_all(segment, 0)] == [
        (0, 2), (2, 1), (3, 3)]
    # Sent again whole (a reconnect that missed the answer): a duplicate.
    stream.setup(1)
    assert (await stream.reply()).append_setup.last_event_number == 5
    stream.block(1, 1, block(0, 2).data, 1, count=2)
    stream.block(1, 2, block(1).data, 2)
    stream.block(1, 3, block(2, 3).data, 5, count=3, end=True)
    assert (await stream.reply()).data_appended.duplicate
    await stream.close()
    assert segment.end_offset == 6


async def test_too_large_drops_the_whole_transaction(topics: TopicManager,
                                                     servicer: AppendServicer) -> None:
    servicer.held.max_bytes = 64 * MIB
    stream = _Stream(servicer)
    stream.setup(1)
    await stream.reply()
    for sequence in range(1, 6):  # the 5th block passes 16 MiB
        stream.block(1, sequence, bytes(4 * MIB - 1100), sequence - 1)  # under the block limit
    failed = await stream.reply()
    assert failed.request_id == 1 << 32 | 5
    assert failed.append_failed.code == grpc.StatusCode.RESOURCE_EXHAUSTED.value[0]
    assert failed.append_failed.error == "TransactionTooLargeError"
    assert "16 MiB" in failed.append_failed.message
    assert not failed.append_failed.retriable
    assert servicer.held.used == 0
    stream.block(1, 6, b"rest", 5)  # the rest of that transaction: dropped, unanswered
    await stream.settle()
    assert servicer.held.used == 0
    stream.block(1, 7, b"end", 6, end=True)  # its end: the same failure
    ended = await stream.reply()
    assert (ended.request_id, ended.append_failed.error) == (1 << 32 | 7,
                                                             "TransactionTooLargeError")
    stream.block(1, 8, block(9).data, 0, end=True)  # the next transaction is fine
    assert (await stream.reply()).data_appended.offset == 0
    await stream.close()
    assert (await topics.segment("t/0")).end_offset == 1


async def test_the_broker_wide_budget(servicer: AppendServicer) -> None:
    servicer.held.max_bytes = 600 * 1024
    first, second = _Stream(servicer), _Stream(servicer)
    first.setup(1, "a")
    second.setup(1, "b")
    await first.reply()
    await second.reply()
    first.block(1, 1, bytes(500 * 1024), 2, count=3)
    await first.settle()
    second.block(1, 1, bytes(200 * 1024), 0)
    failed = await second.reply()
    assert failed.append_failed.code == grpc.StatusCode.RESOURCE_EXHAUSTED.value[0]
    assert (failed.append_failed.error, failed.append_failed.retriable) == (
        "TransactionBufferFullError", True)
    second.block(1, 2, b"x", 1, end=True)
    assert (await second.reply()).append_failed.error == "TransactionBufferFullError"
    first.block(1, 2, b"y", 3, end=True)
    assert (await first.reply()).data_appended.event_count == 4
    second.block(1, 3, bytes(200 * 1024), 0)  # room again
    second.block(1, 4, b"x", 1, end=True)
    assert (await second.reply()).data_appended.event_count == 2
    await first.close()
    await second.close()
    assert servicer.held.used == 0


async def test_held_blocks_expire(servicer: AppendServicer, clock: FakeClock) -> None:
    stream = _Stream(servicer)
    stream.setup(1)
    await stream.reply()
    stream.block(1, 1, b"a", 0)
    await stream.settle()
    clock.advance_ms(120_001)
    stream.block(1, 2, b"b", 1)
    expired = await stream.reply()
    assert expired.append_failed.code == grpc.StatusCode.FAILED_PRECONDITION.value[0]
    assert expired.append_failed.error == "TransactionExpiredError"
    assert "transaction expired" in expired.append_failed.message
    stream.block(1, 3, b"c", 2, end=True)
    assert (await stream.reply()).append_failed.error == "TransactionExpiredError"
    stream.block(1, 4, b"a", 0)
    stream.block(1, 5, b"b", 1, end=True)  # sent again in time: written
    assert (await stream.reply()).data_appended.event_count == 2
    await stream.close()


async def test_held_blocks_of_a_dead_stream_or_a_rebound_flow_are_dropped(
        topics: TopicManager, servicer: AppendServicer) -> None:
    stream = _Stream(servicer)
    stream.setup(1)
    await stream.reply()
    stream.block(1, 1, b"a", 0)
    await stream.settle()
    stream.setup(1)  # a new setup starts afresh
    await stream.reply()
    assert servicer.held.used == 0
    stream.block(1, 2, b"a", 0)
    stream.block(1, 3, b"b", 1)
    await stream.settle()
    assert servicer.held.used > 0
    await stream.kill()
    assert servicer.held.used == 0
    assert servicer.held.runs == 0
    assert (await topics.segment("t/0")).end_offset == 0


async def test_numbers_that_go_backwards(servicer: AppendServicer) -> None:
    stream = _Stream(servicer)
    stream.setup(1)
    await stream.reply()
    stream.block(1, 1, block(0, 3).data, 2, count=3, end=True)  # 0..2
    await stream.reply()
    stream.block(1, 2, block(1, 2).data, 3, count=2, end=True)  # 2..3 overlaps
    invalid = (await stream.reply()).invalid_event_number
    assert invalid.expected_above == 2 and "overlap" in invalid.message
    stream.block(1, 3, block(2, 2).data, 4, count=2)  # 3..4, held
    stream.block(1, 4, block(3).data, 4, end=True)  # 4 again: does not follow
    invalid = (await stream.reply()).invalid_event_number
    assert invalid.expected_above == 4
    stream.block(1, 5, block(2).data, 3, end=True)
    assert (await stream.reply()).data_appended.offset == 3
    await stream.close()
