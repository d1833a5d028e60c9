"""A share group's records over a broker crash (SIGKILL) and restart (KIP-932 durability).

Records ACCEPTed before the crash are never delivered again; records
acquired and not acknowledged when the broker died are delivered again, their
delivery count the one last written plus one (a RELEASE was written, the
acquisition after it was not: docs/kafka.md, "Share groups"). Before any member
is back, ``folio group describe`` and a dry-run ``reset`` find the group by its
share state.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType

from tests.integration.kafka.test_kafka_clients import DEADLINE_S, create_topic, produce
from tests.integration.kafka.test_kafka_share_groups import (
    poll_until,
    set_group_configs,
    share_consumer,
)
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


@pytest.mark.faults
def test_accepted_records_stay_consumed_and_held_ones_come_back(
        processes: BookieProcesses, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    server = start_standalone(processes, data_dir, "--kafka-port", "0")
    bootstrap = _bootstrap(server)
    group, topic = "share-restart", "share-restart-in"
    create_topic(bootstrap, topic, 1)
    set_group_configs(bootstrap, group, {"share.auto.offset.reset": "earliest"})
    for block in range(2):  # two record batches: 0-4 and 5-9
        produce(bootstrap, topic, [(0, b"v%d" % (5 * block + i), None, []) for i in range(5)])
    consumer = share_consumer(bootstrap, group, topic, explicit=True)
    seen: list[Any] = []
    poll_until(consumer, lambda: len(seen) == 5, "the first batch", seen.append)
    assert [m.offset() for m in seen] == [0, 1, 2, 3, 4]
    for message in seen:
        consumer.acknowledge(message, AcknowledgeType.ACCEPT)
    consumer.commit_sync(DEADLINE_S)
    held: list[Any] = []
    poll_until(consumer, lambda: len(held) == 5, "the second batch", held.append)
    for message in held:
        consumer.acknowledge(message, AcknowledgeType.RELEASE)
    consumer.commit_sync(DEADLINE_S)  # written: AVAILABLE, delivered once
    again: list[Any] = []
    poll_until(consumer, lambda: len(again) == 5, "the second batch again", again.append)
    assert {m.delivery_count() for m in again} == {2}
    assert server.kill() == -9  # acquired (a second time), not acknowledged

    server = start_standalone(processes, data_dir, "--kafka-port", "0")
    bootstrap = _bootstrap(server)
    # No member yet: ``folio group`` finds the group by its share state written.
    ep = ("--json", "--endpoint", server.address)
    described = run_folio("group", "describe", group, *ep)
    assert described.returncode == 0, described.stderr
    shown = json.loads(described.stdout)
    assert (shown["state"], shown["protocol_type"], shown["lag"]) == ("Empty", "share", 5)
    assert [(p["committed_offset"], p["end_offset"]) for p in shown["partitions"]] == [(5, 10)]
    planned = run_folio("group", "reset", group, "--to-earliest", "--dry-run", *ep)
    assert planned.returncode == 0, planned.stderr
    plan = json.loads(planned.stdout)
    assert [(o["partition"], o["new_offset"]) for o in plan["offsets"]] == [(0, 0)]
    after = share_consumer(bootstrap, group, topic)
    read: list[tuple[int, int]] = []
    try:
        poll_until(after, lambda: len(read) >= 5, "the held records",
                   lambda m: read.append((m.offset(), m.delivery_count())))
        produce(bootstrap, topic, [(0, b"v10", None, [])])
        poll_until(after, lambda: len(read) >= 6, "a new record",
                   lambda m: read.append((m.offset(), m.delivery_count())))
    finally:
        after.close()
    # Never the ACCEPTed 0-4; 5-9 once more (written count 1, plus this delivery); 10 new.
    assert read == [(5, 2), (6, 2), (7, 2), (8, 2), (9, 2), (10, 1)]
