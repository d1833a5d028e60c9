"""A transactional flow lands a prefix of its blocks (``broker.appends.stream``).

Two pipelined blocks of one transactional flow: the first waits for the
transaction's log record naming the segment and fails there (as when its log
write shared a group with a cancelled call); the second, queued behind it,
must be refused with the same failure and not written. Written, it would make
``AppendSetup.last_event_number`` after a reconnect cover the missing first
block, and the client would count it as landed (the fault test
``tests/faults/test_txn_full_faults.py`` lost 20 events of a committed
transaction that way).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from broker.api import AppendResult, Block, TopicConfig
from broker.appends.held import HeldBudget
from broker.appends.stream import (
    Appended,
    AppendEngine,
    BlockCommand,
    Command,
    Outcome,
    Refused,
    SetupCommand,
    SetupDone,
)
from broker.errors import BrokerShuttingDownError
from folio.api.v1.block import encode_block
from txnbuffer.api import TxnId

TXN: TxnId = (7, 9)
FLOW = 1 << 32


@dataclass
class _Segment:
    config: TopicConfig = field(default_factory=TopicConfig)
    written: list[int] = field(default_factory=list)  # last event numbers

    async def last_event_number(self, writer_id: str) -> int:
        return -1

    async def append(self, blocks: Sequence[Block], writer_id: str, last_event_number: int,
                     *, txn_id: TxnId | None = None) -> AppendResult:
        assert txn_id == TXN
        self.written.append(last_event_number)
        return AppendResult(0, sum(b.event_count for b in blocks), last_event_number)


@dataclass
class _Topics:
    segment: _Segment

    async def writable_segment(self, name: str, what: str) -> _Segment:
        return self.segment


class _Coordinator:
    """Registration of the first block waits on ``fail_first``, then fails."""

    def __init__(self) -> None:
        self.lock = asyncio.Lock()  # FIFO, as the coordinator's per-segment lock
        self.entered = 0
        self.fail_first = asyncio.Event()
        self.second_waits = asyncio.Event()

    @contextlib.asynccontextmanager
    async def writing(self, txn_id: TxnId, segment: str,
                      loaded: object = None) -> AsyncIterator[None]:
        self.entered += 1
        first = self.entered == 1
        if not first:
            self.second_waits.set()
        async with self.lock:
            if first:
                await self.fail_first.wait()
                raise BrokerShuttingDownError("write to _txnlog/0 was cancelled")
        yield


def _block(sequence: int, count: int, last: int) -> BlockCommand:
    payloads = [b"e%d" % n for n in range(count)]
    return BlockCommand(FLOW | sequence, encode_block(payloads), count, last, True)


async def _commands(coordinator: _Coordinator) -> AsyncIterator[Command]:
    yield SetupCommand(FLOW, "t/0", "writer", TXN)
    yield _block(1, 20, 19)
    yield _block(2, 3, 22)
    await coordinator.second_waits.wait()  # block 2 queued behind block 1's registration
    coordinator.fail_first.set()


async def test_a_failed_block_refuses_the_later_blocks_of_its_flow() -> None:
    segment = _Segment()
    coordinator = _Coordinator()
    topics: Any = _Topics(segment)
    stream = AppendEngine(topics, asyncio.Event(), HeldBudget(), coordinator=coordinator)
    pump = asyncio.ensure_future(stream.pump(_commands(coordinator)))
    outcomes: list[Outcome] = []
    while (outcome := await asyncio.wait_for(stream.next_outcome(), 30)) is not None:
        outcomes.append(outcome)
    assert await pump is False
    assert isinstance(outcomes[0], SetupDone)
    first, second = outcomes[1:]
    assert isinstance(first, Refused) and isinstance(second, Refused)
    assert isinstance(first.error, BrokerShuttingDownError)
    assert second.error is first.error  # the same failure, so the client sees one cause
    assert segment.written == []  # nothing landed after the missing block


async def test_blocks_after_a_new_setup_are_written_again() -> None:
    segment = _Segment()
    coordinator = _Coordinator()
    coordinator.fail_first.set()

    async def commands() -> AsyncIterator[Command]:
        yield SetupCommand(FLOW, "t/0", "writer", TXN)
        yield _block(1, 20, 19)  # fails
        yield _block(2, 3, 22)   # refused: same flow
        yield SetupCommand(FLOW | 3, "t/0", "writer", TXN)  # starts afresh
        yield _block(4, 20, 19)

    topics: Any = _Topics(segment)
    stream = AppendEngine(topics, asyncio.Event(), HeldBudget(), coordinator=coordinator)
    pump = asyncio.ensure_future(stream.pump(commands()))
    outcomes: list[Outcome] = []
    while (outcome := await asyncio.wait_for(stream.next_outcome(), 30)) is not None:
        outcomes.append(outcome)
    await pump
    kinds = [type(outcome).__name__ for outcome in outcomes]
    assert kinds == ["SetupDone", "Refused", "Refused", "SetupDone", "Appended"]
    assert isinstance(outcomes[-1], Appended)
    assert segment.written == [19]
