"""``OffsetCommits`` alone, on a real ledger stack (``BrokerEnv``) and a hand-filled table.

Kafka's commit rules (who may commit when), each partition's check, the
stable fetch with pending transactional offsets, and OffsetDelete's refusals;
what is written is read back from a fresh ``OffsetStore`` on the same topics.
"""

from __future__ import annotations

import struct

from kio.schema.errors import ErrorCode

from broker.api import TopicConfig
from broker.kafka.consumer_groups._commits import OffsetCommitItem, OffsetCommits
from broker.kafka.consumer_groups._table import GroupTable
from broker.kafka.consumer_groups.members import Group, Member
from broker.kafka.consumer_groups.offsets import CommittedOffset, OffsetStore, TopicPartition
from broker.kafka.consumer_groups.states import ConsumerGroupState
from broker.topics.manager import TopicManager

S = ConsumerGroupState


def _subscription(*topics: str) -> bytes:
    """A ConsumerProtocolSubscription (version 1) naming ``topics``, no user data."""
    data = struct.pack(">hi", 1, len(topics))
    for topic in topics:
        data += struct.pack(">h", len(topic)) + topic.encode()
    return data + struct.pack(">i", -1)


class Pending:
    """The transactions' side: partitions with transactional offsets pending, per group."""

    def __init__(self) -> None:
        self.partitions: dict[str, set[TopicPartition]] = {}

    def __call__(self, group_id: str) -> set[TopicPartition]:
        return self.partitions.get(group_id, set())


async def _commits(topics: TopicManager, pending: Pending | None = None,
                   ) -> tuple[OffsetCommits, GroupTable, OffsetStore]:
    await topics.create_topic("t", 2, TopicConfig())
    store = OffsetStore(topics)
    await store.load()
    table = GroupTable(512)
    return (OffsetCommits(topics, store, table, 8, pending or Pending()), table, store)


def _item(topic: str, partition: int, offset: int, metadata: str = "") -> OffsetCommitItem:
    return OffsetCommitItem(topic, partition, CommittedOffset(offset, -1, metadata))


def _stable_group(table: GroupTable, generation: int = 2) -> Group:
    group = Group("g", S.STABLE, generation, "consumer", "range", "m")
    group.members["m"] = Member("m", "client", "", 10_000, 10_000,
                                (("range", _subscription("t")),), "instance")
    table.put(group)
    return group


async def test_who_may_commit(topics: TopicManager) -> None:
    commits, table, _ = await _commits(topics)
    assert commits.commit_error("", -1, "") is ErrorCode.invalid_group_id
    assert commits.commit_error("new", -1, "") is ErrorCode.none  # Kafka creates the group
    assert commits.commit_error("new", 3, "m") is ErrorCode.illegal_generation
    group = _stable_group(table)
    assert commits.commit_error("g", 2, "m") is ErrorCode.none
    assert commits.commit_error("g", -1, "") is ErrorCode.unknown_member_id  # it has members
    assert commits.commit_error("g", 2, "other") is ErrorCode.unknown_member_id
    assert commits.commit_error("g", 1, "m") is ErrorCode.illegal_generation
    assert commits.commit_error("g", 2, "old", "instance") is ErrorCode.fenced_instance_id
    group.state = S.COMPLETING_REBALANCE
    assert commits.commit_error("g", 2, "m") is ErrorCode.rebalance_in_progress
    group.state = S.DEAD
    assert commits.commit_error("g", 2, "m") is ErrorCode.coordinator_not_available


async def test_each_partition_is_checked_and_the_good_ones_written(
        topics: TopicManager) -> None:
    commits, table, _ = await _commits(topics)
    errors = await commits.commit("solo", -1, "", [
        _item("t", 0, 5), _item("t", 1, 6, "x" * 9), _item("t", 2, 7),
        _item("missing", 0, 1), _item("_kafka_offsets", 0, 1), _item("", 0, 1)])
    assert errors == {("t", 0): ErrorCode.none,
                      ("t", 1): ErrorCode.offset_metadata_too_large,
                      ("t", 2): ErrorCode.unknown_topic_or_partition,
                      ("missing", 0): ErrorCode.unknown_topic_or_partition,
                      ("_kafka_offsets", 0): ErrorCode.unknown_topic_or_partition,
                      ("", 0): ErrorCode.unknown_topic_or_partition}
    assert table.get("solo") is not None  # a commit without generation makes the group
    again = OffsetStore(topics)
    await again.load()
    assert {tp: value.offset for tp, value in again.offsets("solo").items()} == {("t", 0): 5}
    refused = await commits.commit("solo", 4, "m", [_item("t", 0, 9)])
    assert refused == {("t", 0): ErrorCode.unknown_member_id}  # the group is known now


async def test_a_stable_fetch_reports_pending_transactional_offsets(
        topics: TopicManager) -> None:
    pending = Pending()
    commits, _, _ = await _commits(topics, pending)
    await commits.commit("g", -1, "", [_item("t", 0, 5), _item("t", 1, 6)])
    pending.partitions["g"] = {("t", 1)}
    error, answers = commits.fetch("g", None, require_stable=True)
    assert error is ErrorCode.none
    assert [(tp, value.offset if value else None, code) for tp, value, code in answers] == [
        (("t", 0), 5, ErrorCode.none), (("t", 1), 6, ErrorCode.unstable_offset_commit)]
    _, loose = commits.fetch("g", [("t", 1), ("t", 9)], require_stable=False)
    assert [(tp, code) for tp, _, code in loose] == [(("t", 1), ErrorCode.none),
                                                     (("t", 9), ErrorCode.none)]
    assert loose[1][1] is None  # never committed
    assert commits.fetch("", None, False) == (ErrorCode.invalid_group_id, [])


async def test_offset_delete_refuses_what_members_subscribe_to(topics: TopicManager) -> None:
    commits, table, store = await _commits(topics)
    assert await commits.delete_offsets("g", [("t", 0)]) == (ErrorCode.group_id_not_found, {})
    await commits.commit("g", -1, "", [_item("t", 0, 5)])
    await topics.create_topic("u", 1, TopicConfig())
    await commits.commit("g", -1, "", [_item("u", 0, 3)])
    _stable_group(table, generation=0)
    error, answers = await commits.delete_offsets("g", [("t", 0), ("u", 0), ("u", 7)])
    assert error is ErrorCode.none
    assert answers == {("t", 0): ErrorCode.group_subscribed_to_topic,
                       ("u", 0): ErrorCode.none, ("u", 7): ErrorCode.none}
    assert set(store.offsets("g")) == {("t", 0)}
    table.get("g").protocol_type = "connect"  # type: ignore[union-attr]
    assert await commits.delete_offsets("g", [("t", 0)]) == (ErrorCode.non_empty_group, {})
