"""Share groups (KIP-932) with librdkafka's ``ShareConsumer`` on a real standalone.

Two share consumers of one group read a one-partition topic together, each
record handed to one of them; explicit acknowledgements: RELEASE hands a
record out again with a greater delivery count, REJECT never, and at the
group's delivery-count limit a released record is archived; a consumer that
closes without acknowledging, or whose locks expire (the group's
``share.record.lock.duration.ms`` set short through IncrementalAlterConfigs on
the GROUP resource), has its records handed to the other. The group is
listed with type ``share`` and described (ShareGroupDescribe through raw
requests: librdkafka 2.16 has no admin call for it), and by ``folio group``. Then bad input through
raw requests (kio), each with Kafka's error code; the group's start offsets
described, altered and deleted (DescribeShareGroupOffsets, AlterShareGroupOffsets,
DeleteShareGroupOffsets) and the group deleted.
"""

from __future__ import annotations

import datetime
import json
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import (
    AcknowledgeType,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    ShareConsumer,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

from tests.integration.kafka.share_requests import (
    alter,
    ask,
    describe,
    heartbeat,
    listed,
    offsets,
    partition,
    share_acknowledge,
    share_fetch,
)
from tests.integration.kafka.test_kafka_clients import DEADLINE_S, create_topic, produce
from tests.support.bookies import BookieProcess, run_folio
from tests.support.wait import wait_for

#: A share member's first assignment comes with its first heartbeat; its
#: fetches then long-poll: a few seconds.
POLL_S = 0.5


def set_group_configs(bootstrap: str, group: str, configs: dict[str, str]) -> None:
    """IncrementalAlterConfigs SET of ``configs`` on the GROUP resource ``group``."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
        for name, value in configs.items()])
    admin.incremental_alter_configs([resource])[resource].result(DEADLINE_S)


def share_consumer(bootstrap: str, group: str, topic: str, *,
                   explicit: bool = False) -> ShareConsumer:
    consumer = ShareConsumer({
        "bootstrap.servers": bootstrap, "group.id": group,
        "share.acknowledgement.mode": "explicit" if explicit else "implicit",
        "max.poll.records": 5})
    consumer.subscribe([topic])
    return consumer


def poll_until(consumer: ShareConsumer, done: Callable[[], bool], what: str,
               on_message: Callable[[Any], None], timeout_s: float = DEADLINE_S) -> None:
    """Poll ``consumer``, giving each record to ``on_message``, until ``done()``."""
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, f"not within {timeout_s} s: {what}"
        for message in consumer.poll(POLL_S):
            assert message.error() is None, message.error()
            on_message(message)


@pytest.fixture
def topic(bootstrap: str, request: pytest.FixtureRequest) -> Iterator[str]:
    name = f"share-{request.node.name[5:40]}".replace("_", "-")
    create_topic(bootstrap, name, 1)
    yield name


def _cli(server: BookieProcess, *args: str) -> str:
    done = run_folio("group", *args, "--endpoint", server.address)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_two_members_share_one_partition(server: BookieProcess, bootstrap: str,
                                         topic: str) -> None:
    group = f"{topic}-g"
    set_group_configs(bootstrap, group, {"share.auto.offset.reset": "earliest"})
    values = [b"r%d" % i for i in range(30)]
    for block in range(6):  # six producers: six record batches
        produce(bootstrap, topic, [(0, value, None, []) for value in values[5 * block:][:5]])
    first = share_consumer(bootstrap, group, topic, explicit=True)
    second = share_consumer(bootstrap, group, topic)
    held: list[Any] = []
    read: list[bytes] = []
    try:
        # The first member holds what it got (acquired, not acknowledged): the
        # second is handed every other record of the partition they share.
        poll_until(first, lambda: bool(held), "the first member's records", held.append)
        assert len(held) < len(values)
        poll_until(second, lambda: len(read) == len(values) - len(held),
                   "the other records", lambda m: read.append(m.value()))
        for message in held:
            first.acknowledge(message, AcknowledgeType.ACCEPT)
        first.commit_sync(DEADLINE_S)
        assert sorted(read + [m.value() for m in held]) == sorted(values)  # each once
        assert (group, "share", "Stable") in listed(bootstrap, "share")
        assert not [g for g in listed(bootstrap, "classic") if g[0] == group]
        described = describe(bootstrap, group)
        assert described.group_state == "Stable"
        assert len(described.members) == 2
        assert all(m.assignment.topic_partitions[0].partitions == (0,)
                   for m in described.members)  # the one partition, shared
        shown = json.loads(_cli(server, "describe", group, "--json"))
        assert (shown["kind"], shown["state"], shown["protocol_type"], shown["protocol"]) == (
            "kafka", "Stable", "share", "simple")
        assert [a["partition"] for m in shown["members"] for a in m["assigned"]] == [0, 0]
        listing = json.loads(_cli(server, "list", "--json"))
        assert [(g["kind"], g["members"]) for g in listing if g["name"] == group] == [
            ("kafka", 2)]
    finally:
        first.close()
        second.close()
    assert describe(bootstrap, group).group_state == "Empty"


def test_release_reject_and_the_delivery_limit(bootstrap: str, topic: str) -> None:
    group = f"{topic}-g"
    set_group_configs(bootstrap, group, {"share.auto.offset.reset": "earliest",
                                         "share.delivery.count.limit": "3"})
    produce(bootstrap, topic, [(0, b"accept", None, []), (0, b"reject", None, []),
                               (0, b"release", None, [])])
    consumer = share_consumer(bootstrap, group, topic, explicit=True)
    counts: dict[bytes, list[int]] = {}

    def on_message(message: Any) -> None:
        value = message.value()
        counts.setdefault(value, []).append(message.delivery_count())
        kind = {b"accept": AcknowledgeType.ACCEPT, b"reject": AcknowledgeType.REJECT,
                b"release": AcknowledgeType.RELEASE}[value]
        consumer.acknowledge(message, kind)

    try:
        poll_until(consumer, lambda: len(counts.get(b"release", [])) == 3,
                   "the released record three times", on_message)
        consumer.commit_sync(DEADLINE_S)
        produce(bootstrap, topic, [(0, b"accept", None, [])])
        poll_until(consumer, lambda: len(counts[b"accept"]) == 2, "the new record",
                   on_message)
    finally:
        consumer.close()
    # RELEASE: again, with a delivery count one greater, until the limit (3) archives it.
    assert counts[b"release"] == [1, 2, 3]
    assert counts[b"reject"] == [1]  # REJECT: never again
    assert counts[b"accept"] == [1, 1]  # the first once, then the new one


def test_records_of_a_closed_member_go_to_the_other(bootstrap: str, topic: str) -> None:
    group = f"{topic}-g"
    set_group_configs(bootstrap, group, {"share.auto.offset.reset": "earliest"})
    produce(bootstrap, topic, [(0, b"v%d" % i, None, []) for i in range(5)])
    quitter = share_consumer(bootstrap, group, topic, explicit=True)
    held: list[bytes] = []
    poll_until(quitter, lambda: bool(held), "the first member's records",
               lambda m: held.append(m.value()))
    quitter.close()  # without acknowledging: released at its share session's close
    other = share_consumer(bootstrap, group, topic)
    read: list[bytes] = []
    try:
        poll_until(other, lambda: len(read) == 5, "all five records",
                   lambda m: read.append(m.value()))
    finally:
        other.close()
    assert set(held) <= set(read)
    assert sorted(read) == [b"v%d" % i for i in range(5)]


def test_expired_locks_hand_records_to_the_other(bootstrap: str, topic: str) -> None:
    group = f"{topic}-g"
    set_group_configs(bootstrap, group, {"share.auto.offset.reset": "earliest",
                                         "share.record.lock.duration.ms": "1000"})
    produce(bootstrap, topic, [(0, b"v%d" % i, None, []) for i in range(5)])
    holder = share_consumer(bootstrap, group, topic, explicit=True)
    other = share_consumer(bootstrap, group, topic, explicit=True)
    held: list[Any] = []
    read: list[tuple[bytes, int]] = []

    def take(message: Any) -> None:
        read.append((message.value(), message.delivery_count()))
        other.acknowledge(message, AcknowledgeType.ACCEPT)

    try:
        poll_until(holder, lambda: bool(held), "the holder's records", held.append)
        # The holder keeps its records unacknowledged (no poll, no commit): after
        # the lock (1 s) they are the other's, delivered a second time.
        poll_until(other, lambda: {v for v, _ in read} >= {m.value() for m in held},
                   "the held records", take)
        other.commit_sync(DEADLINE_S)
    finally:
        holder.close()
        other.close()
    # Delivered again: a second time, or more (the holder's client fetches on in the
    # background and may take a released record again before the other does).
    assert all(count >= 2 for value, count in read if value in {m.value() for m in held})

















def test_heartbeats_the_broker_refuses(bootstrap: str, topic: str) -> None:
    group = f"{topic}-g"
    assert heartbeat(bootstrap, group, "m1", 0, None).error_code == ErrorCode.invalid_request
    assert heartbeat(bootstrap, group, "", 0, (topic,)).error_code == ErrorCode.invalid_request
    assert heartbeat(bootstrap, group, "m1", -1, None).error_code == \
        ErrorCode.group_id_not_found  # a leave makes no group
    joined = heartbeat(bootstrap, group, "m1", 0, (topic,))
    assert (joined.error_code, joined.member_epoch) == (ErrorCode.none, 1)
    [assigned] = joined.assignment.topic_partitions
    assert assigned.partitions == (0,)
    assert heartbeat(bootstrap, group, "m2", 4, (topic,)).error_code == \
        ErrorCode.unknown_member_id
    assert heartbeat(bootstrap, group, "m1", 7, None).error_code == \
        ErrorCode.fenced_member_epoch
    steady = heartbeat(bootstrap, group, "m1", 1, None)
    assert (steady.error_code, steady.member_epoch, steady.assignment) == (
        ErrorCode.none, 1, None)
    assert steady.heartbeat_interval == datetime.timedelta(seconds=5)
    left = heartbeat(bootstrap, group, "m1", -1, None)
    assert (left.error_code, left.member_epoch) == (ErrorCode.none, -1)
    assert heartbeat(bootstrap, group, "m1", 1, None).error_code == ErrorCode.unknown_member_id
    # A classic group's id (a member in it) is no share group's.
    classic = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-classic"})
    try:
        classic.subscribe([topic])
        # (poll() may return an error event before the join: wait for the assignment)
        wait_for(lambda: classic.poll(0.1) is None and bool(classic.assignment()),
                 "the classic member assigned")
        refused = heartbeat(bootstrap, f"{topic}-classic", "m1", 0, (topic,))
        assert refused.error_code == ErrorCode.group_id_not_found
        assert "not a share group" in refused.error_message
    finally:
        classic.close()


def test_share_fetches_and_acknowledgements_the_broker_refuses(bootstrap: str,
                                                               topic: str) -> None:
    group = f"{topic}-g"
    set_group_configs(bootstrap, group, {"share.auto.offset.reset": "earliest"})
    produce(bootstrap, topic, [(0, b"v%d" % i, None, []) for i in range(3)])
    [assigned] = heartbeat(bootstrap, group, "a", 0, (topic,)).assignment.topic_partitions
    topic_id = assigned.topic_id
    assert heartbeat(bootstrap, group, "b", 0, (topic,)).error_code == ErrorCode.none
    # Not a member; a session not opened; acknowledgements in the opening request.
    assert share_fetch(bootstrap, group, "x", 0, topic_id).error_code == \
        ErrorCode.unknown_member_id
    assert share_fetch(bootstrap, group, "a", 1, topic_id).error_code == \
        ErrorCode.share_session_not_found
    assert share_fetch(bootstrap, group, "a", 0, topic_id, ((0, 0, (1,)),)).error_code == \
        ErrorCode.invalid_request
    assert share_acknowledge(bootstrap, group, "a", 0, topic_id, ((0, 0, (1,)),)).error_code \
        == ErrorCode.invalid_share_session_epoch
    fetched = partition(share_fetch(bootstrap, group, "a", 0, topic_id))
    assert [(r.first_offset, r.last_offset, r.delivery_count)
            for r in fetched.acquired_records] == [(0, 2, 1)]
    assert share_fetch(bootstrap, group, "a", 5, topic_id).error_code == \
        ErrorCode.invalid_share_session_epoch
    # b acknowledges a's records, a offsets never fetched, a a malformed batch.
    assert share_fetch(bootstrap, group, "b", 0, topic_id).error_code == ErrorCode.none
    assert partition(share_acknowledge(bootstrap, group, "b", 1, topic_id,
                                         ((0, 0, (1,)),))).error_code == \
        ErrorCode.invalid_record_state
    assert partition(share_acknowledge(bootstrap, group, "a", 1, topic_id,
                                         ((2, 9, (1,)),))).error_code == \
        ErrorCode.invalid_record_state
    assert partition(share_acknowledge(bootstrap, group, "a", 2, topic_id,
                                         ((0, 2, (1, 1),),))).error_code == \
        ErrorCode.invalid_request
    assert partition(share_acknowledge(bootstrap, group, "a", 3, topic_id,
                                         ((0, 0, (7,)),))).error_code == \
        ErrorCode.invalid_request
    # Record by record: accept 0, release 1, reject 2; then 0 again is not acquired.
    answer = partition(share_fetch(bootstrap, group, "a", 4, topic_id,
                                     ((0, 2, (1, 2, 3)),)))
    assert answer.acknowledge_error_code == ErrorCode.none
    assert [(r.first_offset, r.last_offset, r.delivery_count)
            for r in answer.acquired_records] == [(1, 1, 2)]  # the released one, again
    assert partition(share_acknowledge(bootstrap, group, "a", 5, topic_id,
                                         ((0, 0, (1,)),))).error_code == \
        ErrorCode.invalid_record_state
    closed = share_acknowledge(bootstrap, group, "a", -1, topic_id, ((1, 1, (1,)),))
    assert partition(closed).error_code == ErrorCode.none
    assert share_acknowledge(bootstrap, group, "a", 6, topic_id, ()).error_code == \
        ErrorCode.share_session_not_found
    unknown = partition(share_fetch(bootstrap, group, "b", 2, uuid.uuid4()))
    assert unknown.error_code == ErrorCode.unknown_topic_id


def test_group_configs_the_broker_refuses(bootstrap: str) -> None:
    for name, value in (("share.record.lock.duration.ms", "5"),
                        ("share.delivery.count.limit", "11"),
                        ("share.auto.offset.reset", "sometime"), ("share.no.such", "1")):
        with pytest.raises(KafkaException) as raised:
            set_group_configs(bootstrap, "share-configs-g", {name: value})
        assert raised.value.args[0].code() == KafkaError.INVALID_CONFIG, name


def test_share_group_offsets_described_altered_deleted(bootstrap: str, topic: str) -> None:
    group = f"{topic}-g"
    set_group_configs(bootstrap, group, {"share.auto.offset.reset": "earliest"})
    produce(bootstrap, topic, [(0, b"v%d" % i, None, []) for i in range(6)])
    [assigned] = heartbeat(bootstrap, group, "a", 0, (topic,)).assignment.topic_partitions
    topic_id = assigned.topic_id
    fetched = partition(share_fetch(bootstrap, group, "a", 0, topic_id))
    assert [(r.first_offset, r.last_offset) for r in fetched.acquired_records] == [(0, 5)]
    assert partition(share_acknowledge(bootstrap, group, "a", 1, topic_id,
                                         ((0, 1, (1,)),))).error_code == ErrorCode.none
    assert offsets(bootstrap, group, topic) == [(0, 2, 4, ErrorCode.none)]
    assert alter(bootstrap, group, topic, 4) == (ErrorCode.non_empty_group, [])
    assert heartbeat(bootstrap, group, "a", -1, None).error_code == ErrorCode.none
    assert alter(bootstrap, group, topic, 99) == (ErrorCode.none,
                                                   [ErrorCode.offset_out_of_range])
    assert alter(bootstrap, group, topic, 4) == (ErrorCode.none, [ErrorCode.none])
    assert offsets(bootstrap, group, topic) == [(0, 4, 2, ErrorCode.none)]
    heartbeat(bootstrap, group, "b", 0, (topic,))
    fetched = partition(share_fetch(bootstrap, group, "b", 0, topic_id))
    assert [(r.first_offset, r.last_offset, r.delivery_count)
            for r in fetched.acquired_records] == [(4, 5, 1)]
    assert heartbeat(bootstrap, group, "b", -1, None).error_code == ErrorCode.none
    schema: Any = load_request_schema(92, 0)
    module = sys.modules[schema.__module__]
    deleted = ask(bootstrap, 92, 0, schema(group_id=group, topics=(
        module.DeleteShareGroupOffsetsRequestTopic(topic_name=topic),
        module.DeleteShareGroupOffsetsRequestTopic(topic_name=f"{topic}-none"))))
    assert [t.error_code for t in deleted.responses] == [
        ErrorCode.none, ErrorCode.unknown_topic_or_partition]
    assert offsets(bootstrap, group, topic) == [(0, -1, -1, ErrorCode.none)]
    assert offsets(bootstrap, group, None) == []
    groups: Any = load_request_schema(42, 2)
    assert [r.error_code for r in ask(bootstrap, 42, 2, groups(
        groups_names=(group,))).results] == [ErrorCode.none]
    assert group not in {listed[0] for listed in listed(bootstrap, "share")}






def test_a_deleted_topic_takes_its_share_partitions_along(bootstrap: str, topic: str) -> None:
    group = f"{topic}-g"
    set_group_configs(bootstrap, group, {"share.auto.offset.reset": "earliest"})
    produce(bootstrap, topic, [(0, b"v%d" % i, None, []) for i in range(3)])
    [assigned] = heartbeat(bootstrap, group, "a", 0, (topic,)).assignment.topic_partitions
    share_fetch(bootstrap, group, "a", 0, assigned.topic_id)
    assert share_fetch(bootstrap, group, "a", 1, assigned.topic_id,
                        ((0, 2, (1,)),)).error_code == ErrorCode.none
    assert offsets(bootstrap, group, None) == [(0, 3, 0, ErrorCode.none)]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics([topic])[topic].result(DEADLINE_S)
    wait_for(lambda: offsets(bootstrap, group, None) == [], "the share state gone")
    assert heartbeat(bootstrap, group, "a", -1, None).error_code == ErrorCode.none


def test_read_committed_share_groups_skip_aborted_transactions(bootstrap: str,
                                                               topic: str) -> None:
    group = f"{topic}-g"
    set_group_configs(bootstrap, group, {"share.auto.offset.reset": "earliest",
                                         "share.isolation.level": "read_committed"})
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                         "transactional.id": f"{topic}-txn"})
    producer.init_transactions(DEADLINE_S)
    for kind, commit in (("committed", True), ("aborted", False), ("last", True)):
        producer.begin_transaction()
        for i in range(3):
            producer.produce(topic, value=b"%s-%d" % (kind.encode(), i), partition=0)
        producer.flush(DEADLINE_S)  # written to the segment, then ended
        if commit:
            producer.commit_transaction(DEADLINE_S)
        else:
            producer.abort_transaction(DEADLINE_S)
    consumer = share_consumer(bootstrap, group, topic)
    read: list[bytes] = []
    try:
        poll_until(consumer, lambda: len(read) >= 6, "the committed records",
                   lambda m: read.append(m.value()))
        # (librdkafka 2.16's close does not acknowledge the last poll's records)
        consumer.commit_sync(DEADLINE_S)
    finally:
        consumer.close()
    # The "last" records lie after the aborted ones: had those been served, they came first.
    assert read == [b"committed-0", b"committed-1", b"committed-2", b"last-0", b"last-1",
                    b"last-2"]
    # All done with (offsets 0-8: the aborted records archived, the rest accepted).
    assert offsets(bootstrap, group, topic) == [(0, 9, 0, ErrorCode.none)]


def test_group_configs_described(bootstrap: str) -> None:
    group = "share-described-g"
    set_group_configs(bootstrap, group, {"share.record.lock.duration.ms": "5000"})
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.GROUP, group)
    described = admin.describe_configs([resource])[resource].result(DEADLINE_S)
    shown = {name: (entry.value, int(getattr(entry.source, "value", entry.source)))
             for name, entry in described.items()}
    # Kafka's ConfigSource: 8 GROUP_CONFIG (confluent-kafka 2.16 has no name for it),
    # 5 DEFAULT_CONFIG.
    assert shown["share.record.lock.duration.ms"] == ("5000", 8)
    assert shown["share.delivery.count.limit"] == ("5", 5)
    assert shown["share.auto.offset.reset"] == ("latest", 5)
