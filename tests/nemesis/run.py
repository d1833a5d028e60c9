"""One nemesis run: the cluster, the workload, the faults, the checks, the report.

``run(seed, duration_s, base)`` returns the ``Report``; ``python -m
tests.nemesis`` (``make chaos``) runs it from the command line.
"""

from __future__ import annotations

import json
import signal
import statistics
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import folio
from bench._cluster_client import list_brokers
from tests.nemesis.checks import Report, check
from tests.nemesis.cluster import NemesisCluster
from tests.nemesis.faults import Nemesis
from tests.nemesis.kafka_workload import PARTITIONS, KafkaWorkload, check_kafka
from tests.nemesis.kafka_workload import TOPIC as KAFKA_TOPIC
from tests.nemesis.workload import TxnWriter, Writers
from tests.support.member_process import MemberProcess

__all__ = ["run", "summary"]

TOPIC = "chaos"
GROUP = "chaos-readers"
SEGMENTS = 6
CONTAINERS = 12


def _wait_owned(cluster: NemesisCluster, timeout_s: float = 120) -> None:
    """Until some broker lists every container owned."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for broker in cluster.brokers:
            try:
                listed = list_brokers(f"127.0.0.1:{broker.port}")
            except Exception:  # not up yet
                continue
            if sum(len(b.containers) for b in listed.brokers) == CONTAINERS:
                return
        time.sleep(0.2)
    raise AssertionError(f"containers not all owned within {timeout_s} s")


class _Members:
    """Two group members in processes of their own, restarted if one dies."""

    def __init__(self, base: Path, endpoint: str) -> None:
        self._base, self._endpoint = base, endpoint
        self.members = [self._start(f"r{i}") for i in range(2)]
        self.restarts: list[str] = []
        self._retired: list[MemberProcess] = []

    def _start(self, reader_id: str) -> MemberProcess:
        return MemberProcess(self._base, self._endpoint, GROUP, TOPIC, reader_id, 8000)

    def watch(self) -> None:
        for index, member in enumerate(self.members):
            if member.process.poll() is not None:
                self.restarts.append(f"member {member.reader_id} exited "
                                     f"{member.process.returncode}: {member.log()[-300:]}")
                self._retired.append(member)
                self.members[index] = self._start(member.reader_id)

    def payloads(self) -> set[str]:
        self.watch()
        return {p for m in [*self._retired, *self.members] for p in m.events()}

    def stop(self) -> None:
        for member in self.members:
            if member.process.poll() is None:
                member.stop(signal.SIGTERM)
            member.reap()
        for member in self._retired:
            member.reap()


def run(seed: int, duration_s: float, base: Path) -> Report:
    """A whole run; raises only if the cluster cannot even start."""
    cluster = NemesisCluster(base)
    members: _Members | None = None
    writers: Writers | None = None
    txns: TxnWriter | None = None
    kafka: KafkaWorkload | None = None
    try:
        print(f"nemesis: seed {seed}, {duration_s:.0f} s, in {base}", flush=True)
        cluster.start(containers=CONTAINERS)
        _wait_owned(cluster)
        with folio.Client(cluster.endpoint, timeout_s=60) as client:
            client.create_topic(TOPIC, SEGMENTS)
            client.create_topic(KAFKA_TOPIC, PARTITIONS)
        members = _Members(base, cluster.endpoint)
        kafka = KafkaWorkload(cluster.kafka_bootstrap)
        writers = Writers(cluster.endpoint, TOPIC)
        txns = TxnWriter(cluster.endpoint, TOPIC)
        stop = threading.Event()
        nemesis = Nemesis(cluster, seed)

        def watch_members() -> None:
            while not stop.wait(1.0):
                assert members is not None
                members.watch()

        watcher = threading.Thread(target=watch_members, daemon=True)
        watcher.start()
        nemesis.run(duration_s, stop.is_set)
        print("nemesis: healing", flush=True)
        cluster.heal()
        _wait_owned(cluster)
        writers.stop()
        txns.stop()
        kafka.stop_producing()
        stop.set()
        watcher.join(10)
        print(f"nemesis: checking {len(writers.acked)} acknowledged events, "
              f"{len(txns.records)} transactions", flush=True)
        report = check(cluster.endpoint, TOPIC, writers, txns, members.payloads)
        report.errors += members.restarts
        report.kafka_delivered = len(kafka.delivered)
        report.kafka_failures = check_kafka(kafka, cluster.kafka_bootstrap)
        kafka.stop_consuming()
        report.errors += kafka.errors
        (base / "faults.log").write_text("\n".join(nemesis.log) + "\n")
        return report
    finally:
        if writers is not None:
            writers.stop()
        if txns is not None:
            txns.stop()
        if kafka is not None:
            kafka.stop_producing()
            kafka.stop_consuming()
        if members is not None:
            members.stop()
        cluster.close()


def summary(report: Report) -> dict[str, Any]:
    """The figures a closing note quotes: counts, failures, stall percentiles."""
    stalls = sorted(report.stalls_ms.values())

    def pct(q: float) -> float:
        return round(stalls[min(len(stalls) - 1, int(q * len(stalls)))], 1) if stalls else 0.0

    return {
        "acknowledged": report.acknowledged, "uncertain": report.uncertain,
        "committed_txns": report.committed, "aborted_txns": report.aborted,
        "kafka_delivered": report.kafka_delivered,
        "failures": report.failures(),
        "application_errors": len(report.errors),
        "error_kinds": sorted({e.split(":")[1].strip() if ":" in e else e
                               for e in report.errors})[:10],
        "stall_ms": {"p50": pct(0.5), "p90": pct(0.9), "max": pct(1.0),
                     "mean": round(statistics.fmean(stalls), 1) if stalls else 0.0},
    }


def to_json(report: Report) -> str:
    return json.dumps(asdict(report), indent=1)
