"""``make cluster`` / ``make cluster-down`` (scripts/cluster.py): up, serve, describe, down;
``status``, ``stop NAME``, ``restart NAME`` and an ``up`` that brings back what died; who
owns which segment and container (``topic describe``, ``cluster describe``, the SDK).

Run with the script's own options on free ports (1 bookie, 1 broker, in a tmp
dir), so it never collides with a developer's cluster on the default ports.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import folio
from tests.support.bookies import run_folio
from tests.support.wait import wait_for
from tests.support.zookeeper import free_port

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "cluster.py"


def _script(directory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), "--dir", str(directory), *args],
                          capture_output=True, text=True, timeout=300, check=False, cwd=ROOT)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


# Several processes start one after another: more than the default 120 s on a
# loaded machine.
@pytest.mark.timeout(300)
def test_cluster_up_serves_and_down_stops_everything(tmp_path: Path) -> None:
    directory = tmp_path / "folio-cluster"
    zk_port, broker_port = free_port(), free_port()
    ports = ["--zk-port", str(zk_port), "--bookie-port", str(free_port()),
             "--bookie-metrics-port", str(free_port()), "--broker-port", str(broker_port),
             "--broker-metrics-port", str(free_port())]
    up = _script(directory, "up", "--bookies", "1", "--brokers", "1", *ports)
    try:
        assert up.returncode == 0, up.stderr
        assert f"client endpoints: 127.0.0.1:{broker_port}\n" in up.stdout
        url = f"zk://127.0.0.1:{zk_port}/folio"
        assert f"initialised cluster at {url}: 16 segment containers" in up.stdout
        pids = [int(line.split()[1]) for line in (directory / "pids").read_text().splitlines()]
        assert len(pids) == 3 and all(_alive(pid) for pid in pids)
        for name in ("zk/zoo.cfg", "bookie-1.log", "broker-1.log", "broker-1.out"):
            assert (directory / name).exists(), name
        # A second `up` while everything runs starts nothing and says so.
        again = _script(directory, "up", *ports)
        assert again.returncode == 0, again.stderr
        assert "nothing is missing" in again.stdout
        assert f"client endpoints: 127.0.0.1:{broker_port}\n" in again.stdout
        # One bookie: the script initialised the cluster with E=Qw=Qa=1.
        assert "default ledger quorums E=1 Qw=1 Qa=1" in up.stdout
        with folio.Client(f"127.0.0.1:{broker_port}", timeout_s=30) as client:
            client.create_topic("t")
            with client.writer("t") as writer:
                writer.write_event(b"hello").result(timeout=30)
            with client.reader("t") as reader:
                event = reader.read_next(timeout=30)
                assert event is not None and event.payload == b"hello"
        described = run_folio("cluster", "describe", "--metadata-url", url)
        assert described.returncode == 0, described.stderr
        assert f"live brokers (1): 127.0.0.1:{broker_port}" in described.stdout
    finally:
        down = _script(directory, "down")
    assert down.returncode == 0, down.stderr
    assert down.stdout.splitlines() == [
        f"stopped broker-1 (pid {pids[2]})", f"stopped bookie-1 (pid {pids[1]})",
        f"stopped zookeeper (pid {pids[0]})"]
    assert not any(_alive(pid) for pid in pids)
    assert _script(directory, "down").stdout.startswith("cluster: nothing running")
    assert os.path.isdir(directory / "zk" / "data")  # the data stays


def _status(directory: Path) -> tuple[int, dict[str, str]]:
    """``status``'s exit code and each process's state word (running or stopped)."""
    shown = _script(directory, "status")
    states = {line.split()[0]: line.split()[1] for line in shown.stdout.splitlines()
              if line.split() and line.split()[0].startswith(("zookeeper", "bookie", "broker"))}
    return shown.returncode, states


@pytest.mark.timeout(600)
def test_cluster_nursing_and_who_owns_what(tmp_path: Path) -> None:
    directory = tmp_path / "folio-cluster"
    # The script gives member i the base port + i: two consecutive ports per broker base.
    zk_port, first_broker = free_port(), free_port(count=2)
    brokers = [f"127.0.0.1:{first_broker}", f"127.0.0.1:{first_broker + 1}"]
    ports = ["--zk-port", str(zk_port), "--bookie-port", str(free_port()),
             "--bookie-metrics-port", str(free_port()), "--broker-port", str(first_broker),
             "--broker-metrics-port", str(free_port(count=2))]
    url = f"zk://127.0.0.1:{zk_port}/folio"
    up = _script(directory, "up", "--bookies", "1", "--brokers", "2", "--containers", "4",
                 *ports)
    try:
        assert up.returncode == 0, up.stderr
        assert _status(directory) == (0, {"zookeeper": "running", "bookie-1": "running",
                                          "broker-1": "running", "broker-2": "running"})

        # Who serves what: the SDK, topic describe and cluster describe agree.
        with folio.Client(",".join(brokers), timeout_s=60) as client:
            client.create_topic("owned", segments=4)

            def every_container_owned() -> bool:
                info = client.describe_cluster()
                return info.container_count == 4 and not info.unowned_containers \
                    and len([b for b in info.brokers if b.containers]) == 2
            wait_for(every_container_owned, "both brokers serve containers", timeout_s=120)
            cluster = client.describe_cluster()
            assert sorted(b.address for b in cluster.brokers) == brokers
            assert sorted(c for b in cluster.brokers for c in b.containers) == [0, 1, 2, 3]
        described = run_folio("topic", "describe", "owned", "--json", "--endpoint", brokers[0])
        assert described.returncode == 0, described.stderr
        owners = {s["name"]: s["owner"] for s in json.loads(described.stdout)["segments"]}
        assert len(owners) == 4 and set(owners.values()) <= set(brokers), owners
        human = run_folio("topic", "describe", "owned", "--endpoint", brokers[0])
        assert "OWNER" in human.stdout
        layout = run_folio("cluster", "describe", "--metadata-url", url, "--json")
        assert layout.returncode == 0, layout.stderr
        containers = json.loads(layout.stdout)["containers"]
        assert [c["container"] for c in containers] == [0, 1, 2, 3]
        assert {c["address"] for c in containers} == set(brokers)
        text = run_folio("cluster", "describe", "--metadata-url", url).stdout
        assert "containers (4):" in text

        # A broker dies: status says so, `up` starts it again and only it.
        pids = dict(line.split()[:2] for line in (directory / "pids").read_text().splitlines())
        os.kill(int(pids["broker-2"]), signal.SIGKILL)
        wait_for(lambda: not _alive(int(pids["broker-2"])), "broker-2 is gone")
        code, states = _status(directory)
        assert code == 1 and states["broker-2"] == "stopped" and states["broker-1"] == "running"
        again = _script(directory, "up")
        assert again.returncode == 0, again.stderr
        assert "starting broker-2" in again.stdout and "started broker-2" in again.stdout
        assert "started broker-1" not in again.stdout
        assert _status(directory)[0] == 0

        # stop NAME and restart NAME.
        stopped = _script(directory, "stop", "broker-1")
        assert stopped.returncode == 0 and stopped.stdout.startswith("stopped broker-1 (pid ")
        assert _status(directory)[1]["broker-1"] == "stopped"
        restarted = _script(directory, "restart", "broker-1")
        assert restarted.returncode == 0, restarted.stderr
        assert "started broker-1 (pid " in restarted.stdout and brokers[0] in restarted.stdout
        assert _status(directory)[0] == 0
        unknown = _script(directory, "restart", "broker-9")
        assert unknown.returncode == 2 and "no process 'broker-9'" in unknown.stderr
        with folio.Client(",".join(brokers), timeout_s=60) as client:
            assert "owned" in [t.name for t in client.list_topics()]

        # down with one broker dead names it rather than skipping it silently.
        pids = dict(line.split()[:2] for line in (directory / "pids").read_text().splitlines())
        os.kill(int(pids["broker-2"]), signal.SIGKILL)
        wait_for(lambda: not _alive(int(pids["broker-2"])), "broker-2 is gone")
    finally:
        down = _script(directory, "down")
    assert down.returncode == 0, down.stderr
    assert "broker-2 was not running" in down.stdout
    assert _status(directory)[1] == {"zookeeper": "stopped", "bookie-1": "stopped",
                                     "broker-1": "stopped", "broker-2": "stopped"}
