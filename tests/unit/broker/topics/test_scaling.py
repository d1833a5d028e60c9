"""Scaling: plans checked against the topic record, the auto-scaling rule, and the manager.

The plan and rule are pure (``broker.topics.scaling``); the manager tests run on the
real ledger stack of ``conftest.py`` (RocksDB metadata, an in-process bookie).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from broker.api import SegmentState, TopicConfig
from broker.errors import (
    InternalTopicError,
    InvalidArgumentError,
    NoSuchSegmentError,
    SegmentSealedError,
    TopicNotFoundError,
)
from broker.segments.names import segment_path, topic_path
from broker.segments.records import SegmentRecord
from broker.topics.manager import TopicManager
from broker.topics.records import TopicRecord, TopicSegment
from broker.topics.scaling import RateMeter, auto_scale, plan_scale, successors_of
from tests.unit.broker.conftest import BrokerEnv, block


def _record(*ranges: tuple[float, float], sealed: tuple[int, ...] = ()) -> TopicRecord:
    segments = tuple(
        TopicSegment(i, low, high, SegmentState.SEALED if i in sealed else SegmentState.OPEN)
        for i, (low, high) in enumerate(ranges))
    return TopicRecord("t", TopicConfig(), segments, len(segments), 0)


FOUR = _record((0.0, 0.25), (0.25, 0.5), (0.5, 0.75), (0.75, 1.0))


def test_split_merge_and_both() -> None:
    split = plan_scale(FOUR, ["t/0"], [(0.125, 0.25), (0.0, 0.125)])
    assert split.seal == (0,)
    assert [(s.number, s.key_low, s.key_high, s.predecessors) for s in split.created] == [
        (4, 0.0, 0.125, (0,)), (5, 0.125, 0.25, (0,))]
    merge = plan_scale(FOUR, ["t/1", "t/2"], [(0.25, 0.75)])
    assert merge.seal == (1, 2)
    assert [(s.number, s.predecessors) for s in merge.created] == [(4, (1, 2))]
    both = plan_scale(FOUR, ["t/2", "t/1", "t/3"], [(0.25, 0.6), (0.6, 1.0)])
    assert [(s.key_low, s.key_high, s.predecessors) for s in both.created] == [
        (0.25, 0.6, (1, 2)), (0.6, 1.0, (2, 3))]


def test_boundaries_within_1e_9_snap_to_the_sealed_ones() -> None:
    thirds = _record((0.0, 1 / 3), (1 / 3, 2 / 3), (2 / 3, 1.0))
    plan = plan_scale(thirds, ["t/0", "t/1"], [(0.0, 0.6666666667)])
    assert plan.created[0].key_high == 2 / 3


@pytest.mark.parametrize(("seal", "ranges", "message"), [
    ([], [(0.0, 0.25)], "seal names no segment"),
    (["t/0"], [], "new_ranges is empty"),
    (["t/0", "t/0"], [(0.0, 0.25)], "named twice"),
    (["u/0"], [(0.0, 0.25)], "not a segment of topic 't'"),
    (["zero"], [(0.0, 0.25)], "not a segment name"),
    (["t/0"], [(0.0, 0.2)], r"leave \[0.2, 0.25\) .* uncovered"),
    (["t/0"], [(0.0, 0.1), (0.2, 0.25)], r"leave \[0.1, 0.2\)"),
    (["t/0"], [(0.0, 0.3)], r"range \[0.0, 0.3\) reaches outside"),
    (["t/0"], [(0.0, 0.2), (0.1, 0.25)], "overlap"),
    (["t/0"], [(0.2, 0.1)], "need 0 <= low < high <= 1"),
    (["t/0"], [(0.0, float("nan"))], "need 0 <= low < high <= 1"),
    (["t/0", "t/2"], [(0.0, 0.75)], "reaches outside"),
])
def test_anything_else_is_invalid_argument(seal: list[str], ranges: list[tuple[float, float]],
                                           message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        plan_scale(FOUR, seal, ranges)


def test_unknown_and_sealed_segments() -> None:
    with pytest.raises(NoSuchSegmentError):
        plan_scale(FOUR, ["t/9"], [(0.0, 0.25)])
    with pytest.raises(SegmentSealedError):
        plan_scale(_record((0.0, 1.0), sealed=(0,)), ["t/0"], [(0.0, 1.0)])


def test_too_many_open_segments_are_refused() -> None:
    one = _record((0.0, 1.0))
    ranges = [(i / 1025, (i + 1) / 1025) for i in range(1025)]
    ranges[-1] = (ranges[-1][0], 1.0)
    with pytest.raises(InvalidArgumentError, match="1025 open segments; at most 1024"):
        plan_scale(one, ["t/0"], ranges)


def test_successors_of_follow_predecessors() -> None:
    record = replace(FOUR, segments=(*FOUR.segments, TopicSegment(4, 0.25, 0.75,
                                                                  predecessors=(1, 2))))
    assert successors_of(record) == {1: [4], 2: [4]}


def test_auto_scale_splits_the_hottest_then_merges_the_coldest_neighbours() -> None:
    config = TopicConfig(scale_target_events_per_s=100, scale_min_segments=2)
    segments = list(FOUR.segments)
    assert auto_scale("t", segments, {0: 150.0, 1: 500.0, 2: 0.0}, config) == (
        ["t/1"], [(0.25, 0.375), (0.375, 0.5)])
    assert auto_scale("t", segments, {0: 30.0, 1: 30.0, 2: 10.0, 3: 5.0}, config) == (
        ["t/2", "t/3"], [(0.5, 1.0)])
    # Neighbours adding up to half the target or more stay; unknown rates stay.
    assert auto_scale("t", segments, {0: 30.0, 1: 30.0, 2: 30.0}, config) is None
    assert auto_scale("t", segments[:2], {0: 0.0, 1: 0.0}, config) is None  # min segments
    assert auto_scale("t", segments, {0: 1e9}, TopicConfig()) is None  # off


def test_rate_meter_measures_between_rounds() -> None:
    meter = RateMeter()
    assert meter.sample("t", 1000, {0: 10, 1: None}) == {}
    assert meter.sample("t", 3000, {0: 210, 1: None}) == {0: 100.0}
    assert meter.sample("t", 4000, {0: None, 1: 5}) == {0: 0.0}  # unloaded: unchanged
    assert meter.sample("t", 5000, {1: 15}) == {1: 10.0}


# -- the manager ------------------------------------------------------------------------


async def test_scale_seals_creates_and_the_successors_take_appends(
        topics: TopicManager) -> None:
    await topics.create_topic("t", 1, TopicConfig())
    old = await topics.segment("t/0")
    await old.append([block(0, 3)], "w", 2)
    outcome = await topics.scale_topic("t", ["t/0"], [(0.0, 0.5), (0.5, 1.0)])
    assert [(s.name, s.state, s.end_offset, s.successors) for s in outcome.sealed] == [
        ("t/0", SegmentState.SEALED, 3, ("t/1", "t/2"))]
    assert [(s.name, s.key_low, s.predecessors) for s in outcome.created] == [
        ("t/1", 0.0, ("t/0",)), ("t/2", 0.5, ("t/0",))]
    with pytest.raises(SegmentSealedError):
        await old.append([block(1)], "w", 3)
    assert await old.last_event_number("w") == 2  # the writer attribute stays readable
    result = await (await topics.segment("t/2")).append([block(2)], "w", 3)
    assert result.offset == 0
    segment, successors = await topics.get_successors("t/0")
    assert segment.state is SegmentState.SEALED and [s.name for s in successors] == [
        "t/1", "t/2"]
    listed = await topics.list_segments("t", include_sealed=True)
    assert [s.name for s in listed] == ["t/0", "t/1", "t/2"]
    assert [s.name for s in (await topics.get_topic("t")).segments] == ["t/1", "t/2"]


async def test_a_successor_seals_its_predecessors_before_it_is_loaded(env: BrokerEnv) -> None:
    """A crash between the topic record's update and the seals is rolled forward."""
    topics = env.manager()
    await topics.create_topic("t", 1, TopicConfig())
    await (await topics.segment("t/0")).append([block(0, 2)], "w", 1)
    await topics.close()
    env.abandon(topics)
    # What a broker that died right after the conditional update left behind.
    node = await env.store.get(topic_path("t"))
    record = TopicRecord.from_bytes(node.data)
    plan = plan_scale(record, ["t/0"], [(0.0, 1.0)])
    await env.store.create(segment_path("t", 1), SegmentRecord("t", 1).to_bytes())
    await env.store.set(topic_path("t"), replace(
        record, segments=(replace(record.segments[0], state=SegmentState.SEALED),
                          *plan.created), next_segment_number=2).to_bytes(), node.version)
    assert not SegmentRecord.from_bytes((await env.store.get(segment_path("t", 0))).data).sealed

    again = env.manager()
    successor = await again.segment("t/1")
    sealed = SegmentRecord.from_bytes((await env.store.get(segment_path("t", 0))).data)
    assert sealed.sealed and sealed.end_offset == 2
    assert (await successor.append([block(1)], "w", 2)).offset == 0


async def test_seal_topic_is_idempotent_and_leaves_no_successors(topics: TopicManager) -> None:
    await topics.create_topic("t", 2, TopicConfig())
    sealed = await topics.seal_topic("t")
    assert sealed.sealed and sealed.segments == ()
    assert (await topics.seal_topic("t")).sealed
    _, successors = await topics.get_successors("t/0")
    assert successors == []
    with pytest.raises(SegmentSealedError):
        await (await topics.segment("t/1")).append([block(0)], "w", 0)
    with pytest.raises(SegmentSealedError, match="sealed at offset 0"):
        await topics.scale_topic("t", ["t/0"], [(0.0, 0.5)])
    with pytest.raises(TopicNotFoundError):
        await topics.seal_topic("nope")
    with pytest.raises(InternalTopicError, match="'_txnlog' is internal to the broker"):
        await topics.seal_topic("_txnlog")
    with pytest.raises(InternalTopicError, match="ScaleTopic is refused"):
        await topics.scale_topic("_txnlog", ["_txnlog/0"], [(0.0, 1.0)])


async def test_auto_scaling_splits_a_hot_segment_and_merges_back_when_cold(
        env: BrokerEnv) -> None:
    topics = env.manager()
    config = TopicConfig(scale_target_events_per_s=100, scale_cooldown_ms=1000)
    await topics.create_topic("t", 1, config)
    segment = await topics.segment("t/0")
    await topics.run_maintenance()  # first round: rates start here
    await segment.append([block(0, 1000)], "w", 999)
    env.clock.advance_ms(2000)
    await topics.run_maintenance()  # 500 events/s > 100: split
    assert [(s.key_low, s.key_high) for s in (await topics.get_topic("t")).segments] == [
        (0.0, 0.5), (0.5, 1.0)]
    for name, number in (("t/1", 0), ("t/2", 0)):
        await (await topics.segment(name)).append([block(number)], "w", 1000)
    env.clock.advance_ms(500)
    await topics.run_maintenance()  # within the cool-down: nothing
    assert len((await topics.get_topic("t")).segments) == 2
    env.clock.advance_ms(10_000)
    await topics.run_maintenance()  # cold (well under 50 events/s together): merge
    merged = (await topics.get_topic("t")).segments
    assert [(s.name, s.key_low, s.key_high, s.predecessors) for s in merged] == [
        ("t/3", 0.0, 1.0, ("t/1", "t/2"))]
    env.clock.advance_ms(10_000)
    await topics.run_maintenance()  # one segment is the minimum
    assert len((await topics.get_topic("t")).segments) == 1
