"""``python -m bench.failover``: how long writes stall when a broker is killed or stopped.

Starts a cluster on loopback (ZooKeeper from Debian's ``zookeeper`` package,
``folio cluster init``, 3 bookies with E=3 Qw=2 Qa=2, 3 brokers), a topic of
``--segments`` segments and the SDK workload of ``bench._failover_load``: one
exactly-once writer, a thread per segment writing without pause (a few
events unacknowledged at a time). Then, ``--rounds`` times for each fault of
``--faults``:

- ``kill``: SIGKILL the broker owning one of the segments (in turn); once
  every segment it owned is written again elsewhere, start a new broker in
  its place;
- ``pause``: SIGSTOP that broker; once every segment it owned is written
  again elsewhere, SIGCONT it (its session expired meanwhile: it joins anew).

A round ends when the brokers share the containers evenly again and every
segment was written since (the moves back to a newcomer are measured too).
For each segment and round the *stall* is the longest time between two of its
acknowledgements from the fault to the end of the round. Printed per fault:
p50, p90 and max of the stalls of the segments the victim owned (those the
fault hit) and of every segment, against the session timeout the brokers use
(a broker's segments move only once ZooKeeper expires its session); and the
writes that failed (transient failures are retried: none should). At the end
every segment is read back to its end offset: each event once, in order, or
the run fails.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench._cluster_client import list_brokers, lookup_owner
from bench._failover_load import SegmentLoad, percentile

_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(_ROOT / "scripts"))
from zookeeper_server import ZooKeeperServer  # noqa: E402

_LISTENING = re.compile(r"listening on (?P<address>\S+:\d+)")
_READY_S = 120.0
_CONTAINERS = 16
_TOPIC = "bench"


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

    def signal(self, signum: signal.Signals) -> None:
        self.popen.send_signal(signum)

    def kill(self) -> None:
        self.popen.send_signal(signal.SIGCONT)  # (a stopped process dies all the same)
        self.popen.send_signal(signal.SIGKILL)
        self.popen.wait()


def _folio(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "folio.cli", *args], check=True,
                   capture_output=True)


class Stalls:
    """Stalls in seconds per fault: of the segments the victim owned, and of all."""

    def __init__(self) -> None:
        self.hit: dict[str, list[float]] = {}
        self.every: dict[str, list[float]] = {}

    def add(self, fault: str, hit: list[float], every: list[float]) -> None:
        self.hit.setdefault(fault, []).extend(hit)
        self.every.setdefault(fault, []).extend(every)


def run(faults: list[str], rounds: int, segments: int, session_timeout_ms: int,
        base: Path) -> tuple[Stalls, SegmentLoad]:
    """The stalls of every round; the load (stopped and checked)."""
    zookeeper = ZooKeeperServer(base / "zookeeper")
    zookeeper.start()
    processes: list[Process] = []
    try:
        url = zookeeper.url("/bench-failover")
        _folio("cluster", "init", "--metadata-url", url, "--container-count", str(_CONTAINERS),
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
        _wait_spread(brokers[0].address)
        _folio("--endpoint", brokers[0].address, "topic", "create", _TOPIC,
               "--segments", str(segments))
        load = SegmentLoad(",".join(b.address for b in brokers), _TOPIC)
        stalls = Stalls()
        for round_number in range(rounds):
            for fault in faults:
                target = load.segments[(round_number * len(faults) + faults.index(fault))
                                       % len(load.segments)]
                _wait(lambda: all(load.acked_after(s, time.monotonic() - 1.0)
                                  for s in load.segments) or bool(load.failures))
                addresses = [b.address for b in brokers]
                owners = {s: lookup_owner(addresses, s) for s in load.segments}
                victim = next(b for b in brokers if b.address == owners[target])
                hit = [s for s, owner in owners.items() if owner == victim.address]
                at, wall = time.monotonic(), time.time()
                if fault == "kill":
                    victim.kill()
                else:
                    victim.signal(signal.SIGSTOP)
                # Resumed elsewhere: new acknowledgements beyond those in flight.
                _wait(lambda a=at, h=hit: all(  # type: ignore[misc]
                    load.acked_after(s, a) > 8 for s in h))
                if fault == "kill":
                    brokers.remove(victim)
                    brokers.append(broker())
                else:
                    victim.signal(signal.SIGCONT)
                _wait_spread(brokers[-1].address)
                settled = time.monotonic()
                _wait(lambda t=settled: all(  # type: ignore[misc]
                    load.acked_after(s, t) > 8 for s in load.segments))
                end = time.monotonic()
                every = {s: load.longest_gap(s, at, end) for s in load.segments}
                stalls.add(fault, [every[s] for s in hit], list(every.values()))
                print(f"{fault} {round_number + 1} (of {victim.address} at "
                      f"{time.strftime('%H:%M:%S', time.localtime(wall))}"
                      f".{int(wall % 1 * 1000):03d}): {len(hit)} of {len(every)} segments on the "
                      f"victim; their stalls {_seconds(every[s] for s in hit)}, the others' "
                      f"{_seconds(v for s, v in every.items() if s not in hit)}; "
                      f"{len(load.failures)} failed writes so far", flush=True)
        load.stop()
        stored, problems = load.check([b.address for b in brokers])
        if problems:
            raise RuntimeError(f"read back {stored} events: {'; '.join(problems)}")
        print(f"read back {stored} events, each once, in order "
              f"({len(load.failures)} writes failed)", flush=True)
        return stalls, load
    finally:
        for process in processes:
            if process.popen.poll() is None:
                process.kill()
        zookeeper.stop()


def _seconds(values: object) -> str:
    return "[" + ", ".join(f"{v:.2f}" for v in values) + "] s"  # type: ignore[attr-defined]


def _wait_spread(address: str) -> None:
    """Until the 3 live brokers share the containers evenly (handovers done)."""
    share = [_CONTAINERS // 3] * 2 + [_CONTAINERS - 2 * (_CONTAINERS // 3)]

    def even() -> bool:
        try:
            listed = list_brokers(address).brokers
        except Exception:
            return False
        return sorted(len(b.containers) for b in listed) == sorted(share)

    _wait(even)


def _wait(condition: Callable[[], bool], timeout_s: float = 180.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"not within {timeout_s} s (a round that never recovers: see "
                               "the brokers' logs)")
        time.sleep(0.01)


def _summary(name: str, values: list[float]) -> str:
    return (f"{name}: p50 {percentile(values, 0.5):.2f} s, p90 {percentile(values, 0.9):.2f} s, "
            f"max {max(values, default=0.0):.2f} s ({len(values)})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.failover", description=__doc__)
    parser.add_argument("--faults", default="kill,pause",
                        help="comma-separated faults per round: kill, pause (default both)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds (default 5)")
    parser.add_argument("--segments", type=int, default=6,
                        help="segments of the topic written (default 6)")
    parser.add_argument("--session-timeout-ms", type=int, default=2000,
                        help="the brokers' ZooKeeper session timeout (default 2000)")
    parser.add_argument("--log", metavar="FILE", default=None,
                        help="write the SDK's log (INFO, with times) to FILE")
    parser.add_argument("--work-dir", metavar="DIR", default=None,
                        help="keep ZooKeeper's, the bookies' and the brokers' data and logs "
                             "(broker-N.log, with times) in DIR, created if missing "
                             "(default: a temporary directory, removed at the end)")
    args = parser.parse_args(argv)
    if args.log:
        logging.basicConfig(filename=args.log, level=logging.INFO,
                            format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    faults = [f for f in args.faults.split(",") if f]
    if not faults or set(faults) - {"kill", "pause"}:
        parser.error("--faults takes kill and/or pause")
    if args.work_dir is not None:
        work = Path(args.work_dir)
        work.mkdir(parents=True, exist_ok=True)
        stalls, load = run(faults, args.rounds, args.segments, args.session_timeout_ms, work)
    else:
        with tempfile.TemporaryDirectory(prefix="folio-failover-") as base:
            stalls, load = run(faults, args.rounds, args.segments, args.session_timeout_ms,
                               Path(base))
    session_s = args.session_timeout_ms / 1000
    for fault in faults:
        print(f"{fault}, session timeout {session_s:g} s: per-segment stall, "
              f"{_summary('segments on the victim', stalls.hit[fault])}; "
              f"{_summary('all segments', stalls.every[fault])}")
    kinds = sorted({type(error).__name__ for _, _, error in load.failures})
    print(f"writes failed: {len(load.failures)} {kinds if kinds else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
