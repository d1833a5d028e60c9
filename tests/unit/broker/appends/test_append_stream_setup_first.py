"""A flow's blocks land only after its setup has read the writer's last event number.

The commands of a stream are read and started without waiting for each
other, so a setup and the blocks right behind it run at once. The setup's
answer (``AppendSetup.last_event_number``) tells the writer what landed
before this stream; had a block of the same stream landed first, the
answer would count it too, and the writer would take its own unanswered
block for one written earlier. Found by ``make test`` on a busy machine
(``tests/integration/test_broker_api.py``: the setup answered 2, not -1).
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
    SetupCommand,
    SetupDone,
)
from folio.api.v1.block import encode_block
from txnbuffer.api import TxnId

FLOW = 1 << 32


@dataclass
class _SlowSetupSegment:
    """Its last-event-number read waits for ``gate``; appends land at once."""

    config: TopicConfig = field(default_factory=TopicConfig)
    written: list[int] = field(default_factory=list)
    asked: asyncio.Event = field(default_factory=asyncio.Event)
    gate: asyncio.Event = field(default_factory=asyncio.Event)

    async def last_event_number(self, writer_id: str) -> int:
        self.asked.set()
        await self.gate.wait()
        return max(self.written, default=-1)

    async def append(self, blocks: Sequence[Block], writer_id: str, last_event_number: int,
                     *, txn_id: TxnId | None = None) -> AppendResult:
        self.written.append(last_event_number)
        return AppendResult(0, sum(b.event_count for b in blocks), last_event_number)


@dataclass
class _Topics:
    segment: _SlowSetupSegment

    async def writable_segment(self, name: str, what: str) -> _SlowSetupSegment:
        return self.segment


async def test_the_setup_answers_what_landed_before_the_stream_not_its_own_blocks() -> None:
    segment = _SlowSetupSegment()
    all_read = asyncio.Event()

    async def commands() -> AsyncIterator[Command]:
        yield SetupCommand(FLOW, "t/0", "writer", None)
        for sequence, last in ((1, 0), (2, 1)):
            yield BlockCommand(FLOW | sequence, encode_block([b"e"]), 1, last, True)
        all_read.set()

    topics: Any = _Topics(segment)
    stream = AppendEngine(topics, asyncio.Event(), HeldBudget())
    pump = asyncio.ensure_future(stream.pump(commands()))
    await asyncio.wait_for(segment.asked.wait(), 30)
    await asyncio.wait_for(all_read.wait(), 30)
    for _ in range(20):  # turns of the loop in which the blocks could land (no timing)
        await asyncio.sleep(0)
    assert segment.written == []  # nothing lands while the setup is being answered
    segment.gate.set()
    outcomes: list[Outcome] = []
    while (outcome := await asyncio.wait_for(stream.next_outcome(), 30)) is not None:
        outcomes.append(outcome)
    assert await pump is False
    setup, *blocks = outcomes
    assert isinstance(setup, SetupDone) and setup.last_event_number == -1
    assert [type(b) for b in blocks] == [Appended, Appended]
    assert segment.written == [0, 1]
