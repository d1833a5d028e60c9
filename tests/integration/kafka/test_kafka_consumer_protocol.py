"""KIP-848 consumer groups (``group.protocol=consumer``) with librdkafka on a real standalone.

The broker assigns (ConsumerGroupHeartbeat, server-side ``uniform``
assignor): two members share a topic's partitions, one leaves and the other
gets them all, a third joins and gets some; each member commits after each
record, so every record is consumed exactly once across the handovers
(revocation before assignment to another member). The group is described by
librdkafka's admin client (ConsumerGroupDescribe), listed with its type, and
shown by ``folio group list`` / ``describe``; a heartbeat that is not a join
for a classic group is GROUP_ID_NOT_FOUND (a join upgrades the group:
``test_kafka_group_upgrade``).
"""

from __future__ import annotations

import datetime
import json
import socket
import sys
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

from tests.integration.kafka.test_kafka_clients import DEADLINE_S, create_topic, produce
from tests.support.bookies import BookieProcess, run_folio
from tests.support.kafka import raw_request, read_response

PARTITIONS = 4
#: Two rebalances of the consumer protocol take up to a few heartbeat intervals (5 s).
SLOW_S = 3 * DEADLINE_S


def kip848_consumer(bootstrap: str, group: str, topic: str, held: dict[str, set[int]],
                    name: str) -> Consumer:
    """A librdkafka member of ``group`` on the consumer protocol; its partitions in held[name].

    The protocol's callbacks are incremental: added and removed partitions.
    """
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "group.protocol": "consumer", "client.id": name,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    held[name] = set()

    def on_assign(_: Consumer, partitions: list[TopicPartition]) -> None:
        held[name] |= {tp.partition for tp in partitions}

    def on_revoke(_: Consumer, partitions: list[TopicPartition]) -> None:
        held[name] -= {tp.partition for tp in partitions}

    consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)
    return consumer


def commit(consumer: Consumer, message: Any) -> None:
    """Commit past ``message``; a STALE_MEMBER_EPOCH (the epoch moved on) is tried again."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        try:
            consumer.commit(message=message, asynchronous=False)
            return
        except KafkaException as error:
            code = error.args[0].code()
            assert code == KafkaError.STALE_MEMBER_EPOCH, error
            assert time.monotonic() < deadline, "the commit never went through"
            consumer.poll(0.05)  # lets the heartbeat bring the new epoch


class Reading:
    """Members that read and commit record by record; every (partition, offset) read."""

    def __init__(self) -> None:
        self.read: list[tuple[int, int]] = []

    def poll_until(self, consumers: list[Consumer], condition: Any, what: str) -> None:
        deadline = time.monotonic() + SLOW_S
        while not condition():
            assert time.monotonic() < deadline, f"not within {SLOW_S} s: {what}"
            for consumer in consumers:
                message = consumer.poll(0.1)
                if message is None:
                    continue
                assert message.error() is None, message.error()
                partition, offset = message.partition(), message.offset()
                assert partition is not None and offset is not None
                self.read.append((partition, offset))
                commit(consumer, message)


def heartbeat(bootstrap: str, group: str, member_id: str, member_epoch: int,
              topics: list[str]) -> Any:
    """One raw ConsumerGroupHeartbeat v1 (a join when ``member_epoch`` is 0); its answer."""
    host, port = bootstrap.rsplit(":", 1)
    schema: Any = load_request_schema(68, 1)
    request = schema(
        group_id=group, member_id=member_id, member_epoch=member_epoch, instance_id=None,
        rack_id=None, rebalance_timeout=datetime.timedelta(seconds=30),
        subscribed_topic_names=tuple(topics), subscribed_topic_regex=None,
        server_assignor=None, topic_partitions=())
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(raw_request(68, 1, 5, request))
        correlation_id, answer = read_response(sock, 68, 1)
    assert correlation_id == 5
    return answer


def _delete_topic(topic: str) -> Any:
    """OffsetDelete v0's topic of partition 0."""
    module = sys.modules[load_request_schema(47, 0).__module__]
    return module.OffsetDeleteRequestTopic(name=topic, partitions=(
        module.OffsetDeleteRequestPartition(partition_index=0),))


def _cli(server: BookieProcess, *args: str) -> str:
    done = run_folio("group", *args, "--endpoint", server.address)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_members_share_hand_over_and_read_every_record_once(
        server: BookieProcess, bootstrap: str) -> None:
    group, topic = "kip848-share", "kip848-share-in"
    create_topic(bootstrap, topic, PARTITIONS)
    produce(bootstrap, topic, [(p, b"a%d-%d" % (p, i), None, [])
                               for i in range(10) for p in range(PARTITIONS)])
    held: dict[str, set[int]] = {}
    reading = Reading()
    every = set(range(PARTITIONS))
    first = kip848_consumer(bootstrap, group, topic, held, "first")
    second: Consumer | None = None
    third: Consumer | None = None
    try:
        reading.poll_until([first], lambda: held["first"] == every,
                           "the first member gets every partition")
        second = kip848_consumer(bootstrap, group, topic, held, "second")
        reading.poll_until(
            [first, second], lambda: len(held["first"]) == 2 and len(held["second"]) == 2
            and held["first"] | held["second"] == every, "the two members share the partitions")

        admin = AdminClient({"bootstrap.servers": bootstrap})
        described = admin.describe_consumer_groups([group])[group].result(DEADLINE_S)
        assert str(described.type).endswith("CONSUMER")
        assert str(described.state).endswith("STABLE")
        assert described.partition_assignor == "uniform"
        assert sorted(m.client_id for m in described.members) == ["first", "second"]
        assert sorted(tp.partition for m in described.members
                      for tp in m.assignment.topic_partitions) == sorted(every)
        listed = admin.list_consumer_groups().result(DEADLINE_S)
        [mine] = [g for g in listed.valid if g.group_id == group]
        assert str(mine.type).endswith("CONSUMER")

        shown = json.loads(_cli(server, "describe", group, "--json"))
        assert (shown["kind"], shown["state"], shown["protocol_type"], shown["protocol"]) == (
            "kafka", "Stable", "consumer", "uniform")
        assert sorted(m["client_id"] for m in shown["members"]) == ["first", "second"]
        assert sorted(a["partition"] for m in shown["members"] for a in m["assigned"]) == [
            0, 1, 2, 3]
        listing = json.loads(_cli(server, "list", "--json"))
        assert [(g["kind"], g["members"]) for g in listing if g["name"] == group] == [
            ("kafka", 2)]

        produce(bootstrap, topic, [(p, b"b%d-%d" % (p, i), None, [])
                                   for i in range(10) for p in range(PARTITIONS)])
        second.close()  # leaves (epoch -1): its partitions go to the first at once
        second = None
        reading.poll_until([first], lambda: held["first"] == every,
                           "the remaining member gets every partition")
        third = kip848_consumer(bootstrap, group, topic, held, "third")
        reading.poll_until(
            [first, third], lambda: bool(held["third"]) and not held["first"] & held["third"]
            and held["first"] | held["third"] == every, "the third member gets some")
        produce(bootstrap, topic, [(p, b"c%d-%d" % (p, i), None, [])
                                   for i in range(5) for p in range(PARTITIONS)])
        reading.poll_until([first, third], lambda: len(reading.read) >= 25 * PARTITIONS,
                           "every record is read")
        assert sorted(reading.read) == sorted(
            (p, offset) for p in range(PARTITIONS) for offset in range(25)), \
            "a record read twice or never"
        committed = first.committed([TopicPartition(topic, p) for p in range(PARTITIONS)],
                                    timeout=DEADLINE_S)
        assert [(tp.partition, tp.offset) for tp in committed] == [
            (p, 25) for p in range(PARTITIONS)]
    finally:
        for consumer in (third, second, first):
            if consumer is not None:
                consumer.close()
    # Everyone left: the group is Empty, and can be deleted with its offsets.
    admin = AdminClient({"bootstrap.servers": bootstrap})
    described = admin.describe_consumer_groups([group])[group].result(DEADLINE_S)
    assert str(described.state).endswith("EMPTY")
    admin.delete_consumer_groups([group])[group].result(DEADLINE_S)
    assert group not in {g.group_id for g in admin.list_consumer_groups().result(
        DEADLINE_S).valid}


def test_offset_delete_of_a_subscribed_topic_is_refused(bootstrap: str) -> None:
    group, topic = "kip848-kinds", "kip848-kinds-in"
    create_topic(bootstrap, topic, 2)
    held: dict[str, set[int]] = {}
    modern = kip848_consumer(bootstrap, group, topic, held, "modern")
    try:
        Reading().poll_until([modern], lambda: held["modern"] == {0, 1},
                             "the member gets both partitions")
        # OffsetDelete of a topic a member subscribes to: refused, as Kafka does.
        schema: Any = load_request_schema(47, 0)
        request = schema(group_id=group, topics=(_delete_topic(topic),))
        host, port = bootstrap.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=30) as sock:
            sock.sendall(raw_request(47, 0, 9, request))
            _, answer = read_response(sock, 47, 0)
        assert [p.error_code for t in answer.topics for p in t.partitions] == [
            KafkaError.GROUP_SUBSCRIBED_TO_TOPIC]
    finally:
        modern.close()


@pytest.mark.parametrize("member_epoch", [3])
def test_a_heartbeat_for_a_classic_group_with_members_is_group_id_not_found(
        bootstrap: str, member_epoch: int) -> None:
    """Not a join (epoch 0, which upgrades the group): GROUP_ID_NOT_FOUND, as Kafka."""
    group, topic = f"kip848-classic-{member_epoch}", f"kip848-classic-in-{member_epoch}"
    create_topic(bootstrap, topic, 1)
    classic = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                        "auto.offset.reset": "earliest", "session.timeout.ms": 10_000})
    assigned: list[int] = []
    classic.subscribe([topic], on_assign=lambda _c, tps: assigned.extend(
        tp.partition for tp in tps))
    try:
        deadline = time.monotonic() + DEADLINE_S
        while not assigned:
            classic.poll(0.1)
            assert time.monotonic() < deadline, "the classic member got no partition"
        answer = heartbeat(bootstrap, group, "m-1", member_epoch, [topic])
        assert answer.error_code == KafkaError.GROUP_ID_NOT_FOUND
    finally:
        classic.close()


def test_a_static_member_back_under_a_new_id_takes_its_partitions_without_a_new_epoch(
        server: BookieProcess, bootstrap: str) -> None:
    group, topic = "kip848-static", "kip848-static-in"
    create_topic(bootstrap, topic, 2)
    held: dict[str, set[int]] = {}

    def static(name: str) -> Consumer:
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                             "group.protocol": "consumer", "client.id": name,
                             "group.instance.id": "box-1", "auto.offset.reset": "earliest"})
        held[name] = set()
        consumer.subscribe([topic], on_assign=lambda _c, tps: held[name].update(
            tp.partition for tp in tps))
        return consumer

    before = static("before")
    try:
        Reading().poll_until([before], lambda: held["before"] == {0, 1}, "both partitions")
        epoch = json.loads(_cli(server, "describe", group, "--json"))["generation"]
    finally:
        before.close()  # a static member leaves with epoch -2: its partitions wait for it
    shown = json.loads(_cli(server, "describe", group, "--json"))
    assert [m["client_id"] for m in shown["members"]] == ["before"]
    after = static("after")
    try:
        Reading().poll_until([after], lambda: held["after"] == {0, 1}, "both partitions back")
        shown = json.loads(_cli(server, "describe", group, "--json"))
        assert [(m["client_id"], m["group_instance_id"]) for m in shown["members"]] == [
            ("after", "box-1")]
        assert shown["generation"] == epoch
    finally:
        after.close()


def test_a_kip848_member_commits_offsets_in_a_transaction(bootstrap: str) -> None:
    group, source, sink = "kip848-txn", "kip848-txn-in", "kip848-txn-out"
    create_topic(bootstrap, source, 1)
    create_topic(bootstrap, sink, 1)
    produce(bootstrap, source, [(0, b"r%d" % i, None, []) for i in range(5)])
    held: dict[str, set[int]] = {}
    reading = Reading()
    member = kip848_consumer(bootstrap, group, source, held, "member")
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "kip848-txn-id"})
    try:
        got: list[Any] = []
        deadline = time.monotonic() + SLOW_S
        while len(got) < 5:
            assert time.monotonic() < deadline, "the 5 records were not read"
            message = member.poll(0.1)
            if message is not None and message.error() is None:
                got.append(message)
        producer.init_transactions(DEADLINE_S)
        producer.begin_transaction()
        for message in got:
            producer.produce(sink, value=message.value(), partition=0)
        producer.send_offsets_to_transaction(
            member.position([TopicPartition(source, 0)]), member.consumer_group_metadata(),
            DEADLINE_S)
        producer.commit_transaction(DEADLINE_S)
        [committed] = member.committed([TopicPartition(source, 0)], timeout=DEADLINE_S)
        assert committed.offset == 5
        assert not reading.read
        admin = AdminClient({"bootstrap.servers": bootstrap})
        listed = admin.list_consumer_groups().result(DEADLINE_S)
        # Listed once, as a consumer group (the commit kept it one).
        assert [str(g.type) for g in listed.valid if g.group_id == group] == [
            "ConsumerGroupType.CONSUMER"]
    finally:
        member.close()


def test_metadata_v12_answers_topics_asked_by_id(bootstrap: str) -> None:
    topic = "kip848-by-id"
    create_topic(bootstrap, topic, 2)
    schema: Any = load_request_schema(3, 12)
    module = sys.modules[schema.__module__]

    def ask(topics: tuple[Any, ...]) -> Any:
        host, port = bootstrap.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=30) as sock:
            sock.sendall(raw_request(3, 12, 3, schema(
                topics=topics, allow_auto_topic_creation=True,
                include_topic_authorized_operations=False)))
            return read_response(sock, 3, 12)[1]

    [by_name] = ask((module.MetadataRequestTopic(topic_id=None, name=topic),)).topics
    unknown = uuid.uuid4()
    answer = ask((module.MetadataRequestTopic(topic_id=by_name.topic_id, name=None),
                  module.MetadataRequestTopic(topic_id=unknown, name=None)))
    found, missing = answer.topics
    assert (found.error_code, found.name, found.topic_id) == (
        ErrorCode.none, topic, by_name.topic_id)
    assert sorted(p.partition_index for p in found.partitions) == [0, 1]
    assert (missing.error_code, missing.topic_id, missing.partitions) == (
        ErrorCode.unknown_topic_id, unknown, ())


def test_partitions_added_to_a_subscribed_topic_are_assigned(bootstrap: str) -> None:
    group, topic = "kip848-grow", "kip848-grow-in"
    create_topic(bootstrap, topic, 2)
    held: dict[str, set[int]] = {}
    member = kip848_consumer(bootstrap, group, topic, held, "member")
    try:
        Reading().poll_until([member], lambda: held["member"] == {0, 1}, "both partitions")
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_partitions([NewPartitions(topic, 4)])[topic].result(DEADLINE_S)
        # The group looks at its topics' partition counts again (every 10 s): a new epoch.
        Reading().poll_until([member], lambda: held["member"] == {0, 1, 2, 3},
                             "the new partitions assigned too")
    finally:
        member.close()
