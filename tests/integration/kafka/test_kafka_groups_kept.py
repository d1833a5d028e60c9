"""Group members kept over a broker crash (SIGKILL) and restart: no rebalance, nothing lost.

A standalone broker is reached through a TCP proxy (``tests/support/proxy.py``)
that it advertises as its Kafka address, so the running consumers find it
again when it comes back on another port. A librdkafka consumer in a classic
group and one in a KIP-848 group (``group.protocol=consumer``) read and commit
record by record; the broker is SIGKILLed and restarted on the same data; the
consumers go on: same member ids, the classic generation and the KIP-848 group
and member epochs unchanged (``folio group describe``, DescribeGroups through
the admin client, a raw ConsumerGroupDescribe), no assignment callback again,
their commits accepted, and every record read exactly once (docs/kafka.md,
"Consumer groups").
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient
from kio.index import load_request_schema

from tests.integration.kafka.test_kafka_clients import DEADLINE_S, create_topic, produce
from tests.support.bookies import BookieProcess, BookieProcesses, run_folio
from tests.support.kafka import kafka_address, raw_request, read_response
from tests.support.proxy import TcpProxy
from tests.support.standalone import start_standalone
from tests.support.wait import wait_for

PARTITIONS = 2
BEFORE, AFTER = 10, 10


@pytest.fixture
def processes() -> Iterator[BookieProcesses]:
    started = BookieProcesses()
    yield started
    started.kill_all()


def _direct(server: BookieProcess) -> str:
    host, port = kafka_address(server)
    return f"{host}:{port}"


def _start(processes: BookieProcesses, data_dir: Path, proxy: TcpProxy) -> BookieProcess:
    """The standalone, advertising the proxy; the proxy pointed at it."""
    server = start_standalone(processes, data_dir, "--kafka-port", "0",
                              "--kafka-advertised-host", "127.0.0.1",
                              "--kafka-advertised-port", proxy.address.rsplit(":", 1)[1])
    proxy.retarget(kafka_address(server)[1])
    return server


class Member:
    """A consumer that commits each record it reads, and counts its assignment callbacks."""

    def __init__(self, bootstrap: str, group: str, topic: str, **settings: Any) -> None:
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                  "client.id": group, "auto.offset.reset": "earliest",
                                  "enable.auto.commit": False, **settings})
        self.read: list[tuple[int, int]] = []
        self.held: set[int] = set()
        self.callbacks = 0
        self.consumer.subscribe([topic], on_assign=self._assigned, on_revoke=self._revoked,
                                on_lost=self._revoked)

    def _assigned(self, _: Consumer, partitions: list[TopicPartition]) -> None:
        self.callbacks += 1
        self.held |= {tp.partition for tp in partitions}

    def _revoked(self, _: Consumer, partitions: list[TopicPartition]) -> None:
        self.callbacks += 1
        self.held -= {tp.partition for tp in partitions}

    def poll(self) -> None:
        message = self.consumer.poll(0.1)
        if message is None:
            return
        error = message.error()
        if error is not None:
            # Only the broker being away may show (the client says so, then retries).
            assert error.code() in (KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN), error
            return
        partition, offset = message.partition(), message.offset()
        assert partition is not None and offset is not None
        self.read.append((partition, offset))
        self._commit(message)

    def _commit(self, message: Any) -> None:
        def committed() -> bool:
            try:
                self.consumer.commit(message=message, asynchronous=False)
            except KafkaException as error:
                # The broker is away (retried); anything else is an error here.
                assert error.args[0].retriable() or error.args[0].code() in (
                    KafkaError._TRANSPORT, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                    KafkaError.NOT_COORDINATOR,
                    KafkaError.COORDINATOR_NOT_AVAILABLE), error
                return False
            return True

        wait_for(committed, "the commit accepted", timeout_s=DEADLINE_S)


def _poll_until(members: list[Member], condition: Any, what: str) -> None:
    def done() -> bool:
        for member in members:
            member.poll()
        return bool(condition())

    wait_for(done, what, timeout_s=2 * DEADLINE_S)


def _folio_describe(server: BookieProcess, group: str) -> dict[str, Any]:
    done = run_folio("group", "describe", group, "--json", "--endpoint", server.address)
    assert done.returncode == 0, done.stderr
    shown: dict[str, Any] = json.loads(done.stdout)
    return shown


def _consumer_group_describe(bootstrap: str, group: str) -> tuple[int, dict[str, int]]:
    """A raw ConsumerGroupDescribe v0: (group epoch, member id -> member epoch)."""
    host, port = bootstrap.rsplit(":", 1)
    schema: Any = load_request_schema(69, 0)
    with socket.create_connection((host, int(port)), timeout=DEADLINE_S) as sock:
        sock.sendall(raw_request(69, 0, 1, schema(group_ids=(group,),
                                                  include_authorized_operations=False)))
        _, answer = read_response(sock, 69, 0)
    (described,) = answer.groups
    assert described.error_code.value == 0, described
    return int(described.group_epoch), {m.member_id: int(m.member_epoch)
                                        for m in described.members}


def _classic_describe(bootstrap: str, group: str) -> tuple[str, dict[str, int]]:
    """DescribeGroups through librdkafka's admin client: (state, member id -> partitions)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    described = admin.describe_consumer_groups([group])[group].result(DEADLINE_S)
    return str(described.state), {m.member_id: len(m.assignment.topic_partitions)
                                  for m in described.members}


@pytest.mark.faults
@pytest.mark.timeout(400)
def test_members_keep_their_generation_and_partitions_over_a_crash(
        processes: BookieProcesses, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with TcpProxy("127.0.0.1", 9) as proxy:
        server = _start(processes, data_dir, proxy)
        bootstrap = proxy.address
        classic_group, modern_group = "kept-classic", "kept-modern"
        for topic in (classic_group, modern_group):
            create_topic(_direct(server), topic, PARTITIONS)
            produce(_direct(server), topic, [(p, b"%d-%d" % (p, i), None, [])
                                             for i in range(BEFORE) for p in range(PARTITIONS)])
        members: list[Member] = []
        try:
            classic = Member(bootstrap, classic_group, classic_group,
                             **{"session.timeout.ms": 30_000, "heartbeat.interval.ms": 1_000})
            members.append(classic)
            modern = Member(bootstrap, modern_group, modern_group,
                            **{"group.protocol": "consumer"})
            members.append(modern)
            _poll_until(members, lambda: all(len(m.read) == BEFORE * PARTITIONS
                                             for m in members), "every record before the crash")
            assert classic.held == modern.held == set(range(PARTITIONS))
            generation = _folio_describe(server, classic_group)["generation"]
            classic_state = _classic_describe(bootstrap, classic_group)
            assert classic_state == ("ConsumerGroupState.STABLE",
                                     {classic.consumer.memberid(): PARTITIONS})
            epochs = _consumer_group_describe(_direct(server), modern_group)
            assert list(epochs[1]) == [modern.consumer.memberid()]
            callbacks = (classic.callbacks, modern.callbacks)

            assert server.kill() == -9
            server = _start(processes, data_dir, proxy)
            produce(_direct(server), classic_group, [(p, b"%d-%d" % (p, i), None, [])
                                                     for i in range(BEFORE, BEFORE + AFTER)
                                                     for p in range(PARTITIONS)])
            produce(_direct(server), modern_group, [(p, b"%d-%d" % (p, i), None, [])
                                                    for i in range(BEFORE, BEFORE + AFTER)
                                                    for p in range(PARTITIONS)])
            total = (BEFORE + AFTER) * PARTITIONS
            _poll_until(members, lambda: all(len(m.read) >= total for m in members),
                        "every record after the restart")
            # Kept: no rebalance, the same generation and epochs, the same members.
            assert (classic.callbacks, modern.callbacks) == callbacks
            assert _folio_describe(server, classic_group)["generation"] == generation
            assert _classic_describe(bootstrap, classic_group) == classic_state
            assert _consumer_group_describe(_direct(server), modern_group) == epochs
            everything = sorted((p, o) for p in range(PARTITIONS)
                                for o in range(BEFORE + AFTER))
            for member in members:
                assert sorted(member.read) == everything  # none lost, none twice
            for group, member in ((classic_group, classic), (modern_group, modern)):
                committed = member.consumer.committed(
                    [TopicPartition(group, p) for p in range(PARTITIONS)], timeout=DEADLINE_S)
                assert [tp.offset for tp in committed] == [BEFORE + AFTER] * PARTITIONS
            assert "kafka group kept-classic: 1 members kept at generation" in server.log()
            assert "kafka consumer group kept-modern: 1 members kept" in server.log()
        finally:
            for member in members:
                member.consumer.close()
