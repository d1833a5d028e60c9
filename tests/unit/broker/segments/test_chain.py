"""LedgerChain alone: the record's compare-and-set, new ledgers and their unknown outcomes.

The chain runs on the real ledger stack of ``BrokerEnv`` (a bookie and the
RocksDB metadata store), with no segment around it; record writes fail
through ``tests.support.faulty_metadata`` at the seam.
"""

from __future__ import annotations

from typing import Any

import pytest

from broker.errors import NoSuchSegmentError, WrongHostError
from broker.segments.chain import LedgerChain
from broker.segments.life import Residence, SegmentLife
from broker.segments.names import make_segment_name, segment_path
from broker.segments.offset_index import LedgerSpan
from broker.segments.records import SegmentRecord, WriterState
from broker.segments.recovery import RecoveredChain
from ledger.errors import MetadataUnavailableError, NoNodeError, NoSuchLedgerError
from tests.support.faulty_metadata import Fault, FaultyMetadataStore
from tests.unit.broker.conftest import BrokerEnv

pytestmark = pytest.mark.faults

PATH = segment_path("t", 0)
WRITERS = {"w": WriterState(7, 1_000)}


class Parts:
    """A chain with its life, its store's fault seam and a count of wake-ups."""

    def __init__(self, env: BrokerEnv, store: FaultyMetadataStore, version: int) -> None:
        self.env = env
        self.store = store
        self.life = SegmentLife(make_segment_name("t", 0), sealed=False)
        self.wakes = 0
        recovered = RecoveredChain(SegmentRecord("t", 0), version, [], 0)
        self.chain = LedgerChain(env.ledgers, store, "t", 0, recovered, self.life,
                                 self._wake, lambda: 5_000)

    def _wake(self) -> None:
        self.wakes += 1

    def record_for(self, spans: list[LedgerSpan]) -> SegmentRecord:
        return self.chain.record_of(spans, start_offset=0, end_offset=0, sealed=False,
                                    writers=WRITERS)

    async def recorded(self) -> list[int]:
        node = await self.env.store.get(PATH)
        return [entry.ledger_id for entry in SegmentRecord.from_bytes(node.data).ledgers]

    async def exists(self, ledger_id: int) -> bool:
        try:
            await self.env.ledgers.read_metadata(ledger_id)
        except NoSuchLedgerError:
            return False
        return True


async def _parts(env: BrokerEnv) -> Parts:
    await env.store.create(PATH, SegmentRecord("t", 0).to_bytes(), make_parents=True)
    version = (await env.store.get(PATH)).version
    return Parts(env, FaultyMetadataStore(env.store), version)


async def test_a_new_ledger_is_recorded_with_the_snapshot_then_the_replaced_ones_deleted(
        env: BrokerEnv) -> None:
    parts = await _parts(env)
    chain = parts.chain
    await chain.start_ledger([], 0, parts.record_for)
    first = chain.spans[0]
    assert first.writing and first.created_ms == 5_000 and first.first_offset == 0
    assert chain.firsts == [0]
    assert await parts.recorded() == [first.ledger_id]
    assert chain.snapshot == WRITERS and chain.snapshot_ledger == first.ledger_id
    version = chain.record_version
    await chain.start_ledger(list(chain.spans), 0, lambda spans: parts.record_for(spans[1:]))
    second = chain.spans[-1]
    assert chain.record_version > version
    assert await parts.recorded() == [second.ledger_id]
    assert not await parts.exists(first.ledger_id)
    assert parts.life.usable


async def test_a_record_without_a_snapshot_keeps_the_one_it_has(env: BrokerEnv) -> None:
    parts = await _parts(env)
    await parts.chain.start_ledger([], 0, parts.record_for)
    record = parts.chain.record_of(parts.chain.spans, start_offset=3, end_offset=9,
                                   sealed=True, writers=None)
    assert record.writers == WRITERS
    assert record.writers_ledger == parts.chain.spans[0].ledger_id
    assert (record.start_offset, record.sealed, record.end_offset) == (3, True, 9)
    open_record = parts.chain.record_of([], start_offset=0, end_offset=9, sealed=False,
                                        writers={})
    assert open_record.end_offset == -1 and open_record.writers_ledger == -1


async def test_a_record_someone_else_wrote_fails_the_chain_wrong_host(env: BrokerEnv) -> None:
    parts = await _parts(env)
    node = await env.store.get(PATH)
    await env.store.set(PATH, node.data, node.version)  # another broker's write
    with pytest.raises(WrongHostError):
        await parts.chain.start_ledger([], 0, parts.record_for)
    assert isinstance(parts.life.failure, WrongHostError)
    assert parts.chain.spans == []


async def test_a_record_found_gone_deletes_the_segment_and_wakes_its_readers(
        env: BrokerEnv) -> None:
    parts = await _parts(env)
    await env.store.delete(PATH)
    with pytest.raises(NoSuchSegmentError):
        await parts.chain.write_record(parts.record_for([]))
    assert parts.life.residence is Residence.DELETED
    assert parts.wakes == 1


async def test_a_lost_answer_of_an_applied_write_adopts_its_version(env: BrokerEnv) -> None:
    parts = await _parts(env)
    fired = parts.store.fail("set", PATH.__eq__, Fault.LOST_ANSWER)
    await parts.chain.start_ledger([], 0, parts.record_for)
    assert fired == [PATH]
    assert parts.chain.record_version == (await env.store.get(PATH)).version
    assert await parts.recorded() == [parts.chain.spans[0].ledger_id]
    assert parts.life.usable


async def test_a_write_refused_before_it_applied_deletes_the_unrecorded_ledger(
        env: BrokerEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    parts = await _parts(env)
    version = parts.chain.record_version
    parts.store.fail("set", PATH.__eq__, Fault.BEFORE)
    created: list[int] = []
    create = env.ledgers.create

    async def noting_create(**kwargs: Any) -> Any:
        handle = await create(**kwargs)
        created.append(handle.ledger_id)
        return handle

    monkeypatch.setattr(env.ledgers, "create", noting_create)
    with pytest.raises(MetadataUnavailableError):
        await parts.chain.start_ledger([], 0, parts.record_for)
    assert parts.chain.record_version == version and parts.chain.spans == []
    assert parts.life.usable  # not applied, and known not to be: the segment goes on
    assert len(created) == 1 and not await parts.exists(created[0])


async def test_an_unknown_outcome_keeps_the_new_ledger_and_fails_the_segment(
        env: BrokerEnv) -> None:
    parts = await _parts(env)
    parts.store.fail("set", PATH.__eq__, Fault.LOST_ANSWER)
    parts.store.fail_reads(2, PATH.__eq__)  # the read-back and the check both fail
    with pytest.raises(MetadataUnavailableError):
        await parts.chain.start_ledger([], 0, parts.record_for)
    assert isinstance(parts.life.failure, MetadataUnavailableError)
    named = await parts.recorded()  # the write was applied: the record names the ledger
    assert len(named) == 1 and await parts.exists(named[0])


async def test_deleting_the_record_twice_is_fine(env: BrokerEnv) -> None:
    parts = await _parts(env)
    await parts.chain.delete_record()
    await parts.chain.delete_record()
    with pytest.raises(NoNodeError):
        await env.store.get(PATH)
