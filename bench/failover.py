"""``python -m bench.failover``: how long writes stop when the owner of their segment is killed.

Starts a cluster on loopback (ZooKeeper from Debian's ``zookeeper`` package,
``folio cluster init``, 3 bookies with E=3 Qw=2 Qa=2, 3 brokers), a writer
appending one-event blocks to one segment without pause (a raw gRPC client
that follows WrongHost, ``bench._cluster_client``), then, ``--kills`` times:
SIGKILL the broker owning the writer's segment, and measure the time from
the kill to the writer's first acknowledged append after it; a new broker
replaces the killed one before the next round. Prints each time, the median
and the max, with the session timeout the brokers use (which bounds the
failover: the killed broker's ownership nodes vanish only when ZooKeeper
expires its session). At the end every acknowledged event must be in the
segment once, in order, or the run fails.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from bench._cluster_client import SegmentWriter, list_brokers, lookup_owner, read_segment

_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(_ROOT / "scripts"))
from zookeeper_server import ZooKeeperServer  # noqa: E402

_LISTENING = re.compile(r"listening on (?P<address>\S+:\d+)")
_READY_S = 120.0


class Process:
    """A ``folio`` process and the address of its ready line."""

    def __init__(self, args: list[str], log_path: Path) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("FOLIO_")}
        with log_path.open("ab") as log:
            self.popen = subprocess.Popen(
                [sys.executable, "-m", "folio.cli", *args], stdout=subprocess.PIPE,
                stderr=log, stdin=subprocess.DEVNULL, env=env)
        assert self.popen.stdout is not None
        deadline = time.monotonic() + _READY_S
        line = b""
        while time.monotonic() < deadline:
            line = self.popen.stdout.readline()
            match = _LISTENING.search(line.decode(errors="replace"))
            if match is not None:
                self.address = match["address"]
                return
            if not line and self.popen.poll() is not None:
                break
        self.popen.kill()
        raise RuntimeError(f"folio {args[0]} did not start; see {log_path}")

    def kill(self) -> None:
        self.popen.send_signal(signal.SIGKILL)
        self.popen.wait()


def _folio(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "folio.cli", *args], check=True,
                   capture_output=True)


def run(kills: int, session_timeout_ms: int, base: Path) -> list[float]:
    """The failover times in seconds, one per kill."""
    zookeeper = ZooKeeperServer(base / "zookeeper")
    zookeeper.start()
    processes: list[Process] = []
    try:
        url = zookeeper.url("/bench-failover")
        _folio("cluster", "init", "--metadata-url", url, "--container-count", "16",
               "--ensemble-size", "3", "--write-quorum", "2", "--ack-quorum", "2")
        session = ["--metadata-session-timeout-ms", str(session_timeout_ms)]
        for n in range(3):
            processes.append(Process(["bookie", "--metadata-url", url, "--port", "0",
                                      "--metrics-port", "0",
                                      "--data-dir", str(base / f"bookie-{n}"),
                                      "--durability", "async", *session],
                                     base / f"bookie-{n}.log"))
        started = 0

        def broker() -> Process:
            nonlocal started
            started += 1
            process = Process(["broker", "--metadata-url", url, "--port", "0",
                               "--metrics-port", "0", *session], base / f"broker-{started}.log")
            processes.append(process)
            return process

        brokers = [broker() for _ in range(3)]
        _folio("--endpoint", brokers[0].address, "topic", "create", "bench", "--segments", "1")
        writer = SegmentWriter([b.address for b in brokers], "bench/0", "bench-writer")
        stop = threading.Event()
        failures: list[BaseException] = []

        def write() -> None:
            try:
                while not stop.is_set():
                    writer.append_next(deadline_s=120)
            except BaseException as error:
                failures.append(error)

        thread = threading.Thread(target=write, daemon=True)
        thread.start()
        times: list[float] = []
        for round_number in range(kills):
            target = 100 * (round_number + 1)
            _wait(lambda t=target: writer.acknowledged >= t or bool(failures))  # type: ignore[misc]
            owner = lookup_owner(writer.brokers, "bench/0")
            victim = next(b for b in brokers if b.address == owner)
            killed_at = time.monotonic()
            victim.kill()
            # The first append acknowledged by another broker after the kill (a
            # reply the victim sent just before dying does not count).
            _wait(lambda k=killed_at, v=victim.address: (  # type: ignore[misc]
                writer.acknowledged_at > k and writer.acknowledged_by != v) or bool(failures))
            if failures:
                raise failures[0]
            times.append(writer.acknowledged_at - killed_at)
            print(f"kill {round_number + 1}: first acknowledged append after "
                  f"{times[-1]:.2f} s", flush=True)
            brokers.remove(victim)
            replacement = broker()
            brokers.append(replacement)
            writer.brokers = [b.address for b in brokers]
            # The next kill only once the newcomer has its share (handovers done).
            _wait(lambda r=replacement: sorted(  # type: ignore[misc]
                len(b.containers) for b in list_brokers(r.address).brokers) == [5, 5, 6])
        stop.set()
        thread.join(120)
        writer.close()
        payloads = read_segment(writer.brokers, "bench/0")
        expected = [writer.payload(n) for n in range(writer.acknowledged + 1)]
        if payloads != expected:
            raise RuntimeError(f"the segment holds {len(payloads)} events, "
                               f"{len(expected)} were acknowledged (or not in order)")
        return times
    finally:
        for process in processes:
            if process.popen.poll() is None:
                process.kill()
        zookeeper.stop()


def _wait(condition: Callable[[], bool], timeout_s: float = 180.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"not within {timeout_s} s")
        time.sleep(0.01)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.failover", description=__doc__)
    parser.add_argument("--kills", type=int, default=10, help="owners killed (default 10)")
    parser.add_argument("--session-timeout-ms", type=int, default=2000,
                        help="the brokers' ZooKeeper session timeout (default 2000)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="folio-failover-") as base:
        times = run(args.kills, args.session_timeout_ms, Path(base))
    print(f"failover over {len(times)} kills, session timeout {args.session_timeout_ms} ms: "
          f"median {statistics.median(times):.2f} s, max {max(times):.2f} s "
          f"(every acknowledged event read back once, in order)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
