"""``make cluster`` / ``make cluster-down``: a Folio cluster on one machine, on loopback.

``python scripts/cluster.py up`` starts, under ``./folio-cluster/``:

- ZooKeeper (Debian's package, in the foreground of its own process with a
  config of its own: ``zk/zoo.cfg``, data in ``zk/data``; see
  ``scripts/zookeeper_server.py``) on 127.0.0.1:2181;
- ``folio cluster init --metadata-url zk://127.0.0.1:2181/folio`` (a second
  ``up`` finds the cluster there and keeps it);
- 3 bookies (``folio bookie --metadata-url ...``) on ports 3181-3183, data in
  ``bookie-N/`` (the cluster's ledgers: E=3, Qw=2, Qa=2; fewer with fewer bookies);
- 3 brokers (``folio broker --metadata-url ...``) on ports 7071-7073;

each started in its own session (they outlive this script), waited for (its
ready line) with a deadline, its stdout in ``NAME.out`` and log in
``NAME.log``, its pid in ``pids``. Then it prints the endpoints, the client
one first: ``127.0.0.1:7071,127.0.0.1:7072,127.0.0.1:7073``.

``python scripts/cluster.py down`` stops what ``pids`` lists, brokers first,
then bookies, then ZooKeeper: SIGTERM, then SIGKILL after a deadline. The
data stays; ``rm -rf folio-cluster`` forgets the cluster.

Options (``up --help``) change the counts and ports, e.g. when 2181 is taken.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from cluster_processes import (
    ROOT,
    START_TIMEOUT_S,
    Started,
    alive,
    read_pids,
    record,
    start,
)
from zookeeper_server import ZooKeeperServer, ZooKeeperStartError

#: Deadline for one process to exit after SIGTERM, before SIGKILL.
STOP_TIMEOUT_S = 20.0
CHROOT = "/folio"


def _quorum_args(bookies: int) -> list[str]:
    """``cluster init`` quorums: E=3 Qw=2 Qa=2, less when fewer bookies run."""
    ensemble = max(1, min(3, bookies))
    write = min(2, ensemble)
    return ["--ensemble-size", str(ensemble), "--write-quorum", str(write),
            "--ack-quorum", str(write)]


def up(args: argparse.Namespace) -> int:
    """Start the cluster; print its endpoints."""
    directory = Path(args.dir).resolve()
    running = read_pids(directory)
    if running:
        print(f"cluster: already running under {directory} "
              f"({', '.join(name for name, _ in running)}): `make cluster-down` first",
              file=sys.stderr)
        return 1
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "pids").write_text("")
    zookeeper = ZooKeeperServer(directory / "zk", port=args.zk_port, tick_time_ms=2000)
    url = f"zk://127.0.0.1:{args.zk_port}{CHROOT}"
    started: list[Started] = []
    try:
        zookeeper.start(START_TIMEOUT_S)
        if zookeeper.process is None:
            raise RuntimeError("ZooKeeper did not start")
        started.append(Started("zookeeper", zookeeper.process.pid, zookeeper.address))
        record(directory, started[-1])
        init = subprocess.run(
            [sys.executable, "-m", "folio.cli", "cluster", "init", "--metadata-url", url,
             "--container-count", str(args.containers), *_quorum_args(args.bookies)],
            capture_output=True, text=True, cwd=ROOT, check=False, timeout=START_TIMEOUT_S)
        if init.returncode != 0:
            raise RuntimeError(f"folio cluster init failed:\n{init.stderr}")
        print(init.stdout.strip())
        for index in range(args.bookies):
            started.append(start(directory, f"bookie-{index + 1}", [
                "bookie", "--data-dir", str(directory / f"bookie-{index + 1}"),
                "--port", str(args.bookie_port + index),
                "--metrics-port", str(args.bookie_metrics_port + index),
                "--metadata-url", url]))
            record(directory, started[-1])
        for index in range(args.brokers):
            started.append(start(directory, f"broker-{index + 1}", [
                "broker", "--port", str(args.broker_port + index),
                "--metrics-port", str(args.broker_metrics_port + index),
                "--metadata-url", url]))
            record(directory, started[-1])
    except (ZooKeeperStartError, RuntimeError, OSError, subprocess.TimeoutExpired) as error:
        print(f"cluster: {error}", file=sys.stderr)
        print("cluster: stopping what was started", file=sys.stderr)
        down(args)
        return 1
    brokers = [s.address for s in started if s.name.startswith("broker")]
    bookies = [s.address for s in started if s.name.startswith("bookie")]
    print(f"Folio cluster running under {directory}:")
    print(f"  zookeeper  {zookeeper.address}  (metadata {url})")
    print(f"  bookies    {', '.join(bookies)}")
    print(f"  brokers    {', '.join(brokers)}")
    print(f"client endpoints: {','.join(brokers)}")
    print(f"  e.g. .venv/bin/folio --endpoint {','.join(brokers)} topic create demo")
    print(f"  .venv/bin/folio cluster describe --metadata-url {url}")
    print(f"logs: {directory}/*.log; stop: make cluster-down")
    return 0


def down(args: argparse.Namespace) -> int:
    """Stop every process ``pids`` lists: brokers, bookies, then ZooKeeper."""
    directory = Path(args.dir).resolve()
    entries = read_pids(directory)
    if not entries:
        print(f"cluster: nothing running under {directory}")
        return 0
    order = {"broker": 0, "bookie": 1, "zookeeper": 2}
    for group in sorted({order.get(name.split("-")[0], 3) for name, _ in entries}):
        members = [(name, pid) for name, pid in entries
                   if order.get(name.split("-")[0], 3) == group]
        for _name, pid in members:
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while any(alive(pid) for _, pid in members) and time.monotonic() < deadline:
            threading.Event().wait(0.1)
        for name, pid in members:
            if alive(pid):
                print(f"cluster: {name} (pid {pid}) still running {STOP_TIMEOUT_S:g} s after "
                      "SIGTERM: SIGKILL", file=sys.stderr)
                os.kill(pid, signal.SIGKILL)
            print(f"stopped {name} (pid {pid})")
    (directory / "pids").write_text("")
    return 0


def main(argv: list[str] | None = None) -> int:
    """``up`` or ``down``."""
    parser = argparse.ArgumentParser(description="A Folio cluster on one machine.")
    parser.add_argument("--dir", default="folio-cluster",
                        help="where data, logs and pids go (default ./folio-cluster)")
    commands = parser.add_subparsers(dest="command", required=True)
    start = commands.add_parser("up", help="start ZooKeeper, bookies and brokers")
    start.add_argument("--bookies", type=int, default=3)
    start.add_argument("--brokers", type=int, default=3)
    start.add_argument("--containers", type=int, default=16,
                       help="segment containers (folio cluster init --container-count)")
    start.add_argument("--zk-port", type=int, default=2181)
    start.add_argument("--bookie-port", type=int, default=3181, help="first bookie's port")
    start.add_argument("--bookie-metrics-port", type=int, default=8001)
    start.add_argument("--broker-port", type=int, default=7071, help="first broker's port")
    start.add_argument("--broker-metrics-port", type=int, default=9101)
    start.set_defaults(func=up)
    stop = commands.add_parser("down", help="stop them (SIGTERM, then SIGKILL)")
    stop.set_defaults(func=down)
    args = parser.parse_args(argv)
    result: int = args.func(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
