"""A KIP-848 group's state over a broker crash (SIGKILL) and restart.

What is kept is what classic groups keep: the group record (a consumer-protocol
group, its epoch and assignor) and the committed offsets. After the restart
the group is described as an Empty consumer group, and a new member starts
from the committed offsets at an epoch above the one before the crash.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from tests.integration.kafka.test_kafka_clients import DEADLINE_S, create_topic, produce
from tests.integration.kafka.test_kafka_consumer_protocol import Reading, kip848_consumer
from tests.support.bookies import BookieProcess, BookieProcesses, run_folio
from tests.support.kafka import kafka_address
from tests.support.standalone import start_standalone


@pytest.fixture
def processes() -> Iterator[BookieProcesses]:
    started = BookieProcesses()
    yield started
    started.kill_all()


def _bootstrap(server: BookieProcess) -> str:
    host, port = kafka_address(server)
    return f"{host}:{port}"


def _epoch(server: BookieProcess, group: str) -> int:
    done = run_folio("group", "describe", group, "--json", "--endpoint", server.address)
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert shown["protocol_type"] == "consumer"
    return int(shown["generation"])


@pytest.mark.faults
def test_the_group_and_its_offsets_survive_a_crash(processes: BookieProcesses,
                                                   tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    server = start_standalone(processes, data_dir, "--kafka-port", "0")
    bootstrap = _bootstrap(server)
    group, topic = "kip848-restart", "kip848-restart-in"
    create_topic(bootstrap, topic, 2)
    produce(bootstrap, topic, [(p, b"%d-%d" % (p, i), None, []) for i in range(6) for p in (0, 1)])
    held: dict[str, set[int]] = {}
    reading = Reading()
    member = kip848_consumer(bootstrap, group, topic, held, "before")
    try:
        reading.poll_until([member], lambda: len(reading.read) == 12, "the 12 records")
        epoch = _epoch(server, group)
        assert epoch >= 1
    finally:
        member.close()  # (its leave bumps the epoch once more)
    epoch = _epoch(server, group)
    assert server.kill() == -9

    server = start_standalone(processes, data_dir, "--kafka-port", "0")
    bootstrap = _bootstrap(server)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    described = admin.describe_consumer_groups([group])[group].result(DEADLINE_S)
    assert str(described.type).endswith("CONSUMER")
    assert str(described.state).endswith("EMPTY")
    assert _epoch(server, group) == epoch
    produce(bootstrap, topic, [(p, b"%d-%d" % (p, i), None, []) for i in range(6, 9)
                               for p in (0, 1)])
    after = Reading()
    member = kip848_consumer(bootstrap, group, topic, held, "after")
    try:
        after.poll_until([member], lambda: len(after.read) == 6, "the 6 new records")
        assert _epoch(server, group) > epoch
    finally:
        member.close()
    assert sorted(after.read) == [(p, o) for p in (0, 1) for o in range(6, 9)]
