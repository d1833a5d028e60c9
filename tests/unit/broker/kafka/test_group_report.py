"""``GroupReport``: Kafka groups as ``folio group`` and ``folio_group_lag`` show them.

On a real ledger stack (``BrokerEnv``): a group with committed offsets on a
topic with events is described with each partition's committed offset, end
offset and lag; the lag gauge gets one series per committed partition and
loses those of a deleted group; a group another broker coordinates answers
WrongHost; the consumer protocol's assignment decodes (and garbage does not
crash it).
"""

from __future__ import annotations

import struct

import pytest
from kio.schema.errors import ErrorCode
from prometheus_client import REGISTRY

from broker.api import Block, TopicConfig
from broker.errors import (
    InvalidArgumentError,
    ReaderGroupNotEmptyError,
    ReaderGroupNotFoundError,
    TopicNotFoundError,
    WrongHostError,
)
from broker.groups.kafka_view import KafkaGroupListing, OffsetReset
from broker.kafka.consumer_groups.coordinator import GroupCoordinator, OffsetCommitItem
from broker.kafka.consumer_groups.members import Group
from broker.kafka.consumer_groups.modern import HeartbeatRequest, ModernGroups, topic_partitions
from broker.kafka.consumer_groups.offsets import CommittedOffset, OffsetStore
from broker.kafka.consumer_groups.report import GroupReport, decode_assignment
from broker.kafka.coordinators import ClassicView
from tests.unit.broker.conftest import BrokerEnv


def _assignment(topics: dict[str, list[int]], version: int = 1) -> bytes:
    data = struct.pack(">hi", version, len(topics))
    for topic, partitions in topics.items():
        name = topic.encode()
        data += struct.pack(">h", len(name)) + name
        data += struct.pack(f">i{len(partitions)}i", len(partitions), *partitions)
    return data + struct.pack(">i", -1)  # no user data


def test_the_consumer_protocol_assignment_decodes_sorted() -> None:
    assert decode_assignment(_assignment({"b": [1, 0], "a": [2]})) == (
        ("a", 2), ("b", 0), ("b", 1))
    assert decode_assignment(_assignment({}, version=3)) == ()


@pytest.mark.parametrize("garbage", [b"", b"\x00", b"\x00\x01\x00\x00\x00\x05\x00\x09ab",
                                     b"\x00\x01\x00\x00\x00\x01\x00\x02\xff\xfe"])
def test_garbage_is_no_assignment(garbage: bytes) -> None:
    assert decode_assignment(garbage) == ()


def _lag(group: str, partition: str) -> float | None:
    return REGISTRY.get_sample_value("folio_group_lag", {
        "kind": "kafka", "group": group, "topic": "rep", "partition": partition})


async def _groups(env: BrokerEnv) -> GroupCoordinator:
    topics = env.manager()
    await topics.create_topic("rep", 2, TopicConfig())
    for partition, count in ((0, 10), (1, 4)):
        segment = await topics.segment(f"rep/{partition}")
        for index in range(count):
            await segment.append([Block(b"%d" % index, 1)], "", -1)
    groups = GroupCoordinator(topics, OffsetStore(topics))
    await groups.start()
    return groups


async def test_a_group_described_with_committed_and_end_offsets_and_its_lag_metric(
        env: BrokerEnv) -> None:
    groups = await _groups(env)
    errors = await groups.commit("rep-g", -1, "", [
        OffsetCommitItem("rep", 0, CommittedOffset(7, metadata="m")),
        OffsetCommitItem("rep", 1, CommittedOffset(4))])
    assert set(errors.values()) == {ErrorCode.none}
    report = GroupReport(groups, env.manager())
    assert report.listing() == ([KafkaGroupListing("rep-g", "Empty", "", 0)], True)
    described = await report.describe("rep-g")
    assert (described.state, described.members, described.lag) == ("Empty", (), 3)
    assert [(p.topic, p.partition, p.committed_offset, p.end_offset, p.lag, p.metadata)
            for p in described.partitions] == [("rep", 0, 7, 10, 3, "m"), ("rep", 1, 4, 4, 0, "")]
    with pytest.raises(ReaderGroupNotFoundError) as missing:
        await report.describe("rep-nobody")
    assert missing.value.context() == {"group": "rep-nobody", "kind": "kafka"}
    assert str(missing.value) == "Kafka consumer group 'rep-nobody' does not exist"

    await report.update_lag()
    assert (_lag("rep-g", "0"), _lag("rep-g", "1")) == (3, 0)
    assert await groups.delete_group("rep-g") == ErrorCode.none
    await report.update_lag()
    assert (_lag("rep-g", "0"), _lag("rep-g", "1")) == (None, None)


async def test_a_group_coordinated_elsewhere_answers_wrong_host(env: BrokerEnv) -> None:
    groups = await _groups(env)
    moved = WrongHostError("_kafka_offsets/3", "10.0.0.2:7070")
    report = GroupReport(groups, env.manager(), lambda group: moved)
    assert report.listing() == ([], False)
    with pytest.raises(WrongHostError) as answered:
        await report.describe("rep-elsewhere")
    assert answered.value is moved


async def test_a_reset_needs_an_id_and_something_to_reset(env: BrokerEnv) -> None:
    groups = await _groups(env)
    report = GroupReport(groups, env.manager())
    with pytest.raises(InvalidArgumentError, match="must not be empty"):
        await report.reset("", OffsetReset("earliest", ("rep",)))
    with pytest.raises(ReaderGroupNotFoundError):
        await report.reset("rep-new", OffsetReset("earliest"))  # no group, no topics named
    # A new group's offsets, as Kafka's tool makes them:
    made = await report.reset("rep-new", OffsetReset("latest", ("rep",)))
    assert [(p.partition, p.committed_offset, p.lag) for p in made.partitions] == [
        (0, 10, 0), (1, 4, 0)]
    groups.groups()["rep-bare"] = Group("rep-bare")  # known, no offsets
    with pytest.raises(InvalidArgumentError, match="name the topics to reset"):
        await report.reset("rep-bare", OffsetReset("earliest"))
    with pytest.raises(TopicNotFoundError):
        await report.reset("rep-new", OffsetReset("earliest", ("rep-missing",)))


async def test_each_reset_moves_the_offsets_as_kafka_consumer_groups_does(
        env: BrokerEnv) -> None:
    groups = await _groups(env)  # rep/0 holds 10 events, rep/1 holds 4
    report = GroupReport(groups, env.manager())

    async def reset(spec: OffsetReset) -> list[tuple[int, int]]:
        done = await report.reset("rep-plan", spec)
        now = {p.partition: p.committed_offset for p in done.partitions}
        assert all(now[p.partition] == p.committed_offset for p in done.reset)  # written
        return [(p.partition, p.committed_offset) for p in done.reset]

    assert await reset(OffsetReset("offset", ("rep",), value=6)) == [(0, 6), (1, 4)]  # clamped
    assert await reset(OffsetReset("shift", value=-5)) == [(0, 1), (1, 0)]  # at the start
    assert await reset(OffsetReset("shift", value=2)) == [(0, 3), (1, 2)]
    assert await reset(OffsetReset("current")) == [(0, 3), (1, 2)]
    assert await reset(OffsetReset("offsets", offsets=(("rep", 1, 99),))) == [(1, 4)]
    assert await reset(OffsetReset("earliest", partitions=(("rep", 0),))) == [(0, 0)]
    planned = await report.reset("rep-plan", OffsetReset("latest", dry_run=True))
    assert [(p.partition, p.committed_offset) for p in planned.reset] == [(0, 10), (1, 4)]
    assert [(p.partition, p.committed_offset) for p in planned.partitions] == [(0, 0), (1, 4)]
    with pytest.raises(InvalidArgumentError, match="has no partition 2"):
        await report.reset("rep-plan", OffsetReset("earliest", partitions=(("rep", 2),)))
    with pytest.raises(InvalidArgumentError, match="no committed offset there"):
        await report.reset("rep-none", OffsetReset("shift", ("rep",), value=1))
    described = await report.describe("rep-plan")
    assert [(p.partition, p.committed_offset) for p in described.partitions] == [(0, 0), (1, 4)]
    # By time, each partition is read where it is served (``broker.kafka.offset_times``):
    # its first offset at or after the time, or its end there when none is.
    asked: list[tuple[str, int]] = []

    async def offset_at(segment: str, time_ms: int) -> tuple[int, int]:
        asked.append((segment, time_ms))
        return {"rep/0": (-1, 12), "rep/1": (2, 4)}[segment]

    elsewhere = GroupReport(groups, env.manager(), offset_at=offset_at)
    done = await elsewhere.reset("rep-plan", OffsetReset("timestamp", value=5))
    assert [(p.partition, p.committed_offset, p.end_offset) for p in done.reset] == [
        (0, 12, 12), (1, 2, 4)]
    assert asked == [("rep/0", 5), ("rep/1", 5)]


async def test_a_kip848_group_is_listed_described_and_lagged(env: BrokerEnv) -> None:
    groups = await _groups(env)
    consumers = ModernGroups(topic_partitions(env.manager()), groups.store, ClassicView(groups))
    joined = await consumers.heartbeat(HeartbeatRequest(
        group_id="rep-k", member_id="m1", member_epoch=0, client_id="c1",
        client_host="/127.0.0.1", rebalance_timeout_ms=30_000, subscribed=("rep",),
        owned={}))
    assert joined.member_epoch == 1 and joined.assignment == {"rep": {0, 1}}
    errors = await groups.write_offsets("rep-k", [
        OffsetCommitItem("rep", 0, CommittedOffset(6))], {("rep", 0): ErrorCode.none})
    assert errors == {("rep", 0): ErrorCode.none}
    ClassicView(groups).forget_empty("rep-k")  # as the OffsetCommit handler does
    report = GroupReport(groups, env.manager(), modern=consumers)
    assert report.listing() == ([KafkaGroupListing("rep-k", "Stable", "consumer", 1)], True)
    detail = await report.describe("rep-k")
    assert (detail.protocol_type, detail.protocol, detail.generation) == (
        "consumer", "uniform", 1)
    [member] = detail.members
    assert (member.member_id, member.client_id, member.assigned) == (
        "m1", "c1", (("rep", 0), ("rep", 1)))
    assert [(p.partition, p.committed_offset, p.end_offset, p.lag) for p in detail.partitions] \
        == [(0, 6, 10, 4), (1, -1, 4, -1)]
    await report.update_lag()
    assert _lag("rep-k", "0") == 4
    with pytest.raises(ReaderGroupNotEmptyError):
        await report.delete("rep-k")
    await consumers.heartbeat(HeartbeatRequest(group_id="rep-k", member_id="m1",
                                               member_epoch=-1))
    await report.delete("rep-k")
    assert report.listing() == ([], True)
    consumers.close()
