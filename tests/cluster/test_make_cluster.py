"""``make cluster`` / ``make cluster-down`` (scripts/cluster.py): up, serve, describe, down.

Run with the script's own options on free ports (1 bookie, 1 broker, in a tmp
dir), so it never collides with a developer's cluster on the default ports.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import folio
from tests.support.bookies import run_folio
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
        # A second `up` while it runs is refused.
        again = _script(directory, "up", *ports)
        assert again.returncode == 1 and "already running" in again.stderr
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
