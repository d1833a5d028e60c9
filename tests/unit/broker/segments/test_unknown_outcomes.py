"""Segment record writes whose outcome is unknown: read back, never delete what a record names.

Issue 22, item 1: ``_start_ledger`` deleted the new ledger on any error of the
record's write, although a lost answer (``MetadataUnavailableError``) may mean
the write was applied, so the record named a deleted ledger and the segment's
events became unreadable. Each case here fails the write one way
(``tests.support.faulty_metadata``) and checks every event is still read back,
by this manager and by a fresh one loading the segment from its record.
"""

from __future__ import annotations

from typing import Any

import pytest

from broker.segments.names import segment_path
from broker.segments.records import SegmentRecord
from broker.segments.segment import LedgerSegment
from broker.system.snapshot_store import snapshot_store
from broker.topics.manager import TopicManager
from ledger.client.handle import LedgerHandle
from ledger.errors import MetadataUnavailableError, NoSuchLedgerError
from tests.support.faulty_metadata import Fault, FaultyMetadataStore
from tests.unit.broker.conftest import SMALL, BrokerEnv, block, read_all

pytestmark = pytest.mark.faults

RECORD = segment_path("t", 0)


def _manager(env: BrokerEnv, store: FaultyMetadataStore) -> TopicManager:
    return TopicManager(env.ledgers, store, txn_store_factory=snapshot_store, clock=env.clock)


async def _filled(topics: TopicManager, count: int) -> LedgerSegment:
    await topics.create_topic("t", 1, SMALL)
    segment = await topics.segment("t/0")
    for number in range(count):
        await segment.append([block(number, size=64)], "w", number)
    return segment


async def _recorded_ledgers(env: BrokerEnv) -> list[int]:
    node = await env.store.get(RECORD)
    return [entry.ledger_id for entry in SegmentRecord.from_bytes(node.data).ledgers]


async def _all_read_back(env: BrokerEnv, count: int) -> None:
    """Every event, by a fresh manager that loads the segment from its record."""
    for ledger_id in await _recorded_ledgers(env):
        await env.ledgers.read_metadata(ledger_id)  # NoSuchLedgerError: the bug
    fresh = _manager(env, FaultyMetadataStore(env.store))
    try:
        segment = await fresh.segment("t/0")
        blocks = await read_all(segment, 0)
        assert [b.data for b in blocks] == [block(i, size=64).data for i in range(count)]
    finally:
        await fresh.close()


async def test_lost_answer_of_a_rollover_keeps_the_new_ledger(env: BrokerEnv) -> None:
    store = FaultyMetadataStore(env.store)
    topics = _manager(env, store)
    segment = await _filled(topics, 5)
    fired = store.fail("set", RECORD.__eq__, Fault.LOST_ANSWER)
    await segment.roll_over()  # applied: the read-back finds our record and goes on
    assert fired == [RECORD]
    assert segment.usable
    new_ledger = segment.info().ledgers[-1].ledger_id
    assert (await _recorded_ledgers(env))[-1] == new_ledger
    for number in range(5, 10):  # appends go on in the new ledger
        await segment.append([block(number, size=64)], "w", number)
    await topics.close()
    await _all_read_back(env, 10)


async def test_write_refused_before_applied_deletes_the_unrecorded_ledger(
        env: BrokerEnv) -> None:
    store = FaultyMetadataStore(env.store)
    topics = _manager(env, store)
    segment = await _filled(topics, 5)
    before = await _recorded_ledgers(env)
    created: list[int] = []
    create = env.ledgers.create

    async def remembering(**kwargs: Any) -> LedgerHandle:
        handle = await create(**kwargs)
        created.append(handle.ledger_id)
        return handle

    env.ledgers.create = remembering  # type: ignore[method-assign]
    store.fail("set", RECORD.__eq__, Fault.BEFORE)
    with pytest.raises(MetadataUnavailableError):
        await segment.roll_over()
    env.ledgers.create = create  # type: ignore[method-assign]
    # The read-back shows the record at the version written on, not naming it: deleted.
    assert await _recorded_ledgers(env) == before
    with pytest.raises(NoSuchLedgerError):
        await env.ledgers.read_metadata(created[0])
    assert segment.usable  # nothing changed: the segment goes on
    for number in range(5, 10):
        await segment.append([block(number, size=64)], "w", number)
    await topics.close()
    await _all_read_back(env, 10)


async def test_lost_answer_and_unreadable_record_leaves_the_ledger_and_reloads(
        env: BrokerEnv) -> None:
    store = FaultyMetadataStore(env.store)
    topics = _manager(env, store)
    segment = await _filled(topics, 5)
    store.fail("set", RECORD.__eq__, Fault.LOST_ANSWER)
    store.fail_reads(2)  # the reconciling read and the one before any deletion
    with pytest.raises(MetadataUnavailableError):
        await segment.roll_over()
    # Applied: the record names the new ledger, which must still exist.
    named = (await _recorded_ledgers(env))[-1]
    await env.ledgers.read_metadata(named)
    assert not segment.usable  # outcome unknown: the segment failed, to be loaded again
    reloaded = await topics.segment("t/0")
    assert reloaded is not segment
    for number in range(5, 10):
        await reloaded.append([block(number, size=64)], "w", number)
    await topics.close()
    await _all_read_back(env, 10)


async def test_lost_answer_of_a_load_keeps_the_new_ledger(env: BrokerEnv) -> None:
    # Loading a segment recovers its chain and starts a ledger by the same write.
    first = _manager(env, FaultyMetadataStore(env.store))
    await _filled(first, 5)
    await first.close()
    store = FaultyMetadataStore(env.store)
    topics = _manager(env, store)
    fired = store.fail("set", RECORD.__eq__, Fault.LOST_ANSWER)
    segment = await topics.segment("t/0")
    assert fired == [RECORD]
    for number in range(5, 8):
        await segment.append([block(number, size=64)], "w", number)
    await topics.close()
    await _all_read_back(env, 8)


async def test_lost_answer_of_a_seal_is_a_seal(env: BrokerEnv) -> None:
    store = FaultyMetadataStore(env.store)
    topics = _manager(env, store)
    segment = await _filled(topics, 3)
    store.fail("set", RECORD.__eq__, Fault.LOST_ANSWER)
    info = await segment.seal()
    assert info.segment.end_offset == 3
    node = await env.store.get(RECORD)
    assert SegmentRecord.from_bytes(node.data).sealed
    await topics.close()
    await _all_read_back(env, 3)


async def test_seal_not_recorded_is_sealed_again_after_a_reload(env: BrokerEnv) -> None:
    # Sealed in memory but not in the record, the segment answered the next
    # seal "sealed already", and a reload took appends again.
    store = FaultyMetadataStore(env.store)
    topics = _manager(env, store)
    segment = await _filled(topics, 3)
    store.fail("set", RECORD.__eq__, Fault.BEFORE)
    with pytest.raises(MetadataUnavailableError):
        await segment.seal()
    again = await topics.segment("t/0")  # failed: loaded again from the record
    assert again is not segment
    info = await again.seal()
    assert info.segment.end_offset == 3
    assert SegmentRecord.from_bytes((await env.store.get(RECORD)).data).sealed
    await topics.close()
    await _all_read_back(env, 3)
