"""SegmentRollover alone: when to roll, the switch, and appends kept in order around it."""

from __future__ import annotations

import asyncio

import pytest

from broker.api import AppendResult, TopicConfig
from broker.errors import SegmentSealedError
from broker.segments.entry import EntryKind
from broker.segments.life import SealStage
from broker.segments.offset_index import LedgerSpan
from ledger.errors import NotEnoughBookiesError
from tests.unit.broker.conftest import BrokerEnv, block
from tests.unit.broker.segments.parts_kit import SegmentParts, wired

SMALL = TopicConfig(ledger_rollover_bytes=4096, ledger_rollover_ms=60_000)


async def _fill(parts: SegmentParts) -> int:
    """Appends until the open ledger is due to roll; how many."""
    number = 0
    while not parts.rollover.should_roll(parts.now_ms()):
        submitted = parts.pipeline.submit(parts.chain.spans[-1], [block(number, size=256)],
                                          "fill", number, 1)
        assert isinstance(submitted, tuple)
        number += 1
    await parts.pipeline.drain()
    return number


async def test_a_ledger_rolls_once_big_enough_or_old_enough_with_an_entry(
        env: BrokerEnv) -> None:
    parts = await wired(env, SMALL)
    rollover = parts.rollover
    assert not rollover.should_roll(parts.now_ms() + 10 * 60_000)  # empty: never
    assert not rollover.must_wait()
    parts.pipeline.submit(parts.chain.spans[-1], [block(0)], "w", 0, 1)
    assert not rollover.should_roll(parts.now_ms())
    assert rollover.should_roll(parts.now_ms() + 60_000)  # old enough
    assert await _fill(parts) > 1  # big enough
    assert rollover.must_wait()
    parts.config = TopicConfig(ledger_rollover_bytes=1 << 30)  # the configuration in force
    assert not rollover.should_roll(parts.now_ms())
    parts.life.advance_seal(SealStage.SEALING)
    assert not rollover.should_roll(parts.now_ms() + 60_000)


async def test_roll_over_starts_a_ledger_at_the_end_and_closes_the_old_one(
        env: BrokerEnv) -> None:
    parts = await wired(env, SMALL)
    first = parts.chain.spans[-1]
    assert await parts.rollover.roll_over() == 0  # empty: kept
    assert parts.chain.spans == [first]
    count = await _fill(parts)
    assert await parts.rollover.roll_over() == count
    old, new = parts.chain.spans
    assert old is first and not old.writing and old.length_bytes > 0
    assert new.writing and new.first_offset == count
    assert [entry.ledger_id for entry in (await parts.recorded()).ledgers] == [
        old.ledger_id, new.ledger_id]
    await parts.rollover.tick(parts.now_ms() + 60_000)  # the new one is empty
    assert len(parts.chain.spans) == 2


async def test_an_append_due_a_rollover_lands_in_the_new_ledger(env: BrokerEnv) -> None:
    parts = await wired(env, SMALL)
    count = await _fill(parts)
    submitted = await parts.rollover.submit_in_turn([block(count)], "w", count, 1,
                                                    EntryKind.DATA, None, False)
    assert not isinstance(submitted, AppendResult)
    base, future = submitted
    await future
    assert base == count and len(parts.chain.spans) == 2
    assert parts.chain.spans[-1].bases[0] == count


async def test_appends_queued_behind_a_failed_rollover_fail_with_it(
        env: BrokerEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    parts = await wired(env, SMALL)
    count = await _fill(parts)
    start_ledger = parts.recorder.start_ledger
    failures = [NotEnoughBookiesError("a ledger of ensemble size 3 needs 3 bookies, 2 available")]

    async def failing_once(replacing: list[LedgerSpan]) -> None:
        if failures:
            await asyncio.sleep(0)  # the next append queues meanwhile
            raise failures.pop()
        await start_ledger(replacing)

    monkeypatch.setattr(parts.recorder, "start_ledger", failing_once)
    calls = [parts.rollover.submit_in_turn([block(n)], "w", n, 1, EntryKind.DATA, None, False)
             for n in (count, count + 1)]
    results = await asyncio.gather(*calls, return_exceptions=True)
    assert [type(r) for r in results] == [NotEnoughBookiesError] * 2
    assert parts.pipeline.end_offset == count and len(parts.chain.spans) == 1
    assert parts.chain.spans[0].writing  # the old ledger takes appends again
    submitted = await parts.rollover.submit_in_turn([block(count)], "w", count, 1,
                                                    EntryKind.DATA, None, False)
    assert isinstance(submitted, tuple) and submitted[0] == count
    await submitted[1]
    assert len(parts.chain.spans) == 2


async def test_an_append_that_waited_is_refused_once_the_segment_is_sealed(
        env: BrokerEnv) -> None:
    parts = await wired(env, SMALL)
    await _fill(parts)
    async with parts.chain.lock:  # a seal under way holds the chain
        waiting = asyncio.create_task(parts.rollover.submit_in_turn(
            [block(99)], "v", 0, 1, EntryKind.DATA, None, False))
        await asyncio.sleep(0)
        parts.life.advance_seal(SealStage.SEALING)
    with pytest.raises(SegmentSealedError):
        await waiting
