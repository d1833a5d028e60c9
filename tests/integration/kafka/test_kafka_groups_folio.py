"""Kafka consumer groups in ``folio group`` and ``folio_group_lag``, beside reader groups.

A real ``folio standalone --kafka-port 0`` (maintenance every second, so the
lag gauge is set within a second or two); a librdkafka consumer in a group
consumes a topic and commits; ``folio group list`` / ``describe`` (the CLI,
in a subprocess) and the SDK show the group with its member, assignment,
committed offsets, end offsets and lag, and ``/metrics`` has the lag per
partition. A reader group of the same name shows beside it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, TopicPartition

import folio
from folio.read.kafka_groups import GroupListing, KafkaGroupDescription
from tests.integration.kafka.test_kafka_clients import DEADLINE_S, create_topic, produce
from tests.integration.kafka.test_kafka_groups import poll_until
from tests.observability.scrape import Scrape, metrics_url, wait_for
from tests.support.bookies import BookieProcess, BookieProcesses, run_folio
from tests.support.kafka import kafka_address
from tests.support.standalone import start_standalone

GROUP, TOPIC = "kg-orders", "kg-orders-in"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BookieProcess]:
    """A standalone serving Kafka, with a maintenance round every second."""
    processes = BookieProcesses()
    started = start_standalone(processes, tmp_path_factory.mktemp("standalone") / "data",
                               "--kafka-port", "0", "--retention-interval-s", "1")
    yield started
    try:
        started.terminate()
    finally:
        processes.kill_all()


@pytest.fixture(scope="module")
def bootstrap(server: BookieProcess) -> str:
    host, port = kafka_address(server)
    return f"{host}:{port}"


@pytest.fixture(scope="module")
def member(bootstrap: str) -> Iterator[Consumer]:
    """A consumer of GROUP holding both partitions of TOPIC, having read all 16 records
    (10 in partition 0, 6 in partition 1) and committed 7 and 6: lags 3 and 0."""
    create_topic(bootstrap, TOPIC, 2)
    records: list[tuple[int, bytes, bytes | None, list[tuple[str, bytes]]]] = [
        (0, b"a%d" % i, None, []) for i in range(10)]
    records += [(1, b"b%d" % i, None, []) for i in range(6)]
    produce(bootstrap, TOPIC, records)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP,
                         "client.id": "kg-client", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "session.timeout.ms": 30_000,
                         "heartbeat.interval.ms": 500})
    consumer.subscribe([TOPIC])
    got: list[object] = []
    poll_until([consumer], lambda: len(got) == 16, "the 16 records", got)
    consumer.commit(offsets=[TopicPartition(TOPIC, 0, 7), TopicPartition(TOPIC, 1, 6)],
                    asynchronous=False)
    yield consumer
    consumer.close()


def _cli(*args: str, server: BookieProcess) -> str:
    done = run_folio("group", *args, "--endpoint", server.address)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_folio_group_list_and_describe_show_a_kafka_group(
        server: BookieProcess, member: Consumer) -> None:
    listed = json.loads(_cli("list", "--json", server=server))
    assert [g for g in listed if g["name"] == GROUP] == [
        {"name": GROUP, "kind": "kafka", "state": "Stable", "topics": [TOPIC], "members": 1,
         "lag": 3}]
    table = _cli("list", server=server).splitlines()
    assert table[0].split() == ["GROUP", "KIND", "STATE", "TOPICS", "MEMBERS", "LAG"]
    assert [line.split() for line in table if line.startswith(GROUP)] == [
        [GROUP, "kafka", "Stable", TOPIC, "1", "3"]]

    shown = json.loads(_cli("describe", GROUP, "--json", server=server))
    assert (shown["kind"], shown["state"], shown["protocol_type"], shown["lag"]) == (
        "kafka", "Stable", "consumer", 3)
    assert shown["protocol"] in ("range", "roundrobin", "cooperative-sticky")
    [one] = shown["members"]
    assert one["client_id"] == "kg-client"
    assert one["client_host"] == "/127.0.0.1"
    assert one["assigned"] == [{"topic": TOPIC, "partition": 0},
                               {"topic": TOPIC, "partition": 1}]
    assert shown["partitions"] == [
        {"topic": TOPIC, "partition": 0, "committed_offset": 7, "end_offset": 10, "lag": 3,
         "member_id": one["member_id"], "metadata": ""},
        {"topic": TOPIC, "partition": 1, "committed_offset": 6, "end_offset": 6, "lag": 0,
         "member_id": one["member_id"], "metadata": ""}]
    text = _cli("describe", GROUP, server=server)
    assert text.startswith(f"kafka group {GROUP}: state Stable;")
    assert [line.split() for line in text.splitlines() if line.strip().startswith(TOPIC)] == [
        [TOPIC, "0", "7", "10", "3", one["member_id"]],
        [TOPIC, "1", "6", "6", "0", one["member_id"]]]


def _lag(page: Scrape, kind: str, partition: str, group: str = GROUP) -> float | None:
    for labels, value in page.samples.get("folio_group_lag", ()):
        if labels == {"kind": kind, "group": group, "topic": TOPIC, "partition": partition}:
            return value
    return None


def test_the_lag_metric_per_partition_for_both_kinds(
        server: BookieProcess, member: Consumer) -> None:
    url = metrics_url(server)
    page = wait_for(url, lambda p: _lag(p, "kafka", "0") == 3 and _lag(p, "kafka", "1") == 0,
                    timeout_s=DEADLINE_S, what="folio_group_lag of the Kafka group")
    assert _lag(page, "kafka", "0") == 3
    # A reader group of the same name at the topic's start: 10 and 6 to read.
    with folio.Client(server.address, timeout_s=30) as client:
        client.reader_group(GROUP, [TOPIC], "earliest")
        try:
            page = wait_for(url, lambda p: _lag(p, "reader", "0") == 10
                            and _lag(p, "reader", "1") == 6, timeout_s=DEADLINE_S,
                            what="folio_group_lag of the reader group")
            assert _lag(page, "kafka", "0") == 3  # the two kinds apart
            both = run_folio("group", "describe", GROUP, "--json", "--endpoint",
                             server.address)
            assert both.returncode == 0, both.stderr
            assert "is both a reader group and a Kafka consumer group" in both.stderr
            assert [g["kind"] for g in json.loads(both.stdout)] == ["reader", "kafka"]
            only = json.loads(_cli("describe", GROUP, "--kind", "kafka", "--json",
                                   server=server))
            assert only["kind"] == "kafka"
            kinds = [(g.name, g.kind) for g in client.list_groups() if g.name == GROUP]
            assert kinds == [(GROUP, "kafka"), (GROUP, "reader")]
        finally:
            client.delete_reader_group(GROUP)
        wait_for(url, lambda p: _lag(p, "reader", "0") is None, timeout_s=DEADLINE_S,
                 what="the deleted reader group's series dropped")


def test_sdk_typed_results_and_errors(server: BookieProcess, member: Consumer) -> None:
    with folio.Client(server.address, timeout_s=30) as client:
        described = client.kafka_group(GROUP).describe()
        assert isinstance(described, KafkaGroupDescription)
        assert [(p.partition, p.committed_offset, p.end_offset, p.lag)
                for p in described.partitions] == [(0, 7, 10, 3), (1, 6, 6, 0)]
        assert described.members[0].assigned == ((TOPIC, 0), (TOPIC, 1))
        with pytest.raises(folio.ReaderGroupNotFoundError) as missing:
            client.kafka_group("kg-nobody").describe()
        assert missing.value.context == {"group": "kg-nobody", "kind": "kafka"}
        assert "Kafka consumer group 'kg-nobody' does not exist" in str(missing.value)
        assert [g for g in client.list_groups("kafka") if g.name == GROUP] == [
            GroupListing(GROUP, "kafka", "Stable", 1)]
    refused = run_folio("group", "describe", "kg-nobody", "--endpoint", server.address)
    assert refused.returncode == 1
    assert refused.stderr.startswith("folio group describe: error:")
    assert ("group 'kg-nobody' does not exist (neither a reader group nor a Kafka consumer "
            "group)") in refused.stderr


def test_reset_and_delete_refused_while_the_group_has_members_then_done(
        server: BookieProcess, bootstrap: str, member: Consumer) -> None:
    group = "kg-reset"
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "session.timeout.ms": 30_000, "heartbeat.interval.ms": 500})
    consumer.subscribe([TOPIC])
    got: list[object] = []
    poll_until([consumer], lambda: len(got) == 16, "the 16 records", got)
    consumer.commit(offsets=[TopicPartition(TOPIC, 0, 4), TopicPartition(TOPIC, 1, 2)],
                    asynchronous=False)
    ep = ("--endpoint", server.address)
    try:
        for refused in (run_folio("group", "reset", group, "--to", "earliest", *ep),
                        run_folio("group", "delete", group, *ep)):
            assert refused.returncode == 1
            assert f"Kafka consumer group '{group}' has members: " in refused.stderr
            assert "stop its consumers first" in refused.stderr
        with folio.Client(server.address, timeout_s=30) as client:
            with pytest.raises(folio.ReaderGroupNotEmptyError) as not_empty:
                client.kafka_group(group).reset("latest")
            assert len(not_empty.value.members) == 1
            assert [p.committed_offset for p in client.kafka_group(group).describe().partitions
                    ] == [4, 2]  # nothing changed
    finally:
        consumer.close()  # LeaveGroup: Empty at once

    done = run_folio("group", "reset", group, "--to", "earliest", *ep)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"Kafka consumer group {group} reset to earliest:")
    with folio.Client(server.address, timeout_s=30) as client:
        kafka = client.kafka_group(group)
        assert [(p.committed_offset, p.lag) for p in kafka.describe().partitions] == [
            (0, 10), (0, 6)]
        after = kafka.reset("latest", [TOPIC])
        assert [(p.committed_offset, p.lag) for p in after.partitions] == [(10, 0), (6, 0)]
        with pytest.raises(folio.TopicNotFoundError):
            kafka.reset("earliest", ["kg-no-such-topic"])
    forced = run_folio("group", "delete", group, "--force", *ep)
    assert forced.returncode == 1 and "--force does not apply" in forced.stderr
    deleted = run_folio("group", "delete", group, *ep)
    assert deleted.returncode == 0, deleted.stderr
    listed = json.loads(_cli("list", "--kind", "kafka", "--json", server=server))
    assert group not in {g["name"] for g in listed}
    gone = run_folio("group", "delete", group, "--kind", "kafka", *ep)
    assert gone.returncode == 1
    assert f"Kafka consumer group '{group}' does not exist" in gone.stderr
