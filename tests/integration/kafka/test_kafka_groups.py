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
from confluent_kafka import Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient, KafkaConsumer
from kafka import TopicPartition as KafkaPythonPartition
from kafka.errors import FencedInstanceIdError
from kafka.structs import OffsetAndMetadata
from kio.schema.errors import ErrorCode

from tests.integration.kafka.test_kafka_clients import DEADLINE_S, create_topic, produce
from tests.integration.kafka.test_kafka_groups_bad_input import (
    HEARTBEAT,
    JOIN,
    SECOND,
    SYNC,
    Session,
)
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
        # A second client of instance "a" while "a-again" runs: the old member id
        # is fenced, which librdkafka reports as a fatal error.
        consumers["a-third"] = group_consumer(bootstrap, group, assigned, "a-third", **static)
        errors: list[Any] = []
        poll_until([consumers["a-third"]], lambda: _fatal(consumers["a"], errors),
                   "the replaced client is fenced")
        assert "Static consumer fenced" in errors[0].str()
        poll_until([consumers["a-third"]], lambda: assigned["a-third"] == held_by_a,
                   "the third client gets the partitions")
        assert revoked.count("b") == revoked_before
    finally:
        for consumer in consumers.values():
            consumer.close()
    log = server.log()
    assert f"kafka group {group}: static member a is back as" in log
    assert f"kafka group {group}: rebalance of generation 2" not in log


def _fatal(consumer: Consumer, errors: list[Any]) -> bool:
    """Whether ``consumer`` reported a fatal error (kept in ``errors``): librdkafka's
    event has the code _FATAL (its ``fatal()`` flag is not set on it)."""
    message = consumer.poll(0.1)
    error = None if message is None else message.error()
    if error is not None and error.code() == KafkaError._FATAL:
        errors.append(error)
    return bool(errors)


def test_a_static_member_back_with_another_assignor_preference_rebalances(
        bootstrap: str, server: BookieProcess) -> None:
    # "a" prefers roundrobin, "b" range: one vote each, so the group takes range (the
    # first name). "b" back preferring roundrobin changes the group's choice: Kafka
    # (and Folio) rebalance, where a restart with the same preference does not.
    group = "rd-static-assignor"
    fill(bootstrap, group, 1)
    assigned: dict[str, set[int]] = {}
    revoked: list[str] = []
    consumers = {
        name: group_consumer(bootstrap, group, assigned, name, revoked,
                             **{"group.instance.id": name,
                                "partition.assignment.strategy": strategy})
        for name, strategy in (("a", "roundrobin,range"), ("b", "range,roundrobin"))}
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        poll_until(list(consumers.values()),
                   lambda: len(assigned["a"]) == 2 and len(assigned["b"]) == 2,
                   "the static members split the partitions")
        described = admin.describe_consumer_groups([group])[group].result(DEADLINE_S)
        assert described.partition_assignor == "range"
        revoked_before = revoked.count("a")
        consumers.pop("b").close()
        consumers["b"] = group_consumer(
            bootstrap, group, assigned, "b-again", revoked,
            **{"group.instance.id": "b", "partition.assignment.strategy": "roundrobin,range"})
        poll_until(list(consumers.values()),
                   lambda: (revoked.count("a") > revoked_before and len(assigned["a"]) == 2
                            and len(assigned["b-again"]) == 2),
                   "a rebalance, then the members split the partitions again")
        described = admin.describe_consumer_groups([group])[group].result(DEADLINE_S)
        assert described.partition_assignor == "roundrobin"
        assert assigned["a"] | assigned["b-again"] == set(range(PARTITIONS))
    finally:
        for consumer in consumers.values():
            consumer.close()
    assert (f"kafka group {group}: rebalance of generation 2 (the protocol changes: "
            "static member b is back with other protocols)") in server.log()


def test_kafka_python_static_member_restarts_without_a_rebalance_and_its_old_id_is_fenced(
        bootstrap: str) -> None:
    group = "kp-static"
    fill(bootstrap, group, 1)

    def member(instance: str) -> KafkaConsumer:
        consumer = KafkaConsumer(group, bootstrap_servers=bootstrap, group_id=group,
                                 group_instance_id=instance, auto_offset_reset="earliest",
                                 enable_auto_commit=False, session_timeout_ms=10_000,
                                 heartbeat_interval_ms=500)
        assert consumer.partitions_for_topic(group) == set(range(PARTITIONS))
        return consumer

    def assignment(consumer: KafkaConsumer) -> set[int]:
        return {tp.partition for tp in consumer.assignment()}

    def poll_until_kp(consumers: list[KafkaConsumer], condition: Any, what: str) -> None:
        deadline = time.monotonic() + DEADLINE_S
        while not condition():
            assert time.monotonic() < deadline, f"not within {DEADLINE_S} s: {what}"
            for consumer in consumers:
                consumer.poll(timeout_ms=100)

    consumers = {"a": member("a"), "b": member("b")}
    try:
        poll_until_kp(list(consumers.values()),
                      lambda: (len(assignment(consumers["a"])) == 2
                               and len(assignment(consumers["b"])) == 2),
                      "the static members split the partitions")
        held_by_a, held_by_b = assignment(consumers["a"]), assignment(consumers["b"])
        b_before = consumers["b"].group_metadata()
        old_a = consumers.pop("a")
        old_a_id = old_a.group_metadata().member_id
        old_a.close()  # a static member sends no LeaveGroup
        consumers["a"] = member("a")
        poll_until_kp(list(consumers.values()), lambda: assignment(consumers["a"]) == held_by_a,
                      "the restarted member gets its partitions back")
        b_after = consumers["b"].group_metadata()
        assert (b_after.generation_id, b_after.member_id) == (b_before.generation_id,
                                                              b_before.member_id)
        assert assignment(consumers["b"]) == held_by_b
        a_now = consumers["a"].group_metadata()
        assert a_now.generation_id == b_before.generation_id
        assert a_now.member_id != old_a_id and a_now.member_id.startswith("a-")
        # A second client with instance id "a" while the first runs: it takes the place,
        # again with no rebalance, and the first one's member id is fenced.
        fenced = consumers.pop("a")
        consumers["a"] = member("a")
        poll_until_kp(list(consumers.values()), lambda: assignment(consumers["a"]) == held_by_a,
                      "the second client of instance a gets its partitions")
        with pytest.raises(FencedInstanceIdError):
            fenced.commit({KafkaPythonPartition(group, p): OffsetAndMetadata(1, "", -1)
                           for p in held_by_a})
        fenced.close()
        assert consumers["b"].group_metadata().generation_id == b_before.generation_id
        assert assignment(consumers["b"]) == held_by_b
    finally:
        for consumer in consumers.values():
            consumer.close()


def test_a_static_leader_back_at_join_group_v9_is_told_to_skip_the_assignment(
        server: BookieProcess) -> None:
    # KIP-814 on the wire: a static leader back without a rebalance gets the members
    # and skip_assignment at v9+; before v9 the answer names the previous leader.
    group = "raw-static-v9"
    session = Session(server)

    def join(version: int) -> Any:
        module = session.module(JOIN, version)
        return session.call(JOIN, version, group_id=group, session_timeout=10 * SECOND,
                            rebalance_timeout=10 * SECOND, member_id="",
                            group_instance_id="a", protocol_type="consumer",
                            protocols=(module.JoinGroupRequestProtocol(name="range",
                                                                       metadata=b"m"),),
                            **({"reason": None} if version >= 8 else {}))

    def sync(member_id: str, assignment: bytes) -> Any:
        module = session.module(SYNC, 5)
        assignments = () if not assignment else (
            module.SyncGroupRequestAssignment(member_id=member_id, assignment=assignment),)
        return session.call(SYNC, 5, group_id=group, generation_id=1, member_id=member_id,
                            group_instance_id="a", protocol_type="consumer",
                            protocol_name="range", assignments=assignments)

    try:
        first = join(9)
        assert (first.error_code, first.generation_id, first.leader) == (
            ErrorCode.none, 1, first.member_id)
        assert first.skip_assignment is False
        assert sync(first.member_id, b"for-a").assignment == b"for-a"
        back = join(9)
        assert (back.error_code, back.generation_id, back.leader, back.skip_assignment) == (
            ErrorCode.none, 1, back.member_id, True)
        assert [m.member_id for m in back.members] == [back.member_id]
        assert back.member_id.startswith("a-") and back.member_id != first.member_id
        synced = sync(back.member_id, b"")  # a skipping leader sends no assignment
        assert (synced.error_code, synced.assignment) == (ErrorCode.none, b"for-a")
        old = session.call(HEARTBEAT, 4, group_id=group, generation_id=1,
                           member_id=first.member_id, group_instance_id="a")
        assert old.error_code == ErrorCode.fenced_instance_id
        before_v9 = join(5)
        assert (before_v9.error_code, before_v9.leader, before_v9.members) == (
            ErrorCode.none, back.member_id, ())
    finally:
        session.close()
