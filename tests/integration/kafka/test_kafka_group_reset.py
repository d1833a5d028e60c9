"""``folio group reset`` with kafka-consumer-groups' options, on a real standalone.

A ``folio standalone --kafka-port 0``; a topic of 2 partitions written by a
librdkafka producer with chosen CreateTimes (partition 0: 5 records 10 days
ago a minute apart, then 5 records 1 day ago; partition 1: 4 records 10 days
ago); a group whose offsets a librdkafka consumer commits without joining
(so it has no members). Each option of ``folio group reset`` (the CLI, in a
subprocess) moves the committed offsets exactly, read back by OffsetFetch
(librdkafka's ``committed``); ``--dry-run`` changes nothing; a group with a
member is refused; bad values are one-line errors. A reader group on the
same topic takes --to-offset, --shift-by and --to-current and refuses a
time.
"""

from __future__ import annotations

import datetime
import json
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

import folio
from tests.integration.kafka.test_kafka_clients import DEADLINE_S, create_topic
from tests.integration.kafka.test_kafka_groups import poll_until
from tests.support.bookies import BookieProcess, BookieProcesses, run_folio
from tests.support.kafka import kafka_address

TOPIC = "rs-in"
_MINUTE, _DAY = 60_000, 86_400_000
#: When the records were made: "now" when the module started.
NOW_MS = int(time.time() * 1000)
OLD = NOW_MS - 10 * _DAY


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BookieProcess]:
    from tests.support.standalone import start_standalone  # noqa: PLC0415

    processes = BookieProcesses()
    started = start_standalone(processes, tmp_path_factory.mktemp("standalone") / "data",
                               "--kafka-port", "0")
    yield started
    try:
        started.terminate()
    finally:
        processes.kill_all()


@pytest.fixture(scope="module")
def bootstrap(server: BookieProcess) -> str:
    host, port = kafka_address(server)
    address = f"{host}:{port}"
    create_topic(address, TOPIC, 2)
    producer = Producer({"bootstrap.servers": address, "linger.ms": 5})
    stamps = [(0, OLD + i * _MINUTE) for i in range(5)]
    stamps += [(0, NOW_MS - _DAY + i * _MINUTE) for i in range(5)]
    stamps += [(1, OLD + i * _MINUTE) for i in range(4)]
    for index, (partition, stamp) in enumerate(stamps):
        producer.produce(TOPIC, value=b"r%d" % index, partition=partition, timestamp=stamp)
    assert producer.flush(DEADLINE_S) == 0
    return address


def _commit(bootstrap: str, group: str, offsets: dict[int, int]) -> None:
    """Commit without joining: the group stays without members (Empty)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(TOPIC, p, o) for p, o in offsets.items()],
                        asynchronous=False)
    finally:
        consumer.close()


def _committed(bootstrap: str, group: str) -> list[int | None]:
    """The group's committed offsets of both partitions, by OffsetFetch (None: none)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "enable.auto.commit": False})
    try:
        got = consumer.committed([TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)],
                                 timeout=DEADLINE_S)
    finally:
        consumer.close()
    return [tp.offset if tp.offset >= 0 else None for tp in got]


def _reset(server: BookieProcess, group: str, *args: str) -> str:
    done = run_folio("group", "reset", group, *args, "--endpoint", server.address)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _refused(server: BookieProcess, group: str, *args: str) -> str:
    done = run_folio("group", "reset", group, *args, "--endpoint", server.address)
    assert done.returncode == 1, done.stdout
    assert done.stderr.startswith("folio group reset: error: ")
    assert done.stderr.count("\n") == 1, done.stderr
    return done.stderr


def _utc(ms: int, zone: datetime.timezone = datetime.UTC) -> str:
    at = datetime.datetime.fromtimestamp(ms / 1000, zone)
    text = at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}"
    return text + ("Z" if zone is datetime.UTC else at.strftime("%z")[:3] + ":"
                   + at.strftime("%z")[3:])


def test_each_option_moves_the_committed_offsets_exactly(
        server: BookieProcess, bootstrap: str) -> None:
    group = "rs-g"
    _commit(bootstrap, group, {0: 5, 1: 2})
    assert _committed(bootstrap, group) == [5, 2]

    table = _reset(server, group, "--to-offset", "3")
    assert table.splitlines()[0] == f"Kafka consumer group {group} reset to offset 3:"
    assert table.splitlines()[1].split() == ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]
    assert [line.split() for line in table.splitlines()[2:]] == [
        [group, TOPIC, "0", "3"], [group, TOPIC, "1", "3"]]
    assert _committed(bootstrap, group) == [3, 3]
    _reset(server, group, "--to-offset", "8", "--execute")  # partition 1 ends at 4
    assert _committed(bootstrap, group) == [8, 4]
    _reset(server, group, "--shift-by", "-2")
    assert _committed(bootstrap, group) == [6, 2]
    _reset(server, group, "--shift-by", "100")
    assert _committed(bootstrap, group) == [10, 4]
    _reset(server, group, "--shift-by", "-100")
    assert _committed(bootstrap, group) == [0, 0]
    _reset(server, group, "--to-latest")
    assert _committed(bootstrap, group) == [10, 4]
    _reset(server, group, "--to-earliest", "--topic", TOPIC)
    assert _committed(bootstrap, group) == [0, 0]
    # 2.5 minutes after the oldest records: the first at or after is each one's fourth.
    _reset(server, group, "--to-datetime", _utc(OLD + 150_000))
    assert _committed(bootstrap, group) == [3, 3]
    _reset(server, group, "--to-earliest")
    plus_two = datetime.timezone(datetime.timedelta(hours=2))
    _reset(server, group, "--to-datetime", _utc(OLD + 150_000, plus_two))
    assert _committed(bootstrap, group) == [3, 3]
    # 5 days ago: partition 0's records of a day ago; none in partition 1: its end.
    _reset(server, group, "--by-duration", "P5D")
    assert _committed(bootstrap, group) == [5, 4]
    _reset(server, group, "--to-offset", "1", "--topic", f"{TOPIC}:1")
    assert _committed(bootstrap, group) == [5, 1]
    _reset(server, group, "--to-current")
    assert _committed(bootstrap, group) == [5, 1]
    described = json.loads(run_folio("group", "describe", group, "--json", "--endpoint",
                                     server.address).stdout)
    assert [p["committed_offset"] for p in described["partitions"]] == [5, 1]


def test_a_dry_run_prints_the_plan_and_changes_nothing(
        server: BookieProcess, bootstrap: str) -> None:
    group = "rs-dry"
    _commit(bootstrap, group, {0: 7, 1: 1})
    text = _reset(server, group, "--shift-by", "2", "--dry-run")
    assert text.splitlines()[0] == (f"Kafka consumer group {group} would be reset to a shift "
                                    "of +2 (dry run: nothing written):")
    assert [line.split() for line in text.splitlines()[2:]] == [
        [group, TOPIC, "0", "9"], [group, TOPIC, "1", "3"]]
    shown = json.loads(_reset(server, group, "--to-earliest", "--dry-run", "--json"))
    assert shown == {"group": group, "kind": "kafka", "dry_run": True, "to": "earliest",
                     "offsets": [{"topic": TOPIC, "partition": 0, "new_offset": 0},
                                 {"topic": TOPIC, "partition": 1, "new_offset": 0}]}
    assert _committed(bootstrap, group) == [7, 1]
    # --to-current fills in a partition with nothing committed with its end.
    other = "rs-current"
    _commit(bootstrap, other, {0: 2})
    done = json.loads(_reset(server, other, "--to-current", "--topic", TOPIC, "--json"))
    assert [o["new_offset"] for o in done["offsets"]] == [2, 4] and not done["dry_run"]
    assert _committed(bootstrap, other) == [2, 4]


def test_a_group_with_a_member_is_refused_a_dry_run_too(
        server: BookieProcess, bootstrap: str) -> None:
    group = "rs-busy"
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "session.timeout.ms": 30_000, "heartbeat.interval.ms": 500})
    consumer.subscribe([TOPIC])
    got: list[object] = []
    try:
        poll_until([consumer], lambda: len(got) == 14, "the 14 records", got)
        consumer.commit(offsets=[TopicPartition(TOPIC, 0, 4), TopicPartition(TOPIC, 1, 2)],
                        asynchronous=False)
        for args in (("--to-offset", "0"), ("--shift-by", "1", "--dry-run"),
                     ("--by-duration", "PT1H")):
            said = _refused(server, group, *args)
            assert f"Kafka consumer group '{group}' has members: " in said
            assert "stop its consumers first" in said
        assert _committed(bootstrap, group) == [4, 2]
    finally:
        consumer.close()
    _reset(server, group, "--shift-by", "1")
    assert _committed(bootstrap, group) == [5, 3]


def test_bad_values_are_clear_one_line_errors(server: BookieProcess, bootstrap: str) -> None:
    group = "rs-bad"
    _commit(bootstrap, group, {0: 1})
    assert "topic 'rs-in' has no partition 9 (it has partitions 0-1)" in _refused(
        server, group, "--to-offset", "0", "--topic", f"{TOPIC}:9")
    assert ("cannot shift the offset of rs-in partition 1: the group has no committed "
            "offset there") in _refused(server, group, "--shift-by", "1", "--topic", TOPIC)
    assert "rs-missing" in _refused(server, group, "--to-earliest", "--topic", "rs-missing")
    assert "a Kafka consumer group has no checkpoints" in _refused(
        server, group, "--to", "checkpoint")
    assert "--to-datetime '2026-11-27': expected" in _refused(
        server, group, "--to-datetime", "2026-11-27")
    assert "--by-duration 'P1H': expected" in _refused(server, group, "--by-duration", "P1H")
    assert _committed(bootstrap, group) == [1, None]


def test_a_reader_group_moves_its_positions_and_refuses_a_time(
        server: BookieProcess, bootstrap: str) -> None:
    name = "rs-rg"
    with folio.Client(server.address, timeout_s=30) as client:
        group = client.reader_group(name, [TOPIC], "earliest")

        def positions() -> dict[str, int]:
            return {s.segment: s.position for s in group.describe().unassigned}

        text = _reset(server, name, "--to-offset", "3")
        assert text.splitlines()[0] == f"reader group {name} reset to offset 3:"
        assert [line.split() for line in text.splitlines()[2:]] == [
            [name, TOPIC, "0", "3"], [name, TOPIC, "1", "3"]]
        assert positions() == {f"{TOPIC}/0": 3, f"{TOPIC}/1": 3}
        _reset(server, name, "--shift-by", "2")
        assert positions() == {f"{TOPIC}/0": 5, f"{TOPIC}/1": 4}
        _reset(server, name, "--shift-by", "-1", "--topic", f"{TOPIC}:0")
        assert positions() == {f"{TOPIC}/0": 4, f"{TOPIC}/1": 4}
        planned = json.loads(_reset(server, name, "--to-earliest", "--dry-run", "--json"))
        assert [o["new_offset"] for o in planned["offsets"]] == [0, 0]
        assert planned["kind"] == "reader" and positions() == {f"{TOPIC}/0": 4,
                                                               f"{TOPIC}/1": 4}
        said = _refused(server, name, "--to-datetime", _utc(OLD))
        assert "--to-datetime and --by-duration reset Kafka consumer groups only" in said
        assert "a reader group starts over at latest as a whole" in _refused(
            server, name, "--to-latest", "--topic", TOPIC)
        reader = group.reader("m")
        try:
            assert "members online: m" in _refused(server, name, "--to-offset", "0",
                                                   "--dry-run")
        finally:
            reader.close()
        _reset(server, name, "--to-latest")
        assert positions() == {f"{TOPIC}/0": 10, f"{TOPIC}/1": 4}
