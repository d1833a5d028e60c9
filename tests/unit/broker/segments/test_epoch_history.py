"""A segment's leader-epoch history: Kafka's rules, kept in the record by each owner's load.

``EpochHistory`` alone (assign, truncation from the start, the cap, Kafka's
``endOffsetFor``), then on real segments (RocksDB ledgers and metadata in a
temp dir): each load in a newer epoch adds that epoch at the recovered end in
the record, a reload in the same epoch or a load without one adds nothing,
truncation moves it with the start offset, a sealed segment is left as it is,
and a record write whose answer is lost (``FaultyMetadataStore``) is read
back and kept once.
"""

from __future__ import annotations

import pytest

from broker.segments.epoch_history import MAX_EPOCHS, UNDEFINED, EpochHistory
from broker.segments.names import segment_path
from broker.segments.records import SegmentRecord
from broker.system.snapshot_store import snapshot_store
from broker.topics.manager import TopicManager
from ledger.errors import MetadataUnavailableError
from tests.support.faulty_metadata import Fault, FaultyMetadataStore
from tests.unit.broker.conftest import SMALL, BrokerEnv, block

RECORD = segment_path("t", 0)


def test_assign_adds_only_newer_epochs() -> None:
    history = EpochHistory().assign(2, 0).assign(5, 10)
    assert history.entries == ((2, 0), (5, 10))
    assert history.assign(5, 20) is history  # the same ownership loading again
    assert history.assign(4, 20) is history
    assert history.assign(-1, 20) is history  # no epoch (a broker not owning it)
    assert history.latest == 5 and EpochHistory().latest == UNDEFINED
    # An epoch with nothing appended is replaced by the next (Kafka drops it too).
    assert history.assign(7, 10).entries == ((2, 0), (7, 10))


def test_the_oldest_go_beyond_the_cap() -> None:
    history = EpochHistory()
    for epoch in range(MAX_EPOCHS + 5):
        history = history.assign(epoch, epoch * 10)
    assert len(history.entries) == MAX_EPOCHS
    assert history.entries[0] == (5, 50) and history.latest == MAX_EPOCHS + 4
    # An epoch older than every entry: the oldest kept's start (at or after its end).
    assert history.end_offset_for(1, 10_000) == (1, 50)


def test_truncation_from_the_start_keeps_the_epoch_the_start_is_in() -> None:
    history = EpochHistory(((1, 0), (3, 10), (6, 25)))
    assert history.truncated(0) is history
    assert history.truncated(12).entries == ((3, 12), (6, 25))
    assert history.truncated(25).entries == ((6, 25),)
    assert history.truncated(40).entries == ((6, 40),)
    assert EpochHistory().truncated(40).entries == ()
    assert EpochHistory(((3, 12),)).truncated(5).entries == ((3, 12),)


@pytest.mark.parametrize(("requested", "expected"), [
    (3, (3, 25)),        # an epoch kept: the next epoch's start
    (1, (1, 10)),
    (4, (3, 25)),        # between two kept: the largest below, the next one's start
    (0, (0, 0)),         # below every kept epoch: the oldest kept's start
    (6, (6, 40)),        # the newest: the log end
    (7, (UNDEFINED, UNDEFINED)),    # above the newest
    (-1, (UNDEFINED, UNDEFINED)),
])
def test_end_offset_for_is_kafkas(requested: int, expected: tuple[int, int]) -> None:
    history = EpochHistory(((1, 0), (3, 10), (6, 25)))
    assert history.end_offset_for(requested, 40) == expected


def test_end_offset_for_with_no_history_is_undefined() -> None:
    assert EpochHistory().end_offset_for(0, 40) == (UNDEFINED, UNDEFINED)


def test_the_record_keeps_the_history_and_reads_records_without_one() -> None:
    record = SegmentRecord("t", 0, leader_epochs=EpochHistory(((2, 0), (5, 7))))
    assert SegmentRecord.from_bytes(record.to_bytes()).leader_epochs == record.leader_epochs
    plain = SegmentRecord("t", 0)
    assert b"leader_epochs" not in plain.to_bytes()  # an empty history writes no key
    assert SegmentRecord.from_bytes(plain.to_bytes()).leader_epochs == EpochHistory()
    assert EpochHistory.of([[5, 7], [2, 0]]).entries == ((2, 0), (5, 7))
    with pytest.raises(ValueError, match="negative"):
        EpochHistory.of([[-3, 0]])


def _manager(env: BrokerEnv, store: FaultyMetadataStore | None, epoch: int) -> TopicManager:
    return TopicManager(env.ledgers, store or FaultyMetadataStore(env.store),
                        txn_store_factory=snapshot_store, clock=env.clock,
                        leader_epoch_of=lambda _segment: epoch)


async def _stored(env: BrokerEnv) -> tuple[tuple[int, int], ...]:
    node = await env.store.get(RECORD)
    return SegmentRecord.from_bytes(node.data).leader_epochs.entries


async def _append(topics: TopicManager, first: int, count: int) -> None:
    segment = await topics.segment("t/0")
    for number in range(first, first + count):
        await segment.append([block(number, size=64)], "w", number)


async def test_each_ownership_starts_its_epoch_at_the_recovered_end(env: BrokerEnv) -> None:
    first = _manager(env, None, 2)
    await first.create_topic("t", 1, SMALL)
    await _append(first, 0, 3)
    await first.close()
    second = _manager(env, None, 5)
    await _append(second, 3, 4)
    assert await _stored(env) == ((2, 0), (5, 3))
    segment = await second.segment("t/0")
    assert segment.leader_epochs() == ((2, 0), (5, 3))
    await segment.roll_over()  # every record write carries it
    assert await _stored(env) == ((2, 0), (5, 3))
    await second.close()
    again = _manager(env, None, 5)  # the same ownership loading again: nothing added
    await _append(again, 7, 1)
    await again.close()
    elsewhere = _manager(env, None, -1)  # a broker not owning it: nothing added
    await elsewhere.segment("t/0")
    await elsewhere.close()
    assert await _stored(env) == ((2, 0), (5, 3))
    third = _manager(env, None, 9)
    segment = await third.segment("t/0")
    assert segment.leader_epochs() == ((2, 0), (5, 3), (9, 8))
    await third.close()


async def test_truncation_moves_the_history_with_the_start(env: BrokerEnv) -> None:
    first = _manager(env, None, 1)
    await first.create_topic("t", 1, SMALL)
    await _append(first, 0, 20)
    await first.close()
    second = _manager(env, None, 4)
    await _append(second, 20, 20)
    segment = await second.segment("t/0")
    target = next(ledger.first_offset for ledger in segment.info().ledgers
                  if ledger.first_offset > 20)
    info = await segment.truncate(target)
    assert info.segment.start_offset == target
    assert await _stored(env) == ((4, target),) == segment.leader_epochs()
    await second.close()


async def test_a_sealed_segment_adds_no_epoch(env: BrokerEnv) -> None:
    first = _manager(env, None, 1)
    await first.create_topic("t", 1, SMALL)
    await _append(first, 0, 2)
    await (await first.segment("t/0")).seal()
    await first.close()
    second = _manager(env, None, 3)
    assert (await second.segment("t/0")).leader_epochs() == ((1, 0),)
    await second.close()
    assert await _stored(env) == ((1, 0),)


async def test_a_lost_answer_of_the_epochs_write_is_read_back(env: BrokerEnv) -> None:
    first = _manager(env, None, 1)
    await first.create_topic("t", 1, SMALL)
    await _append(first, 0, 3)
    await first.close()
    store = FaultyMetadataStore(env.store)
    fired = store.fail("set", RECORD.__eq__, Fault.LOST_ANSWER)
    second = _manager(env, store, 2)
    await _append(second, 3, 2)  # the load's write landed; its answer was lost
    assert fired == [RECORD]
    assert await _stored(env) == ((1, 0), (2, 3))
    await second.close()


async def test_an_epochs_write_not_applied_fails_the_load_and_the_next_assigns_again(
        env: BrokerEnv) -> None:
    first = _manager(env, None, 1)
    await first.create_topic("t", 1, SMALL)
    await _append(first, 0, 3)
    await first.close()
    store = FaultyMetadataStore(env.store)
    store.fail("set", RECORD.__eq__, Fault.BEFORE)
    second = _manager(env, store, 2)
    with pytest.raises(MetadataUnavailableError):  # read back: not applied
        await second.segment("t/0")
    assert await _stored(env) == ((1, 0),)
    await _append(second, 3, 1)
    assert await _stored(env) == ((1, 0), (2, 3))
    await second.close()
