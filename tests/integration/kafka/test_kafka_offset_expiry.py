"""Committed offsets expire (``offsets.retention.minutes``) and go with a deleted topic.

A standalone broker with a retention of 3 s, swept every 200 ms: an empty
group's offsets expire and the group leaves ListGroups; a group with a
member keeps the offsets of the topic it subscribes to; a deleted topic's
offsets leave every group at once and a topic made again under its name
starts with none. Both survive a SIGKILL and restart (the removals are
tombstones in ``_kafka_offsets``), checked with librdkafka's AdminClient and
kafka-python.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigEntry, ConfigResource
from kafka import KafkaAdminClient

from tests.integration.kafka.test_kafka_clients import DEADLINE_S, create_topic, produce
from tests.integration.kafka.test_kafka_groups import group_consumer, poll_until
from tests.support.bookies import BookieProcess, BookieProcesses, run_folio
from tests.support.kafka import kafka_address
from tests.support.standalone import start_standalone
from tests.support.wait import wait_for

SHORT = ("--kafka-port", "0", "--kafka-offsets-retention-minutes", "0.05",
         "--kafka-offsets-retention-check-interval-ms", "200")


@pytest.fixture
def processes() -> Iterator[BookieProcesses]:
    started = BookieProcesses()
    yield started
    started.kill_all()


def bootstrap_of(server: BookieProcess) -> str:
    host, port = kafka_address(server)
    return f"{host}:{port}"


def offsets_of(admin: AdminClient, group: str) -> dict[tuple[str, int], int]:
    """The group's committed offsets, as librdkafka's AdminClient lists them."""
    request = ConsumerGroupTopicPartitions(group)
    (future,) = admin.list_consumer_group_offsets([request]).values()
    answer = future.result(timeout=DEADLINE_S)
    return {(tp.topic, tp.partition): tp.offset for tp in answer.topic_partitions
            if tp.offset >= 0}


def broker_configs(admin: AdminClient) -> dict[str, ConfigEntry]:
    """DescribeConfigs of broker 0 (the standalone)."""
    resource = ConfigResource(ConfigResource.Type.BROKER, "0")
    (future,) = admin.describe_configs([resource]).values()
    found: dict[str, ConfigEntry] = future.result(timeout=DEADLINE_S)
    return found


def group_ids(admin: AdminClient) -> set[str]:
    listed = admin.list_consumer_groups().result(timeout=DEADLINE_S)
    return {group.group_id for group in listed.valid}


def commit_without_group(bootstrap: str, group: str, offsets: list[TopicPartition]) -> None:
    """Commit as a consumer that assigns partitions itself (generation -1, no member)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = ConsumerGroupTopicPartitions(group, offsets)
    (future,) = admin.alter_consumer_group_offsets([request]).values()
    answer = future.result(timeout=DEADLINE_S)
    assert [tp.error for tp in answer.topic_partitions] == [None] * len(offsets)


@pytest.mark.faults
def test_an_empty_groups_offsets_expire_a_members_subscribed_ones_stay(
        processes: BookieProcesses, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    server = start_standalone(processes, data_dir, *SHORT)
    bootstrap = bootstrap_of(server)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    create_topic(bootstrap, "kept", 1)
    create_topic(bootstrap, "left", 1)
    produce(bootstrap, "kept", [(0, b"%d" % i, None, []) for i in range(4)])
    assigned: dict[str, set[int]] = {}
    # "kept" is both the topic and the group (group_consumer subscribes to the group's name).
    member = group_consumer(bootstrap, "kept", assigned, "member")
    try:
        poll_until([member], lambda: assigned["member"] == {0}, "the member's assignment")
        member.commit(offsets=[TopicPartition("kept", 0, 2)], asynchronous=False)
        # Offsets of a group that never had members: they expire by their commit time.
        commit_without_group(bootstrap, "simple", [TopicPartition("left", 0, 1)])
        # Until "simple"'s are gone, 3 s (the retention) have passed since the member's commit.
        poll_until([member], lambda: not offsets_of(admin, "simple"), "simple's expiry")
        poll_until([member], lambda: "simple" not in group_ids(admin), "simple leaves")
        assert offsets_of(admin, "kept") == {("kept", 0): 2}, "a member subscribes to it"
        shown = run_folio("group", "describe", "kept", "--kind", "kafka", "--json",
                          "--endpoint", server.address)
        assert shown.returncode == 0, shown.stderr
        assert [(p["topic"], p["committed_offset"]) for p in json.loads(shown.stdout)[
            "partitions"]] == [("kept", 2)]
    finally:
        member.close()
    # Empty now: 3 s later its offsets expire, then the group goes.
    wait_for(lambda: not offsets_of(admin, "kept"), "the empty group's offsets expire",
             DEADLINE_S)
    wait_for(lambda: "kept" not in group_ids(admin), "the empty group leaves ListGroups",
             DEADLINE_S)
    assert "kafka group kept: 1 offsets removed (expired)" in server.log()
    gone = run_folio("group", "describe", "kept", "--kind", "kafka", "--endpoint",
                     server.address)
    assert gone.returncode == 1
    assert "Kafka consumer group 'kept' does not exist" in gone.stderr

    configs = broker_configs(admin)
    assert (configs["offsets.retention.minutes"].value,
            configs["offsets.retention.check.interval.ms"].value) == ("0.05", "200")
    assert not configs["offsets.retention.minutes"].is_default

    # Restarted with Kafka's 7 days: what expired stays gone (tombstones).
    assert server.kill() == -9
    server = start_standalone(processes, data_dir, "--kafka-port", "0")
    admin = AdminClient({"bootstrap.servers": bootstrap_of(server)})
    assert offsets_of(admin, "kept") == {}
    assert offsets_of(admin, "simple") == {}
    assert not {"kept", "simple"} & group_ids(admin)
    configs = broker_configs(admin)
    assert configs["offsets.retention.minutes"].value == "10080"
    assert configs["offsets.retention.minutes"].is_default


@pytest.mark.faults
def test_a_deleted_topics_offsets_leave_every_group(processes: BookieProcesses,
                                                    tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    server = start_standalone(processes, data_dir, "--kafka-port", "0")
    bootstrap = bootstrap_of(server)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for topic in ("doomed", "stays", "by-cli"):
        create_topic(bootstrap, topic, 2)
    for group in ("g1", "g2"):
        commit_without_group(bootstrap, group, [
            TopicPartition("doomed", 0, 3), TopicPartition("doomed", 1, 4),
            TopicPartition("stays", 1, 5), TopicPartition("by-cli", 0, 6)])
    commit_without_group(bootstrap, "only-doomed", [TopicPartition("doomed", 0, 1)])
    assert broker_configs(admin)["transactional.id.expiration.ms"].value == "604800000"

    (deleted,) = admin.delete_topics(["doomed"]).values()
    deleted.result(timeout=DEADLINE_S)
    # Answered after the offsets went: no waiting.
    for group in ("g1", "g2"):
        assert offsets_of(admin, group) == {("stays", 1): 5, ("by-cli", 0): 6}
    # A group left with no offsets and no members is gone (Kafka's Dead).
    assert "only-doomed" not in group_ids(admin)
    # Deleted with the CLI (the gRPC API): the same.
    result = run_folio("topic", "delete", "by-cli", "--endpoint", server.address)
    assert result.returncode == 0, result.stderr
    assert offsets_of(admin, "g1") == {("stays", 1): 5}
    # Made again: it starts with no committed offsets.
    create_topic(bootstrap, "doomed", 2)
    assert offsets_of(admin, "g2") == {("stays", 1): 5}

    assert server.kill() == -9
    server = start_standalone(processes, data_dir, "--kafka-port", "0")
    py_admin = KafkaAdminClient(bootstrap_servers=bootstrap_of(server))
    try:
        for group in ("g1", "g2"):
            found = py_admin.list_group_offsets({group: None})[group]
            assert {(tp.topic, tp.partition): meta.offset for tp, meta in found.items()} == {
                ("stays", 1): 5}
    finally:
        py_admin.close()


def test_a_consumer_protocol_group_keeps_only_its_subscribed_topics_offsets(
        processes: BookieProcesses, tmp_path: Path) -> None:
    server = start_standalone(processes, tmp_path / "data", *SHORT)
    bootstrap = bootstrap_of(server)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    create_topic(bootstrap, "modern-in", 1)
    create_topic(bootstrap, "modern-other", 1)
    member = Consumer({"bootstrap.servers": bootstrap, "group.id": "modern",
                       "group.protocol": "consumer", "auto.offset.reset": "earliest",
                       "enable.auto.commit": False})
    assigned: set[str] = set()
    member.subscribe(["modern-in"],
                     on_assign=lambda _c, tps: assigned.update(tp.topic for tp in tps))
    try:
        poll_until([member], lambda: assigned == {"modern-in"}, "the member's assignment")
        done = member.commit(offsets=[TopicPartition("modern-in", 0, 2),
                                      TopicPartition("modern-other", 0, 3)],
                             asynchronous=False)
        assert done is not None and [tp.error for tp in done] == [None, None]
        # KIP-848 (Kafka's ConsumerGroup): a topic no member subscribes to expires by
        # its commit time, the subscribed one stays while the member does.
        poll_until([member], lambda: offsets_of(admin, "modern") == {("modern-in", 0): 2},
                   "the unsubscribed topic's offset expires")
        assert "kafka group modern: 1 offsets removed (expired)" in server.log()
    finally:
        member.close()
    wait_for(lambda: "modern" not in group_ids(admin), "the empty group's offsets expire "
             "and the group goes", DEADLINE_S)
    assert offsets_of(admin, "modern") == {}
    # The group leaves the listing when its deletion starts (the record's write comes
    # after) and is logged once that write is done: waited for, not read at once.
    wait_for(lambda: "kafka consumer group modern: deleted" in server.log(),
             "the group's deletion logged", DEADLINE_S)
