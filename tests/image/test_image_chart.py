"""The built image runs the chart's containers: image and chart together, on loopback.

The chart rendered with ``ci/minimal-values.yaml`` (one bookie, one broker), and
with ``ci/secure-values.yaml`` on top of it (TLS and tokens from Secrets made by
the test, tests/support/chart_secrets.py); its init Job, bookie and broker run
from build/folio-image.tar with
``buildah run`` (the image's entry point, user and file system), each with the
rendered arguments and environment, its volume mounts bound at the rendered
paths (``--volume``; owned by the image's user, as ``fsGroup`` would make them),
names and ports mapped to loopback as in tests/deploy (tests/support/kube_local.py),
ZooKeeper played by the test's server. A client produces and consumes through
the client Service's port; with the secure values a TLS client with a token works
and one without is refused, on the gRPC port and on the SASL_SSL Kafka listener
the secure values turn on (tests/support/chart_kafka.py). Marker ``image``:
`make test-image` runs it.
"""

from __future__ import annotations

import os
import socket
import subprocess
import uuid
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

import folio
from folio._version import __version__
from ledger.security.tokens import create_token
from tests.support import chart_kafka
from tests.support.bookies import START_TIMEOUT_S, wait_for_ready_line
from tests.support.buildah import ARCHIVE, Buildah, Container
from tests.support.chart import CHART, NAMESPACE, ValueSet, manifests_of
from tests.support.chart_secrets import SecureFiles, secure_secrets
from tests.support.kube_local import Command, LocalCluster
from tests.support.wait import wait_for
from tests.support.zookeeper import ZooKeeperServer

pytestmark = [pytest.mark.image, pytest.mark.timeout(600)]

RELEASE = "folio"
EVENTS = 50
#: The image's user (deploy/Containerfile), which the chart's securityContext names too.
IMAGE_UID = 10001


@pytest.fixture
def containers() -> Iterator[dict[str, Container]]:
    """Working containers of the built image, by pod name; removed at the end."""
    assert ARCHIVE.is_file(), f"{ARCHIVE} is missing: run `make image` (or `make test-image`)"
    made: dict[str, Container] = {}
    yield made
    for container in made.values():
        container.remove()


def _options(command: Command) -> list[str]:
    """``buildah run`` options: the pod's volumes at their paths, its environment."""
    for _, directory in command.mounts:
        for path in (directory, *directory.rglob("*")):
            os.chown(path, IMAGE_UID, IMAGE_UID)
    return [*(f"--volume={directory}:{path}" for path, directory in command.mounts),
            *(f"--env={key}={value}" for key, value in command.env.items())]


def _serving(address: str) -> bool:
    with grpc.insecure_channel(address) as channel:
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=""), timeout=2)
        except grpc.RpcError:
            return False
    return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)


def _start_pods(containers: dict[str, Container], cluster: LocalCluster,
                tmp_path: Path, started: list[tuple[str, subprocess.Popen[bytes]]]) -> list[str]:
    """The init Job to completion, then the bookie and the broker, each from the image
    and ready; ``started`` gets the servers (for the caller to stop). The ready lines."""
    version = __version__  # pyproject.toml reads it there
    pods = [f"{RELEASE}-init-1-0", f"{RELEASE}-bookie-0", f"{RELEASE}-broker-0"]
    for pod in pods:
        spec = cluster.pods[pod].containers[0]
        # The chart's default image is the one `make image` tags.
        assert spec["image"] == f"folio:{version}", spec["image"]
        containers[pod] = Buildah().from_archive()
        containers[pod].drop_image_volumes()  # the pod's claims are mounted there
    entry: list[str] = containers[pods[0]].config()["Entrypoint"]

    (init,) = cluster.commands(pods[0])
    result = containers[pods[0]].exec([*entry, *init.args], options=_options(init))
    assert result.returncode == 0, result.stderr.decode()

    lines = []
    for pod in pods[1:]:
        (command,) = cluster.commands(pod)
        log_path = tmp_path / f"{pod}.log"
        process = containers[pod].start([*entry, *command.args], log_path,
                                        options=_options(command))
        started.append((pod, process))
        lines.append(wait_for_ready_line(process, START_TIMEOUT_S * 3, log_path))
        port = cluster.pods[pod].ports[cluster.pods[pod].container_port("grpc")]
        # A TCP connect (the secure pods serve TLS, which the health probe here does not speak).
        wait_for(partial(_accepts, port), f"{pod} accepting on its API port", timeout_s=60)
    return lines


def _accepts(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except OSError:
        return False
    return True


def test_image_runs_the_minimal_chart(containers: dict[str, Container],
                                      zookeeper: ZooKeeperServer, tmp_path: Path) -> None:
    chroot = f"/t-{uuid.uuid4().hex[:12]}"
    manifests = manifests_of(ValueSet("minimal", CHART / "ci" / "minimal-values.yaml"),
                             extra=["--set", f"metadataChroot={chroot}"])
    cluster = LocalCluster(manifests, tmp_path / "pods", namespace=NAMESPACE,
                           external={f"{RELEASE}-zookeeper": {2181: zookeeper.address}},
                           bind_mounts=True)
    started: list[tuple[str, subprocess.Popen[bytes]]] = []
    try:
        _start_pods(containers, cluster, tmp_path, started)
        for pod in (f"{RELEASE}-bookie-0", f"{RELEASE}-broker-0"):
            port = cluster.pods[pod].ports[cluster.pods[pod].container_port("grpc")]
            wait_for(partial(_serving, f"127.0.0.1:{port}"),
                     f"{pod} ready (gRPC health)", timeout_s=60)
        with folio.Client(cluster.service_address(RELEASE)) as client:
            client.create_topic("orders", segments=2)
            with client.writer("orders") as writer:
                futures = [writer.write_event(f"event-{i}".encode(), routing_key=str(i))
                           for i in range(EVENTS)]
                writer.flush()
            for future in futures:
                future.result(timeout=30)
            read: list[bytes] = []
            with client.reader("orders") as reader:
                while len(read) < EVENTS:
                    event = reader.read_next(timeout=30)
                    assert event is not None, f"read {len(read)} of {EVENTS} events"
                    read.append(bytes(event.payload))
        assert sorted(read) == sorted(f"event-{i}".encode() for i in range(EVENTS))
        # The bookie wrote its ledgers on its claim (the host directory bound at /data).
        (bookie,) = cluster.commands(f"{RELEASE}-bookie-0")
        claim = dict(bookie.mounts)["/data"]
        assert any(claim.iterdir()), "the bookie wrote nothing under /data"
    finally:
        codes = {pod: Container.stop(process) for pod, process in reversed(started)}
        cluster.close()
    assert codes == {pod: 0 for pod, _ in started}, "a server did not stop cleanly"


def _secure_cluster(zookeeper: ZooKeeperServer, tmp_path: Path, files: SecureFiles,
                    *extra: str) -> LocalCluster:
    """ci/secure-values.yaml on top of the minimal set (one bookie, one broker)."""
    chroot = f"/t-{uuid.uuid4().hex[:12]}"
    manifests = manifests_of(ValueSet("minimal", CHART / "ci" / "minimal-values.yaml"), extra=[
        "--values", str(CHART / "ci" / "secure-values.yaml"),
        "--set", f"metadataChroot={chroot}", *extra])
    return LocalCluster(manifests, tmp_path / "pods", namespace=NAMESPACE,
                        external={f"{RELEASE}-zookeeper": {2181: zookeeper.address}},
                        secrets=files.secrets, bind_mounts=True)


def test_image_runs_the_secure_chart(containers: dict[str, Container],
                                     zookeeper: ZooKeeperServer, tmp_path: Path) -> None:
    """The secure values from the image: PyJWT and kio are there (the security and kafka
    extras), every port serves TLS, a client with the CA and a super-user's token
    produces and consumes through the client Service, and so does a SASL_SSL Kafka
    client (PLAIN carrying the token) through the Kafka port; without a token each is
    refused."""
    files = secure_secrets(tmp_path / "secrets")
    cluster = _secure_cluster(zookeeper, tmp_path, files)
    started: list[tuple[str, subprocess.Popen[bytes]]] = []
    try:
        lines = _start_pods(containers, cluster, tmp_path, started)
        assert all("TLS" in line for line in lines), lines
        assert any("kafka on" in line for line in lines), lines
        tls = folio.TLS(ca=str(files.ca))
        token = create_token("admin", files.token_key, "ES256")
        address = cluster.service_address(RELEASE)
        with folio.Client(address, tls=tls, token=token, timeout_s=30) as client:
            client.create_topic("orders", segments=2)
            with client.writer("orders") as writer:
                futures = [writer.write_event(b"event-%d" % i, routing_key=str(i))
                           for i in range(EVENTS)]
                writer.flush()
            assert [f.result(timeout=30).offset >= 0 for f in futures] == [True] * EVENTS
            read: list[bytes] = []
            with client.reader("orders") as reader:
                while len(read) < EVENTS:
                    event = reader.read_next(timeout=30)
                    assert event is not None, f"read {len(read)} of {EVENTS} events"
                    read.append(bytes(event.payload))
        assert sorted(read) == sorted(b"event-%d" % i for i in range(EVENTS))
        with (folio.Client(address, tls=tls, timeout_s=30) as anonymous,
              pytest.raises(folio.UnauthenticatedError)):
            anonymous.list_topics()
        bootstrap = cluster.resolve(RELEASE, 9092)  # the client Service's kafka port
        chart_kafka.round_trip(bootstrap, files.ca, "admin", token, "kafka-orders")
        assert chart_kafka.refuses_anonymous(bootstrap, files.ca)
    finally:
        codes = {pod: Container.stop(process) for pod, process in reversed(started)}
        cluster.close()
    assert codes == {pod: 0 for pod, _ in started}, "a server did not stop cleanly"
