"""SegmentRecorder alone: the record is made of the parts' fields, snapshots only when asked."""

from __future__ import annotations

from broker.segments.life import SealStage
from broker.segments.records import WriterState
from tests.unit.broker.conftest import BrokerEnv, block
from tests.unit.broker.segments.parts_kit import wired

OLD_MS = 1_000  # long before BrokerEnv's clock: idle past any expiry


async def test_a_new_ledger_is_recorded_from_the_end_with_a_fresh_writer_snapshot(
        env: BrokerEnv) -> None:
    parts = await wired(env, writers={"idle": WriterState(3, OLD_MS)})
    first = parts.chain.spans[-1]
    record = await parts.recorded()
    assert [entry.ledger_id for entry in record.ledgers] == [first.ledger_id]
    assert "idle" not in record.writers  # expired before the snapshot
    assert record.writers_ledger == first.ledger_id
    submitted = parts.pipeline.submit(first, [block(0, events=4)], "w", 3, 4)
    assert isinstance(submitted, tuple)
    await parts.pipeline.drain()
    first.writing = False
    await parts.recorder.start_ledger([])
    second = parts.chain.spans[-1]
    assert second.first_offset == 4 == parts.pipeline.end_offset
    record = await parts.recorded()
    assert [entry.ledger_id for entry in record.ledgers] == [first.ledger_id, second.ledger_id]
    assert record.writers["w"].last_event_number == 3
    assert record.writers_ledger == second.ledger_id
    assert record.end_offset == -1 and not record.sealed


async def test_a_record_without_a_snapshot_keeps_the_one_it_has(env: BrokerEnv) -> None:
    parts = await wired(env)
    span = parts.chain.spans[-1]
    parts.pipeline.submit(span, [block(0)], "late", 0, 1)
    await parts.pipeline.drain()
    await parts.recorder.write()
    record = await parts.recorded()
    assert "late" not in record.writers and record.writers_ledger == span.ledger_id
    await parts.recorder.write(snapshot=True)
    assert (await parts.recorded()).writers["late"].last_event_number == 0


async def test_the_start_comes_from_the_chain_and_the_seal_from_the_life(
        env: BrokerEnv) -> None:
    parts = await wired(env)
    parts.pipeline.submit(parts.chain.spans[-1], [block(0, events=5)], "w", 4, 5)
    await parts.pipeline.drain()
    record = parts.recorder.record_of(parts.chain.spans, start=2)
    assert (record.start_offset, record.sealed, record.end_offset) == (2, False, -1)
    parts.chain.set_spans(parts.chain.spans, 3)
    parts.life.advance_seal(SealStage.SEALING)
    record = parts.recorder.record_of(parts.chain.spans)
    assert (record.start_offset, record.sealed, record.end_offset) == (3, True, 5)
