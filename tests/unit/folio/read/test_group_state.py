"""The reader group rules (folio.read._group_state) as pure functions of the state."""

from __future__ import annotations

import pytest

from folio.errors import InvalidArgumentError, ReaderIdInUseError, ReaderNotInGroupError
from folio.read._group_state import GroupState, Successor


def _state(segments: int = 4) -> GroupState:
    return GroupState.starting_at("g", ["t"], {f"t/{i}": 0 for i in range(segments)})


def test_segments_spread_evenly_whatever_the_order_of_joins() -> None:
    state = _state(4)
    for reader in ("a", "b", "c"):
        state.add_reader(reader)
    for reader in ("a", "b", "c"):
        state.acquire(reader)
    assert sorted(len(h) for h in state.readers.values()) == [1, 1, 2]
    assert state.unassigned == {}


def test_rebalance_gives_back_the_excess_at_a_checkpoint() -> None:
    state = _state(6)
    state.add_reader("a")
    assert len(state.acquire("a")) == 6
    state.add_reader("b")
    assert state.acquire("b") == {}  # nothing free: rebalancing waits for a checkpoint
    state.initiate_checkpoint("cp")
    released = state.pass_checkpoint("a", "cp", {f"t/{i}": 10 + i for i in range(6)})
    assert len(released) == 3 and all(offset >= 10 for offset in released.values())
    assert state.completed == []  # b has not passed yet
    state.pass_checkpoint("b", "cp", {})
    (checkpoint,) = state.completed
    assert dict(checkpoint.positions) == {f"t/{i}": 10 + i for i in range(6)}
    assert state.acquire("b") == released


def test_a_merge_waits_for_every_predecessor() -> None:
    state = _state(2)
    state.add_reader("a")
    state.acquire("a")
    merged = Successor("t/2", 0, ("t/0", "t/1"))
    assert state.finish_segment("a", "t/0", [merged]) == []
    assert state.future["t/2"].waiting_for == ("t/1",)
    assert state.finish_segment("a", "t/1", [merged]) == ["t/2"]
    assert state.unassigned == {"t/2": 0} and state.future == {}


def test_a_successor_of_a_split_learnt_late_waits_only_for_what_is_unread() -> None:
    # t/0 split into t/2, t/3 while t/1 stayed; then t/1 and t/3 merged into t/4.
    state = _state(2)
    state.add_reader("a")
    state.acquire("a")
    state.finish_segment("a", "t/1", [Successor("t/4", 0, ("t/1", "t/3"))])
    assert state.future["t/4"].waiting_for == ("t/3",)
    ready = state.finish_segment("a", "t/0", [Successor("t/2", 0, ("t/0",)),
                                              Successor("t/3", 0, ("t/0",))])
    assert sorted(ready) == ["t/2", "t/3"] and "t/4" in state.future
    state.acquire("a")
    assert state.finish_segment("a", "t/3", [Successor("t/4", 0, ("t/1", "t/3"))]) == ["t/4"]


def test_an_offline_reader_stands_in_for_itself_in_a_pending_checkpoint() -> None:
    state = _state(2)
    state.add_reader("a")
    state.add_reader("b")
    state.acquire("a")
    state.acquire("b")
    state.initiate_checkpoint("cp")
    freed = state.remove_reader("b", dict.fromkeys(state.readers["b"], 7))
    assert set(freed.values()) == {7}
    state.pass_checkpoint("a", "cp", dict.fromkeys(state.readers["a"], 3))
    (checkpoint,) = state.completed
    assert sorted(checkpoint.positions.values()) == [3, 7]
    with pytest.raises(ReaderNotInGroupError):
        state.held("b")


def test_encoding_round_trips_and_refusals() -> None:
    state = _state(3)
    state.add_reader("a")
    state.acquire("a")
    state.initiate_checkpoint("x")
    assert GroupState.from_proto("g", state.to_proto()) == state
    assert state.copy() == state and state.copy() is not state
    with pytest.raises(InvalidArgumentError, match="already a member"):
        state.add_reader("a")
    with pytest.raises(InvalidArgumentError, match="already has a checkpoint"):
        state.initiate_checkpoint("x")
    message = state.to_proto()
    message.format = 2
    with pytest.raises(InvalidArgumentError, match="format 2"):
        GroupState.from_proto("g", message)


def test_a_joining_reader_gets_its_share_without_a_checkpoint() -> None:
    state = _state(6)
    state.add_reader("a")
    state.acquire("a")
    state.add_reader("b")
    positions = {f"t/{i}": 20 + i for i in range(6)}
    released = state.rebalance("a", positions)
    # Exactly the newcomer's shortfall, at where a has read to.
    assert released == {s: positions[s] for s in released} and len(released) == 3
    assert state.rebalance("a", positions) == {}  # the free ones cover the shortfall now
    assert state.acquire("b") == released
    assert sorted(len(h) for h in state.readers.values()) == [3, 3]
    assert state.rebalance("a", positions) == {} and state.rebalance("b", {}) == {}


def test_rebalance_frees_only_the_uncovered_shortfall_across_readers() -> None:
    state = _state(4)
    for reader in ("a", "b"):
        state.add_reader(reader)
    for reader in ("a", "b"):
        state.acquire(reader)
    state.add_reader("c")
    state.add_reader("d")
    # 4 segments, 4 readers: c and d are short of 1 each; a and b hold 2 each.
    first = state.rebalance("a", {})
    assert len(first) == 1
    second = state.rebalance("b", {})
    assert len(second) == 1
    assert state.rebalance("a", {}) == {} and state.rebalance("b", {}) == {}
    state.acquire("c")
    state.acquire("d")
    assert sorted(len(h) for h in state.readers.values()) == [1, 1, 1, 1]


def test_balanced_readers_never_release() -> None:
    state = _state(5)
    for reader in ("a", "b", "c"):
        state.add_reader(reader)
    for reader in ("a", "b", "c"):
        state.acquire(reader)
    for reader in ("a", "b", "c"):
        assert state.rebalance(reader, {}) == {}


def test_sessions_tell_a_taken_over_id_from_its_dead_owner() -> None:
    state = _state(2)
    state.add_reader("a", "s1")
    with pytest.raises(ReaderIdInUseError, match="already a member"):
        state.add_reader("a", "s2")
    state.check_session("a", "s1")
    state.remove_reader("a", None)  # declared offline
    state.add_reader("a", "s2")  # the id taken by a new reader
    with pytest.raises(ReaderNotInGroupError, match="taken by a new reader"):
        state.check_session("a", "s1")
    again = GroupState.from_proto("g", state.to_proto())
    assert again.sessions == {"a": "s2"}


def test_session_timeout_survives_the_round_trip() -> None:
    state = GroupState.starting_at("g", ["t"], {"t/0": 0}, session_timeout_ms=2500)
    assert GroupState.from_proto("g", state.to_proto()).session_timeout_ms == 2500
