"""TxnCoordinator on a TopicManager: transitions, timeouts, registration, log replay."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest

from broker.api import TopicConfig
from broker.errors import (
    InternalTopicError,
    InvalidArgumentError,
    TxnLabelClosedError,
    TxnNotFoundError,
    TxnStateError,
)
from broker.segments.transactions import check_txn_id
from broker.system.compacted_topic import CompactedTopic
from broker.topics.manager import TopicManager
from broker.txn.coordinator import (
    LOG_FORMAT_VERSION,
    MAX_TXN_LABEL_BYTES,
    TXN_LOG_TOPIC,
    TxnCoordinator,
    TxnState,
    check_transition,
)
from tests.support.wait import wait_for_async
from tests.unit.broker.conftest import BrokerEnv, block, read_all
from txnbuffer.api import TxnId
from txnbuffer.txn_ids import txn_id_from_hex, txn_id_to_bytes


def _id(raw: bytes) -> TxnId:
    """The TxnId of 16 wire bytes (the coordinator takes TxnIds; the servicers convert)."""
    return check_txn_id(raw)


def test_transition_table() -> None:
    check_transition("t", TxnState.OPEN, TxnState.COMMITTING)
    check_transition("t", TxnState.ABORTING, TxnState.TIMED_OUT)
    with pytest.raises(TxnStateError) as raised:
        check_transition("t", TxnState.ABORTED, TxnState.COMMITTING)
    assert (raised.value.expected, raised.value.actual) == ("OPEN", "ABORTED")
    with pytest.raises(TxnStateError):
        check_transition("t", TxnState.COMMITTED, TxnState.ABORTING)


async def _write(coordinator: TxnCoordinator, topics: TopicManager, txn: TxnId,
                 index: int) -> None:
    segment = await topics.segment("t/0")
    async with coordinator.writing(txn, "t/0"):
        await segment.append([block(index)], "", -1, txn_id=txn)


async def test_timeout_aborts_and_log_replays(env: BrokerEnv) -> None:
    topics = env.manager()
    await topics.create_topic("t", 1, TopicConfig())
    coordinator = TxnCoordinator(topics, clock=env.clock)
    await coordinator.start()
    late = await coordinator.begin(1000)
    kept = await coordinator.begin(60_000)
    await _write(coordinator, topics, late, 0)
    await _write(coordinator, topics, kept, 1)
    env.clock.advance_ms(1001)
    assert await coordinator.tick() == 1
    assert coordinator.status(late).state is TxnState.TIMED_OUT
    assert coordinator.status(kept).segments == ("t/0",)
    with pytest.raises(TxnStateError):
        await _write(coordinator, topics, late, 2)
    with pytest.raises(TxnNotFoundError):
        coordinator.status(_id(bytes(range(16))))
    await env.restart()
    topics = env.manager()
    again = TxnCoordinator(topics, clock=env.clock)
    await again.start()
    assert again.status(late).state is TxnState.TIMED_OUT
    assert again.status(kept).state is TxnState.OPEN
    await again.commit([kept])
    segment = await topics.segment("t/0")
    batch = await segment.read(0, 1 << 20)
    assert [b.data for b in batch.blocks] == [block(1).data]


async def test_finished_transactions_are_forgotten_after_their_retention(
    env: BrokerEnv,
) -> None:
    topics = env.manager()
    await topics.create_topic("t", 1, TopicConfig())
    coordinator = TxnCoordinator(topics, clock=env.clock, finished_retention_ms=10_000)
    await coordinator.start()
    done = await coordinator.begin(60_000)
    await _write(coordinator, topics, done, 0)
    await coordinator.commit([done])
    still_open = await coordinator.begin(600_000)
    env.clock.advance_ms(9_000)
    await coordinator.tick()
    assert coordinator.status(done).state is TxnState.COMMITTED
    env.clock.advance_ms(2_000)

    async def forgotten() -> bool:
        # Forgotten once its COMMITTED record (written after the answer) is durable.
        await coordinator.tick()
        try:
            coordinator.status(done)
        except TxnNotFoundError:
            return True
        return False

    await wait_for_async(forgotten, "the committed transaction forgotten", timeout_s=20)
    assert coordinator.status(still_open).state is TxnState.OPEN
    await env.restart()  # the log no longer holds it either
    again = TxnCoordinator(env.manager(), clock=env.clock, finished_retention_ms=10_000)
    await again.start()
    with pytest.raises(TxnNotFoundError):
        again.status(done)
    assert again.status(still_open).state is TxnState.OPEN


async def test_timer_aborts_at_the_deadline_without_a_maintenance_round(
    env: BrokerEnv,
) -> None:
    topics = env.manager()
    await topics.create_topic("t", 1, TopicConfig())
    coordinator = TxnCoordinator(topics)  # the real clock: the timer fires
    await coordinator.start()
    await topics.segment("t/0")  # loaded first: the 50 ms timer races the append, not a load
    short = await coordinator.begin(50)
    await _write(coordinator, topics, short, 0)
    kept = await coordinator.begin(600_000)
    segment = await topics.segment("t/0")
    # read_committed waits for the open transaction's fate: the timer's abort marker.
    assert await segment.wait_for_data(0, timeout_s=30)
    assert segment.committed_end == segment.end_offset
    await coordinator.close()  # waits out the abort the timer started
    assert coordinator.status(short).state is TxnState.TIMED_OUT
    assert coordinator.status(kept).state is TxnState.OPEN
    await coordinator.commit([kept])
    assert coordinator.status(kept).state is TxnState.COMMITTED


async def test_group_record_of_forgotten_transactions_is_cleared_on_start(
    env: BrokerEnv,
) -> None:
    topics = env.manager()
    txn_log = CompactedTopic(topics, TXN_LOG_TOPIC, maintain=False)
    gone = bytes(range(16)).hex()
    await txn_log.write("commit-" + gone, json.dumps(
        {"v": LOG_FORMAT_VERSION, "state": "COMMITTING", "txns": [gone]}).encode())
    coordinator = TxnCoordinator(topics, clock=env.clock)
    await coordinator.start()
    reloaded = CompactedTopic(topics, TXN_LOG_TOPIC, maintain=False)  # reads the segment anew
    assert await reloaded.get("commit-" + gone) is None
    with pytest.raises(TxnNotFoundError):
        coordinator.status(_id(bytes(range(16))))


@pytest.mark.parametrize("outcome", ["commit", "abort"])
async def test_a_transaction_open_across_a_seal_is_still_decided(
    env: BrokerEnv, outcome: str,
) -> None:
    """The seal stops data, not markers: read_committed waits, then sees the fate, then ends."""
    topics = env.manager()
    await topics.create_topic("t", 1, TopicConfig())
    coordinator = TxnCoordinator(topics, clock=env.clock)
    await coordinator.start()
    txn = await coordinator.begin(60_000)
    await _write(coordinator, topics, txn, 0)
    segment = await topics.segment("t/0")
    await segment.append([block(1)], "", -1)  # plain, after the open transaction
    await segment.seal()
    held = await segment.read(0, 1 << 20)
    assert held.blocks == [] and not held.end_of_segment  # held at max_read_position
    await coordinator.close()
    await env.restart()  # the seal and the open transaction survive
    topics = env.manager()
    coordinator = TxnCoordinator(topics, clock=env.clock)
    await coordinator.start()
    if outcome == "commit":
        await coordinator.commit([txn])
    else:
        await coordinator.abort(txn)
    # Its final record is written in the background: closing waits for it, as
    # a broker's stack stops the coordinator before the topics (else a retry
    # of that write outlives the test's event loop).
    await coordinator.close()
    for _ in range(2):  # and again after a restart
        segment = await topics.segment("t/0")
        assert segment.sealed
        shown = await read_all(segment, 0)
        want = [block(0).data, block(1).data] if outcome == "commit" else [block(1).data]
        assert [b.data for b in shown] == want
        assert (await segment.read(segment.end_offset, 1 << 20)).end_of_segment
        assert segment.end_offset == 2
        await env.restart()
        topics = env.manager()


async def test_a_label_survives_a_restart_and_a_record_without_one_has_none(
    env: BrokerEnv,
) -> None:
    topics = env.manager()
    await topics.create_topic("t", 1, TopicConfig())
    txn_log = CompactedTopic(topics, TXN_LOG_TOPIC, maintain=False)
    old = bytes(range(1, 17))  # logged by a broker that knew no labels
    await txn_log.write(old.hex(), json.dumps(
        {"v": LOG_FORMAT_VERSION, "state": "OPEN", "deadline_ms": 10**13, "segments": [],
         "finished_ms": -1}).encode())
    coordinator = TxnCoordinator(topics, clock=env.clock)
    await coordinator.start()
    labelled = await coordinator.begin(60_000, "job-1")
    await _write(coordinator, topics, labelled, 0)
    plain = await coordinator.begin(60_000)
    assert coordinator.status(labelled).label == "job-1"
    await env.restart()
    topics = env.manager()
    again = TxnCoordinator(topics, clock=env.clock)
    await again.start()
    assert again.status(labelled).label == "job-1"
    assert again.status(labelled).segments == ("t/0",)
    assert again.status(plain).label == ""
    assert again.status(_id(old)).label == ""
    assert await again.abort_labelled("job-1") == [labelled]
    assert again.status(labelled).state is TxnState.ABORTED
    assert again.status(_id(old)).state is again.status(plain).state is TxnState.OPEN


async def test_abort_labelled_aborts_only_the_open_ones_of_the_label_but_keep(
    env: BrokerEnv,
) -> None:
    topics = env.manager()
    await topics.create_topic("t", 1, TopicConfig())
    coordinator = TxnCoordinator(topics, clock=env.clock)
    await coordinator.start()
    job = [await coordinator.begin(60_000, "job") for _ in range(5)]
    other = await coordinator.begin(60_000, "other-job")
    plain = await coordinator.begin(60_000)
    for index, txn in enumerate([*job, other, plain]):
        await _write(coordinator, topics, txn, index)
    committed, aborted, kept, swept = job[0], job[1], job[2], job[3:]
    await coordinator.commit([committed])
    await coordinator.abort(aborted)
    result = await coordinator.abort_labelled("job", [committed, kept])
    assert sorted(result) == sorted(swept)
    for txn in swept:
        assert coordinator.status(txn).state is TxnState.ABORTED
    assert coordinator.status(committed).state is TxnState.COMMITTED
    assert coordinator.status(aborted).state is TxnState.ABORTED
    assert coordinator.status(kept).state is TxnState.OPEN
    assert coordinator.status(other).state is coordinator.status(plain).state is TxnState.OPEN
    assert await coordinator.abort_labelled("job", [committed, kept]) == []  # nothing left
    assert await coordinator.abort_labelled("nobody") == []
    # The swept ones' events never show; the kept one still commits.
    await coordinator.commit([kept, other, plain])
    shown = await read_all(await topics.segment("t/0"), 0)
    assert [b.data for b in shown] == [block(i).data for i in (0, 2, 5, 6)]


async def test_abort_labelled_races_with_a_commit_and_refuses_bad_arguments(
    env: BrokerEnv,
) -> None:
    topics = env.manager()
    await topics.create_topic("t", 1, TopicConfig())
    coordinator = TxnCoordinator(topics, clock=env.clock)
    await coordinator.start()
    racing, swept = [await coordinator.begin(60_000, "job") for _ in range(2)]
    for index, txn in enumerate((racing, swept)):
        await _write(coordinator, topics, txn, index)
    # The sweep picks both while OPEN; the commit (the next task to run) takes
    # `racing` before the sweep's abort of it starts: that abort is skipped.
    aborted, _ = await asyncio.gather(coordinator.abort_labelled("job"),
                                      coordinator.commit([racing]))
    assert aborted == [swept]
    assert coordinator.status(racing).state is TxnState.COMMITTED
    assert coordinator.status(swept).state is TxnState.ABORTED
    with pytest.raises(InvalidArgumentError, match="needs a label"):
        await coordinator.abort_labelled("")
    with pytest.raises(InvalidArgumentError, match="at most 256 bytes"):
        await coordinator.abort_labelled("x" * (MAX_TXN_LABEL_BYTES + 1))
    with pytest.raises(InvalidArgumentError, match="at most 256 bytes"):
        await coordinator.begin(60_000, "é" * (MAX_TXN_LABEL_BYTES // 2 + 1))
    with pytest.raises(InvalidArgumentError, match="16 bytes"):
        _id(b"short")  # a bad id in keep: refused where the wire bytes are decoded
    assert len(txn_id_to_bytes(await coordinator.begin(60_000, "x" * MAX_TXN_LABEL_BYTES))) == 16


async def test_forgotten_transactions_leave_their_label(env: BrokerEnv) -> None:
    topics = env.manager()
    await topics.create_topic("t", 1, TopicConfig())
    coordinator = TxnCoordinator(topics, clock=env.clock, finished_retention_ms=1_000)
    await coordinator.start()
    done = await coordinator.begin(60_000, "job")
    await coordinator.abort_labelled("job")
    env.clock.advance_ms(1_001)
    await coordinator.tick()
    await coordinator.tick()  # the first round dates records from before finished_ms
    with pytest.raises(TxnNotFoundError):
        coordinator.status(done)
    later = await coordinator.begin(60_000, "job")
    assert await coordinator.abort_labelled("job") == [later]


async def test_a_closed_label_refuses_later_transactions(env: BrokerEnv) -> None:
    topics = env.manager()
    await topics.create_topic("t", 1, TopicConfig())
    coordinator = TxnCoordinator(topics, clock=env.clock, finished_retention_ms=10_000)
    await coordinator.start()
    swept = await coordinator.begin(60_000, "job")
    assert await coordinator.abort_labelled("job", close=True) == [swept]
    with pytest.raises(TxnLabelClosedError, match="'job' is closed"):
        await coordinator.begin(60_000, "job")
    # A begin whose log write was under way when the label closed is aborted and refused.
    late = asyncio.ensure_future(coordinator.begin(60_000, "job-2"))
    closing = asyncio.ensure_future(coordinator.abort_labelled("job-2", close=True))
    with pytest.raises(TxnLabelClosedError):
        await late
    assert await closing == []
    assert "open" not in coordinator.count_by_state()  # the late one was aborted
    assert await coordinator.abort_labelled("other") == []  # not closed: begins still work
    assert await coordinator.begin(60_000, "other")
    env.clock.advance_ms(10_001)  # closed labels are forgotten with finished transactions
    await coordinator.tick()
    assert await coordinator.begin(60_000, "job")


async def test_unreadable_log_records_are_skipped_on_start(
    env: BrokerEnv, caplog: pytest.LogCaptureFixture,
) -> None:
    topics = env.manager()
    await topics.create_topic("t", 1, TopicConfig())
    txn_log = CompactedTopic(topics, TXN_LOG_TOPIC, maintain=False)
    good, bad, group = bytes(range(1, 17)), bytes(range(2, 18)).hex(), bytes(range(3, 19)).hex()
    await txn_log.write(good.hex(), json.dumps({
        "v": LOG_FORMAT_VERSION, "state": "OPEN", "deadline_ms": 2**53,
        "segments": ["t/0", "_txnlog/0"], "finished_ms": -1, "label": ""}).encode())
    await txn_log.write(bad, b"{not json")
    await txn_log.write("commit-" + group, json.dumps({"v": LOG_FORMAT_VERSION}).encode())
    await txn_log.write("not-hex", json.dumps({
        "v": LOG_FORMAT_VERSION, "state": "OPEN", "deadline_ms": 0, "segments": []}).encode())
    coordinator = TxnCoordinator(topics, clock=env.clock)
    with caplog.at_level(logging.ERROR):
        await coordinator.start()
    try:
        for key in (bad, "commit-" + group, "not-hex"):
            assert f"skipped the unreadable record of key {key!r} at offset" in caplog.text
        assert "named system segments ['_txnlog/0']; they are left out" in caplog.text
        assert coordinator.status(_id(good)).segments == ("t/0",)
        with pytest.raises(TxnNotFoundError):
            coordinator.status(txn_id_from_hex(bad))
        await coordinator.abort(_id(good))  # markers go to t/0 only
        assert coordinator.status(_id(good)).state is TxnState.ABORTED
        assert coordinator.status(await coordinator.begin(1000)).state is TxnState.OPEN
    finally:
        await coordinator.close()


async def test_a_transaction_never_registers_a_system_segment(env: BrokerEnv) -> None:
    topics = env.manager()
    coordinator = TxnCoordinator(topics, clock=env.clock)
    await coordinator.start()
    try:
        txn_id = await coordinator.begin(10_000)
        with pytest.raises(InternalTopicError, match="'_txnlog' is internal to the broker"):
            async with coordinator.writing(txn_id, f"{TXN_LOG_TOPIC}/0"):
                pass
        assert coordinator.status(txn_id).segments == ()
        await coordinator.commit([txn_id])  # nothing in flight was left behind
    finally:
        await coordinator.close()
