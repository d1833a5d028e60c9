"""A plain (non-transactional) flow lands a prefix of its blocks too (``broker.appends.stream``).

The first block of a flow is refused with a retriable error (its segment's
ledger failed); a later block of the same flow, arriving once the segment
could take it again, must be refused with the same failure until the writer
sets up again. Landed, it would make ``AppendSetup.last_event_number`` cover
the refused block, which the SDK then counts as stored (found by the
rolling-restart cluster test, ``tests/cluster/test_rolling_restart.py``).
"""

from __future__ import annotations

import asyncio
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
from folio.api.v1.block import encode_block
from ledger.errors import InvalidArgumentError, NotEnoughBookiesError
from txnbuffer.api import TxnId

FLOW = 1 << 32


@dataclass
class _Segment:
    """Refuses the first append with ``failure``, takes every later one."""

    failure: Exception
    config: TopicConfig = field(default_factory=TopicConfig)
    written: list[int] = field(default_factory=list)  # last event numbers
    calls: int = 0

    async def last_event_number(self, writer_id: str) -> int:
        return max(self.written, default=-1)

    async def append(self, blocks: Sequence[Block], writer_id: str, last_event_number: int,
                     *, txn_id: TxnId | None = None) -> AppendResult:
        self.calls += 1
        if self.calls == 1:
            raise self.failure
        self.written.append(last_event_number)
        return AppendResult(0, sum(b.event_count for b in blocks), last_event_number)


@dataclass
class _Topics:
    segment: _Segment

    async def writable_segment(self, name: str, what: str) -> _Segment:
        return self.segment


def _block(sequence: int, last: int) -> BlockCommand:
    return BlockCommand(FLOW | sequence, encode_block([b"e%d" % last]), 1, last, True)


async def _run(segment: _Segment, setup_again: bool) -> list[Outcome]:
    """Setup, block 0; once it is answered, block 1; then (maybe) a new setup and both again."""
    answered = asyncio.Event()

    async def commands() -> AsyncIterator[Command]:
        yield SetupCommand(FLOW, "t/0", "writer", None)
        yield _block(1, 0)
        await answered.wait()  # block 1 comes once block 0 was refused
        yield _block(2, 1)
        if setup_again:
            yield SetupCommand(FLOW | 3, "t/0", "writer", None)
            yield _block(4, 0)
            yield _block(5, 1)

    topics: Any = _Topics(segment)
    stream = AppendEngine(topics, asyncio.Event(), HeldBudget())
    pump = asyncio.ensure_future(stream.pump(commands()))
    outcomes: list[Outcome] = []
    while (outcome := await asyncio.wait_for(stream.next_outcome(), 30)) is not None:
        outcomes.append(outcome)
        if len(outcomes) == 2:
            answered.set()
    assert await pump is False
    return outcomes


async def test_a_retriable_refusal_refuses_the_later_blocks_of_a_plain_flow() -> None:
    segment = _Segment(NotEnoughBookiesError("no bookie left to replace ['b1'] in ledger 3"))
    outcomes = await _run(segment, setup_again=True)
    assert isinstance(outcomes[0], SetupDone)
    first, second = outcomes[1:3]
    assert isinstance(first, Refused) and isinstance(second, Refused)
    assert second.error is first.error  # the same failure: one cause for the client
    # After a new setup the writer resends both, in order, and they land.
    assert isinstance(outcomes[3], SetupDone)
    assert [type(o) for o in outcomes[4:]] == [Appended, Appended]
    assert segment.written == [0, 1]


async def test_a_refusal_for_good_does_not_refuse_the_later_blocks() -> None:
    # The writer fails a block refused for good and goes on without a new setup.
    segment = _Segment(InvalidArgumentError("not retriable"))
    outcomes = await _run(segment, setup_again=False)
    assert isinstance(outcomes[1], Refused)
    assert isinstance(outcomes[2], Appended)
    assert segment.written == [1]
