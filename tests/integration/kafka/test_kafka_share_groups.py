"""Share groups (KIP-932) with librdkafka's ``ShareConsumer`` on a real standalone.

Two share consumers of one group read a one-partition topic together, each
record handed to one of them; explicit acknowledgements: RELEASE hands a
record out again with a greater delivery count, REJECT never, and at the
group's delivery-count limit a released record is archived; a consumer that
closes without acknowledging, or whose locks expire (the group's
``share.record.lock.duration.ms`` set short through IncrementalAlterConfigs on
the GROUP resource), has its records handed to the other. The group is
listed with type ``share`` and described (ShareGroupDescribe through raw
requests: librdkafka 2.16 has no admin call for it).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

from tests.integration.kafka.test_kafka_clients import DEADLINE_S, create_topic, produce
from tests.support.kafka import raw_request, read_response

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


def test_two_members_share_one_partition(bootstrap: str, topic: str) -> None:
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
        assert (group, "share", "Stable") in _listed(bootstrap, "share")
        assert not [g for g in _listed(bootstrap, "classic") if g[0] == group]
        described = _describe(bootstrap, group)
        assert described.group_state == "Stable"
        assert len(described.members) == 2
        assert all(m.assignment.topic_partitions[0].partitions == (0,)
                   for m in described.members)  # the one partition, shared
    finally:
        first.close()
        second.close()
    assert _describe(bootstrap, group).group_state == "Empty"


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
    assert all(count == 2 for value, count in read if value in {m.value() for m in held})


def _ask(bootstrap: str, api_key: int, version: int, request: Any) -> Any:
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(raw_request(api_key, version, 7, request))
        return read_response(sock, api_key, version)[1]


def _listed(bootstrap: str, group_type: str) -> list[tuple[str, str, str]]:
    """ListGroups v5 of ``group_type``: (group id, protocol type, state) of each group."""
    schema: Any = load_request_schema(16, 5)
    answer = _ask(bootstrap, 16, 5, schema(states_filter=(), types_filter=(group_type,)))
    return [(g.group_id, g.protocol_type, g.group_state) for g in answer.groups]


def _describe(bootstrap: str, group: str) -> Any:
    schema: Any = load_request_schema(77, 1)
    answer = _ask(bootstrap, 77, 1, schema(group_ids=(group,),
                                           include_authorized_operations=False))
    [described] = answer.groups
    assert described.error_code == ErrorCode.none
    return described
