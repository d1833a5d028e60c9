"""The record-state machine of a share partition (``broker.kafka.share_groups.records``),
the simple assignor and the share sessions: pure, no broker."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from broker.kafka.share_groups.config import ShareConfig
from broker.kafka.share_groups.membership import ShareGroups, ShareMember, assign
from broker.kafka.share_groups.partitions import SharePartition, SharePartitions
from broker.kafka.share_groups.records import (
    AckType,
    RecordState,
    RecordStateError,
    Run,
    ShareRecords,
)
from broker.kafka.share_groups.sessions import ShareSessions
from broker.kafka.share_groups.store import ShareStore
from tests.support.wait import wait_for_async


def _runs(records: ShareRecords) -> list[tuple[int, int, str, int, str | None]]:
    return [(r.first, r.last, r.state.name, r.delivery_count, r.member_id)
            for r in records.runs]


def test_a_block_is_one_run_and_acknowledgements_split_it() -> None:
    records = ShareRecords(10)
    records.add(10, 19, "a", 5.0)
    assert _runs(records) == [(10, 19, "ACQUIRED", 1, "a")]
    records.acknowledge("a", 12, 13, AckType.RELEASE, 5)
    records.acknowledge("a", 14, 19, AckType.ACCEPT, 5)
    assert _runs(records) == [(10, 11, "ACQUIRED", 1, "a"), (12, 13, "AVAILABLE", 1, None),
                              (14, 19, "ACKNOWLEDGED", 1, None)]
    records.acknowledge("a", 10, 11, AckType.REJECT, 5)
    assert records.start == 12  # past the archived head
    assert _runs(records) == [(12, 13, "AVAILABLE", 1, None), (14, 19, "ACKNOWLEDGED", 1, None)]


def test_only_the_holder_acknowledges_and_nothing_changes_on_a_refusal() -> None:
    records = ShareRecords(0)
    records.add(0, 4, "a", 5.0)
    records.add(5, 9, "b", 5.0)
    with pytest.raises(RecordStateError):
        records.acknowledge("a", 3, 6, AckType.ACCEPT, 5)
    with pytest.raises(RecordStateError):
        records.acknowledge("a", 8, 12, AckType.ACCEPT, 5)  # past the end
    assert [(r.first, r.last, r.state) for r in records.runs] == [
        (0, 4, RecordState.ACQUIRED), (5, 9, RecordState.ACQUIRED)]


def test_gaps_are_archived_and_the_limit_archives_released_records() -> None:
    records = ShareRecords(0)
    records.add(3, 4, "a", 1.0)  # 0-2 left out by the read path (aborted data)
    assert _runs(records) == [(3, 4, "ACQUIRED", 1, "a")] and records.start == 3
    assert records.release(2, now=1.0)  # the lock expired
    [run] = records.available()
    records.acquire(run, "b", 9.0)
    assert records.release(2, member_id="b")  # delivered twice: the limit
    assert records.runs == [] and records.start == records.end == 5


def test_loaded_runs_and_a_truncated_log() -> None:
    records = ShareRecords(0, [Run(0, 4, RecordState.AVAILABLE, 2),
                               Run(5, 9, RecordState.ARCHIVED)])
    assert records.end == 10
    records.move_start(3)
    assert _runs(records)[0] == (3, 4, "AVAILABLE", 2, None)


def test_the_simple_assignor_shares_partitions_when_members_outnumber_them() -> None:
    members = [ShareMember(name, 1, "", "", None, ("t",)) for name in "abc"]
    assert assign(members, {"t": 1}) == {"a": {"t": (0,)}, "b": {"t": (0,)}, "c": {"t": (0,)}}
    assert assign(members, {"t": 4}) == {"a": {"t": (0, 3)}, "b": {"t": (1,)}, "c": {"t": (2,)}}
    assert assign(members[:1], {"t": 0}) == {"a": {}}


def test_share_session_epochs() -> None:
    sessions = ShareSessions()
    assert sessions.advance("g", "m", 1, (), (), may_open=True)[0] is \
        ErrorCode.share_session_not_found
    assert sessions.advance("g", "m", 0, (), (), may_open=False)[0] is \
        ErrorCode.invalid_share_session_epoch
    code, session = sessions.advance("g", "m", 0, [("t", 0)], (), may_open=True)
    assert code is ErrorCode.none and session is not None and session.epoch == 1
    assert sessions.advance("g", "m", 2, (), (), may_open=True)[0] is \
        ErrorCode.invalid_share_session_epoch
    code, session = sessions.advance("g", "m", 1, [("t", 1)], [("t", 0)], may_open=True)
    assert session is not None and session.partitions == {("t", 1)} and session.epoch == 2
    assert sessions.advance("g", "m", -1, (), (), may_open=False)[1] is session
    assert sessions.advance("g", "m", 2, (), (), may_open=True)[0] is \
        ErrorCode.share_session_not_found


async def test_a_silent_member_is_removed_and_its_records_released() -> None:
    gone: list[tuple[str, str, bool]] = []

    async def partitions(topic: str) -> int:
        return 2

    config = ShareConfig(session_timeout_ms=50)
    groups = ShareGroups(partitions, config, lambda _group: config,
                         lambda group, member, left: gone.append((group, member, left)),
                         lambda _group: False)
    first = await groups.heartbeat("g", "a", 0, "c", "h", None, ("t",))
    assert first.assignment == {"t": (0, 1)} and first.member_epoch == 1
    second = await groups.heartbeat("g", "b", 0, "c", "h", None, ("t",))
    assert second.assignment == {"t": (1,)} and second.member_epoch == 2
    again = await groups.heartbeat("g", "a", 1, "c", "h", None, None)
    assert (again.member_epoch, again.assignment) == (2, {"t": (0,)})
    await wait_for_async(lambda: _true(bool(gone)), "a session timed out")
    assert sorted(gone)[0][2] is False  # timed out, not left: released at once
    groups.close()


async def _true(value: bool) -> bool:
    return value


async def test_a_full_share_partition_reads_no_more_until_acknowledged() -> None:
    """With ``max_in_flight`` records in flight a waiting fetch must not wait for new
    data (there is some past the end: it would wake at once, again and again)."""
    config = ShareConfig(max_in_flight=10)
    partitions = SharePartitions(ShareStore.__new__(ShareStore), lambda _group: config)
    part = SharePartition("g", "t", 0, ShareRecords(0))
    part.records.add(0, 9, "a", 1e9)
    assert not partitions.may_read_more(part)
    part.records.acknowledge("a", 0, 4, AckType.ACCEPT, 5)
    assert partitions.may_read_more(part)


async def test_a_topic_that_grows_is_assigned_at_the_next_refresh() -> None:
    counts = {"t": 1}
    reads: list[str] = []

    async def partitions(topic: str) -> int:
        reads.append(topic)
        return counts[topic]

    config = ShareConfig(metadata_refresh_ms=3_600_000)
    groups = ShareGroups(partitions, config, lambda _group: config,
                         lambda *_gone: None, lambda _group: False)
    joined = await groups.heartbeat("g", "a", 0, "c", "h", None, ("t",))
    counts["t"] = 3
    steady = await groups.heartbeat("g", "a", joined.member_epoch, "c", "h", None, None)
    assert (steady.assignment, len(reads)) == (None, 1)  # not looked at again yet
    group = groups.group("g")
    assert group is not None
    group.counts_read_at -= 3_600  # the refresh interval has passed
    grown = await groups.heartbeat("g", "a", joined.member_epoch, "c", "h", None, None)
    assert grown.assignment == {"t": (0, 1, 2)} and grown.member_epoch == 2
    groups.close()


def test_renew_moves_only_the_lock_and_a_split_takes_a_runs_head() -> None:
    records = ShareRecords(0)
    records.add(0, 9, "a", 5.0)
    records.acknowledge("a", 2, 3, AckType.RENEW, 5, deadline=50.0)  # KIP-1222
    assert [(r.first, r.last, r.state.name, r.delivery_count, r.deadline)
            for r in records.runs] == [(0, 1, "ACQUIRED", 1, 5.0), (2, 3, "ACQUIRED", 1, 50.0),
                                       (4, 9, "ACQUIRED", 1, 5.0)]
    assert records.release(5, now=10.0)  # the renewed lock outlives the others
    assert _runs(records) == [(0, 1, "AVAILABLE", 1, None), (2, 3, "ACQUIRED", 1, "a"),
                              (4, 9, "AVAILABLE", 1, None)]
    with pytest.raises(RecordStateError):  # not acquired (any more): refused
        records.acknowledge("a", 0, 1, AckType.RENEW, 5, deadline=60.0)
    records.split_at(6)  # record-limit mode takes 4-5 only
    head = records.available()[1]
    records.acquire(head, "b", 70.0)
    assert _runs(records)[2:] == [(4, 5, "ACQUIRED", 2, "b"), (6, 9, "AVAILABLE", 1, None)]
