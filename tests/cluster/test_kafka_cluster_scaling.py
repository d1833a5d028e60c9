"""A keyed Kafka producer writes on through a split and a merge on a 3-broker cluster.

Real processes (ZooKeeper, 3 bookies E=3/Qw=2/Qa=2, 3 brokers each with
``--kafka-port 0``). The topic is named so that every heir is owned by
another broker than the sealed partition the producer writes to: partition
0's heir after the split (segment 2) and after the merge (segment 4, reached
through sealed 2: two hops), partition 1's after its split (segment 5). The
sealed partition's owner forwards each batch to the heir's owner
(``broker.kafka.forwarding``). No delivery fails, every delivered record is
read back exactly once by a Kafka consumer and by an SDK reader, and per-key
order holds for both (the producer's partition count stays 2: it does not
refresh its metadata during the run). kafkajs's idempotent producer does the
same through a split; and a SIGKILL of the heir's owner while batches are
forwarded to it loses the hop's answers: the calls go again to its next
owner, and every record is stored once (docs/kafka.md, "Partitions and
scaling").
"""

from __future__ import annotations

import json
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

import folio
from bench._cluster_client import list_brokers
from broker.cluster.containers import container_of
from tests.cluster.test_kafka_cluster import _kafka_cluster
from tests.integration.kafka.test_kafka_clients import DEADLINE_S, create_topic
from tests.integration.kafka.test_kafka_scaling import (
    KeyedProducer,
    assert_in_stream_order,
    kafka_read_back,
    scale_with_cli,
    sdk_read_back,
)
from tests.support.bookies import BookieProcess, BookieProcesses
from tests.support.cluster import LocalCluster
from tests.support.cluster_load import COUNT, wait_spread
from tests.support.kafka import kafka_address
from tests.support.kafkajs import kafkajs_folder


def _at(brokers: list[BookieProcess], address: str) -> BookieProcess:
    """The broker at ``address``: scales run on the sealed segment's owner.

    A scale run elsewhere fences the owner's ledger; the owner, reloading the
    segment meanwhile, may finish the seal itself, and the CLI's second
    attempt then reports the segment sealed although the split happened (a
    race of cross-broker scaling left to its own issue).
    """
    return next(b for b in brokers if b.address == address)


def _topic_with_remote_heirs(address: str, prefix: str, *, victim_heir: bool = False
                             ) -> tuple[str, dict[int, str]]:
    """A topic name whose heirs (segments 2, 4, 5) are owned away from their predecessors.

    ``victim_heir``: segment 2's owner also owns neither partition 0 nor 1.
    """
    owners = {container: b.address for b in list_brokers(address).brokers
              for container in b.containers}
    for i in range(10_000):
        name = f"{prefix}{i}"
        owner = {n: owners.get(container_of(f"{name}/{n}", COUNT), "") for n in range(7)}
        if "" in owner.values():
            continue
        if victim_heir and owner[2] == owner[1]:
            continue
        if (owner[2] != owner[0] and owner[4] not in (owner[0], owner[2])
                and owner[5] != owner[1]):
            return name, owner
    raise AssertionError("no topic name puts the heirs on other brokers")


@pytest.mark.timeout(600)
def test_keyed_producer_writes_through_split_and_merge_across_brokers(
        zk_url: str, bookie_processes: BookieProcesses, tmp_path: Path) -> None:
    brokers, kafka = _kafka_cluster(bookie_processes, zk_url, tmp_path)
    bootstrap = ",".join(kafka.values())
    topic, owner = _topic_with_remote_heirs(brokers[0].address, "fw")
    create_topic(bootstrap, topic, 2)
    producer = KeyedProducer(bootstrap, topic,
                             **{"topic.metadata.refresh.interval.ms": 300_000})
    producer.thread.start()
    producer.wait_for_more(200)
    # Split partition 0 into 2 and 3, merge those into 4 (with the CLI), then
    # split partition 1 into 5 and 6 (with the SDK); the producer goes on
    # writing to partitions 0 and 1, sealed, whose heirs other brokers own.
    scale_with_cli(_at(brokers, owner[0]), topic, "--split", "0")
    producer.wait_for_more(200, partition=0)
    scale_with_cli(_at(brokers, owner[2]), topic, "--merge", "2,3")
    producer.wait_for_more(200, partition=0)
    with folio.Client(owner[1], timeout_s=30) as client:
        client.scale_topic(topic, [f"{topic}/1"], [(0.5, 0.75), (0.75, 1.0)])
        producer.wait_for_more(200, partition=1)
        producer.wait_for_more(200)
        delivered = producer.finish()
        assert producer.errors == []
        expected = Counter((key, number) for key, number, _ in delivered)
        assert max(expected.values()) == 1
        sealed = {segment.name for segment in client.get_segments(topic, include_sealed=True)
                  if segment.sealed}
        assert sealed == {f"{topic}/{n}" for n in (0, 1, 2, 3)}
        # The heirs took the sealed partitions' later records (forwarded to them).
        ends = {s.name: s.end_offset for s in client.get_segments(topic, include_sealed=True)}
        assert ends[f"{topic}/2"] > 0 and ends[f"{topic}/4"] > 0 and ends[f"{topic}/5"] > 0
        assert owner[2] != owner[0] and owner[5] != owner[1]

        through_kafka = kafka_read_back(bootstrap, topic)
        assert Counter(through_kafka) == expected
        assert_in_stream_order(through_kafka, delivered, per_key=True)
        through_sdk = sdk_read_back(client, topic, len(delivered))
        assert Counter(through_sdk) == expected
        assert_in_stream_order(through_sdk, delivered, per_key=True)


@pytest.mark.timeout(600)
def test_kafkajs_producer_writes_through_a_split_across_brokers(
        zk_url: str, bookie_processes: BookieProcesses, tmp_path: Path) -> None:
    folder = kafkajs_folder()
    brokers, kafka = _kafka_cluster(bookie_processes, zk_url, tmp_path)
    bootstrap = ",".join(kafka.values())
    topic, owner = _topic_with_remote_heirs(brokers[0].address, "js")
    create_topic(bootstrap, topic, 2)
    # The script produces keyed records with idempotence, splits nothing
    # itself: it waits for the marker file, written once the split is made.
    marker = tmp_path / "split-done"
    with subprocess.Popen(
            ["node", str(folder / "scaling.js"), bootstrap, topic, str(marker)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=folder) as process:
        try:
            assert process.stdout is not None
            first = process.stdout.readline()
            assert first.strip() == "producing", first
            scale_with_cli(_at(brokers, owner[0]), topic, "--split", "0")
            scale_with_cli(_at(brokers, owner[2]), topic, "--merge", "2,3")
            marker.write_text("done")
            out, err = process.communicate(timeout=DEADLINE_S * 2)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    assert process.returncode == 0, (out, err)
    report = json.loads(out.strip().splitlines()[-1])
    assert report["errors"] == []
    delivered: list[tuple[str, int, int]] = [tuple(item) for item in report["delivered"]]
    expected = Counter((key, number) for key, number, _ in delivered)
    assert max(expected.values()) == 1 and len(delivered) > 0
    with folio.Client(brokers[0].address, timeout_s=30) as client:
        ends = {s.name: s.end_offset for s in client.get_segments(topic, include_sealed=True)}
        assert ends[f"{topic}/4"] > 0, ends
        through_kafka = kafka_read_back(bootstrap, topic)
        assert Counter(through_kafka) == expected
        assert_in_stream_order(through_kafka, delivered, per_key=True)
        through_sdk = sdk_read_back(client, topic, len(delivered))
        assert Counter(through_sdk) == expected
        assert_in_stream_order(through_sdk, delivered, per_key=True)


@pytest.mark.faults
@pytest.mark.timeout(600)
def test_sigkill_of_the_heirs_owner_while_batches_are_forwarded(
        zk_url: str, bookie_processes: BookieProcesses, tmp_path: Path) -> None:
    """The hop's connection dies with the heir's owner (answers lost: maybe applied).

    The sealed partition's owner asks again until the heir's next owner answers;
    every delivered record is stored once and each stream stays in order.
    """
    brokers, kafka = _kafka_cluster(bookie_processes, zk_url, tmp_path)
    bootstrap = ",".join(kafka.values())
    topic, owner = _topic_with_remote_heirs(brokers[0].address, "kill", victim_heir=True)
    create_topic(bootstrap, topic, 2)
    producer = KeyedProducer(bootstrap, topic,
                             **{"topic.metadata.refresh.interval.ms": 300_000})
    producer.thread.start()
    producer.wait_for_more(200)
    scale_with_cli(_at(brokers, owner[0]), topic, "--split", "0")
    producer.wait_for_more(300, partition=0)  # forwarded to the heir's owner
    victim = next(b for b in brokers if b.address == owner[2])
    assert victim.kill() != 0
    survivors = [b for b in brokers if b is not victim]
    producer.wait_for_more(300, partition=0)  # forwarded to the heir's next owner
    delivered = producer.finish()
    assert producer.errors == []
    expected = Counter((key, number) for key, number, _ in delivered)
    assert max(expected.values()) == 1
    bootstrap = ",".join(kafka[b.address] for b in survivors)
    with folio.Client(survivors[0].address, timeout_s=30) as client:
        through_kafka = kafka_read_back(bootstrap, topic)
        assert Counter(through_kafka) == expected
        assert_in_stream_order(through_kafka, delivered, per_key=False)
        through_sdk = sdk_read_back(client, topic, len(delivered))
        assert Counter(through_sdk) == expected
        assert_in_stream_order(through_sdk, delivered, per_key=False)


@pytest.mark.timeout(600)
def test_keyed_producer_writes_through_auto_scaling_across_brokers(
        zk_url: str, bookie_processes: BookieProcesses, tmp_path: Path) -> None:
    """Auto-scaling (each broker's maintenance round, every 0.2 s) seals the partitions."""
    cluster = LocalCluster(bookie_processes, zk_url, tmp_path)
    cluster.init(container_count=COUNT, ensemble_size=3, write_quorum=2, ack_quorum=2)
    for _ in range(3):
        cluster.start_bookie()
    brokers = [cluster.start_broker("--kafka-port", "0", "--retention-interval-s", "0.2")
               for _ in range(3)]
    wait_spread(brokers[0].address, [COUNT // 3] * 3)
    bootstrap = ",".join("{}:{}".format(*kafka_address(b)) for b in brokers)
    owners = {container: b.address for b in list_brokers(brokers[0].address).brokers
              for container in b.containers}
    # Whichever partition splits first, its heir (segment 2) is on a third
    # broker, and so is the other's later heir (segment 4).
    topic = next(name for name in (f"auto{i}" for i in range(10_000))
                 if len({owners[container_of(f"{name}/{n}", COUNT)] for n in (0, 1, 2)}) == 3
                 and owners[container_of(f"{name}/4", COUNT)] not in {
                     owners[container_of(f"{name}/{n}", COUNT)] for n in (0, 1)})
    with folio.Client(brokers[0].address, timeout_s=30) as client:
        client.create_topic(topic, 2, scale_target_events_per_s=200, scale_min_segments=1,
                            scale_cooldown_ms=500)
        producer = KeyedProducer(bootstrap, topic,
                                 **{"topic.metadata.refresh.interval.ms": 300_000})
        producer.thread.start()

        def sealed() -> list[int]:
            return [segment.number for segment in client.get_segments(
                topic, include_sealed=True) if segment.sealed]
        deadline = time.monotonic() + DEADLINE_S
        while not {0, 1} & set(sealed()):
            assert time.monotonic() < deadline, "auto-scaling never scaled the topic"
            producer.wait_for_more(100)
        for number in {0, 1} & set(sealed()):
            producer.wait_for_more(200, partition=number)  # forwarded to a remote heir
        delivered = producer.finish()
        assert producer.errors == []
        expected = Counter((key, number) for key, number, _ in delivered)
        assert max(expected.values()) == 1
        ends = {s.number: s.end_offset for s in client.get_segments(topic, include_sealed=True)}
        assert ends[2] > 0, ends
        through_kafka = kafka_read_back(bootstrap, topic)
        assert Counter(through_kafka) == expected
        assert_in_stream_order(through_kafka, delivered, per_key=True)
        through_sdk = sdk_read_back(client, topic, len(delivered))
        assert Counter(through_sdk) == expected
        assert_in_stream_order(through_sdk, delivered, per_key=True)
