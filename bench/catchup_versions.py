"""Catch-up consume of several versions side by side: one broker per commit, reads alternating.

Each ``--version NAME=COMMIT`` is extracted with ``git archive`` into a
directory of its own; a ``folio standalone`` of that version runs from it,
and the same backlog (``--events`` events per size, one segment, no keys,
written by this checkout's SDK) is written into each. Then, ``--rounds``
times, each backlog is read from the start by each version in turn, each
read in a fresh process with that version's own SDK and its ``folio perf
consume`` loop (``run_consume``); a version whose loop has ``read_many``
(``ConsumeConfig.read_next``) is read with both calls, ``read_many`` and
``read_next``. Per read it prints events/s, the reader's CPU per event (all
threads, and the caller's thread), the broker's CPU per event (``/proc``)
and how long the caller's thread waited for a CPU; then the medians::

    python -m bench.catchup_versions --version orig=e2be1c6 --version main=main \\
        --version mine=HEAD --sizes 100,1024 --events 400000 --rounds 3

On a loaded machine events/s measures the scheduler's share as much as
Folio (docs/bench.md, "Catch-up consume"): CPU per event is the steadier figure.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

__all__ = ["main"]

# One read, run with a version's directory first on PYTHONPATH (its folio, its loop).
_CHILD = """
import dataclasses, json, sys, time
import folio
from folio.cli._perf_consume import ConsumeConfig, run_consume
endpoint, topic, events, api = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
def waited():
    try:
        with open("/proc/thread-self/schedstat") as stats:
            return int(stats.read().split()[1]) / 1e9
    except OSError:
        return 0.0
has_many = "read_next" in {field.name for field in dataclasses.fields(ConsumeConfig)}
if api != "old" and not has_many:
    sys.exit(f"this version's run_consume has no read_many: --api {api}")
options = {"read_next": api == "next"} if has_many else {}
with folio.Client(endpoint) as client:
    cpu, main, delay = time.process_time(), time.thread_time(), waited()
    result = run_consume(client, ConsumeConfig(topic=topic, start="earliest",
                                               max_events=events, **options))
    cpu, main, delay = time.process_time() - cpu, time.thread_time() - main, waited() - delay
print(json.dumps({"events": result.events, "duration_s": result.duration_s, "cpu_s": cpu,
                  "main_cpu_s": main, "run_delay_s": delay, "has_many": has_many}))
"""

# Writes a backlog with the SDK on PYTHONPATH.
_WRITE = """
import sys, folio
endpoint, topic, size, events = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
payload = bytes(size)
with folio.Client(endpoint) as client:
    client.create_topic(topic, 1)
    with client.writer(topic) as writer:
        write = writer.write_event
        for _ in range(events):
            write(payload)
        writer.flush()
"""


def _cpu_s(pid: int) -> float:
    """User and system CPU of process ``pid`` so far (Linux ``/proc``)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _env(directory: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(directory)}


def _start(directory: Path, data: Path) -> tuple[subprocess.Popen[str], str]:
    """``folio standalone`` of the version in ``directory`` (run from it, so that its
    ``folio`` is the one imported), on free ports; the process and ``host:port``."""
    process = subprocess.Popen(
        [sys.executable, "-m", "folio.cli", "standalone", "--data-dir", str(data),
         "--port", "0", "--metrics-port", "0"], stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, text=True, env=_env(directory), cwd=directory)
    assert process.stdout is not None
    line = process.stdout.readline()
    if "listening on " not in line:
        process.kill()
        process.wait()
        raise RuntimeError(f"folio standalone in {directory} did not start: {line!r}")
    return process, line.split("listening on ", 1)[1].split()[0]


def _read(directory: Path, endpoint: str, topic: str, events: int, api: str
          ) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", _CHILD, endpoint, topic, str(events), api],
                         check=True, capture_output=True, text=True, env=_env(directory),
                         cwd=directory)
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    """Parse options, start one broker per version, write, read alternating, print."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.catchup_versions",
        description="Catch-up consume of several commits side by side: one folio standalone "
        "per commit (git archive), the same backlog in each, reads alternating between "
        "versions (and between read_many and read_next where a version has both); events/s "
        "and CPU per event of reader and broker.")
    parser.add_argument("--version", action="append", required=True, metavar="NAME=COMMIT",
                        help="a version to measure (repeat; e.g. main=main, mine=HEAD)")
    parser.add_argument("--sizes", default="100,1024",
                        help="event sizes in bytes, comma-separated (default 100,1024)")
    parser.add_argument("--events", type=int, default=400_000,
                        help="events per backlog (default 400000)")
    parser.add_argument("--rounds", type=int, default=3, help="reads of each (default 3)")
    args = parser.parse_args(argv)
    versions = dict(spec.split("=", 1) for spec in args.version)
    sizes = [int(size) for size in args.sizes.split(",") if size]
    base = Path(tempfile.mkdtemp(prefix="folio-bench-versions-"))
    here = Path(__file__).resolve().parent.parent
    brokers: dict[str, tuple[subprocess.Popen[str], str]] = {}
    try:
        for name, commit in versions.items():
            directory = base / name
            directory.mkdir()
            archive = subprocess.run(["git", "archive", commit], check=True, cwd=here,
                                     capture_output=True).stdout
            subprocess.run(["tar", "-x", "-C", str(directory)], input=archive, check=True)
            brokers[name] = _start(directory, base / f"data-{name}")
        print(f"brokers {({name: endpoint for name, (_, endpoint) in brokers.items()})}, "
              f"load average {os.getloadavg()[0]:.2f}", flush=True)
        for size in sizes:
            for _, endpoint in brokers.values():
                subprocess.run([sys.executable, "-c", _WRITE, endpoint, f"catchup-{size}",
                                str(size), str(args.events)], check=True, env=_env(here),
                               cwd=here)
            print(f"{size} B: wrote {args.events:,} events into each", flush=True)
        reads: list[tuple[str, str]] = []
        for name in versions:
            has_many = _read(base / name, brokers[name][1], f"catchup-{sizes[0]}", 1,
                             "old")["has_many"]
            reads += [(name, "many"), (name, "next")] if has_many else [(name, "old")]
        rows: dict[tuple[int, str, str], list[dict[str, float]]] = {}
        for round_ in range(args.rounds):
            for size in sizes:
                for name, api in reads:
                    process, endpoint = brokers[name]
                    before = _cpu_s(process.pid)
                    result = _read(base / name, endpoint, f"catchup-{size}", args.events, api)
                    per_event_us = 1e6 / max(result["events"], 1)
                    row = {"rate": result["events"] / max(result["duration_s"], 1e-9),
                           "reader_us": result["cpu_s"] * per_event_us,
                           "caller_us": result["main_cpu_s"] * per_event_us,
                           "broker_us": (_cpu_s(process.pid) - before) * per_event_us}
                    rows.setdefault((size, name, api), []).append(row)
                    print(f"round {round_ + 1}, {size} B, {name} ({api}): "
                          f"{row['rate']:,.0f} events/s; reader {row['reader_us']:.2f} us/event "
                          f"(caller's thread {row['caller_us']:.2f}), broker "
                          f"{row['broker_us']:.2f} us/event; waited "
                          f"{result['run_delay_s']:.2f} s of {result['duration_s']:.2f} s for "
                          f"a CPU (load {os.getloadavg()[0]:.1f})", flush=True)
        print("medians:")
        for (size, name, api), found in rows.items():
            def median(key: str, found: list[dict[str, float]] = found) -> float:
                return statistics.median(row[key] for row in found)
            print(f"{size} B, {name} ({api}): {median('rate'):,.0f} events/s; reader "
                  f"{median('reader_us'):.2f} (caller's thread {median('caller_us'):.2f}) "
                  f"us/event; broker {median('broker_us'):.2f} us/event", flush=True)
    finally:
        for process, _ in brokers.values():
            process.terminate()
            process.wait()
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
