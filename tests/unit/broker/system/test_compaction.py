"""Compaction of a keyed system topic: covered records go, the latest per key stays.

Also with writes racing it, and when the broker crashes at any step of it.
"""

from __future__ import annotations

import asyncio

import pytest

from broker.segments.names import make_segment_name
from broker.system.compacted_topic import CompactedTopic
from broker.topics.manager import TopicManager
from ledger.client.ledger_client import LedgerClient
from tests.unit.broker.conftest import BrokerEnv

NAME = "__folio_kv"
KEYS = 20


class _Crash(Exception):
    """Stands for the broker dying at a compaction step."""


def _topic(topics: TopicManager) -> CompactedTopic:
    # Small batches: compaction copies in several entries.
    return CompactedTopic(topics, NAME, batch_bytes=300, maintain=False)


async def _fill(topic: CompactedTopic, rounds: int = 5) -> dict[str, bytes]:
    """Keys written ``rounds`` times each, every third one deleted at the end."""
    model: dict[str, bytes] = {}
    for round_ in range(rounds):
        for i in range(KEYS):
            value = f"value-{i}-{round_}".encode() * 3
            await topic.write(f"key-{i:02d}", value)
            model[f"key-{i:02d}"] = value
    for i in range(0, KEYS, 3):
        await topic.write(f"key-{i:02d}", None)
        del model[f"key-{i:02d}"]
    return model


async def _view(topic: CompactedTopic) -> dict[str, bytes]:
    return dict(await topic.read_prefix(""))


async def test_compaction_drops_covered_records(env: BrokerEnv) -> None:
    topics = env.manager()
    topic = _topic(topics)
    model = await _fill(topic)
    segment = await topics.segment(make_segment_name(NAME, 0))
    before_bytes = segment.info().length_bytes
    before = await topic.stats()
    result = await topic.compact()
    after = await topic.stats()
    assert result.copied == len(model)
    assert result.point == before.end_offset
    assert after.start_offset == result.start_offset == before.end_offset
    assert after.end_offset == before.end_offset + len(model)
    assert after.dead_bytes == 0
    assert after.live_bytes == before.live_bytes
    segment = await topics.segment(make_segment_name(NAME, 0))
    assert segment.info().length_bytes < before_bytes / 3
    assert len(segment.info().ledgers) == 1
    assert await _view(topic) == model
    # Compacting a compacted topic keeps it as it is, less the extra ledger.
    await topic.compact()
    assert await _view(topic) == model
    await env.restart()
    assert await _view(_topic(env.manager())) == model


async def test_compaction_of_an_empty_topic(topics: TopicManager) -> None:
    topic = _topic(topics)
    result = await topic.compact()
    assert (result.copied, result.start_offset) == (0, 0)
    await topic.write("a", b"1")
    await topic.write("a", None)
    result = await topic.compact()
    assert result.copied == 0
    assert await _view(topic) == {}
    assert (await topic.stats()).total_bytes == 0


async def test_writes_during_compaction_are_kept(topics: TopicManager) -> None:
    topic = _topic(topics)
    model = await _fill(topic)
    batches = 0

    async def write_between(step: str) -> None:
        nonlocal batches
        if step != "copied-batch":
            return
        batches += 1
        if batches != 1:
            return
        # After the first batch: one key copied already, one not yet, one
        # deleted before its copy, one new.
        for key, value in ((f"key-{1:02d}", b"new-1"), (f"key-{KEYS - 1:02d}", b"new-last"),
                           (f"key-{KEYS - 3:02d}", None), ("fresh", b"fresh")):
            await topic.write(key, value)
            if value is None:
                model.pop(key, None)
            else:
                model[key] = value

    await topic.compact(hook=write_between)
    assert batches > 2
    assert await _view(topic) == model
    await topic.compact()
    assert await _view(topic) == model


async def test_compaction_racing_concurrent_writers(env: BrokerEnv) -> None:
    topics = env.manager()
    topic = _topic(topics)
    model = await _fill(topic)

    async def writer(n: int) -> None:
        for round_ in range(15):
            key = f"key-{(n * 7 + round_) % KEYS:02d}"
            value = None if round_ % 5 == 4 else f"w{n}-{round_}".encode()
            await topic.write(key, value)
            if value is None:
                model.pop(key, None)
            else:
                model[key] = value
            await asyncio.sleep(0)

    await asyncio.gather(topic.compact(), writer(0), writer(1), topic.compact(), writer(2))
    assert await _view(topic) == model
    await env.restart()
    assert await _view(_topic(env.manager())) == model


@pytest.mark.parametrize(("crash_at", "nth"), [
    ("rolled", 1), ("copied-batch", 1), ("copied-batch", 3), ("copied", 1), ("truncated", 1),
])
async def test_crash_mid_compaction_keeps_the_view(env: BrokerEnv, crash_at: str,
                                                   nth: int) -> None:
    first = env.manager()
    topic = _topic(first)
    model = await _fill(topic)
    seen = 0

    async def crash(step: str) -> None:
        nonlocal seen
        if step == crash_at:
            seen += 1
            if seen == nth:
                raise _Crash(step)

    with pytest.raises(_Crash):
        await topic.compact(hook=crash)
    env.abandon(first)
    second = env.manager()  # same stack, as after a crash that left it running
    again = _topic(second)
    assert await _view(again) == model
    await again.write("after", b"crash")
    model["after"] = b"crash"
    await again.compact()
    assert await _view(again) == model
    await env.restart()
    assert await _view(_topic(env.manager())) == model


async def test_crash_between_truncation_and_ledger_deletes(
        env: BrokerEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    first = env.manager()
    topic = _topic(first)
    model = await _fill(topic)
    segment = await first.segment(make_segment_name(NAME, 0))
    old_ledgers = [ledger.ledger_id for ledger in segment.info().ledgers]

    async def die(self: LedgerClient, ledger_id: int) -> None:
        raise _Crash(ledger_id)

    monkeypatch.setattr(LedgerClient, "delete", die)
    with pytest.raises(_Crash):
        await topic.compact()
    monkeypatch.undo()
    env.abandon(first)
    second = env.manager()
    again = _topic(second)
    stats = await again.stats()
    assert stats.start_offset > 0  # the record moved: the old ledgers are orphans
    assert await _view(again) == model
    segment = await second.segment(make_segment_name(NAME, 0))
    assert not {ledger.ledger_id for ledger in segment.info().ledgers} & set(old_ledgers)
