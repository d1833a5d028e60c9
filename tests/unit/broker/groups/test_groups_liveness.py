"""The broker's liveness rule: heartbeats keep members, silence past the timeout frees them.

``declare_offline`` on protobuf states, and ``GroupLiveness`` on a real
``ReaderGroupStore`` (RocksDB metadata in a tmp dir) with an injected clock.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from broker.errors import InvalidArgumentError, ReaderGroupNotFoundError
from broker.groups.backlog import backlog_of
from broker.groups.heartbeats import HeartbeatBoard
from broker.groups.liveness import GroupLiveness, declare_offline
from broker.groups.store import ReaderGroupStore, session_timeout_ms
from folio.api.v1 import groups_pb2
from ledger.metadata.rocksdb_store import RocksDBMetadataStore


class Clock:
    """Monotonic seconds, moved by the test."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now

    def advance_ms(self, ms: int) -> None:
        self.now += ms / 1000


def _offsets(pairs: dict[str, int]) -> list[groups_pb2.SegmentOffset]:
    return [groups_pb2.SegmentOffset(segment=s, offset=o) for s, o in sorted(pairs.items())]


def _state(readers: dict[str, dict[str, int]], unassigned: dict[str, int] | None = None,
           timeout_ms: int = 2000) -> groups_pb2.ReaderGroupState:
    return groups_pb2.ReaderGroupState(
        format=1, topics=["t"], session_timeout_ms=timeout_ms,
        readers=[groups_pb2.ReaderAssignment(reader_id=r, segments=_offsets(held),
                                             session_id=f"s-{r}")
                 for r, held in sorted(readers.items())],
        unassigned=_offsets(unassigned or {}))


def _held(state: groups_pb2.ReaderGroupState) -> dict[str, dict[str, int]]:
    return {r.reader_id: {s.segment: s.offset for s in r.segments} for r in state.readers}


def _free(state: groups_pb2.ReaderGroupState) -> dict[str, int]:
    return {s.segment: s.offset for s in state.unassigned}


def test_offline_frees_at_the_later_of_recorded_and_reported_offsets() -> None:
    state = _state({"a": {"t/0": 10, "t/1": 50}, "b": {"t/2": 5}}, {"t/3": 7})
    freed = declare_offline("g", state, "a", {"t/0": 40, "t/1": 20, "t/9": 99})
    # t/0: reported beyond the recorded 10; t/1: an older report never moves it back;
    # t/9: not held by it, ignored.
    assert freed == {"t/0": 40, "t/1": 50}
    assert _held(state) == {"b": {"t/2": 5}}
    assert _free(state) == {"t/0": 40, "t/1": 50, "t/3": 7}


def test_offline_of_a_non_member_changes_nothing() -> None:
    state = _state({"a": {"t/0": 1}})
    before = state.SerializeToString()
    assert declare_offline("g", state, "zz", {}) is None
    assert state.SerializeToString() == before


def test_offline_member_passes_the_checkpoints_it_held_up() -> None:
    state = _state({"a": {"t/0": 10}, "b": {"t/1": 3}})
    state.pending_checkpoints.extend([
        groups_pb2.PendingCheckpoint(name="only-a", waiting_readers=["a"],
                                     positions=_offsets({"t/1": 3})),
        groups_pb2.PendingCheckpoint(name="a-and-b", waiting_readers=["a", "b"]),
        groups_pb2.PendingCheckpoint(name="only-b", waiting_readers=["b"]),
    ])
    declare_offline("g", state, "a", {"t/0": 12})
    assert [p.name for p in state.pending_checkpoints] == ["a-and-b", "only-b"]
    assert list(state.pending_checkpoints[0].waiting_readers) == ["b"]
    assert {p.segment: p.offset for p in state.pending_checkpoints[0].positions} == {"t/0": 12}
    [done] = state.completed_checkpoints
    assert (done.group, done.name, list(done.topics)) == ("g", "only-a", ["t"])
    assert {p.segment: p.offset for p in done.positions} == {"t/0": 12, "t/1": 3}


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[ReaderGroupStore]:
    metadata = RocksDBMetadataStore(tmp_path / "metadata")
    try:
        yield ReaderGroupStore(metadata)
    finally:
        await metadata.close()


async def test_session_timeout_is_validated_and_defaults_to_10_s(
        store: ReaderGroupStore) -> None:
    for bad in (999, 1_800_001, -5):
        with pytest.raises(InvalidArgumentError, match="session_timeout_ms"):
            await store.create(f"g{bad}".replace("-", "m"), _state({}, timeout_ms=bad))
    record = await store.create("g", _state({}, timeout_ms=0))
    assert session_timeout_ms(record.state) == 10_000


async def test_silent_member_is_declared_offline_heartbeating_one_is_not(
        store: ReaderGroupStore) -> None:
    clock = Clock()
    liveness = GroupLiveness(store, clock=clock)
    await store.create("g-silent", _state({"a": {"t/0": 10}, "b": {"t/1": 20}}))
    assert await liveness.sweep() == []  # first sight: each gets a whole timeout
    assert await liveness.heartbeat("g-silent", "a", "s-a", {"t/0": 15, "t/1": 99}) == (True, 2000)
    clock.advance_ms(1500)
    assert await liveness.heartbeat("g-silent", "a", "s-a", {"t/0": 30}) == (True, 2000)
    clock.advance_ms(600)  # b: 2100 ms silent; a: 600 ms
    assert await liveness.sweep() == [("g-silent", "b")]
    record = await store.get("g-silent")
    assert _held(record.state) == {"a": {"t/0": 10}}
    assert _free(record.state) == {"t/1": 20}  # b never reported: its recorded offset
    clock.advance_ms(2001)
    assert await liveness.sweep() == [("g-silent", "a")]
    record = await store.get("g-silent")
    assert _held(record.state) == {}
    assert _free(record.state) == {"t/0": 30, "t/1": 20}  # a's last report
    assert await liveness.heartbeat("g-silent", "a", "s-a", {}) == (False, 2000)
    assert REGISTRY.get_sample_value("folio_reader_group_members_declared_offline_total",
                                     {"group": "g-silent"}) == 2


async def test_heartbeat_of_another_session_or_non_member_is_not_a_member(
        store: ReaderGroupStore) -> None:
    clock = Clock()
    liveness = GroupLiveness(store, clock=clock)
    await store.create("g", _state({"a": {"t/0": 1}}))
    assert await liveness.heartbeat("g", "a", "old-session", {}) == (False, 2000)
    assert await liveness.heartbeat("g", "nobody", "s", {}) == (False, 2000)
    with pytest.raises(ReaderGroupNotFoundError):
        await liveness.heartbeat("missing", "a", "s-a", {})


async def test_a_new_session_under_the_same_id_starts_its_own_clock(
        store: ReaderGroupStore) -> None:
    clock = Clock()
    liveness = GroupLiveness(store, clock=clock)
    record = await store.create("g", _state({"a": {"t/0": 1}}))
    await liveness.heartbeat("g", "a", "s-a", {"t/0": 500})
    clock.advance_ms(1900)
    # The id was declared offline elsewhere and taken by a new reader (new session).
    state = _state({"a": {"t/0": 1}})
    state.readers[0].session_id = "new"
    await store.update("g", record.version, state)
    clock.advance_ms(200)
    assert await liveness.sweep() == []  # the new session was first seen just now
    _, [member] = await liveness.members("g")
    assert (member.session_id, member.heartbeated, member.reported) == ("new", False, {})
    clock.advance_ms(2001)
    assert await liveness.sweep() == [("g", "a")]
    # The old session's report (500) is never used for the new session's segment.
    assert _free((await store.get("g")).state) == {"t/0": 1}


async def test_members_reports_silence_and_reported_offsets(store: ReaderGroupStore) -> None:
    clock = Clock()
    liveness = GroupLiveness(store, clock=clock)
    await store.create("g", _state({"a": {"t/0": 1}, "b": {}}))
    await liveness.heartbeat("g", "a", "s-a", {"t/0": 7})
    clock.advance_ms(300)
    timeout_ms, members = await liveness.members("g")
    assert timeout_ms == 2000
    by_id = {m.reader_id: m for m in members}
    assert (by_id["a"].silent_ms, by_id["a"].heartbeated, by_id["a"].reported) == \
        (300, True, {"t/0": 7})
    assert (by_id["b"].heartbeated, by_id["b"].reported) == (False, {})


async def test_deleted_group_is_forgotten(store: ReaderGroupStore) -> None:
    clock = Clock()
    liveness = GroupLiveness(store, clock=clock)
    await store.create("g", _state({"a": {}}))
    await liveness.sweep()
    await store.delete("g")
    clock.advance_ms(5000)
    assert await liveness.sweep() == []


async def test_a_sweep_that_loses_its_compare_and_set_tries_again_next_round(
        store: ReaderGroupStore, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    liveness = GroupLiveness(store, clock=clock)
    await store.create("g-race", _state({"a": {"t/0": 4}}))
    await liveness.sweep()
    clock.advance_ms(2100)
    real_update = store.update

    async def lose(name: str, expected_version: int,
                   state: groups_pb2.ReaderGroupState) -> object:
        await real_update(name, expected_version, _state({"a": {"t/0": 4}}))  # a client's
        return await real_update(name, expected_version, state)  # now stale: refused

    monkeypatch.setattr(store, "update", lose)
    assert await liveness.sweep() == []
    monkeypatch.setattr(store, "update", real_update)
    clock.advance_ms(300)  # one round later, not a whole timeout later
    assert await liveness.sweep() == [("g-race", "a")]


async def test_backlog_counts_from_the_reported_offsets(store: ReaderGroupStore) -> None:
    liveness = GroupLiveness(store, clock=Clock())
    record = await store.create("g-backlog", _state({"a": {"t/0": 10}, "b": {"t/1": 5}},
                                                    {"t/2": 1}))
    await liveness.heartbeat("g-backlog", "a", "s-a", {"t/0": 40})
    reported = liveness.reported("g-backlog", record.state)
    assert reported == {"t/0": 40}
    ends = {"t/0": 100, "t/1": 50, "t/2": 3}
    assert backlog_of(record.state, ends, reported) == 60 + 45 + 2
    assert backlog_of(record.state, ends) == 90 + 45 + 2


async def test_in_a_cluster_one_broker_sweeps_from_heartbeats_any_broker_received(
        tmp_path: Path) -> None:
    """Two brokers' liveness on one metadata store: heartbeats reach the one that does
    not sweep the group; the sweeper learns of them from the shared board."""
    metadata = RocksDBMetadataStore(tmp_path / "metadata")
    try:
        store = ReaderGroupStore(metadata)
        board = HeartbeatBoard(metadata)
        clock = Clock()
        sweeper = GroupLiveness(store, clock=clock)
        sweeper.share(board, lambda group: True)
        receiver = GroupLiveness(store, clock=clock)
        receiver.share(board, lambda group: False)
        await store.create("g", _state({"a": {"t/0": 10}, "b": {"t/1": 20}}))
        assert await sweeper.sweep() == []
        assert await receiver.heartbeat("g", "a", "s-a", {"t/0": 15}) == (True, 2000)
        clock.advance_ms(2100)  # a heartbeated (elsewhere), b did not
        assert await receiver.sweep() == []  # not its group to sweep
        assert await sweeper.sweep() == [("g", "b")]
        assert await receiver.heartbeat("g", "a", "s-a", {"t/0": 30}) == (True, 2000)
        clock.advance_ms(2100)
        assert await sweeper.sweep() == []  # a's node moved since the last look
        clock.advance_ms(2100)  # silent since
        assert await sweeper.sweep() == [("g", "a")]
        record = await store.get("g")
        assert _free(record.state) == {"t/0": 30, "t/1": 20}  # a's last report, via the board
        assert await board.read("g", "a") is None  # forgotten with the member
    finally:
        await metadata.close()
