"""Finding entries: the in-memory index, read hints, and the binary search over headers."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from broker.api import TopicConfig
from broker.segments.offset_index import LedgerSpan, ReadHints
from ledger.client.handle import LedgerHandle
from tests.unit.broker.conftest import BrokerEnv, block


def test_span_index() -> None:
    span = LedgerSpan(ledger_id=1, first_offset=10, indexed_end=10)
    assert span.lookup(10) is None
    span.note_entry(0, 10, 13)
    span.note_entry(1, 13, 14)
    span.note_entry(5, 99, 100)  # not the next entry: ignored
    assert [span.lookup(offset) for offset in (10, 12, 13, 14)] == [0, 0, 1, None]


def test_hints_bounded() -> None:
    hints = ReadHints(capacity=2)
    hints.put(5, 1, 3)
    hints.put(9, 1, 4)
    assert hints.get(5, 1) == 3
    assert hints.get(5, 2) is None
    hints.put(12, 1, 6)  # drops 9, the least recently used
    assert (hints.get(9, 1), hints.get(5, 1), hints.get(12, 1)) == (None, 3, 6)


async def test_search_is_logarithmic_and_sequential_reads_do_not_search(
        env: BrokerEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    first = env.manager()
    await first.create_topic("t", 1, TopicConfig(ledger_rollover_bytes=1 << 20))
    segment = await first.segment("t/0")
    for i in range(256):
        await segment.append([block(i, events=2)], "w", 2 * i + 1)
    await env.restart()
    # Recovery scanned (and indexed) that ledger, the newest with entries;
    # one entry in the next ledger makes it the newest, so the big one is not.
    segment = await env.manager().segment("t/0")
    await segment.append([block(999)], "w", 999)
    await env.restart()
    segment = await env.manager().segment("t/0")

    reads: list[tuple[int, int]] = []
    original = LedgerHandle.read

    async def counting(self: LedgerHandle, first_entry_id: int,
                       last_entry_id: int) -> Sequence[bytes]:
        reads.append((first_entry_id, last_entry_id))
        return await original(self, first_entry_id, last_entry_id)

    monkeypatch.setattr(LedgerHandle, "read", counting)
    batch = await segment.read(301, 1)
    assert [(b.offset, b.data) for b in batch.blocks] == [(300, block(150, 2).data)]
    assert 2 <= len(reads) <= 10  # searched: log2(256) header reads + the read itself
    for offset in range(302, 320, 2):
        reads.clear()
        batch = await segment.read(offset, 1)
        assert batch.blocks[0].offset == offset
        assert len(reads) == 1
