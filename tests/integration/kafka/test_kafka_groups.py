"""Kafka consumer groups with real clients: rebalances, commits, listings.

Two members of one group split a topic's partitions; when one leaves, the
other gets them all (librdkafka and kafka-python, each against the broker's
group coordinator). Committed offsets are where a new member of the group
starts; the admin APIs list and describe the group.
"""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient, KafkaConsumer
from kafka import TopicPartition as KafkaPythonPartition

from tests.integration.kafka.test_kafka_clients import DEADLINE_S, create_topic, produce
from tests.support.bookies import BookieProcess

PARTITIONS = 4


def fill(bootstrap: str, topic: str, per_partition: int) -> None:
    """Create ``topic`` with ``PARTITIONS`` partitions of ``per_partition`` records each."""
    create_topic(bootstrap, topic, PARTITIONS)
    produce(bootstrap, topic, [(p, b"%d-%d" % (p, i), None, [])
                               for i in range(per_partition) for p in range(PARTITIONS)])


def group_consumer(bootstrap: str, group: str, assigned: dict[str, set[int]], name: str,
                   revoked: list[str] | None = None, **settings: Any) -> Consumer:
    """A subscribed librdkafka consumer whose current assignment is kept in ``assigned[name]``.

    Each revocation appends ``name`` to ``revoked`` (if given).
    """
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "session.timeout.ms": 10_000, "heartbeat.interval.ms": 500,
                         **settings})

    def on_assign(_: Consumer, partitions: list[TopicPartition]) -> None:
        assigned[name] = {tp.partition for tp in partitions}

    def on_revoke(_: Consumer, partitions: list[TopicPartition]) -> None:
        assigned[name] = set()
        if revoked is not None:
            revoked.append(name)

    assigned[name] = set()
    consumer.subscribe([group], on_assign=on_assign, on_revoke=on_revoke)
    return consumer


def poll_until(consumers: list[Consumer], condition: Any, what: str,
               messages: list[Any] | None = None) -> list[Any]:
    """Poll every consumer until ``condition()``; the messages got meanwhile (into ``messages``)."""
    messages = [] if messages is None else messages
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, f"not within {DEADLINE_S} s: {what}"
        for consumer in consumers:
            message = consumer.poll(0.1)
            if message is not None:
                assert message.error() is None, message.error()
                messages.append(message)
    return messages


def test_librdkafka_two_members_split_the_partitions_and_one_gets_all_when_the_other_leaves(
        bootstrap: str) -> None:
    group = "rd-group"
    fill(bootstrap, group, 5)  # the topic is named after the group
    assigned: dict[str, set[int]] = {}
    first = group_consumer(bootstrap, group, assigned, "first")
    second: Consumer | None = None
    try:
        got = poll_until([first], lambda: assigned["first"] == set(range(PARTITIONS)),
                         "the first member gets every partition")
        second = group_consumer(bootstrap, group, assigned, "second")
        got += poll_until(
            [first, second],
            lambda: (len(assigned["first"]) == 2 and len(assigned["second"]) == 2
                     and assigned["first"] | assigned["second"] == set(range(PARTITIONS))),
            "the two members split the partitions")
        admin = AdminClient({"bootstrap.servers": bootstrap})
        description = admin.describe_consumer_groups([group])[group].result(DEADLINE_S)
        assert str(description.state).endswith("STABLE")
        assert len(description.members) == 2
        assert {m.assignment.topic_partitions[0].topic for m in description.members} == {group}
        listed = admin.list_consumer_groups().result(DEADLINE_S)
        assert group in {g.group_id for g in listed.valid}
        second.close()
        second = None
        got += poll_until([first], lambda: assigned["first"] == set(range(PARTITIONS)),
                          "the remaining member gets every partition back")
        poll_until([first], lambda: len({(m.partition(), m.offset()) for m in got})
                   == 5 * PARTITIONS, "every record is read", got)
        assert {(m.partition(), m.value()) for m in got} == {
            (p, b"%d-%d" % (p, i)) for p in range(PARTITIONS) for i in range(5)}
    finally:
        if second is not None:
            second.close()
        first.close()


def test_librdkafka_commits_are_where_the_next_member_starts(bootstrap: str) -> None:
    group = "rd-commits"
    fill(bootstrap, group, 6)
    assigned: dict[str, set[int]] = {}
    consumer = group_consumer(bootstrap, group, assigned, "one")
    try:
        poll_until([consumer], lambda: assigned["one"] == set(range(PARTITIONS)),
                   "the member gets every partition")
        offsets = [TopicPartition(group, p, 2 + p) for p in range(PARTITIONS)]
        consumer.commit(offsets=offsets, asynchronous=False)
        committed = consumer.committed([TopicPartition(group, p) for p in range(PARTITIONS)],
                                       timeout=DEADLINE_S)
        assert [(tp.partition, tp.offset) for tp in committed] == [
            (p, 2 + p) for p in range(PARTITIONS)]
    finally:
        consumer.close()
    assigned = {}
    again = group_consumer(bootstrap, group, assigned, "again")
    try:
        got: list[Any] = []
        poll_until([again], lambda: len(got) >= sum(6 - 2 - p for p in range(PARTITIONS)),
                   "the rest after the committed offsets", got)
    finally:
        again.close()
    assert sorted((m.partition(), m.offset()) for m in got) == sorted(
        (p, offset) for p in range(PARTITIONS) for offset in range(2 + p, 6))
    # Deleting the (now empty) group deletes its offsets.
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_consumer_groups([group])[group].result(DEADLINE_S)
    assert group not in {g.group_id for g in admin.list_consumer_groups().result(
        DEADLINE_S).valid}
    probe = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        offsets = probe.committed([TopicPartition(group, p) for p in range(PARTITIONS)],
                                  timeout=DEADLINE_S)
    finally:
        probe.close()
    assert {tp.offset for tp in offsets} == {-1001}  # librdkafka's "no committed offset"


def test_kafka_python_group_rebalances_between_two_members(bootstrap: str) -> None:
    group = "kp-group"
    fill(bootstrap, group, 3)

    def member() -> KafkaConsumer:
        consumer = KafkaConsumer(group, bootstrap_servers=bootstrap, group_id=group,
                                 auto_offset_reset="earliest", enable_auto_commit=False,
                                 session_timeout_ms=10_000, heartbeat_interval_ms=500)
        # The topic's metadata before the first join: kafka-python 3.0 otherwise
        # may lead a generation without it, assign nothing, rejoin, and was once
        # seen stuck after that (no SyncGroup, no heartbeat), whatever the broker.
        assert consumer.partitions_for_topic(group) == set(range(PARTITIONS))
        return consumer

    def assignment(consumer: KafkaConsumer) -> set[int]:
        return {tp.partition for tp in consumer.assignment()}

    first = member()
    second: KafkaConsumer | None = None
    records: list[Any] = []
    deadline = time.monotonic() + DEADLINE_S
    try:
        while assignment(first) != set(range(PARTITIONS)) or len(records) < 3 * PARTITIONS:
            assert time.monotonic() < deadline, "the first member reads every partition"
            for batch in first.poll(timeout_ms=200).values():
                records.extend(batch)
        first.commit()
        second = member()
        while not (len(assignment(first)) == 2 and len(assignment(second)) == 2):
            assert time.monotonic() < deadline, "the two members split the partitions"
            first.poll(timeout_ms=100)
            second.poll(timeout_ms=100)
        assert assignment(first) | assignment(second) == set(range(PARTITIONS))
        second.close()
        second = None
        while assignment(first) != set(range(PARTITIONS)):
            assert time.monotonic() < deadline, "the remaining member gets all back"
            first.poll(timeout_ms=200)
    finally:
        if second is not None:
            second.close()
        first.close()
    assert sorted((r.partition, r.offset) for r in records) == sorted(
        (p, i) for p in range(PARTITIONS) for i in range(3))
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        offsets = admin.list_group_offsets({group: None})[group]
        listed = admin.list_groups()
    finally:
        admin.close()
    committed = {tp.partition: meta.offset for tp, meta in offsets.items()}
    assert committed == dict.fromkeys(range(PARTITIONS), 3)
    assert KafkaPythonPartition(group, 0) in offsets
    entry = next(entry for entry in listed if entry["group_id"] == group)
    assert (entry["protocol_type"], entry["group_state"]) == ("consumer", "Empty")


_MEMBER_SCRIPT = """
import sys
from confluent_kafka import Consumer
consumer = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                     "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
consumer.subscribe([sys.argv[2]])
while True:
    consumer.poll(0.2)
"""


@pytest.mark.faults
def test_a_killed_member_is_dropped_after_its_session_timeout(bootstrap: str) -> None:
    group = "rd-killed"
    fill(bootstrap, group, 1)
    assigned: dict[str, set[int]] = {}
    survivor = group_consumer(bootstrap, group, assigned, "survivor")
    member = subprocess.Popen([sys.executable, "-c", _MEMBER_SCRIPT, bootstrap, group],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        poll_until([survivor], lambda: len(assigned["survivor"]) == 2,
                   "the other process takes half of the partitions")
        # A crash: no LeaveGroup. The session timeout (6 s) removes it.
        member.kill()
        member.wait(DEADLINE_S)
        poll_until([survivor], lambda: assigned["survivor"] == set(range(PARTITIONS)),
                   "the survivor gets every partition")
    finally:
        if member.poll() is None:
            member.kill()
            member.wait(DEADLINE_S)
        survivor.close()


def test_a_static_member_restarting_takes_its_partitions_back_without_a_rebalance(
        bootstrap: str, server: BookieProcess) -> None:
    group = "rd-static"
    fill(bootstrap, group, 1)
    assigned: dict[str, set[int]] = {}
    revoked: list[str] = []
    consumers = {name: group_consumer(bootstrap, group, assigned, name, revoked,
                                      **{"group.instance.id": name})
                 for name in ("a", "b")}
    try:
        poll_until(list(consumers.values()),
                   lambda: len(assigned["a"]) == 2 and len(assigned["b"]) == 2,
                   "the static members split the partitions")
        held_by_a, held_by_b = set(assigned["a"]), set(assigned["b"])
        revoked_before = revoked.count("b")
        # A static member leaves no group on close (KIP-345): "a" restarts as a new client.
        consumers.pop("a").close()
        static: dict[str, Any] = {"group.instance.id": "a"}
        consumers["a"] = group_consumer(bootstrap, group, assigned, "a-again", **static)
        poll_until(list(consumers.values()), lambda: assigned["a-again"] == held_by_a,
                   "the restarted member gets its partitions back")
        assert revoked.count("b") == revoked_before  # "b" was never asked to rejoin
        assert assigned["b"] == held_by_b
    finally:
        for consumer in consumers.values():
            consumer.close()
    log = server.log()
    assert f"kafka group {group}: static member a is back as" in log
    assert f"kafka group {group}: rebalance of generation 2" not in log
