"""Recovery: a segment loaded after a clean stop, after a crash, and under a new owner."""

from __future__ import annotations

import pytest

from broker.api import ReadBlock, TopicConfig
from broker.errors import WrongHostError
from broker.topics.manager import TopicManager
from ledger.api import LedgerState
from ledger.client.handle import LedgerHandle
from tests.unit.broker.conftest import BrokerEnv, block, read_all

ROLL = TopicConfig(ledger_rollover_bytes=1024)


async def _write(topics: TopicManager, appends: int, first: int = 0) -> list[ReadBlock]:
    segment = await topics.segment("t/0")
    written = []
    for i in range(first, first + appends):
        result = await segment.append([block(i, events=2, size=150)], "w", 2 * i + 1)
        written.append(ReadBlock(result.offset, 2, block(i, 2, 150).data))
    return written


async def _check_recovered(topics: TopicManager, written: list[ReadBlock]) -> None:
    segment = await topics.segment("t/0")
    end = len(written) * 2
    assert segment.end_offset == end
    for offset in range(end - 1, -1, -3):  # older ledgers have no index: binary search
        first = (await segment.read(offset, 1)).blocks[0]
        assert first == written[offset // 2]
    assert await read_all(segment, 0) == written
    assert await segment.last_event_number("w") == 2 * len(written) - 1
    duplicate = await segment.append([block(0)], "w", 2 * len(written) - 1)
    assert duplicate.duplicate
    result = await segment.append([block(99, 2)], "w", 2 * len(written) + 1)
    assert result.offset == end
    assert segment.end_offset == end + 2


async def test_clean_restart(env: BrokerEnv) -> None:
    first = env.manager()
    await first.create_topic("t", 1, ROLL)
    written = await _write(first, 30)
    await env.restart()  # closes `first` cleanly
    second = env.manager()
    await _check_recovered(second, written)
    info = (await second.segment("t/0")).info()
    assert sum(not ledger.closed for ledger in info.ledgers) == 1


async def test_restarts_without_appends_keep_no_empty_ledgers(env: BrokerEnv) -> None:
    first = env.manager()
    await first.create_topic("t", 1, ROLL)
    written = await _write(first, 3)
    for _ in range(3):
        await env.restart()
        ledgers = (await env.manager().segment("t/0")).info().ledgers
        assert len(ledgers) == 2  # the one with the events and a fresh one
    await env.restart()
    await _check_recovered(env.manager(), written)


async def test_crash_restart(env: BrokerEnv) -> None:
    first = env.manager()
    await first.create_topic("t", 1, ROLL)
    written = await _write(first, 25)
    last_ledger = (await first.segment("t/0")).info().ledgers[-1].ledger_id
    env.abandon(first)  # no close: its last ledger stays OPEN
    await env.restart()
    metadata, _ = await env.ledgers.read_metadata(last_ledger)
    assert metadata.state is LedgerState.OPEN
    second = env.manager()
    await _check_recovered(second, written)
    metadata, _ = await env.ledgers.read_metadata(last_ledger)
    assert metadata.state is LedgerState.CLOSED


async def test_crash_between_rollover_and_close(env: BrokerEnv,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    async def no_close(self: LedgerHandle) -> None:
        return None

    first = env.manager()
    await first.create_topic("t", 1, ROLL)
    monkeypatch.setattr(LedgerHandle, "close", no_close)
    written = await _write(first, 25)
    ledgers = (await first.segment("t/0")).info().ledgers
    assert len(ledgers) > 2
    env.abandon(first)
    monkeypatch.undo()
    for ledger in ledgers:
        assert (await env.ledgers.read_metadata(ledger.ledger_id))[0].state is LedgerState.OPEN
    second = env.manager()  # same stack: the crash left the bookie and store running
    await _check_recovered(second, written)


async def test_new_owner_fences_old(env: BrokerEnv) -> None:
    old = env.manager()
    await old.create_topic("t", 1, ROLL)
    written = await _write(old, 5)
    old_segment = await old.segment("t/0")
    new = env.manager()
    new_segment = await new.segment("t/0")
    assert new_segment.end_offset == 10
    with pytest.raises(WrongHostError) as raised:
        await old_segment.append([block(50)], "w", 50)
    assert raised.value.segment == "t/0"
    with pytest.raises(WrongHostError):
        await old_segment.append([block(51)], "w", 51)
    assert await old.segment("t/0") is old_segment  # not reloaded: that would fence `new`
    assert (await new_segment.append([block(5, 2, 150)], "w", 11)).offset == 10
    written.append(ReadBlock(10, 2, block(5, 2, 150).data))
    assert await read_all(new_segment, 0) == written
