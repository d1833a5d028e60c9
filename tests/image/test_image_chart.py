"""The built image runs the chart's containers: image and chart together, on loopback.

The chart rendered with ``ci/minimal-values.yaml`` (one bookie, one broker);
its init Job, bookie and broker run from build/folio-image.tar with
``buildah run`` (the image's entry point, user and file system), each with the
rendered arguments and environment, its volume mounts bound at the rendered
paths (``--volume``; owned by the image's user, as ``fsGroup`` would make them),
names and ports mapped to loopback as in tests/deploy (tests/support/kube_local.py),
ZooKeeper played by the test's server. A client produces and consumes through
the client Service's port. Marker ``image``: `make test-image` runs it.
"""

from __future__ import annotations

import os
import subprocess
import tomllib
import uuid
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

import folio
from tests.support.bookies import START_TIMEOUT_S, wait_for_ready_line
from tests.support.buildah import ARCHIVE, ROOT, Buildah, Container
from tests.support.chart import CHART, NAMESPACE, ValueSet, manifests_of
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


def test_image_runs_the_minimal_chart(containers: dict[str, Container],
                                      zookeeper: ZooKeeperServer, tmp_path: Path) -> None:
    chroot = f"/t-{uuid.uuid4().hex[:12]}"
    manifests = manifests_of(ValueSet("minimal", CHART / "ci" / "minimal-values.yaml"),
                             extra=["--set", f"metadataChroot={chroot}"])
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    cluster = LocalCluster(manifests, tmp_path / "pods", namespace=NAMESPACE,
                           external={f"{RELEASE}-zookeeper": {2181: zookeeper.address}},
                           bind_mounts=True)
    started: list[tuple[str, subprocess.Popen[bytes]]] = []
    try:
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

        for pod in pods[1:]:
            (command,) = cluster.commands(pod)
            log_path = tmp_path / f"{pod}.log"
            process = containers[pod].start([*entry, *command.args], log_path,
                                            options=_options(command))
            started.append((pod, process))
            wait_for_ready_line(process, START_TIMEOUT_S * 3, log_path)
            probe_port = cluster.pods[pod].ports[cluster.pods[pod].container_port("grpc")]
            wait_for(lambda port=probe_port: _serving(f"127.0.0.1:{port}"),
                     f"{pod} ready", timeout_s=60)

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
