"""Kafka 4.0's online upgrade and downgrade of a consumer group, with librdkafka.

A classic consumer (``group.protocol=classic``, the ``range`` or
``cooperative-sticky`` assignor) reads a topic; a consumer of the KIP-848
protocol (``group.protocol=consumer``) joins the same group id: the group
becomes a consumer-protocol group with the classic member inside it, the
broker's assignor divides the partitions between both; the KIP-848 member
leaves and the group is classic again, its member taking every partition.
Each member commits after each record (a record counts once its commit went
through; a refused commit's record is sought back), so every record is
counted exactly once across both changes of kind; kafka-python (classic only)
and kafkajs go through both changes the same way. A broker with
``--kafka-group-migration-policy disabled`` refuses the joining member with
GROUP_ID_NOT_FOUND, as Kafka does; a classic member of another protocol
type is INCONSISTENT_GROUP_PROTOCOL.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource
from kafka import KafkaConsumer
from kio.index import load_request_schema

from tests.integration.kafka.test_kafka_clients import DEADLINE_S, create_topic, produce
from tests.integration.kafka.test_kafka_consumer_protocol import heartbeat
from tests.support.bookies import BookieProcess, BookieProcesses, run_folio
from tests.support.kafka import kafka_address, raw_request, read_response
from tests.support.kafkajs import kafkajs_folder
from tests.support.standalone import start_standalone

PARTITIONS = 4
#: A change of kind takes a few heartbeats of each protocol (3 s and 5 s).
SLOW_S = 3 * DEADLINE_S
#: What a commit meets while the group rebalances; the record is read again.
_REBALANCING = {KafkaError.STALE_MEMBER_EPOCH, KafkaError.ILLEGAL_GENERATION,
                KafkaError.REBALANCE_IN_PROGRESS, KafkaError.UNKNOWN_MEMBER_ID}


@pytest.fixture(scope="module")
def disabled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The Kafka address of a standalone whose groups never change kind with members."""
    processes = BookieProcesses()
    started = start_standalone(processes, tmp_path_factory.mktemp("disabled") / "data",
                               "--kafka-port", "0", "--kafka-group-migration-policy",
                               "disabled")
    host, port = kafka_address(started)
    yield f"{host}:{port}"
    try:
        started.terminate()
    finally:
        processes.kill_all()


class Members:
    """Consumers of one group that read and commit record by record."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        self.bootstrap, self.group, self.topic = bootstrap, group, topic
        self.held: dict[str, set[int]] = {}
        self.consumers: dict[str, Consumer] = {}
        #: (partition, offset) of every record whose commit went through.
        self.counted: list[tuple[int, int]] = []

    def add(self, name: str, protocol: str, assignor: str = "range") -> None:
        settings = {"bootstrap.servers": self.bootstrap, "group.id": self.group,
                    "group.protocol": protocol, "client.id": name,
                    "auto.offset.reset": "earliest", "enable.auto.commit": False}
        if protocol == "classic":
            settings |= {"partition.assignment.strategy": assignor,
                         "session.timeout.ms": 10_000, "heartbeat.interval.ms": 1_000}
        consumer = Consumer(settings)
        self.held[name] = set()
        incremental = protocol == "consumer" or assignor == "cooperative-sticky"

        def on_assign(_: Consumer, partitions: list[TopicPartition]) -> None:
            if not incremental:
                self.held[name] = set()
            self.held[name] |= {tp.partition for tp in partitions}

        def on_revoke(_: Consumer, partitions: list[TopicPartition]) -> None:
            self.held[name] -= {tp.partition for tp in partitions}

        consumer.subscribe([self.topic], on_assign=on_assign, on_revoke=on_revoke,
                           on_lost=on_revoke)
        self.consumers[name] = consumer

    def close(self, name: str) -> None:
        self.consumers.pop(name).close()
        self.held[name] = set()

    def close_all(self) -> None:
        for name in list(self.consumers):
            self.close(name)

    def _commit(self, consumer: Consumer, message: Any) -> bool:
        """Commit past ``message``; False (and sought back) if the group refused it."""
        try:
            consumer.commit(message=message, asynchronous=False)
            return True
        except KafkaException as error:
            assert error.args[0].code() in _REBALANCING, error
        with contextlib.suppress(KafkaException):  # read again if still ours; else by its heir
            consumer.seek(TopicPartition(self.topic, message.partition(), message.offset()))
        return False

    def poll_until(self, condition: Any, what: str) -> None:
        deadline = time.monotonic() + SLOW_S
        while not condition():
            assert time.monotonic() < deadline, f"not within {SLOW_S} s: {what}; {self.held}"
            for consumer in list(self.consumers.values()):
                message = consumer.poll(0.1)
                if message is None:
                    continue
                assert message.error() is None, message.error()
                partition, offset = message.partition(), message.offset()
                assert partition is not None and offset is not None
                if self._commit(consumer, message):
                    self.counted.append((partition, offset))

    def shared(self, *names: str) -> bool:
        """Whether ``names`` hold every partition, each some, none twice."""
        holdings = [self.held[name] for name in names]
        return all(holdings) and sum(map(len, holdings)) == PARTITIONS \
            and set().union(*holdings) == set(range(PARTITIONS))


def _describe(server: BookieProcess, group: str) -> Any:
    done = run_folio("group", "describe", group, "--json", "--endpoint", server.address)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _records(bootstrap: str, topic: str, round_: str, count: int) -> None:
    produce(bootstrap, topic, [(p, f"{round_}{p}-{i}".encode(), None, [])
                               for i in range(count) for p in range(PARTITIONS)])


@pytest.mark.parametrize("assignor", ["range", "cooperative-sticky"])
def test_a_classic_group_upgrades_and_downgrades_online(
        server: BookieProcess, bootstrap: str, assignor: str) -> None:
    group, topic = f"upgrade-{assignor}", f"upgrade-{assignor}-in"
    create_topic(bootstrap, topic, PARTITIONS)
    _records(bootstrap, topic, "a", 10)
    members = Members(bootstrap, group, topic)
    try:
        members.add("classic", "classic", assignor)
        members.poll_until(lambda: members.held["classic"] == set(range(PARTITIONS))
                           and len(members.counted) >= 10, "the classic member reads")
        assert _describe(server, group)["protocol"] == assignor

        # Upgrade: the KIP-848 member joins the classic group.
        members.add("modern", "consumer")
        members.poll_until(lambda: members.shared("classic", "modern"),
                           "the two members divide the partitions")
        shown = _describe(server, group)
        assert (shown["protocol_type"], shown["protocol"]) == ("consumer", "uniform")
        assert sorted(m["client_id"] for m in shown["members"]) == ["classic", "modern"]
        assert sorted(a["partition"] for m in shown["members"] for a in m["assigned"]) == [
            0, 1, 2, 3]
        admin = AdminClient({"bootstrap.servers": bootstrap})
        described = admin.describe_consumer_groups([group])[group].result(DEADLINE_S)
        assert str(described.type).endswith("CONSUMER")
        assert sorted(m.client_id for m in described.members) == ["classic", "modern"]

        _records(bootstrap, topic, "b", 10)
        members.poll_until(lambda: len(members.counted) >= 20 * PARTITIONS,
                           "both members read the second round")

        # Downgrade: the KIP-848 member leaves; the group is classic again.
        members.close("modern")
        members.poll_until(lambda: members.held["classic"] == set(range(PARTITIONS)),
                           "the classic member takes every partition back")
        members.poll_until(lambda: _describe(server, group)["protocol"] == assignor,
                           "the group is classic again")
        _records(bootstrap, topic, "c", 5)
        members.poll_until(lambda: len(members.counted) >= 25 * PARTITIONS,
                           "every record is read")
        assert sorted(members.counted) == sorted(
            (p, offset) for p in range(PARTITIONS) for offset in range(25)), \
            "a record counted twice or never"
        committed = members.consumers["classic"].committed(
            [TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=DEADLINE_S)
        assert [(tp.partition, tp.offset) for tp in committed] == [
            (p, 25) for p in range(PARTITIONS)]
    finally:
        members.close_all()


def test_a_classic_member_joins_a_consumer_group(bootstrap: str) -> None:
    """The other order: KIP-848 first, then a classic member inside it, then it alone."""
    group, topic = "upgrade-late-classic", "upgrade-late-classic-in"
    create_topic(bootstrap, topic, PARTITIONS)
    _records(bootstrap, topic, "a", 5)
    members = Members(bootstrap, group, topic)
    try:
        members.add("modern", "consumer")
        members.poll_until(lambda: members.held["modern"] == set(range(PARTITIONS)),
                           "the KIP-848 member gets every partition")
        members.add("classic", "classic", "cooperative-sticky")
        members.poll_until(lambda: members.shared("classic", "modern"),
                           "the two members divide the partitions")
        members.close("classic")  # LeaveGroup: its partitions go back
        members.poll_until(lambda: members.held["modern"] == set(range(PARTITIONS))
                           and len(members.counted) >= 5 * PARTITIONS,
                           "the KIP-848 member has them all again")
        assert sorted(members.counted) == sorted(
            (p, offset) for p in range(PARTITIONS) for offset in range(5))
    finally:
        members.close_all()


def _join_other_type(bootstrap: str, group: str) -> Any:
    """A raw JoinGroup v5 of protocol type ``connect``; its answer."""
    schema: Any = load_request_schema(11, 5)
    module = sys.modules[schema.__module__]
    request = schema(group_id=group, session_timeout=datetime.timedelta(seconds=10),
                     rebalance_timeout=datetime.timedelta(seconds=10), member_id="",
                     group_instance_id=None, protocol_type="connect",
                     protocols=(module.JoinGroupRequestProtocol(
                         name="default", metadata=struct.pack(">hi", 0, 0) + b"\xff" * 4),))
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(raw_request(11, 5, 7, request))
        return read_response(sock, 11, 5)[1]


def test_a_member_of_another_protocol_type_is_refused(bootstrap: str) -> None:
    group, topic = "upgrade-other-type", "upgrade-other-type-in"
    create_topic(bootstrap, topic, 1)
    members = Members(bootstrap, group, topic)
    try:
        members.add("modern", "consumer")
        members.poll_until(lambda: members.held["modern"] == {0}, "the member's partition")
        answer = _join_other_type(bootstrap, group)
        assert answer.error_code == KafkaError.INCONSISTENT_GROUP_PROTOCOL
    finally:
        members.close_all()


def test_migration_disabled_refuses_the_joining_member(disabled: str) -> None:
    group, topic = "upgrade-disabled", "upgrade-disabled-in"
    create_topic(disabled, topic, 2)
    members = Members(disabled, group, topic)
    try:
        members.add("classic", "classic")
        members.poll_until(lambda: members.held["classic"] == {0, 1}, "both partitions")
        answer = heartbeat(disabled, group, "m-1", 0, [topic])
        assert answer.error_code == KafkaError.GROUP_ID_NOT_FOUND
        assert "not a consumer group" in answer.error_message
        members.poll_until(lambda: members.held["classic"] == {0, 1},
                           "the classic member keeps its partitions")
    finally:
        members.close_all()
    admin = AdminClient({"bootstrap.servers": disabled})
    [config] = admin.describe_configs([ConfigResource(ConfigResource.Type.BROKER, "0")]).values()
    assert config.result(DEADLINE_S)["group.consumer.migration.policy"].value == "disabled"


def test_a_kafka_python_group_upgrades_and_downgrades(server: BookieProcess,
                                                      bootstrap: str) -> None:
    """kafka-python 3.0 (classic only, eager assignors) inside a KIP-848 group and back."""
    group, topic = "upgrade-kafka-python", "upgrade-kafka-python-in"
    create_topic(bootstrap, topic, PARTITIONS)
    _records(bootstrap, topic, "a", 3)
    classic = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                            auto_offset_reset="earliest", enable_auto_commit=False,
                            session_timeout_ms=10_000, heartbeat_interval_ms=500)
    assert classic.partitions_for_topic(topic) == set(range(PARTITIONS))  # see test_kafka_groups
    members = Members(bootstrap, group, topic)

    def held() -> set[int]:
        return {tp.partition for tp in classic.assignment()}

    def poll_until(condition: Any, what: str) -> None:
        deadline = time.monotonic() + SLOW_S
        while not condition():
            assert time.monotonic() < deadline, f"not within {SLOW_S} s: {what}"
            classic.poll(timeout_ms=100)
            for consumer in members.consumers.values():
                consumer.poll(0.05)

    try:
        poll_until(lambda: held() == set(range(PARTITIONS)), "kafka-python has every partition")
        members.add("modern", "consumer")
        poll_until(lambda: bool(held()) and bool(members.held["modern"])
                   and not held() & members.held["modern"]
                   and held() | members.held["modern"] == set(range(PARTITIONS)),
                   "kafka-python and the KIP-848 member divide the partitions")
        assert _describe(server, group)["protocol_type"] == "consumer"
        assert len(_describe(server, group)["members"]) == 2
        classic.commit()  # its generation is its member epoch: accepted
        members.close("modern")
        poll_until(lambda: held() == set(range(PARTITIONS)),
                   "kafka-python has every partition again")
        poll_until(lambda: _describe(server, group)["protocol"] == "range",
                   "the group is classic again")
        classic.commit()
    finally:
        members.close_all()
        classic.close()


class KafkajsMember:
    """``tests/kafkajs/group_member.js``: a kafkajs consumer's JSON lines, read as they come."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        node = shutil.which("node")
        assert node is not None
        self.lines: list[dict[str, Any]] = []
        self._process = subprocess.Popen(
            [node, str(kafkajs_folder() / "group_member.js"), bootstrap, group, topic],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)  # its errors: JSON lines
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self._process.stdout is not None
        for raw in self._process.stdout:
            self.lines.append(json.loads(raw))

    def held(self) -> set[int]:
        """The partitions of its last join (none before the first)."""
        joins = [line["joined"] for line in list(self.lines) if "joined" in line]
        return set(joins[-1]) if joins else set()

    def read(self) -> list[tuple[int, int]]:
        return [(line["read"][0], line["read"][1]) for line in list(self.lines)
                if "read" in line]

    def stop(self) -> None:
        """SIGTERM: it leaves the group (LeaveGroup) and exits."""
        self._process.terminate()
        try:
            self._process.wait(timeout=DEADLINE_S)
        finally:
            if self._process.poll() is None:
                self._process.kill()
                self._process.wait()
        self._reader.join(timeout=DEADLINE_S)
        assert self._process.stdout is not None
        self._process.stdout.close()
        assert not [line for line in self.lines if "error" in line or "crash" in line], \
            self.lines


def test_a_kafkajs_member_goes_through_an_upgrade_and_a_downgrade(
        server: BookieProcess, bootstrap: str) -> None:
    """kafkajs 2.2 (classic only; its metadata version 1 carries no owned partitions)."""
    group, topic = "upgrade-kafkajs", "upgrade-kafkajs-in"
    create_topic(bootstrap, topic, PARTITIONS)
    _records(bootstrap, topic, "a", 3)
    every = set(range(PARTITIONS))
    kafkajs = KafkajsMember(bootstrap, group, topic)
    members = Members(bootstrap, group, topic)

    def poll_until(condition: Any, what: str) -> None:
        deadline = time.monotonic() + SLOW_S
        while not condition():
            assert time.monotonic() < deadline, f"not within {SLOW_S} s: {what}; " \
                f"{kafkajs.lines[-5:]}, {members.held}"
            for consumer in members.consumers.values():
                consumer.poll(0.1)
            if not members.consumers:
                threading.Event().wait(0.1)

    try:
        poll_until(lambda: kafkajs.held() == every and len(kafkajs.read()) == 3 * PARTITIONS,
                   "kafkajs reads every partition")
        members.add("modern", "consumer")
        poll_until(lambda: bool(kafkajs.held()) and bool(members.held["modern"])
                   and not kafkajs.held() & members.held["modern"]
                   and kafkajs.held() | members.held["modern"] == every,
                   "kafkajs and the KIP-848 member divide the partitions")
        assert len(_describe(server, group)["members"]) == 2
        members.close("modern")
        poll_until(lambda: kafkajs.held() == every, "kafkajs has every partition again")
        poll_until(lambda: _describe(server, group)["protocol"] == "RoundRobinAssigner",
                   "the group is classic again")
        _records(bootstrap, topic, "b", 2)
        poll_until(lambda: len(kafkajs.read()) == 5 * PARTITIONS, "kafkajs reads the rest")
        assert sorted(kafkajs.read()) == sorted(
            (p, offset) for p in range(PARTITIONS) for offset in range(5))
    finally:
        members.close_all()
        kafkajs.stop()
