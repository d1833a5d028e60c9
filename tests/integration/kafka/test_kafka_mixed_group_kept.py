"""A mixed group (a classic consumer inside a KIP-848 group) kept over a broker crash.

As ``test_kafka_groups_kept``: a standalone broker behind a TCP proxy it
advertises, so the consumers find it again on its new port. A librdkafka
consumer of the classic protocol reads a topic; one of the consumer protocol
(``group.protocol=consumer``) joins the same group, which becomes a consumer
group with the classic member inside it (the online upgrade); both read and
commit record by record. The broker is SIGKILLed and restarted on the same
data: both members go on with the same member ids, epochs and partitions
(the classic one still a classic member: ConsumerGroupDescribe v1's member
type), no assignment callback again, and every record is read exactly once
(docs/kafka.md, "Online upgrade and downgrade").
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import TopicPartition
from kio.index import load_request_schema

from tests.integration.kafka.test_kafka_clients import DEADLINE_S, create_topic, produce
from tests.integration.kafka.test_kafka_groups_kept import Member, _direct, _poll_until, _start
from tests.support.bookies import BookieProcesses
from tests.support.kafka import raw_request, read_response
from tests.support.proxy import TcpProxy

PARTITIONS = 2
BEFORE, AFTER = 10, 10
EVERY = set(range(PARTITIONS))


@pytest.fixture
def processes() -> Iterator[BookieProcesses]:
    started = BookieProcesses()
    yield started
    started.kill_all()


def _describe(bootstrap: str, group: str) -> tuple[int, dict[str, tuple[int, int]]]:
    """A raw ConsumerGroupDescribe v1: (group epoch, member id -> (epoch, member type))."""
    host, port = bootstrap.rsplit(":", 1)
    schema: Any = load_request_schema(69, 1)
    with socket.create_connection((host, int(port)), timeout=DEADLINE_S) as sock:
        sock.sendall(raw_request(69, 1, 1, schema(group_ids=(group,),
                                                  include_authorized_operations=False)))
        _, answer = read_response(sock, 69, 1)
    (described,) = answer.groups
    assert described.error_code.value == 0, described
    return int(described.group_epoch), {m.member_id: (int(m.member_epoch), int(m.member_type))
                                        for m in described.members}


def _records(bootstrap: str, topic: str, first: int, count: int) -> None:
    produce(bootstrap, topic, [(p, b"%d-%d" % (p, i), None, [])
                               for i in range(first, first + count) for p in range(PARTITIONS)])


@pytest.mark.faults
@pytest.mark.timeout(400)
def test_a_mixed_group_keeps_both_members_over_a_crash(
        processes: BookieProcesses, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    group = "kept-mixed"
    with TcpProxy("127.0.0.1", 9) as proxy:
        server = _start(processes, data_dir, proxy)
        bootstrap = proxy.address
        create_topic(_direct(server), group, PARTITIONS)
        members: list[Member] = []
        try:
            classic = Member(bootstrap, group, group,
                             **{"session.timeout.ms": 30_000, "heartbeat.interval.ms": 1_000,
                                "partition.assignment.strategy": "range"})
            members.append(classic)
            _poll_until(members, lambda: classic.held == EVERY, "the classic group's member")
            # The online upgrade: a KIP-848 member joins; the broker divides the partitions.
            modern = Member(bootstrap, group, group, **{"group.protocol": "consumer"})
            members.append(modern)
            _poll_until(members, lambda: bool(classic.held) and bool(modern.held)
                        and classic.held | modern.held == EVERY
                        and not classic.held & modern.held, "the two members share")
            _records(_direct(server), group, 0, BEFORE)
            _poll_until(members, lambda: len(classic.read) + len(modern.read)
                        == BEFORE * PARTITIONS, "every record before the crash")
            epoch, described = _describe(_direct(server), group)
            assert described == {classic.consumer.memberid(): (epoch, 0),  # classic
                                 modern.consumer.memberid(): (epoch, 1)}  # consumer
            held = (set(classic.held), set(modern.held))
            callbacks = (classic.callbacks, modern.callbacks)

            assert server.kill() == -9
            server = _start(processes, data_dir, proxy)
            _records(_direct(server), group, BEFORE, AFTER)
            total = (BEFORE + AFTER) * PARTITIONS
            _poll_until(members, lambda: len(classic.read) + len(modern.read) >= total,
                        "every record after the restart")
            # Kept: no rebalance, the same members, epochs, kinds and partitions.
            assert (classic.callbacks, modern.callbacks) == callbacks
            assert (classic.held, modern.held) == held
            assert _describe(_direct(server), group) == (epoch, described)
            assert sorted(classic.read + modern.read) == sorted(
                (p, o) for p in range(PARTITIONS) for o in range(BEFORE + AFTER)), \
                "a record read twice or never"
            assert {p for p, _ in classic.read} == held[0]
            committed = classic.consumer.committed(
                [TopicPartition(group, p) for p in range(PARTITIONS)], timeout=DEADLINE_S)
            assert [tp.offset for tp in committed] == [BEFORE + AFTER] * PARTITIONS
            assert "kafka consumer group kept-mixed: 2 members kept" in server.log()
        finally:
            for member in members:
                member.consumer.close()
