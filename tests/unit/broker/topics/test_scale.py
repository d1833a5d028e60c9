"""TopicScaling alone: split, merge, seal a topic, successors and open ends.

On the ledger stack of ``conftest.py`` (RocksDB metadata, an in-process
bookie); ``parts.Parts`` builds the part with its own catalog and table of
loaded segments (which seals the segments it holds), and a ``TopicManager``
on the same stack holds the snapshot store.
"""

from __future__ import annotations

import pytest

from broker.api import SegmentState
from broker.errors import (
    BrokerShuttingDownError,
    InternalTopicError,
    NoSuchSegmentError,
    SegmentSealedError,
    TopicNotFoundError,
    WrongHostError,
)
from broker.segments.names import segment_path
from broker.segments.records import SegmentRecord
from tests.unit.broker.conftest import SMALL, BrokerEnv, block
from tests.unit.broker.topics.parts import Parts


async def test_split_seals_the_loaded_segment_and_links_the_successors(env: BrokerEnv) -> None:
    parts = Parts(env, env.manager())
    await parts.crud.create_topic("t", 2, SMALL)
    segment = await parts.loaded.segment("t/0")
    await segment.append([block(0, 2)], "w", 1)
    outcome = await parts.scaling.scale_topic("t", ["t/0"], [(0.25, 0.5), (0.0, 0.25)],
                                              scaled_ms=1234)
    assert [(r.name, r.state, r.end_offset) for r in outcome.sealed] == [
        ("t/0", SegmentState.SEALED, 2)]
    assert [(r.name, r.key_low, r.predecessors) for r in outcome.created] == [
        ("t/2", 0.0, ("t/0",)), ("t/3", 0.25, ("t/0",))]
    assert segment.sealed  # sealed in the ledger service before the call returned
    with pytest.raises(SegmentSealedError):
        await segment.append([block(1)], "w", 2)
    record, _ = await parts.catalog.read("t")
    assert (record.scaled_ms, record.next_segment_number) == (1234, 4)
    opened = await parts.scaling.list_segments("t", include_sealed=False)
    assert [r.name for r in opened] == ["t/2", "t/3", "t/1"]
    every = await parts.scaling.list_segments("t", include_sealed=True)
    assert [(r.name, r.successors) for r in every] == [
        ("t/0", ("t/2", "t/3")), ("t/1", ()), ("t/2", ()), ("t/3", ())]
    current, after = await parts.scaling.get_successors("t/0")
    assert (current.name, [r.name for r in after]) == ("t/0", ["t/2", "t/3"])
    await parts.close()


async def test_merge_seals_both_unloaded_segments_in_their_records(env: BrokerEnv) -> None:
    parts = Parts(env, env.manager())
    await parts.crud.create_topic("t", 2, SMALL)
    outcome = await parts.scaling.scale_topic("t", ["t/0", "t/1"], [(0.0, 1.0)])
    assert [r.name for r in outcome.sealed] == ["t/0", "t/1"]
    assert [(r.name, r.predecessors) for r in outcome.created] == [("t/2", ("t/0", "t/1"))]
    for number in (0, 1):
        stored = await env.store.get(segment_path("t", number))
        assert SegmentRecord.from_bytes(stored.data).sealed
    with pytest.raises(SegmentSealedError) as caught:
        await parts.scaling.scale_topic("t", ["t/0"], [(0.0, 0.5)])
    assert caught.value.segment == "t/0"
    await parts.close()


async def test_refusals(env: BrokerEnv) -> None:
    parts = Parts(env, env.manager())
    await parts.crud.create_topic("t", 1, SMALL)
    await parts.crud.create_topic("__folio_mine", 1, SMALL, internal=True)
    with pytest.raises(InternalTopicError):
        await parts.scaling.scale_topic("__folio_mine", ["__folio_mine/0"], [(0.0, 1.0)])
    with pytest.raises(InternalTopicError):
        await parts.scaling.seal_topic("__folio_mine")
    with pytest.raises(TopicNotFoundError):
        await parts.scaling.scale_topic("nope", ["nope/0"], [(0.0, 1.0)])
    for name in ("t/7", "nope/0"):
        with pytest.raises(NoSuchSegmentError):
            await parts.scaling.get_successors(name)
    parts.closed = True
    calls = [parts.scaling.scale_topic("t", ["t/0"], [(0.0, 1.0)]), parts.scaling.seal_topic("t"),
             parts.scaling.list_segments("t", include_sealed=True),
             parts.scaling.get_successors("t/0")]
    for call in calls:
        with pytest.raises(BrokerShuttingDownError):
            await call
    assert (await parts.catalog.read("t"))[0].next_segment_number == 1


async def test_seal_topic_seals_every_open_segment_once(env: BrokerEnv) -> None:
    parts = Parts(env, env.manager())
    await parts.crud.create_topic("t", 2, SMALL)
    await parts.scaling.scale_topic("t", ["t/1"], [(0.5, 1.0)])
    segment = await parts.loaded.segment("t/0")
    info = await parts.scaling.seal_topic("t")
    assert (info.sealed, info.segments) == (True, ())
    assert segment.sealed
    record, version = await parts.catalog.read("t")
    assert all(s.state is SegmentState.SEALED for s in record.segments)
    again = await parts.scaling.seal_topic("t")  # idempotent: the record is not written again
    assert again.sealed
    assert (await parts.catalog.read("t"))[1] == version
    await parts.close()


async def test_open_segment_ends_from_the_loaded_segment_or_the_record(env: BrokerEnv) -> None:
    parts = Parts(env, env.manager())
    await parts.crud.create_topic("t", 3, SMALL)
    await parts.scaling.scale_topic("t", ["t/2"], [(2 / 3, 1.0)])
    segment = await parts.loaded.segment("t/0")
    await segment.append([block(0, 5)], "w", 4)
    record, ends = await parts.scaling.open_segment_ends("t")
    assert record.next_segment_number == 4
    assert ends == {0: 5, 1: 0, 3: 0}
    with pytest.raises(TopicNotFoundError):
        await parts.scaling.open_segment_ends("nope")
    await parts.close()


async def test_a_segment_another_broker_seals_first_leaves_the_scale_made(
        env: BrokerEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    # In a cluster the owner of a successor loads it and seals its predecessors
    # first; the broker applying the scale then meets WrongHost sealing one of
    # them. The scale is made (its CAS landed): it must not answer "no".
    parts = Parts(env, env.manager())
    await parts.crud.create_topic("t", 2, SMALL)
    seal = parts.loaded.ensure_sealed
    sealed_here = []

    async def taken_elsewhere(topic: str, number: int) -> None:
        if number == 1:
            raise WrongHostError(f"{topic}/{number}", "127.0.0.1:1")
        sealed_here.append(number)
        await seal(topic, number)

    monkeypatch.setattr(parts.loaded, "ensure_sealed", taken_elsewhere)
    outcome = await parts.scaling.scale_topic("t", ["t/0", "t/1"], [(0.0, 1.0)])
    assert [r.name for r in outcome.sealed] == ["t/0", "t/1"]
    assert [(r.name, r.predecessors) for r in outcome.created] == [("t/2", ("t/0", "t/1"))]
    assert sealed_here == [0]
    record, _ = await parts.catalog.read("t")
    assert [s.state for s in record.segments] == [
        SegmentState.SEALED, SegmentState.SEALED, SegmentState.OPEN]
    await parts.close()
