"""The rendered chart drives a real cluster on loopback (tests/support/kube_local.py).

``helm template`` with the default values; every Folio container of the
rendered StatefulSets and Job runs as a local process with its command,
arguments and environment as the kubelet would give them, the pods' and
Services' DNS names mapped to loopback ports. ZooKeeper's pods are played by
the test's ZooKeeper (Debian's package, tests/support/zookeeper.py): the
chart's ZooKeeper container is the official image's Java entry point, not
Folio's, so only its names and client port are checked here.

The init Job runs (twice: an upgrade's new Job finds the layout and exits 0),
then the bookies and brokers start together; each must pass its rendered
readiness probe (gRPC health on the probed port), register in ZooKeeper under
its advertised address, serve metrics on the port of its scrape annotation, and
a client bootstrapping from the client Service's port produces to and consumes
from a topic whose segments the two brokers share. A chart whose wiring is
wrong (a name no Service has, a probe on the wrong port, a flag the command
does not know) fails here.

The ``secure`` value set runs too (one broker), its Secrets (certificates made
by trustme, an ES256 key pair, the brokers' token) written where the pods mount
them; every value set's server commands pass ``--print-config``.

With several brokers (``default``) each must own some of the segment
containers (Admin ListBrokers) before the topic is written, so the produce and
the consumes through each broker cross brokers (WrongHost followed by the SDK).
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

import folio
from folio.api.v1 import admin_pb2, admin_pb2_grpc
from ledger.security.tokens import create_token
from tests.support import chart_kafka
from tests.support.bookies import START_TIMEOUT_S, BookieProcess, folio_env, wait_for_ready_line
from tests.support.chart import CHART, NAMESPACE, ValueSet, check_chart, manifests_of
from tests.support.chart_secrets import secure_secrets
from tests.support.kube_local import FOLIO_ENTRYPOINT, Command, LocalCluster
from tests.support.wait import wait_for
from tests.support.zookeeper import ZooKeeperServer

pytestmark = pytest.mark.timeout(300)

RELEASE = "folio"
EVENTS = 200


def _run(command: Command, timeout_s: float = 60.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command.argv, env=folio_env(command.env), capture_output=True,
                          text=True, timeout=timeout_s, check=False)


def _serving(address: str) -> bool:
    with grpc.insecure_channel(address) as channel:
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=""), timeout=2)
        except grpc.RpcError:
            return False
    return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)


#: The value sets run as processes: the defaults (3 bookies, 2 brokers) and the
#: smallest (1 and 1). The others differ in what only Kubernetes acts on.
RUN_SETS = [v for v in check_chart.value_sets() if v.name in ("default", "minimal")]


@pytest.fixture(params=RUN_SETS, ids=lambda v: v.name)
def cluster(request: pytest.FixtureRequest, zookeeper: ZooKeeperServer,
            tmp_path: Path) -> Iterator[LocalCluster]:
    # A chroot of its own on the session's ZooKeeper (the chart's metadataChroot value).
    chroot = f"/t-{uuid.uuid4().hex[:12]}"
    manifests = manifests_of(request.param, extra=["--set", f"metadataChroot={chroot}"])
    local = LocalCluster(manifests, tmp_path / "pods", namespace=NAMESPACE,
                         external={f"{RELEASE}-zookeeper": {2181: zookeeper.address}})
    yield local
    local.close()


def _flag(argv: list[str], flag: str) -> str:
    return next(a.split("=", 1)[1] for a in argv if a.startswith(f"--{flag}="))


def test_chart_runs_a_cluster_that_produces_and_consumes(
        cluster: LocalCluster, tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    (init_pod,) = [p for p in cluster.pods if p.startswith(f"{RELEASE}-init-")]
    (init,) = cluster.commands(init_pod)
    first = _run(init)
    assert first.returncode == 0, first.stderr
    again = _run(init)
    assert again.returncode == 0, again.stderr

    bookies = [p.name for p in cluster.pods_of(f"{RELEASE}-bookie")]
    brokers = [p.name for p in cluster.pods_of(f"{RELEASE}-broker")]
    commands = {pod: cluster.commands(pod)[0] for pod in [*bookies, *brokers]}
    processes: dict[str, subprocess.Popen[bytes]] = {}
    try:
        # Kubernetes starts them together (podManagementPolicy Parallel): brokers
        # wait for their ensemble's bookies to register.
        for pod, command in commands.items():
            with (logs / f"{pod}.log").open("ab") as log:
                processes[pod] = subprocess.Popen(
                    command.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                    stderr=log, bufsize=0, env=folio_env(command.env))
        for pod, process in processes.items():
            wait_for_ready_line(process, START_TIMEOUT_S * 3, logs / f"{pod}.log")
        for pod in commands:
            _check_probe_and_metrics(cluster, pod)
        advertised = {pod: _advertised(cluster, pod) for pod in commands}
        state = _describe(commands[bookies[0]])
        assert sorted(state["bookies"]["live"].values()) == sorted(
            advertised[p] for p in bookies)
        assert sorted(state["brokers"].values()) == sorted(advertised[p] for p in brokers)
        assert state["layout"] == {
            "container_count": int(_flag(init.argv, "container-count")),
            "ensemble_size": int(_flag(init.argv, "ensemble-size")),
            "write_quorum": int(_flag(init.argv, "write-quorum")),
            "ack_quorum": int(_flag(init.argv, "ack-quorum"))}

        if len(brokers) > 1:
            # The brokers share the segment containers: each owns some.
            wait_for(lambda: _every_broker_owns_containers(advertised[brokers[0]], len(brokers)),
                     "every broker owning segment containers", timeout_s=60)
        expected = sorted(f"event-{i}".encode() for i in range(EVENTS))
        with folio.Client(cluster.service_address(RELEASE)) as client:
            client.create_topic("orders", segments=4)
            _produce(client, "orders")
            assert _consume(client, "orders") == expected
        # Every broker, bootstrapped from at its advertised address, serves the
        # whole topic (itself or by redirecting the client to the owners).
        for pod in brokers:
            with folio.Client(advertised[pod]) as client:
                assert _consume(client, "orders") == expected, pod
    finally:
        _stop(processes, [*brokers, *bookies], logs)


def _check_probe_and_metrics(cluster: LocalCluster, pod_name: str) -> None:
    """The pod passes its rendered gRPC readiness probe and serves the annotated metrics."""
    pod = cluster.pods[pod_name]
    probe = pod.containers[0]["readinessProbe"]["grpc"]
    port = pod.ports[pod.container_port(probe["port"])]
    wait_for(lambda: _serving(f"127.0.0.1:{port}"),
             f"{pod_name} ready (gRPC health on its probed port)", timeout_s=60)
    annotations = pod.template["metadata"]["annotations"]
    metrics_port = pod.ports[int(annotations["prometheus.io/port"])]
    url = f"http://127.0.0.1:{metrics_port}{annotations['prometheus.io/path']}"
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.status == 200
        assert b"# TYPE" in response.read()


def _advertised(cluster: LocalCluster, pod_name: str) -> str:
    """Where the pod's DNS name (as the chart builds it) and API port lead on loopback."""
    pod = cluster.pods[pod_name]
    service = pod.workload["spec"]["serviceName"]
    return cluster.resolve(f"{pod_name}.{service}.{NAMESPACE}.svc.cluster.local",
                           pod.container_port("grpc"))


def _describe(command: Command) -> dict[str, Any]:
    """``folio cluster describe --json`` on the metadata URL of ``command``."""
    url = _flag(command.argv, "metadata-url")
    described = subprocess.run(
        [*FOLIO_ENTRYPOINT, "cluster", "describe", "--json", f"--metadata-url={url}"],
        env=folio_env(), capture_output=True, text=True, timeout=60, check=False)
    assert described.returncode == 0, described.stderr
    state: dict[str, Any] = json.loads(described.stdout)
    return state


def _produce(client: folio.Client, topic: str) -> None:
    with client.writer(topic) as writer:
        futures = [writer.write_event(f"event-{i}".encode(), routing_key=f"key-{i % 17}")
                   for i in range(EVENTS)]
        writer.flush()
    for future in futures:
        future.result(timeout=30)


def _consume(client: folio.Client, topic: str) -> list[bytes]:
    read: list[bytes] = []
    with client.reader(topic) as reader:
        while len(read) < EVENTS:
            event = reader.read_next(timeout=30)
            assert event is not None, f"read {len(read)} of {EVENTS} events"
            read.append(bytes(event.payload))
    return sorted(read)


def _stop(processes: dict[str, subprocess.Popen[bytes]], order: list[str], logs: Path) -> None:
    """SIGTERM in ``order`` (brokers before the bookies they close ledgers on); reap all."""
    late: list[str] = []
    for pod in order:
        process = processes.get(pod)
        if process is None:
            continue
        server = BookieProcess(process, logs, logs / f"{pod}.log", "127.0.0.1", 0, "")
        try:
            server.terminate()  # SIGKILLs and reaps it, then raises, past the deadline
        except AssertionError as error:
            late.append(f"{pod}: {error}")
    assert not late, "\n".join(late)


@pytest.mark.parametrize("value_set", check_chart.value_sets(), ids=lambda v: v.name)
def test_rendered_folio_commands_are_accepted(value_set: ValueSet, tmp_path: Path) -> None:
    """Every Folio server command of the value set, with its TOML config, parses (--print-config).

    The ``secure`` set's TLS and token flags included: its Secrets are written
    where the pods mount them.
    """
    local = LocalCluster(manifests_of(value_set), tmp_path, namespace=NAMESPACE,
                         cluster_domain=_domain(value_set),
                         external={f"{RELEASE}-zookeeper": {2181: "127.0.0.1:2181"}},
                         secrets=secure_secrets(tmp_path / "secrets").secrets)
    try:
        checked = 0
        for pod in local.pods.values():
            if pod.workload["kind"] != "StatefulSet" or "zookeeper" in pod.name:
                continue
            (command,) = local.commands(pod.name)
            result = _run(dataclasses.replace(command, argv=[*command.argv, "--print-config"]))
            assert result.returncode == 0, f"{pod.name}: {result.stderr}"
            assert "metadata_url = " in result.stdout
            checked += 1
        assert checked >= 2
    finally:
        local.close()


def _domain(value_set: ValueSet) -> str:
    if value_set.path is None:
        return "cluster.local"
    import yaml  # noqa: PLC0415

    values = yaml.safe_load(value_set.path.read_text()) or {}
    return str(values.get("clusterDomain", "cluster.local"))



def test_secure_chart_runs_a_secured_cluster(zookeeper: ZooKeeperServer,
                                             tmp_path: Path) -> None:
    """ci/secure-values.yaml as processes, its Secrets made by trustme and written where
    the pods mount them: bookies take only the brokers (mutual TLS, brokers' token),
    a TLS client with a super-user's token produces and consumes through the client
    Service, and so does a SASL_SSL Kafka client (PLAIN carrying the token) through
    its Kafka port; without a token each is refused. One broker (two race: see the
    module)."""
    files = secure_secrets(tmp_path / "secrets")
    chroot = f"/t-{uuid.uuid4().hex[:12]}"
    value_set = ValueSet("secure", CHART / "ci" / "secure-values.yaml")
    manifests = manifests_of(value_set, extra=["--set", f"metadataChroot={chroot}",
                                               "--set", "broker.replicas=1"])
    cluster = LocalCluster(manifests, tmp_path / "pods", namespace=NAMESPACE,
                           external={f"{RELEASE}-zookeeper": {2181: zookeeper.address}},
                           secrets=files.secrets)
    logs = tmp_path / "logs"
    logs.mkdir()
    processes: dict[str, subprocess.Popen[bytes]] = {}
    bookies = [p.name for p in cluster.pods_of(f"{RELEASE}-bookie")]
    brokers = [p.name for p in cluster.pods_of(f"{RELEASE}-broker")]
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
            assert "TLS" in line, (pod, line)
            if pod in brokers:
                assert "kafka on" in line, (pod, line)

        tls = folio.TLS(ca=str(files.ca))
        admin_token = create_token("admin", files.token_key, "ES256")
        address = cluster.service_address(RELEASE)
        with folio.Client(address, tls=tls, token=admin_token, timeout_s=30) as client:
            client.create_topic("orders", segments=2)
            _produce(client, "orders")
            assert _consume(client, "orders") == sorted(
                f"event-{i}".encode() for i in range(EVENTS))
        with (folio.Client(address, tls=tls, timeout_s=30) as anonymous,
              pytest.raises(folio.UnauthenticatedError)):
            anonymous.list_topics()
        # The Kafka listener (SASL_SSL): the same token as PLAIN's password; none refused.
        bootstrap = cluster.resolve(RELEASE, 9092)  # the client Service's kafka port
        chart_kafka.round_trip(bootstrap, files.ca, "admin", admin_token, "kafka-orders")
        assert chart_kafka.refuses_anonymous(bootstrap, files.ca)
        # A client with the CA but no client certificate cannot talk to a bookie.
        bookie = cluster.resolve(f"{bookies[0]}.{RELEASE}-bookie-headless",
                                 cluster.pods[bookies[0]].container_port("grpc"))
        with grpc.secure_channel(bookie, grpc.ssl_channel_credentials(
                files.ca.read_bytes())) as channel:
            with pytest.raises(grpc.RpcError) as refused:
                health_pb2_grpc.HealthStub(channel).Check(
                    health_pb2.HealthCheckRequest(service=""), timeout=10)
            assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        _stop(processes, [*brokers, *bookies], logs)
        cluster.close()


def _every_broker_owns_containers(address: str, brokers: int) -> bool:
    """Whether ``brokers`` live brokers each own at least one container (ListBrokers)."""
    with grpc.insecure_channel(address) as channel:
        try:
            answer = admin_pb2_grpc.AdminStub(channel).ListBrokers(
                admin_pb2.ListBrokersRequest(), timeout=5)
        except grpc.RpcError:
            return False
    return len(answer.brokers) == brokers and all(b.containers for b in answer.brokers)
