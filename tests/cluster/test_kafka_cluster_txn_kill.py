"""Kafka transactions on a 3-broker cluster across a SIGKILL (docs/kafka.md, "Clusters").

Real processes, as ``test_kafka_cluster_txn``: a broker is SIGKILLed
mid-transaction (the transaction coordinator's, or a partition owner's) and
each client (librdkafka; kafka-python and kafkajs across the coordinator's
death) ends with exactly-once results: a committed transaction whole and once,
an aborted one invisible, read back with ``read_committed`` up to a sentinel
per partition.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer

from bench._cluster_client import lookup_owner
from broker.cluster.containers import COORDINATOR_SEGMENT
from tests.cluster.test_kafka_cluster import PARTITIONS, _kafka_cluster
from tests.cluster.test_kafka_cluster_txn import (
    DEADLINE_S,
    _committed_contents,
    _spread_name,
    _values,
)
from tests.integration.kafka.test_kafka_clients import create_topic
from tests.support.bookies import BookieProcess, BookieProcesses
from tests.support.kafkajs import KAFKAJS, kafkajs_folder

ROOT = Path(__file__).resolve().parents[2]


class _Transactions:
    """A librdkafka transactional producer run as an application would, with the outcomes.

    ``outcomes``: transaction name -> "committed", "aborted" or "unknown"
    (the producer failed fatally while ending it: then a new producer with
    the same transactional id is initialised, which aborts it if still open).
    """

    def __init__(self, bootstrap: str, topic: str) -> None:
        self._bootstrap = bootstrap
        self._topic = topic
        self.outcomes: dict[str, str] = {}
        self.errors: list[str] = []
        self.producer = self.new_producer()

    def new_producer(self) -> Producer:
        producer = Producer({"bootstrap.servers": self._bootstrap, "transactional.id": "kill",
                             "linger.ms": 5, "transaction.timeout.ms": 120_000,
                             "message.timeout.ms": 120_000})
        producer.init_transactions(DEADLINE_S)
        return producer

    def produce(self, prefix: str) -> None:
        for p, value in _values(prefix):
            self.producer.produce(self._topic, value=value, partition=p,
                                  on_delivery=self._delivered)

    def _delivered(self, error: KafkaError | None, message: Any) -> None:
        if error is not None:
            self.errors.append(f"{message.value()!r}: {error}")

    def end(self, name: str, commit: bool) -> None:
        deadline = time.monotonic() + 3 * DEADLINE_S
        while True:
            try:
                if commit:
                    self.producer.commit_transaction(DEADLINE_S)
                else:
                    self.producer.abort_transaction(DEADLINE_S)
                self.outcomes[name] = "committed" if commit else "aborted"
                return
            except KafkaException as failure:
                error = failure.args[0]
                assert time.monotonic() < deadline, f"{name} did not end: {error}"
                if error.retriable():
                    continue
                if error.txn_requires_abort():
                    self.producer.abort_transaction(DEADLINE_S)
                    self.outcomes[name] = "aborted"
                    return
                self.outcomes[name] = "unknown"
                self.producer = self.new_producer()
                return


def _check_exactly_once(contents: list[bytes], outcomes: dict[str, str]) -> None:
    assert len(contents) == len(set(contents)), "a record is in the topic twice"
    for name, outcome in outcomes.items():
        wanted = {value for _, value in _values(name)}
        there = wanted & set(contents)
        if outcome == "committed":
            assert there == wanted, f"{name} committed, {len(wanted - there)} records missing"
        elif outcome == "aborted":
            assert not there, f"{name} aborted, {len(there)} records visible"
        else:
            assert there in (set(), wanted), f"{name}: only part of it is visible"


@pytest.mark.faults
@pytest.mark.timeout(420)
@pytest.mark.parametrize("victim", ["coordinator", "partition owner"])
def test_a_broker_sigkilled_mid_transaction_leaves_exactly_once_results(
        victim: str, zk_url: str, bookie_processes: BookieProcesses, tmp_path: Path) -> None:
    brokers, kafka = _kafka_cluster(bookie_processes, zk_url, tmp_path)
    bootstrap = ",".join(kafka.values())
    first = brokers[0].address
    topic = _spread_name(first, "t")
    create_topic(kafka[first], topic, PARTITIONS)
    addresses = list(kafka)
    coordinator = lookup_owner(addresses, COORDINATOR_SEGMENT)
    if victim == "coordinator":
        doomed = coordinator
    else:  # the owner of a partition that is not the coordinator
        doomed = next(owner for owner in (lookup_owner(addresses, f"{topic}/{p}")
                                          for p in range(PARTITIONS)) if owner != coordinator)
    app = _Transactions(bootstrap, topic)
    app.producer.begin_transaction()
    app.produce("before")
    app.end("before", commit=True)
    app.producer.begin_transaction()
    app.produce("across")
    assert app.producer.flush(DEADLINE_S) == 0  # acknowledged by every owner, then the kill
    next(b for b in brokers if b.address == doomed).kill()
    app.produce("across-after")
    app.end("across", commit=True)
    app.outcomes["across-after"] = app.outcomes["across"]  # one transaction, two halves
    app.producer.begin_transaction()
    app.produce("dropped")
    app.producer.flush(DEADLINE_S)
    app.end("dropped", commit=False)
    app.producer.begin_transaction()
    app.produce("after")
    app.end("after", commit=True)
    assert app.outcomes["after"] == "committed"
    # A producer left with an open transaction is fenced by a new one of the same
    # transactional id: its InitProducerId, at the coordinator now serving, bumps
    # the epoch and aborts the open transaction; the old one's commit is refused.
    zombie = app.producer
    zombie.begin_transaction()
    app.produce("zombie")
    assert zombie.flush(DEADLINE_S) == 0
    app.producer = app.new_producer()
    app.outcomes["zombie"] = "aborted"
    with pytest.raises(KafkaException) as fenced:
        zombie.commit_transaction(DEADLINE_S)
    assert fenced.value.args[0].fatal()
    app.producer.begin_transaction()
    app.produce("fresh")
    app.end("fresh", commit=True)
    assert app.outcomes["fresh"] == "committed"
    assert app.producer.flush(DEADLINE_S) == 0

    living = [a for a in addresses if a != doomed]
    assert lookup_owner(living, COORDINATOR_SEGMENT) in living  # moved, if it was the victim
    contents = _committed_contents(",".join(kafka[a] for a in living), topic)
    _check_exactly_once(contents, app.outcomes)
    assert app.outcomes["before"] == "committed"
    # The transaction open across the kill commits whole: nothing acknowledged is lost.
    assert app.outcomes["across"] == "committed"


def _client_across_a_kill(command: list[str], doomed: BookieProcess) -> Any:
    """Run a client's transaction script (``txn_kill.js``, ``kafka_python_txn_kill``)
    across ``doomed``'s SIGKILL; its outcomes (the scripts' protocol: a ``sent``
    line, the kill, a line on stdin, the outcomes as the last line)."""
    with subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, cwd=ROOT) as running:
        assert running.stdin is not None and running.stdout is not None
        assert running.stderr is not None
        first = running.stdout.readline()  # {"phase": "sent"}: acknowledged by every owner
        assert json.loads(first or b"{}").get("phase") == "sent", running.stderr.read()
        doomed.kill()
        running.stdin.write(b"go\n")
        running.stdin.flush()
        out, err = running.communicate(timeout=300)
        assert running.returncode == 0, err.decode(errors="replace")
    return json.loads(out.splitlines()[-1])["outcomes"]


@pytest.mark.faults
@pytest.mark.timeout(420)
@pytest.mark.parametrize("client", ["kafka-python", "kafkajs"])
def test_kafka_python_and_kafkajs_across_a_sigkilled_coordinator_exactly_once(
        client: str, zk_url: str, bookie_processes: BookieProcesses, tmp_path: Path) -> None:
    brokers, kafka = _kafka_cluster(bookie_processes, zk_url, tmp_path)
    bootstrap = ",".join(kafka.values())
    first = brokers[0].address
    topic = _spread_name(first, "t")
    create_topic(kafka[first], topic, PARTITIONS)
    addresses = list(kafka)
    coordinator = lookup_owner(addresses, COORDINATOR_SEGMENT)
    doomed = next(b for b in brokers if b.address == coordinator)
    if client == "kafkajs":
        kafkajs_folder()  # installed once, under a lock
        node = shutil.which("node")
        assert node is not None
        command = [node, str(KAFKAJS / "txn_kill.js"), bootstrap, topic, str(PARTITIONS),
                   "kjs-kill"]
    else:  # its own process too: kafka-python's stuck ending and sockets end with it
        command = [sys.executable, "-m", "tests.support.kafka_python_txn_kill", bootstrap,
                   topic, str(PARTITIONS)]
    outcomes = _client_across_a_kill(command, doomed)
    living = [a for a in addresses if a != coordinator]
    assert lookup_owner(living, COORDINATOR_SEGMENT) in living
    contents = _committed_contents(",".join(kafka[a] for a in living), topic)
    _check_exactly_once(contents, outcomes)
    # After the kill a new transaction of the same id commits (kafka-python: with a
    # new producer, its InitProducerId at the new coordinator).
    assert outcomes[next(name for name in outcomes if name.endswith("-after")
                         and "across" not in name)] == "committed"
    if client == "kafkajs":
        assert outcomes["kjs-across"] in ("committed", "aborted")  # known to the client
