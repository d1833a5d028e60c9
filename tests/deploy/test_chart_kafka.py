"""The chart's Kafka listener as processes (tests/support/kube_local.py): a Kafka client
bootstraps from the client Service's ``kafka`` port and is sent on to each broker at
the address the chart makes it advertise (its pod's name through the headless
Service, mapped to the broker's own loopback port here).

The default values (3 bookies, 2 brokers) with ``broker.kafka.enabled``: every
broker the Metadata answer names is one of the pods, at its own Kafka port, and
each owns some partitions' leadership; kafka-python creates a topic, produces to
every partition through the leaders and reads every record back.
"""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

from tests.deploy.test_chart_processes import _every_broker_owns_containers, _run, _stop
from tests.support.bookies import START_TIMEOUT_S, folio_env, wait_for_ready_line
from tests.support.chart import NAMESPACE, ValueSet, manifests_of
from tests.support.kube_local import LocalCluster
from tests.support.wait import wait_for
from tests.support.zookeeper import ZooKeeperServer

pytestmark = pytest.mark.timeout(300)

RELEASE = "folio"
PARTITIONS = 4
RECORDS = 40
DEADLINE_S = 30


def test_kafka_clients_reach_each_broker_at_its_advertised_pod_name(
        zookeeper: ZooKeeperServer, tmp_path: Path) -> None:
    chroot = f"/t-{uuid.uuid4().hex[:12]}"
    manifests = manifests_of(ValueSet("kafka", None), extra=[
        "--set", f"metadataChroot={chroot}", "--set", "broker.kafka.enabled=true"])
    cluster = LocalCluster(manifests, tmp_path / "pods", namespace=NAMESPACE,
                           external={f"{RELEASE}-zookeeper": {2181: zookeeper.address}})
    logs = tmp_path / "logs"
    logs.mkdir()
    bookies = [p.name for p in cluster.pods_of(f"{RELEASE}-bookie")]
    brokers = [p.name for p in cluster.pods_of(f"{RELEASE}-broker")]
    processes: dict[str, subprocess.Popen[bytes]] = {}
    try:
        (init_pod,) = [p for p in cluster.pods if p.startswith(f"{RELEASE}-init-")]
        (init,) = cluster.commands(init_pod)
        done = _run(init)
        assert done.returncode == 0, done.stderr
        for pod in [*bookies, *brokers]:
            (command,) = cluster.commands(pod)
            with (logs / f"{pod}.log").open("ab") as log:
                processes[pod] = subprocess.Popen(
                    command.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                    stderr=log, bufsize=0, env=folio_env(command.env))
        for pod, process in processes.items():
            line = wait_for_ready_line(process, START_TIMEOUT_S * 3, logs / f"{pod}.log")
            if pod in brokers:
                assert "kafka on" in line, line
        # Each broker's Kafka port on loopback, where its pod name leads.
        kafka_ports = {pod: cluster.pods[pod].ports[cluster.pods[pod].container_port("kafka")]
                       for pod in brokers}
        grpc_address = cluster.resolve(
            f"{brokers[0]}.{RELEASE}-broker-headless.{NAMESPACE}.svc.cluster.local",
            cluster.pods[brokers[0]].container_port("grpc"))
        wait_for(lambda: _every_broker_owns_containers(grpc_address, len(brokers)),
                 "every broker owning segment containers", timeout_s=60)

        bootstrap = cluster.resolve(RELEASE, 9092)  # the client Service's kafka port
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=DEADLINE_S * 1000)
        try:
            admin.create_topics([NewTopic("orders", PARTITIONS, 1)])
            described = admin.describe_cluster()
        finally:
            admin.close()
        advertised = sorted((b["host"], b["port"]) for b in described["brokers"])
        assert advertised == sorted(("127.0.0.1", port) for port in kafka_ports.values())

        producer = KafkaProducer(bootstrap_servers=bootstrap)
        futures = [producer.send("orders", value=b"v%d" % i, partition=i % PARTITIONS)
                   for i in range(RECORDS)]
        producer.flush(DEADLINE_S)
        leaders = {producer._metadata.leader_for_partition(
            TopicPartition("orders", p)) for p in range(PARTITIONS)}
        offsets = sorted((f.get(DEADLINE_S).partition, f.get(DEADLINE_S).offset)
                         for f in futures)
        producer.close()
        assert offsets == sorted((i % PARTITIONS, i // PARTITIONS) for i in range(RECORDS))
        # The partitions' leaders are spread over both brokers (the containers' owners).
        assert len(leaders) == len(brokers)

        consumer = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                                 enable_auto_commit=False, consumer_timeout_ms=DEADLINE_S * 1000)
        consumer.assign([TopicPartition("orders", p) for p in range(PARTITIONS)])
        got = []
        for record in consumer:
            got.append(record.value)
            if len(got) == RECORDS:
                break
        consumer.close()
        assert sorted(got) == sorted(b"v%d" % i for i in range(RECORDS))
    finally:
        _stop(processes, [*brokers, *bookies], logs)
        cluster.close()
