"""AppendPipeline alone: call order, the end moving on confirmation, duplicates, failures.

The pipeline writes to a real ledger of ``BrokerEnv`` (an in-process bookie),
with no segment around it; a failure is a real fence (the ledger opened with
recovery, as a new owner does).
"""

from __future__ import annotations

import asyncio

import pytest

from broker.errors import (
    EventTooLargeError,
    InvalidArgumentError,
    InvalidEventNumberError,
    WrongHostError,
)
from broker.segments.entry import decode_entry_header
from broker.segments.life import SegmentLife
from broker.segments.offset_index import LedgerSpan
from broker.segments.pipeline import AppendPipeline, PendingEntry
from broker.segments.writers import WriterTable
from ledger.errors import LedgerError
from tests.unit.broker.conftest import MAX_ENTRY_BYTES, BrokerEnv, block


class Parts:
    """A pipeline on a fresh ledger, with its life and what it reported."""

    def __init__(self, env: BrokerEnv, span: LedgerSpan, end_offset: int = 10) -> None:
        self.env = env
        self.span = span
        self.life = SegmentLife("t/0", sealed=False)
        self.durable: list[tuple[int, int]] = []  # (base offset, entry id)
        self.wakes = 0
        self.pipeline = AppendPipeline("t/0", end_offset, WriterTable({}), MAX_ENTRY_BYTES,
                                       self.life, self._wake, lambda: 7_000, self._durable)

    def _wake(self) -> None:
        self.wakes += 1

    def _durable(self, entry: PendingEntry, entry_id: int) -> None:
        assert self.pipeline.end_offset == entry.base_offset + entry.event_count
        self.durable.append((entry.base_offset, entry_id))

    def submit(self, last: int, writer: str = "w", events: int = 1,
               ) -> tuple[int, asyncio.Future[int]]:
        """Events numbered up to ``last`` from ``writer``, in one block."""
        submitted = self.pipeline.submit(self.span, [block(last, events)], writer,
                                         last, events)
        assert isinstance(submitted, tuple)
        return submitted


async def _parts(env: BrokerEnv) -> Parts:
    handle = await env.ledgers.create()
    span = LedgerSpan(handle.ledger_id, 10, created_ms=0, handle=handle, writing=True,
                      indexed_end=10)
    return Parts(env, span)


async def test_entries_take_offsets_in_call_order_and_the_end_moves_on_confirmation(
        env: BrokerEnv) -> None:
    parts = await _parts(env)
    pipeline = parts.pipeline
    first, first_done = parts.submit(2, events=3)  # numbers 0 to 2
    second, second_done = parts.submit(1, writer="v", events=2)
    assert (first, second) == (10, 13)
    assert pipeline.end_offset == 10 and not pipeline.idle  # nothing confirmed yet
    await pipeline.drain()
    assert pipeline.idle and pipeline.end_offset == 15
    assert parts.durable == [(10, 0), (13, 1)]
    assert (await first_done, await second_done) == (0, 1)
    assert parts.wakes >= 1
    assert parts.span.last_entry_id == 1 and parts.span.last_entry_ms == 7_000
    assert list(parts.span.bases) == [10, 13]
    handle = parts.span.handle
    assert handle is not None
    [data] = await handle.read(1, 1)
    entry = decode_entry_header(data)
    assert (entry.base_offset, entry.writer_id, entry.last_event_number) == (13, "v", 1)
    assert pipeline.writers.last_event_number("w") == 2


async def test_a_duplicate_is_answered_with_its_first_offset_after_the_first_copy_lands(
        env: BrokerEnv) -> None:
    parts = await _parts(env)
    parts.submit(0)
    duplicate = parts.pipeline.submit(parts.span, [block(0)], "w", 0, 1)
    assert not isinstance(duplicate, tuple)
    assert duplicate.duplicate and duplicate.offset == 10
    await parts.pipeline.settle()  # the first copy is durable before the answer
    assert parts.pipeline.idle and parts.pipeline.end_offset == 11


async def test_a_fenced_ledger_fails_the_segment_wrong_host_and_every_later_submit(
        env: BrokerEnv) -> None:
    parts = await _parts(env)
    parts.submit(0)
    await parts.pipeline.drain()
    await env.ledgers.open(parts.span.ledger_id, recovery=True)  # a new owner fences it
    _, future = parts.submit(1)
    with pytest.raises(LedgerError):
        await future
    with pytest.raises(WrongHostError):
        await parts.pipeline.drain()
    assert isinstance(parts.life.failure, WrongHostError)
    assert parts.pipeline.end_offset == 11  # the failed entry never became readable
    assert parts.durable == [(10, 0)]
    with pytest.raises(WrongHostError):
        await parts.pipeline.settle()


@pytest.mark.parametrize(("blocks", "writer", "last", "error"), [
    ([], "w", 0, InvalidEventNumberError),
    ([block(0)], "w", -2, InvalidEventNumberError),
    ([block(0)], "w" * 300, 0, InvalidArgumentError),
    ([block(0, events=0)], "w", 0, InvalidEventNumberError),
])
async def test_bad_appends_are_refused_before_anything_is_submitted(
        env: BrokerEnv, blocks: list[object], writer: str, last: int,
        error: type[Exception]) -> None:
    parts = await _parts(env)
    with pytest.raises(error):
        parts.pipeline.check_blocks(blocks, writer, last)  # type: ignore[arg-type]
    assert parts.pipeline.idle and not parts.span.bases


async def test_a_block_over_the_entry_limit_is_refused_and_takes_no_offset(
        env: BrokerEnv) -> None:
    parts = await _parts(env)
    with pytest.raises(EventTooLargeError):
        parts.pipeline.submit(parts.span, [block(0, size=MAX_ENTRY_BYTES)], "w", 0, 1)
    offset, _ = parts.submit(1)
    assert offset == 10
    await parts.pipeline.drain()
