"""``make cluster`` / ``make cluster-down``: a Folio cluster on one machine, on loopback.

``python scripts/cluster.py up`` starts, under ``./folio-cluster/``:

- ZooKeeper (Debian's package, in the foreground of its own process with a
  config of its own: ``zk/zoo.cfg``, data in ``zk/data``; see
  ``scripts/zookeeper_server.py``) on 127.0.0.1:2181;
- ``folio cluster init --metadata-url zk://127.0.0.1:2181/folio`` (a second
  ``up`` finds the cluster there and keeps it);
- 3 bookies (``folio bookie --metadata-url ...``) on ports 3181-3183, data in
  ``bookie-N/`` (the cluster's ledgers: E=3, Qw=2, Qa=2; fewer with fewer bookies);
- 3 brokers (``folio broker --metadata-url ...``) on ports 7081-7083 (metrics
  9101-9103: the port plan of docs/cluster.md, which deploy/prometheus/
  prometheus-cluster.yml scrapes; API and metrics ports never overlap, and none
  is ``make run``'s 7070/7071);

each started in its own session (they outlive this script), waited for (its
ready line) with a deadline, its stdout in ``NAME.out`` and log in
``NAME.log``, its pid in ``pids``. Then it prints the endpoints, the client
one first: ``127.0.0.1:7081,127.0.0.1:7082,127.0.0.1:7083``.

``python scripts/cluster.py down`` stops what ``pids`` lists, brokers first,
then bookies, then ZooKeeper: SIGTERM, then SIGKILL after a deadline. The
data stays; ``rm -rf folio-cluster`` forgets the cluster.

``up`` also writes ``cluster.json``, how each process is started, so that
``status`` shows every process (running with its pid and address, or
stopped), ``stop NAME`` and ``restart NAME`` act on one, and an ``up`` run
while some are up starts only the missing ones (from the record, not the
flags) instead of refusing.

Options (``up --help``) change the counts and ports, e.g. when 2181 is taken.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from cluster_processes import (
    LAYOUT_FILE,
    ROOT,
    START_TIMEOUT_S,
    Layout,
    Started,
    forget,
    read_pids,
    ready_address,
    record,
    start,
    stop,
)
from zookeeper_server import ZooKeeperServer, ZooKeeperStartError

#: Deadline for one process to exit after SIGTERM, before SIGKILL.
STOP_TIMEOUT_S = 20.0
CHROOT = "/folio"
# The port plan (docs/cluster.md, "Ports"): process N of a kind takes first + N - 1.
# API and metrics ranges never overlap, and none is `make run`'s 7070/7071, so a
# standalone and this cluster run side by side; deploy/prometheus/
# prometheus-cluster.yml scrapes these metrics ports.
ZK_PORT = 2181
BOOKIE_PORT = 3181
BOOKIE_METRICS_PORT = 8001
BROKER_PORT = 7081
BROKER_METRICS_PORT = 9101


def _quorum_args(bookies: int) -> list[str]:
    """``cluster init`` quorums: E=3 Qw=2 Qa=2, less when fewer bookies run."""
    ensemble = max(1, min(3, bookies))
    write = min(2, ensemble)
    return ["--ensemble-size", str(ensemble), "--write-quorum", str(write),
            "--ack-quorum", str(write)]


def _layout(args: argparse.Namespace, directory: Path) -> Layout:
    """The processes the flags ask for, with their ``folio`` arguments."""
    url = f"zk://127.0.0.1:{args.zk_port}{CHROOT}"
    commands: dict[str, list[str]] = {}
    for index in range(args.bookies):
        commands[f"bookie-{index + 1}"] = [
            "bookie", "--data-dir", str(directory / f"bookie-{index + 1}"),
            "--port", str(args.bookie_port + index),
            "--metrics-port", str(args.bookie_metrics_port + index), "--metadata-url", url]
    for index in range(args.brokers):
        commands[f"broker-{index + 1}"] = [
            "broker", "--port", str(args.broker_port + index),
            "--metrics-port", str(args.broker_metrics_port + index), "--metadata-url", url]
    return Layout(url, args.zk_port, commands)


def _start_one(directory: Path, layout: Layout, name: str) -> Started:
    """Starts ``name`` of ``layout`` and records its pid."""
    if name == "zookeeper":
        zookeeper = ZooKeeperServer(directory / "zk", port=layout.zk_port, tick_time_ms=2000)
        zookeeper.start(START_TIMEOUT_S)
        if zookeeper.process is None:
            raise RuntimeError("ZooKeeper did not start")
        started = Started("zookeeper", zookeeper.process.pid, zookeeper.address)
    else:
        started = start(directory, name, layout.commands[name])
    forget(directory, name)
    record(directory, started)
    return started


def _init(layout: Layout, bookies: int, containers: int) -> None:
    init = subprocess.run(
        [sys.executable, "-m", "folio.cli", "cluster", "init", "--metadata-url",
         layout.metadata_url, "--container-count", str(containers), *_quorum_args(bookies)],
        capture_output=True, text=True, cwd=ROOT, check=False, timeout=START_TIMEOUT_S)
    if init.returncode != 0:
        raise RuntimeError(f"folio cluster init failed:\n{init.stderr}")
    print(init.stdout.strip())


def _print_endpoints(directory: Path, layout: Layout) -> None:
    def addresses(role: str) -> list[str]:
        return [ready_address(directory, name) or "?" for name in layout.commands
                if name.startswith(role)]
    brokers, url = addresses("broker"), layout.metadata_url
    print(f"Folio cluster running under {directory}:")
    print(f"  zookeeper  127.0.0.1:{layout.zk_port}  (metadata {url})")
    print(f"  bookies    {', '.join(addresses('bookie'))}")
    print(f"  brokers    {', '.join(brokers)}")
    print(f"client endpoints: {','.join(brokers)}")
    print(f"  e.g. .venv/bin/folio --endpoint {','.join(brokers)} topic create demo")
    print(f"  .venv/bin/folio cluster describe --metadata-url {url}")
    print(f"logs: {directory}/*.log; status: scripts/cluster.py status; stop: make cluster-down")


def up(args: argparse.Namespace) -> int:
    """Start the cluster, or what is missing of a running one; print its endpoints.

    Nothing running: a new start from the flags (ZooKeeper, ``cluster init``,
    bookies, brokers; the data of an earlier run is kept). Something running:
    the recorded layout (``cluster.json``) is kept, the flags are not used, and
    each process that is not running is started again, in order.
    """
    directory = Path(args.dir).resolve()
    running = dict(read_pids(directory))
    layout = Layout.load(directory) if running else None
    if running and layout is None:
        print(f"cluster: already running under {directory} "
              f"({', '.join(running)}) without a {LAYOUT_FILE} to restart the others from: "
              "`make cluster-down` first", file=sys.stderr)
        return 1
    fresh = layout is None
    if layout is None:
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "pids").write_text("")
        layout = _layout(args, directory)
        layout.save(directory)
    missing = [name for name in layout.names if name not in running]
    if not fresh:
        print(f"cluster: running under {directory}: {', '.join(running)}; "
              + (f"starting {', '.join(missing)}" if missing else "nothing is missing"))
    try:
        for name in missing:
            started = _start_one(directory, layout, name)
            if not fresh:
                print(f"started {name} (pid {started.pid}) at {started.address}")
            if fresh and name == "zookeeper":
                _init(layout, args.bookies, args.containers)
    except (ZooKeeperStartError, RuntimeError, OSError, subprocess.TimeoutExpired) as error:
        print(f"cluster: {error}", file=sys.stderr)
        if fresh:
            print("cluster: stopping what was started", file=sys.stderr)
            down(args)
        else:
            print("cluster: `scripts/cluster.py status` shows what runs", file=sys.stderr)
        return 1
    _print_endpoints(directory, layout)
    return 0


def down(args: argparse.Namespace) -> int:
    """Stop every process ``pids`` lists: brokers, bookies, then ZooKeeper."""
    directory = Path(args.dir).resolve()
    entries = read_pids(directory)
    layout = Layout.load(directory)
    gone = [name for name in (layout.names if layout else [])
            if name not in dict(entries)]
    if not entries:
        print(f"cluster: nothing running under {directory}")
        return 0
    order = {"broker": 0, "bookie": 1, "zookeeper": 2}
    for group in sorted({order.get(name.split("-")[0], 3) for name, _ in entries}):
        members = [(name, pid) for name, pid in entries
                   if order.get(name.split("-")[0], 3) == group]
        stop(members, STOP_TIMEOUT_S, _warn)
        for name, pid in members:
            print(f"stopped {name} (pid {pid})")
    for name in gone:
        print(f"{name} was not running")
    (directory / "pids").write_text("")
    return 0


def _warn(message: str) -> None:
    print(message, file=sys.stderr)


def status(args: argparse.Namespace) -> int:
    """One line per process of the layout: running (pid, address) or not; exit 1 if any is not."""
    directory = Path(args.dir).resolve()
    layout = Layout.load(directory)
    if layout is None:
        print(f"cluster: no cluster under {directory} (`make cluster` starts one)")
        return 1
    running = dict(read_pids(directory))
    for name in layout.names:
        address = (f"127.0.0.1:{layout.zk_port}" if name == "zookeeper"
                   else ready_address(directory, name) or "-")
        state = f"running  pid {running[name]}" if name in running else "stopped"
        print(f"{name:<10} {state:<18} {address}")
    down_count = sum(name not in running for name in layout.names)
    if down_count:
        print(f"{down_count} of {len(layout.names)} not running: `scripts/cluster.py up` "
              "starts them again (or `restart NAME`)")
    return 1 if down_count else 0


def _named(args: argparse.Namespace) -> tuple[Path, Layout] | None:
    directory = Path(args.dir).resolve()
    layout = Layout.load(directory)
    if layout is None:
        print(f"cluster: no cluster under {directory}", file=sys.stderr)
        return None
    if args.name not in layout.names:
        print(f"cluster: no process {args.name!r}; the cluster has "
              f"{', '.join(layout.names)}", file=sys.stderr)
        return None
    return directory, layout


def stop_one(args: argparse.Namespace) -> int:
    """Stop one process (SIGTERM, then SIGKILL after a deadline)."""
    named = _named(args)
    if named is None:
        return 2
    directory = named[0]
    pid = dict(read_pids(directory)).get(args.name)
    if pid is None:
        print(f"{args.name} is not running")
        return 0
    stop([(args.name, pid)], STOP_TIMEOUT_S, _warn)
    forget(directory, args.name)
    print(f"stopped {args.name} (pid {pid})")
    return 0


def restart(args: argparse.Namespace) -> int:
    """Stop one process if it runs, then start it again with its recorded arguments."""
    named = _named(args)
    if named is None:
        return 2
    directory, layout = named
    pid = dict(read_pids(directory)).get(args.name)
    if pid is not None:
        stop([(args.name, pid)], STOP_TIMEOUT_S, _warn)
        forget(directory, args.name)
        print(f"stopped {args.name} (pid {pid})")
    try:
        started = _start_one(directory, layout, args.name)
    except (ZooKeeperStartError, RuntimeError, OSError, subprocess.TimeoutExpired) as error:
        print(f"cluster: {error}", file=sys.stderr)
        return 1
    print(f"started {args.name} (pid {started.pid}) at {started.address}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """``up``, ``down``, ``status``, ``stop NAME`` or ``restart NAME``."""
    parser = argparse.ArgumentParser(description="A Folio cluster on one machine.")
    parser.add_argument("--dir", default="folio-cluster",
                        help="where data, logs and pids go (default ./folio-cluster)")
    commands = parser.add_subparsers(dest="command", required=True)
    start = commands.add_parser(
        "up", help="start ZooKeeper, bookies and brokers; with some running, start the "
        "missing ones (as recorded in cluster.json; the flags then do not apply)")
    start.add_argument("--bookies", type=int, default=3)
    start.add_argument("--brokers", type=int, default=3)
    start.add_argument("--containers", type=int, default=16,
                       help="segment containers (folio cluster init --container-count)")
    start.add_argument("--zk-port", type=int, default=ZK_PORT)
    start.add_argument("--bookie-port", type=int, default=BOOKIE_PORT, help="first bookie's port")
    start.add_argument("--bookie-metrics-port", type=int, default=BOOKIE_METRICS_PORT)
    start.add_argument("--broker-port", type=int, default=BROKER_PORT, help="first broker's port")
    start.add_argument("--broker-metrics-port", type=int, default=BROKER_METRICS_PORT)
    start.set_defaults(func=up)
    commands.add_parser("down", help="stop them all (SIGTERM, then SIGKILL)").set_defaults(
        func=down)
    commands.add_parser(
        "status", help="show each process: running (pid, address) or stopped; exit 1 if "
        "any is stopped").set_defaults(func=status)
    for verb, func, text in (("stop", stop_one, "stop one process (SIGTERM, then SIGKILL)"),
                             ("restart", restart, "stop one process if it runs and start it "
                              "again with the same arguments")):
        one = commands.add_parser(verb, help=text)
        one.add_argument("name", metavar="NAME",
                         help="zookeeper, bookie-N or broker-N (as `status` lists them)")
        one.set_defaults(func=func)
    args = parser.parse_args(argv)
    result: int = args.func(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
