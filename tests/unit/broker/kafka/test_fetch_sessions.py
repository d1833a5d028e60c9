"""The fetch session cache (KIP-227): full and incremental requests, forgotten partitions,
answers without the unchanged partitions, epoch and id errors, the bound and eviction."""

from __future__ import annotations

from kio.schema.errors import ErrorCode
from prometheus_client import REGISTRY

from broker.kafka.fetch_sessions import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    FetchSessionCache,
    PartitionKey,
    PartitionState,
    Wanted,
)

A0: PartitionKey = ("a", 0)
A1: PartitionKey = ("a", 1)
B0: PartitionKey = ("b", 0)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _state(hw: int, records: bool = False, error: ErrorCode = ErrorCode.none) -> PartitionState:
    return PartitionState(hw, hw, 0, records, error)


def _open(cache: FetchSessionCache, keys: list[PartitionKey]) -> int:
    plan = cache.plan(0, INITIAL_EPOCH, [Wanted(k, 0, 100) for k in keys], [], by_id=False)
    session_id, carried = plan.answer({k: _state(5) for k in keys})
    assert carried == keys
    return session_id


def test_sessionless_full_fetch_keeps_no_session() -> None:
    cache = FetchSessionCache()
    plan = cache.plan(0, FINAL_EPOCH, [Wanted(A0, 3, 100)], [], by_id=False)
    assert [w.key for w in plan.reads] == [A0]
    assert plan.answer({A0: _state(5)}) == (0, [A0])
    assert len(cache) == 0 and cache.opened == 0


def test_incremental_answers_only_what_changed_and_reads_the_whole_session() -> None:
    cache = FetchSessionCache()
    session_id = _open(cache, [A0, A1])
    assert session_id != 0 and len(cache) == 1 and cache.opened == 1
    # Epoch 1, nothing asked anew: both partitions read, neither changed.
    plan = cache.plan(session_id, 1, [], [], by_id=False)
    assert plan.error is ErrorCode.none
    assert [(w.key, w.fetch_offset) for w in plan.reads] == [(A0, 0), (A1, 0)]
    assert plan.answer({A0: _state(5), A1: _state(5)}) == (session_id, [])
    # Epoch 2: A1's high watermark moved, A0 has records.
    plan = cache.plan(session_id, 2, [], [], by_id=False)
    assert plan.answer({A0: _state(5, records=True), A1: _state(7)}) == (session_id, [A0, A1])
    # A0 answered records: it moved to the end, so it cannot starve A1.
    plan = cache.plan(session_id, 3, [Wanted(A0, 9, 100), Wanted(B0, 0, 50)], [], by_id=False)
    assert [(w.key, w.fetch_offset) for w in plan.reads] == [(A1, 0), (A0, 9), (B0, 0)]
    assert cache.incremental == 3 and _events("incremental") >= 3


def test_forgotten_partitions_leave_the_session() -> None:
    cache = FetchSessionCache()
    session_id = _open(cache, [A0, A1, B0])
    plan = cache.plan(session_id, 1, [], [A1, ("a", 9)], by_id=False)
    assert [w.key for w in plan.reads] == [A0, B0]
    session = cache.get(session_id)
    assert session is not None and list(session.partitions) == [A0, B0]


def test_an_error_is_always_answered_and_answered_again_once_gone() -> None:
    cache = FetchSessionCache()
    session_id = _open(cache, [A0])
    plan = cache.plan(session_id, 1, [], [], by_id=False)
    assert plan.answer({A0: _state(5, error=ErrorCode.kafka_storage_error)})[1] == [A0]
    plan = cache.plan(session_id, 2, [], [], by_id=False)
    assert plan.answer({A0: _state(5)})[1] == [A0]  # the error went away: say so
    plan = cache.plan(session_id, 3, [], [], by_id=False)
    assert plan.answer({A0: _state(5)})[1] == []


def _events(event: str) -> float:
    return REGISTRY.get_sample_value("folio_kafka_fetch_sessions_total", {"event": event}) or 0.0


def test_session_errors() -> None:
    cache = FetchSessionCache()
    session_id = _open(cache, [A0])
    refused_before = _events("refused")
    assert cache.plan(session_id + 1, 1, [], [], by_id=False).error is (
        ErrorCode.fetch_session_id_not_found)
    assert cache.plan(session_id, 2, [], [], by_id=False).error is (
        ErrorCode.invalid_fetch_session_epoch)
    assert cache.plan(session_id, 1, [], [], by_id=True).error is (
        ErrorCode.fetch_session_topic_id_error)
    # A wrong epoch does not consume the expected one.
    assert cache.plan(session_id, 1, [], [], by_id=False).error is ErrorCode.none
    # The same epoch twice (a resent request) is refused.
    assert cache.plan(session_id, 1, [], [], by_id=False).error is (
        ErrorCode.invalid_fetch_session_epoch)
    assert cache.refused == 4 and _events("refused") == refused_before + 4


def test_a_full_fetch_naming_a_session_closes_it() -> None:
    cache = FetchSessionCache()
    session_id = _open(cache, [A0])
    plan = cache.plan(session_id, FINAL_EPOCH, [Wanted(A0, 0, 10)], [], by_id=False)
    assert plan.answer({A0: _state(5)}) == (0, [A0])
    assert cache.get(session_id) is None
    assert cache.plan(session_id, 1, [], [], by_id=False).error is (
        ErrorCode.fetch_session_id_not_found)


def test_bounded_cache_evicts_only_idle_sessions() -> None:
    clock = Clock()
    cache = FetchSessionCache(max_sessions=2, evict_after_s=120.0, clock=clock)
    first = _open(cache, [A0])
    clock.now += 10
    second = _open(cache, [A1])
    # Full and nothing idle long enough: a full answer without a session.
    plan = cache.plan(0, INITIAL_EPOCH, [Wanted(B0, 0, 10)], [], by_id=False)
    assert plan.answer({B0: _state(1)}) == (0, [B0])
    assert len(cache) == 2 and cache.evicted == 0
    clock.now += 115  # first idle 125 s, second 115 s
    third = _open(cache, [B0])
    assert third not in (0, first, second) and cache.evicted == 1
    assert cache.get(first) is None and cache.get(second) is not None
    assert cache.plan(first, 1, [], [], by_id=False).error is (
        ErrorCode.fetch_session_id_not_found)


def test_no_slots_means_no_sessions() -> None:
    cache = FetchSessionCache(max_sessions=0)
    plan = cache.plan(0, INITIAL_EPOCH, [Wanted(A0, 0, 10)], [], by_id=False)
    assert plan.answer({A0: _state(1)}) == (0, [A0])
    assert len(cache) == 0
